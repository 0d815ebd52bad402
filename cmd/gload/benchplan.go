package main

import (
	"encoding/json"
	"fmt"

	"github.com/spf13/cobra"

	"github.com/gload/gload/bench"
	"github.com/gload/gload/bucket"
)

// newBenchPlanCmd is `gload bench plan`: one epoch plan over synthetic lengths, timed (bench.PlanBench).
func newBenchPlanCmd() *cobra.Command {
	var c bench.PlanConfig
	var policy string
	cmd := &cobra.Command{
		Use:   "plan --rows N [--policy bucketed|tokens|packed] [--batch-size B --token-budget T --seq-len S --seed K --epoch E --world W] [--planner auto|exact|lazy] [--sources K]",
		Short: "Time one epoch plan over N synthetic row lengths, without a dataset",
		Long: `Plans one epoch over N synthetic, deterministic row lengths (log-normal, median 300, sigma 1.2, clipped to
[1, 32768]; see bucket.Synthetic) exactly as the server plans a dataset of those lengths, and prints one JSON line:
the time to the first batch (planning included), mean and p99 microseconds per further batch (1 000 batches sampled
evenly across the epoch), batches in the epoch, and the peak RSS of the process (VmHWM), which includes the 4-byte
per row lengths array the planner reads, as the server holds the index's lengths.

--planner lazy (the default above 2^27 rows) plans with bucket.NewLazyPlan (bucket.NewLazyPacked for packed), which
reads lengths on demand: no lengths array is made, and each batch computes its mega-batch's (packed: its window's)
synthetic lengths (length_ns says what one costs; a memory-mapped index reads one in a few ns). Lazy plans warm up
within their first window, which they build before the first batch. plan_s is the time to make the plan (for lazy
tokens and packed plans, their counting pass over every row, on every core); packing_efficiency is the plan's real
over padded tokens.

--sources K plans a mixture epoch of --rows slots instead: K synthetic sources of rows/K rows each, weights 1/(i+1),
with bucket.NewEpochMixture (exact up to 2^27 slots, lazy above; --planner picks one).`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			c.Policy = bucket.Policy(policy)
			switch c.Policy {
			case bucket.Bucketed, bucket.Packed:
				c.TokenBudget = 0
			case bucket.Tokens:
			default:
				return fmt.Errorf("--policy: want bucketed, tokens or packed, got %q", policy)
			}
			if c.Policy != bucket.Packed {
				c.SeqLen, c.SplitDocs = 0, false
			}
			if c.Policy == bucket.Tokens && !cmd.Flags().Changed("batch-size") {
				c.BatchSize = 0
			}
			res, err := bench.PlanBench(c)
			if err != nil {
				return err
			}
			b, err := json.Marshal(res)
			if err != nil {
				return err
			}
			_, err = fmt.Fprintln(cmd.OutOrStdout(), string(b))
			return err
		},
	}
	f := cmd.Flags()
	f.Int64Var(&c.Rows, "rows", 0, "rows of the synthetic dataset (required)")
	f.StringVar(&policy, "policy", "bucketed", "bucketed, tokens or packed")
	f.IntVar(&c.BatchSize, "batch-size", 16, "rows per batch (tokens: optional cap, 0 by default)")
	f.IntVar(&c.TokenBudget, "token-budget", 65536, "tokens per batch (tokens policy)")
	f.IntVar(&c.SeqLen, "seq-len", 4096, "packed row length (packed policy)")
	f.BoolVar(&c.SplitDocs, "split-docs", false, "split documents across packed rows (packed policy)")
	f.Uint64Var(&c.Seed, "seed", 0, "plan seed")
	f.IntVar(&c.Epoch, "epoch", 0, "epoch")
	f.IntVar(&c.World, "world", 1, "world size the plan is laid out for (warm-up)")
	f.Uint64Var(&c.LengthSeed, "length-seed", 0, "seed of the synthetic lengths")
	f.IntVar(&c.Samples, "samples", 1000, "batches timed after the first")
	f.BoolVar(&c.Quality, "quality", false, "also walk the epoch and report the distances in the plan between rows adjacent in the dataset (4 bytes per row)")
	f.StringVar(&c.Planner, "planner", "auto", "auto (exact up to 2^27 rows, lazy above), exact or lazy")
	f.IntVar(&c.Sources, "sources", 0, "plan a mixture epoch of --rows slots over this many synthetic sources (Zipf weights; see bench.MixSources)")
	_ = cmd.MarkFlagRequired("rows")
	return cmd
}
