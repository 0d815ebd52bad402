package bench

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sync"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/gload/gload/loader/client"
	"github.com/gload/gload/loader/dataset"
	"github.com/gload/gload/proto/gloadpb"
)

// Web-scale serving: a dataset of more rows than an int32 counts, written without a tokenizer (one token per row),
// served by a real server and read by several ranks and workers over a slice of its epoch, then resumed with another
// world size. gload bench webscale drives it (cmd/gload/benchwebscale.go starts the server as a subprocess, so
// its memory is its own).

// ScaleToken is the token row r of a WriteScaleDataset dataset holds.
func ScaleToken(r int64) int32 { return int32(r % 50_000) }

// WriteScaleDataset writes a dataset of rows rows of one token each (row r holds ScaleToken(r)) into dir,
// in shards of shardRows rows, workers shards at a time, and finalizes it. Its memory is the index's 4 bytes per
// row (the writer keeps every shard's lengths until Finalize).
func WriteScaleDataset(dir string, rows, shardRows int64, workers int) error {
	if rows <= 0 || shardRows <= 0 || workers <= 0 {
		return fmt.Errorf("%w: rows %d, shard rows %d, workers %d", ErrOptions, rows, shardRows, workers)
	}
	opts := dataset.WriterOptions{TokenizerHash: "bench/webscale"}
	n := int((rows + shardRows - 1) / shardRows)
	infos := make([]dataset.ShardInfo, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	next := make(chan int)
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for k := range next {
				infos[k], errs[k] = writeScaleShard(dir, k, int64(k)*shardRows, min(int64(k+1)*shardRows, rows), opts)
			}
		}()
	}
	for k := range n {
		next <- k
	}
	close(next)
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return err
	}
	return dataset.Finalize(dir, infos, opts)
}

func writeScaleShard(dir string, k int, lo, hi int64, opts dataset.WriterOptions) (dataset.ShardInfo, error) {
	w, err := dataset.CreateShard(dir, k, opts)
	if err != nil {
		return dataset.ShardInfo{}, err
	}
	var tok [1]int32
	for r := lo; r < hi; r++ {
		tok[0] = ScaleToken(r)
		if err := w.Append(tok[:], nil); err != nil {
			return dataset.ShardInfo{}, fmt.Errorf("shard %d row %d: %w", k, r, err)
		}
	}
	return w.Close()
}

// ScaleReadOptions configure ScaleRead.
type ScaleReadOptions struct {
	Addr, Dataset string
	BatchSize     int
	Seed          uint64
	// Batches is how many batches each consumer of the first phase reads (world × workers consumers); the second
	// phase resumes from there with ResumeWorld ranks of Workers workers, each reading as many.
	Batches        int
	From           uint64 // the slice's first global batch (the first phase resumes there)
	World, Workers int
	ResumeWorld    int
	TokenOf        func(row int64) int32 // the token row r holds (checked in every batch)
}

// ScaleReadResult is what ScaleRead measured and checked.
type ScaleReadResult struct {
	GlobalBatches uint64  `json:"global_batches"` // of the epoch plan
	PlanHash      string  `json:"plan_hash"`      // the server's
	From          uint64  `json:"from"`           // the slice's first global batch
	SliceBatches  int     `json:"slice_batches"`  // read: global batches [from, from+slice_batches), each once
	Rows          int     `json:"rows_read"`      // distinct dataset rows read, each once
	MaxRow        int64   `json:"max_row"`        // largest row number read
	RowsPast2_31  int     `json:"rows_past_2_31"` // rows read whose number is at least 2^31
	FirstBatchS   float64 `json:"first_batch_s"`  // Open to the first batch of the first consumer
	ReadS         float64 `json:"read_s"`         // both phases
}

