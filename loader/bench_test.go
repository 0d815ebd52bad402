package loader_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/gload/gload/loader"
	"github.com/gload/gload/loader/client"
	"github.com/gload/gload/proto/gloadpb"
)

// fixedDataset writes rows of exactly rowLen tokens.
func fixedDataset(b testing.TB, rows, rowLen, perShard int) string {
	b.Helper()
	dir := b.TempDir()
	lengths := make([]int, rows)
	for i := range lengths {
		lengths[i] = rowLen
	}
	writeDataset(b, dir, lengths, perShard, 1000)
	return dir
}

// BenchmarkStream: a Go client on loopback (or over a shared-memory ring) pulls 16×1024-token batches
// (64 KiB of input_ids each) at prefetch depths 1, 4 and 16, releasing each
// batch at once. Reports batches/s and the p50/p99 latency of Next. The
// step=… runs sleep that long between batches, like a training step that
// leaves the CPU to the loader: Next then finds its batch ready.
func BenchmarkStream(b *testing.B) {
	dir := fixedDataset(b, 4096, 1024, 4096)
	type run struct {
		depth int
		step  time.Duration
	}
	runs := []run{{1, 0}, {4, 0}, {16, 0}, {4, 500 * time.Microsecond}}
	for _, tr := range transports {
		ts := startServer(b, loader.Config{Datasets: map[string]string{"d": dir}, ShmDir: tr.shmDir(b)}, tr.network)
		c := dial(b, ts.addr)
		for _, r := range runs {
			depth := r.depth
			name := fmt.Sprintf("%s-%s/prefetch=%d", tr.network, tr.name, depth)
			if r.step > 0 {
				name += fmt.Sprintf("/step=%s", r.step)
			}
			b.Run(name, func(b *testing.B) {
				ctx := context.Background()
				epoch := uint32(0)
				open := func() *client.Stream {
					epoch++
					s, err := c.Stream(ctx, &gloadpb.Open{Dataset: "d", Epoch: epoch, Prefetch: uint32(depth), Transport: tr.transport,
						Policy: &gloadpb.BatchPolicy{BatchSize: 16, PadMultiple: 1024}})
					if err != nil {
						b.Fatal(err)
					}
					return s
				}
				s := open()
				lat := make([]time.Duration, 0, 1<<16)
				b.ReportAllocs()
				b.SetBytes(16 * 1024 * 4)
				start := time.Now()
				for b.Loop() {
					t0 := time.Now()
					bt, err := s.Next(ctx)
					if errors.Is(err, io.EOF) {
						s.Close()
						s = open()
						t0 = time.Now()
						bt, err = s.Next(ctx)
					}
					if err != nil {
						b.Fatal(err)
					}
					if len(lat) < cap(lat) {
						lat = append(lat, time.Since(t0))
					}
					bt.Release()
					if r.step > 0 {
						time.Sleep(r.step)
					}
				}
				el := time.Since(start)
				s.Close()
				slices.Sort(lat)
				b.ReportMetric(float64(b.N)/el.Seconds(), "batches/s")
				b.ReportMetric(float64(lat[len(lat)/2].Nanoseconds())/1e3, "p50-µs")
				b.ReportMetric(float64(lat[len(lat)*99/100].Nanoseconds())/1e3, "p99-µs")
			})
		}
	}
}

// rssAnonKB reads a process's anonymous resident memory.
func rssAnonKB(pid int) (int, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, err
	}
	for line := range strings.SplitSeq(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "RssAnon:"); ok {
			return strconv.Atoi(strings.TrimSuffix(strings.TrimSpace(v), " kB"))
		}
	}
	return 0, errors.New("no RssAnon line")
}

