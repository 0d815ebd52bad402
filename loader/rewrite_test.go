package loader_test

import (
	"bytes"
	"encoding/binary"
	"errors"
	"io"
	"os"
	"testing"

	"google.golang.org/grpc/codes"

	"github.com/gload/gload/loader"
	"github.com/gload/gload/loader/client"
	"github.com/gload/gload/proto/gloadpb"
)

// shiftOffsets does what ../shared/repro/shiftoffs.py does to a served shard:
// it adds 2^30 to every list offset of input_ids, in place (same size, the
// file stays mapped). The shard holds rows [first, first+len(lengths)) in
// record batches of perBatch rows; each batch's offsets are found by value.
func shiftOffsets(t *testing.T, path string, lengths []int, perBatch int) {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	for start := 0; start < len(lengths); start += perBatch {
		rows := lengths[start:min(start+perBatch, len(lengths))]
		want := binary.LittleEndian.AppendUint32(nil, 0)
		shifted := binary.LittleEndian.AppendUint32(nil, 0x40000000)
		acc := uint32(0)
		for _, l := range rows {
			acc += uint32(l)
			want = binary.LittleEndian.AppendUint32(want, acc)
			shifted = binary.LittleEndian.AppendUint32(shifted, acc+0x40000000)
		}
		at := bytes.Index(data, want)
		if at < 0 {
			t.Fatalf("%s: offsets of the batch at row %d not found", path, start)
		}
		if _, err := f.WriteAt(shifted, int64(at)); err != nil {
			t.Fatal(err)
		}
	}
}

// TestRewrittenUnderStream: list offsets rewritten in place under running
// streams (the shiftoffs repro) end those streams with DATA_LOSS naming the
// shard, on every transport; the server keeps serving other datasets (a
// stream on one runs on to its end) and refuses the damaged one from then on.
func TestRewrittenUnderStream(t *testing.T) {
	for _, tr := range transports {
		t.Run(tr.name+"-"+tr.network, func(t *testing.T) {
			dir, other := t.TempDir(), t.TempDir()
			lengths := genLengths(2000, 20, 200, 21)
			writeDataset(t, dir, lengths, 2000, 100)
			writeDataset(t, other, genLengths(300, 1, 50, 22), 300, 50)
			ts := startServer(t, loader.Config{Datasets: map[string]string{"d": dir, "o": other}, ShmDir: tr.shmDir(t), NoGPUWatch: true}, tr.network)
			c := dial(t, ts.addr)
			open := &gloadpb.Open{Dataset: "d", Policy: &gloadpb.BatchPolicy{BatchSize: 16}, Prefetch: 1, Transport: tr.transport}
			s, err := c.Stream(t.Context(), open)
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			bystander, err := c.Stream(t.Context(), &gloadpb.Open{Dataset: "o", Policy: &gloadpb.BatchPolicy{BatchSize: 10}, Prefetch: 1, Transport: tr.transport},
				client.AckOnNext(true))
			if err != nil {
				t.Fatal(err)
			}
			defer bystander.Close()
			b, err := s.Next(t.Context())
			if err != nil {
				t.Fatal(err)
			}
			b.Release()
			shiftOffsets(t, shardPath(t, dir, 0, 1), lengths, 100)
			n := 1
			for {
				b, err = s.Next(t.Context())
				if err != nil {
					break
				}
				b.Release()
				n++
			}
			if errors.Is(err, io.EOF) {
				t.Fatalf("stream ended normally after %d batches over rewritten offsets", n)
			}
			checkStatus(t, "Batches", err, codes.DataLoss, []string{"dataset d", shardPath(t, dir, 0, 1)})
			t.Logf("stream failed after %d batches: %v", n, err)
			// The server is alive: the other dataset's stream runs to its end.
			m := 0
			for {
				if _, err := bystander.Next(t.Context()); err != nil {
					if !errors.Is(err, io.EOF) {
						t.Fatalf("bystander stream: %v", err)
					}
					break
				}
				m++
			}
			if m != 30 {
				t.Fatalf("bystander got %d batches, want 30", m)
			}
			if _, err := c.Health(t.Context()); err != nil {
				t.Fatal(err)
			}
			_, err = c.Stream(t.Context(), open)
			checkStatus(t, "Batches", err, codes.FailedPrecondition, []string{"dataset d"})
		})
	}
}