// ScaleRead reads a slice of an epoch as opts says and checks it: the global batches of both phases are exactly
// [From, From+N) once each, every row of them comes once, and every token is the row's.
func ScaleRead(ctx context.Context, opts ScaleReadOptions) (ScaleReadResult, error) {
	var res ScaleReadResult
	c, err := client.Dial(ctx, opts.Addr)
	if err != nil {
		return res, err
	}
	defer c.Close()
	policy := &gloadpb.BatchPolicy{BatchSize: uint32(opts.BatchSize)}
	globals := map[uint64]int{}
	rows := map[int64]int{}
	var mu sync.Mutex
	var first time.Duration
	t0 := time.Now()
	phase := func(world, workers int, resume *gloadpb.ResumeState) error {
		var wg sync.WaitGroup
		errs := make([]error, world*workers)
		for rank := range world {
			for worker := range workers {
				wg.Add(1)
				go func() {
					defer wg.Done()
					open := &gloadpb.Open{Dataset: opts.Dataset, Seed: opts.Seed, Policy: policy, Resume: resume,
						WorldSize: uint32(world), Rank: uint32(rank), NumWorkers: uint32(workers), Worker: uint32(worker)}
					errs[rank*workers+worker] = readConsumer(ctx, c, open, opts, func(b *client.Batch) error {
						mu.Lock()
						defer mu.Unlock()
						if first == 0 {
							first = time.Since(t0)
						}
						globals[b.GlobalIndex]++
						ids := b.InputIDs()
						for i, r := range b.Index() {
							rows[r]++
							if opts.TokenOf != nil && ids[i*b.Length] != opts.TokenOf(r) {
								return fmt.Errorf("batch %d: row %d holds token %d, want %d", b.GlobalIndex, r, ids[i*b.Length], opts.TokenOf(r))
							}
						}
						return nil
					})
				}()
			}
		}
		wg.Wait()
		return errors.Join(errs...)
	}
	plan, err := c.Plan(ctx, &gloadpb.Open{Dataset: opts.Dataset, Seed: opts.Seed, Policy: policy, WorldSize: uint32(opts.World)})
	if err != nil {
		return res, err
	}
	res.PlanHash = plan.PlanHash
	var start *gloadpb.ResumeState
	if opts.From > 0 {
		start = proto.CloneOf(plan.GetStart())
		start.Consumed, start.PlanWorld = opts.From, uint32(opts.World)
	}
	if err := phase(opts.World, opts.Workers, start); err != nil {
		return res, err
	}
	resume := proto.CloneOf(plan.GetStart())
	resume.Consumed, resume.PlanWorld = opts.From+uint64(opts.World*opts.Workers*opts.Batches), uint32(opts.World)
	if err := phase(opts.ResumeWorld, opts.Workers, resume); err != nil {
		return res, err
	}
	res.ReadS = time.Since(t0).Seconds()
	res.FirstBatchS = first.Seconds()
	res.GlobalBatches = plan.GlobalBatches
	res.SliceBatches, res.From = len(globals), opts.From
	for g := opts.From; g < opts.From+uint64(len(globals)); g++ {
		if globals[g] != 1 {
			return res, fmt.Errorf("global batch %d read %d times (of %d batches read from %d)", g, globals[g], len(globals), opts.From)
		}
	}
	for r, n := range rows {
		if n != 1 {
			return res, fmt.Errorf("row %d read %d times", r, n)
		}
		res.MaxRow = max(res.MaxRow, r)
		if r >= 1<<31 {
			res.RowsPast2_31++
		}
	}
	res.Rows = len(rows)
	return res, nil
}

// readConsumer reads opts.Batches batches of one consumer's stream (fewer if it ends), passing each to check.
func readConsumer(ctx context.Context, c *client.Client, open *gloadpb.Open, opts ScaleReadOptions, check func(*client.Batch) error) error {
	s, err := c.Stream(ctx, open)
	if err != nil {
		return fmt.Errorf("rank %d worker %d: %w", open.Rank, open.Worker, err)
	}
	defer s.Close()
	for range opts.Batches {
		b, err := s.Next(ctx)
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("rank %d worker %d: %w", open.Rank, open.Worker, err)
		}
		err = check(b)
		b.Release()
		if err != nil {
			return err
		}
	}
	return nil
}
