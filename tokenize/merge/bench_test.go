package merge

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/gload/gload/loader"
	"github.com/gload/gload/loader/client"
	"github.com/gload/gload/loader/dataset"
	"github.com/gload/gload/proto/gloadpb"
	"github.com/gload/gload/tokenize/pipeline"
)

// BenchmarkMerge100Parts measures issue 11's numbers: merging 100 parts of 100k rows (10M rows, 1–16 tokens a
// row) and, on the merged dataset, a cold server's first batch (bucketed, B=16). Parts are written once, before
// timing. Run it alone:
//
//	go test -run '^$' -bench Merge100Parts -benchtime 3x ./tokenize/merge/
func BenchmarkMerge100Parts(b *testing.B) {
	const parts, perPart = 100, 100_000
	root := b.TempDir()
	opts := dataset.WriterOptions{RowsPerBatch: 1000, TokenizerHash: "bench"}
	rng := rand.New(rand.NewPCG(1, 2))
	var dirs []string
	ids := make([]int32, 16)
	for p := range parts {
		dir := filepath.Join(root, fmt.Sprintf("part-%03d", p))
		os.Mkdir(dir, 0o755)
		w, err := dataset.CreateShard(dir, 0, opts)
		if err != nil {
			b.Fatal(err)
		}
		for range perPart {
			n := 1 + rng.IntN(16)
			for j := range n {
				ids[j] = int32(rng.IntN(50000))
			}
			if err := w.Append(ids[:n], nil); err != nil {
				b.Fatal(err)
			}
		}
		info, err := w.Close()
		if err != nil {
			b.Fatal(err)
		}
		t := pipeline.Task{Version: 1, Index: p, Count: parts, From: p, To: p + 1, FileCount: parts,
			Inputs: "i", Tokenizer: "bench", Flags: "f", Writer: opts}
		tb, _ := json.Marshal(t)
		os.WriteFile(filepath.Join(dir, pipeline.TaskFile), tb, 0o644)
		if err := dataset.Finalize(dir, []dataset.ShardInfo{info}, opts); err != nil {
			b.Fatal(err)
		}
		dirs = append(dirs, dir)
	}
	var out string
	for i := 0; b.Loop(); i++ {
		out = filepath.Join(root, fmt.Sprintf("merged-%d", i))
		start := time.Now()
		s, err := Merge(out, dirs, Options{})
		if err != nil {
			b.Fatal(err)
		}
		b.ReportMetric(float64(time.Since(start).Milliseconds()), "ms/merge")
		if s.Rows != parts*perPart {
			b.Fatalf("%d rows", s.Rows)
		}
	}
	b.StopTimer()
	t0 := time.Now()
	ds, err := dataset.Open(out, dataset.OpenOptions{})
	if err != nil {
		b.Fatal(err)
	}
	b.ReportMetric(float64(time.Since(t0).Milliseconds()), "ms/open-merged")
	b.ReportMetric(float64(ds.ShardsVerified()), "shards-hashed")
	ds.Close()
	// A cold server on the merged dataset: open from its index, plan, first batch.
	start := time.Now()
	srv, err := loader.NewServer(loader.Config{Datasets: map[string]string{"m": out}, NoGPUWatch: true})
	if err != nil {
		b.Fatal(err)
	}
	sock := filepath.Join(b.TempDir(), "s.sock")
	lis, err := net.Listen("unix", sock)
	if err != nil {
		b.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ctx, lis) }()
	c, err := client.Dial(ctx, "unix://"+sock)
	if err != nil {
		b.Fatal(err)
	}
	st, err := c.Stream(ctx, &gloadpb.Open{Dataset: "m", Policy: &gloadpb.BatchPolicy{Policy: "bucketed", BatchSize: 16}})
	if err != nil {
		b.Fatal(err)
	}
	if _, err := st.Next(ctx); err != nil {
		b.Fatal(err)
	}
	b.ReportMetric(float64(time.Since(start).Milliseconds()), "ms/first-batch-merged")
	st.Close()
	c.Close()
	cancel()
	<-done
}