// TestHelperServe is the server process of TestServerMemoryBounded; it does
// nothing unless GLOAD_HELPER_SERVE names a dataset and a socket.
func TestHelperServe(t *testing.T) {
	spec := os.Getenv("GLOAD_HELPER_SERVE")
	if spec == "" {
		t.Skip("helper process only")
	}
	dir, sock, _ := strings.Cut(spec, ",")
	srv, err := loader.NewServer(loader.Config{Datasets: map[string]string{"d": dir}, DrainTimeout: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	lis, err := loader.Listen(sock, loader.ListenOptions{})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	go func() { // stop when the parent closes our stdin
		io.Copy(io.Discard, os.Stdin)
		cancel()
	}()
	if err := srv.Serve(ctx, lis); err != nil {
		t.Fatal(err)
	}
}

// TestServerMemoryBounded streams a dataset several times larger than what
// the prefetch depth holds through a server in its own process and checks
// that the server's anonymous memory (heap, buffers: not the mapped shards)
// stays bounded.
func TestServerMemoryBounded(t *testing.T) {
	if testing.Short() {
		t.Skip("writes a 128 MiB dataset")
	}
	if _, err := rssAnonKB(os.Getpid()); err != nil {
		t.Skipf("no /proc RssAnon: %v", err)
	}
	const rows, rowLen = 32768, 1024 // 128 MiB of tokens
	dir := fixedDataset(t, rows, rowLen, 16384)
	sock := "unix://" + filepath.Join(t.TempDir(), "m.sock")
	cmd := exec.Command(os.Args[0], "-test.run=^TestHelperServe$")
	cmd.Env = append(os.Environ(), "GLOAD_HELPER_SERVE="+dir+","+sock)
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() {
		stdin.Close()
		if err := cmd.Wait(); err != nil {
			t.Errorf("helper server: %v", err)
		}
	}()
	ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
	defer cancel()
	var c *client.Client
	for c == nil {
		c, err = client.Dial(ctx, sock)
		if err != nil {
			if ctx.Err() != nil {
				t.Fatal(err)
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
	defer c.Close()
	base, err := rssAnonKB(cmd.Process.Pid)
	if err != nil {
		t.Fatal(err)
	}
	const prefetch = 8
	peak := base
	var bytes int64
	for epoch := range 2 {
		s, err := c.Stream(ctx, &gloadpb.Open{Dataset: "d", Epoch: uint32(epoch), Prefetch: prefetch,
			Policy: &gloadpb.BatchPolicy{BatchSize: 16, PadMultiple: 1024}})
		if err != nil {
			t.Fatal(err)
		}
		for i := 0; ; i++ {
			b, err := s.Next(ctx)
			if errors.Is(err, io.EOF) {
				break
			}
			if err != nil {
				t.Fatal(err)
			}
			bytes += int64(len(b.InputIDsBytes()))
			b.Release()
			if i%64 == 0 {
				if kb, err := rssAnonKB(cmd.Process.Pid); err == nil {
					peak = max(peak, kb)
				}
			}
		}
		s.Close()
	}
	batchKB := 16 * rowLen * 4 / 1024
	t.Logf("server RssAnon: %d kB after start, peak %d kB while streaming %d MiB (prefetch %d × %d kB batches)",
		base, peak, bytes>>20, prefetch, batchKB)
	// The bound: a constant (runtime, plan, gRPC buffers) plus prefetch ×
	// batch size, far below the data streamed.
	if limit := base + 32*1024 + 4*prefetch*batchKB; peak > limit {
		t.Fatalf("server RssAnon grew from %d kB to %d kB (limit %d kB) while streaming %d MiB", base, peak, limit, bytes>>20)
	}
}

// BenchmarkFirstBatch10M measures DESIGN's "first batch of a 10M-sample dataset in under 1 s": from a cold server
// (dataset opened from its gload.index, no plan cached) to the first batch in the client's hands, bucketed, B=16.
// The 10M-row dataset (1–16 tokens a row) is written once, before timing. Run it alone:
//
//	go test -run '^$' -bench FirstBatch10M -benchtime 3x ./loader/
func BenchmarkFirstBatch10M(b *testing.B) {
	dir := b.TempDir()
	writeDataset(b, dir, genLengths(10_000_000, 1, 16, 3), 2_500_000, 1000)
	open := &gloadpb.Open{Dataset: "big", WorldSize: 1, NumWorkers: 1,
		Policy: &gloadpb.BatchPolicy{Policy: "bucketed", BatchSize: 16}}
	for b.Loop() {
		start := time.Now()
		ts := startServer(b, loader.Config{Datasets: map[string]string{"big": dir}, NoGPUWatch: true}, "unix")
		c, err := client.Dial(context.Background(), ts.addr)
		if err != nil {
			b.Fatal(err)
		}
		s, err := c.Stream(context.Background(), open)
		if err != nil {
			b.Fatal(err)
		}
		if _, err := s.Next(context.Background()); err != nil {
			b.Fatal(err)
		}
		b.ReportMetric(float64(time.Since(start).Milliseconds()), "ms/first-batch")
		s.Close()
		c.Close()
		ts.stop(b)
	}
}
