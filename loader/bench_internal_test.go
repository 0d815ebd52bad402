package loader

import (
	"context"
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/gload/gload/bucket"
	"github.com/gload/gload/loader/dataset"
)

// writeBenchDataset writes rows of exactly rowLen tokens.
func writeBenchDataset(b testing.TB, dir string, rows, rowLen int) {
	b.Helper()
	ids := make([]int32, rowLen)
	writeRows(b, dir, rows, dataset.WriterOptions{RowsPerBatch: 1000}, func(i int) []int32 {
		for j := range ids {
			ids[j] = int32(i + j)
		}
		return ids
	})
}

// writeRows writes a one-shard dataset of n rows into dir, row i being row(i) (which may reuse its slice).
func writeRows(t testing.TB, dir string, n int, opts dataset.WriterOptions, row func(i int) []int32) {
	t.Helper()
	w, err := dataset.CreateShard(dir, 0, opts)
	if err != nil {
		t.Fatal(err)
	}
	for i := range n {
		if err := w.Append(row(i), nil); err != nil {
			t.Fatal(err)
		}
	}
	info, err := w.Close()
	if err != nil {
		t.Fatal(err)
	}
	if err := dataset.Finalize(dir, []dataset.ShardInfo{info}, opts); err != nil {
		t.Fatal(err)
	}
}

// BenchmarkAssemble: one 16×1024 int32 batch from the memory-mapped shard
// into its wire buffer (bytes = input_ids).
func BenchmarkAssemble(b *testing.B) {
	dir := b.TempDir()
	const rows, rowLen = 4096, 1024
	writeBenchDataset(b, dir, rows, rowLen)
	ds, err := dataset.Open(dir, dataset.OpenOptions{})
	if err != nil {
		b.Fatal(err)
	}
	defer ds.Close()
	for _, packed := range []bool{false, true} {
		b.Run(fmt.Sprintf("packed=%v", packed), func(b *testing.B) {
			pool := &bufPool{}
			a := newAssembler(ds, pool, DefaultMaxBatchBytes)
			rng := rand.New(rand.NewPCG(1, 1))
			batches := make([]bucket.Batch, 64)
			for k := range batches {
				bt := bucket.Batch{Rows: 16, Length: rowLen}
				for r := range 16 {
					row := rng.IntN(rows)
					if packed {
						// two half rows per packed row
						bt.Pieces = append(bt.Pieces, bucket.Piece{Index: row, Len: rowLen / 2}, bucket.Piece{Index: (row + 1) % rows, Start: 7, Len: rowLen / 2})
						bt.RowStart = append(bt.RowStart, 2*r)
					} else {
						bt.Pieces = append(bt.Pieces, bucket.Piece{Index: row, Len: rowLen})
					}
				}
				if packed {
					bt.RowStart = append(bt.RowStart, len(bt.Pieces))
				}
				batches[k] = bt
			}
			b.ReportAllocs()
			b.SetBytes(16 * rowLen * 4)
			i := 0
			for b.Loop() {
				w, err := a.assemble(batches[i%len(batches)], batchHeader{seq: uint64(i), packed: packed})
				if err != nil {
					b.Fatal(err)
				}
				w.release()
				i++
			}
		})
	}
}

// BenchmarkPlanCache10M: epoch plans of 10M rows through the plan cache:
// "miss" computes a new plan each time (bucketed, B=16), "hit" finds it.
func BenchmarkPlanCache10M(b *testing.B) {
	const n = 10_000_000
	lengths := make([]uint32, n)
	rng := rand.New(rand.NewPCG(2, 2))
	for i := range lengths {
		lengths[i] = uint32(1 + rng.IntN(2048))
	}
	cfg := bucket.DefaultConfig()
	cfg.BatchSize = 16
	var last time.Duration
	c := newPlanCache(context.Background(), 2, func(_ string, d time.Duration, hit bool) {
		if !hit {
			last = d
		}
	})
	b.Run("miss", func(b *testing.B) {
		b.ReportAllocs()
		seed := uint64(0)
		var total time.Duration
		for b.Loop() {
			seed++
			if _, err := c.get(context.Background(), planKey{fingerprint: "fp", seed: seed, policy: "p", planWorld: 1}, bucket.SliceLengths(lengths), cfg); err != nil {
				b.Fatal(err)
			}
			total += last
		}
		b.ReportMetric(float64(n)*float64(b.N)/total.Seconds(), "rows/s")
	})
	b.Run("hit", func(b *testing.B) {
		key := planKey{fingerprint: "fp", seed: 1 << 40, policy: "p", planWorld: 1}
		if _, err := c.get(context.Background(), key, bucket.SliceLengths(lengths), cfg); err != nil {
			b.Fatal(err)
		}
		b.ReportAllocs()
		for b.Loop() {
			if _, err := c.get(context.Background(), key, bucket.SliceLengths(lengths), cfg); err != nil {
				b.Fatal(err)
			}
		}
	})
}
