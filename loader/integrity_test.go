package loader_test

import (
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"google.golang.org/grpc/codes"

	"github.com/gload/gload/loader"
	"github.com/gload/gload/loader/dataset"
	"github.com/gload/gload/proto/gloadpb"
)

func shardPath(t *testing.T, dir string, i, n int) string {
	t.Helper()
	p := filepath.Join(dir, dataset.DataFileName(i, n))
	if _, err := os.Stat(p); err != nil {
		t.Fatal(err)
	}
	return p
}

// TestCorruptShardRefused: a corrupt or truncated shard stops the start with
// an error naming the file.
func TestCorruptShardRefused(t *testing.T) {
	for _, tc := range []struct {
		name   string
		damage func(t *testing.T, path string)
	}{
		{"truncated", func(t *testing.T, path string) {
			st, _ := os.Stat(path)
			if err := os.Truncate(path, st.Size()/2); err != nil {
				t.Fatal(err)
			}
		}},
		{"garbage header", func(t *testing.T, path string) {
			f, err := os.OpenFile(path, os.O_WRONLY, 0)
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close()
			if _, err := f.WriteAt([]byte("this is not arrow at all"), 0); err != nil {
				t.Fatal(err)
			}
		}},
		{"missing", func(t *testing.T, path string) {
			if err := os.Remove(path); err != nil {
				t.Fatal(err)
			}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			good, bad := t.TempDir(), t.TempDir()
			writeDataset(t, good, genLengths(300, 1, 64, 8), 300, 50)
			writeDataset(t, bad, genLengths(300, 1, 64, 9), 100, 50)
			path := shardPath(t, bad, 1, 3)
			tc.damage(t, path)
			_, err := loader.NewServer(loader.Config{Datasets: map[string]string{"good": good, "bad": bad}})
			if !errors.Is(err, loader.ErrDataset) {
				t.Fatalf("NewServer: %v, want ErrDataset", err)
			}
			for _, w := range []string{"dataset bad", "data-00001-of-00003.arrow"} {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not name %q", err, w)
				}
			}
		})
	}
}

// TestFilesReplacedDetected: a shard replaced under a running server is
// refused when a stream opens.
func TestFilesReplacedDetected(t *testing.T) {
	dir, other := t.TempDir(), t.TempDir()
	writeDataset(t, dir, genLengths(400, 1, 64, 10), 200, 50)
	writeDataset(t, other, genLengths(400, 1, 64, 11), 200, 50)
	ts := startServer(t, loader.Config{Datasets: map[string]string{"d": dir}}, "unix")
	c := dial(t, ts.addr)
	open := &gloadpb.Open{Dataset: "d", Policy: &gloadpb.BatchPolicy{BatchSize: 8}}
	if _, _, _, err := pullAll(t.Context(), c, open, -1); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(shardPath(t, other, 1, 2), shardPath(t, dir, 1, 2)); err != nil {
		t.Fatal(err)
	}
	_, err := c.Stream(t.Context(), open)
	checkStatus(t, "Batches", err, codes.FailedPrecondition, []string{"dataset d", "data-00001-of-00002.arrow", "changed on disk"})
	_, err = c.Plan(t.Context(), open)
	checkStatus(t, "Plan", err, codes.FailedPrecondition, []string{"data-00001-of-00002.arrow"})
}

// TestTruncatedUnderStream: shards truncated in place while a stream reads
// them end the stream with DATA_LOSS; the server keeps running.
func TestTruncatedUnderStream(t *testing.T) {
	dir := t.TempDir()
	writeDataset(t, dir, genLengths(6000, 200, 400, 12), 3000, 100)
	ts := startServer(t, loader.Config{Datasets: map[string]string{"d": dir}}, "unix")
	c := dial(t, ts.addr)
	open := &gloadpb.Open{Dataset: "d", Policy: &gloadpb.BatchPolicy{BatchSize: 16}, Prefetch: 1}
	s, err := c.Stream(t.Context(), open)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	b, err := s.Next(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	b.Release()
	for i := range 2 {
		if err := os.Truncate(shardPath(t, dir, i, 2), 4096); err != nil {
			t.Fatal(err)
		}
	}
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
		t.Fatalf("stream ended normally after %d batches over truncated shards", n)
	}
	checkStatus(t, "Batches", err, codes.DataLoss, []string{"dataset d", "truncated"})
	t.Logf("stream failed after %d batches: %v", n, err)
	// The server still answers, and refuses the dataset.
	if _, err := c.Health(t.Context()); err != nil {
		t.Fatal(err)
	}
	_, err = c.Stream(t.Context(), open)
	checkStatus(t, "Batches", err, codes.FailedPrecondition, []string{"dataset d"})
}
