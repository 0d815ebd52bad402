package main

import (
	"errors"
	"fmt"
	"io"
	"math/bits"
	"slices"
	"strings"

	"github.com/spf13/cobra"

	"github.com/gload/gload/loader"
	"github.com/gload/gload/loader/dataset"
	"github.com/gload/gload/proto/gloadpb"
	"github.com/gload/gload/tokenize"
	"github.com/gload/gload/tokenize/pipeline"
)

type inspectOptions struct {
	g         *globalOptions
	decode    []int
	tokenizer string
	engine    string
	indexDir  string
	verify    bool
	labels    bool // --show-labels
	plan      bool
	seed      uint64
	epoch     int
	world     int
	policy    gloadpb.BatchPolicy
	anyTok    bool
}

func newInspectCmd(g *globalOptions) *cobra.Command {
	o := &inspectOptions{g: g}
	cmd := &cobra.Command{
		Use:   "inspect DIR",
		Short: "Show what a dataset holds: samples, tokens, length histogram, shards, tokenizer",
		Long: `Opens a dataset directory (written by gload tokenize or by Hugging Face save_to_disk) and prints its row and
token counts, a histogram of row lengths, its shards and the hash of the tokenizer that wrote it. --decode N
prints row N as ids and, with --tokenizer, as text; a tokenizer whose hash is not the one recorded in the dataset is
refused (its text would be garbage) unless --any-tokenizer.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return o.run(cmd.OutOrStdout(), args[0])
		},
	}
	cmd.Flags().IntSliceVar(&o.decode, "decode", nil, "rows to print (ids, and text with --tokenizer)")
	cmd.Flags().StringVar(&o.tokenizer, "tokenizer", "", "tokenizer.json for --decode")
	cmd.Flags().StringVar(&o.engine, "engine", "go", "tokenizer engine for --decode")
	cmd.Flags().StringVar(&o.indexDir, "index-dir", dataset.DefaultIndexDir(), "index cache for datasets without their own gload.index")
	cmd.Flags().BoolVar(&o.verify, "verify", false, "hash every shard and compare with the index")
	cmd.Flags().BoolVar(&o.labels, "show-labels", false, "with --decode on an SFT dataset: print the labels, and (with --tokenizer) the text with trained spans marked «like this»")
	f := cmd.Flags()
	f.BoolVar(&o.plan, "plan", false, "print the hash of one epoch's plan (--seed, --epoch, --world-size, --policy ...), as the Plan RPC reports it")
	f.Uint64Var(&o.seed, "seed", 0, "--plan: seed")
	f.IntVar(&o.epoch, "epoch", 0, "--plan: epoch")
	f.IntVar(&o.world, "world-size", 1, "--plan: world size of the job's first start (a resume keeps its plan)")
	f.StringVar(&o.policy.Policy, "policy", "bucketed", "--plan: bucketed, tokens or packed")
	f.Uint32Var(&o.policy.BatchSize, "batch-size", 0, "--plan: rows per batch")
	f.Uint32Var(&o.policy.TokenBudget, "token-budget", 0, "--plan: tokens policy budget")
	f.Uint32Var(&o.policy.SeqLen, "seq-len", 0, "--plan: packed row length")
	f.Uint32Var(&o.policy.PadMultiple, "pad-multiple", 0, "--plan: pad lengths to a multiple of this (0: 64)")
	f.Uint32Var(&o.policy.MaxLength, "max-length", 0, "--plan: truncate rows to this length")
	f.StringVar(&o.policy.Planner, "planner", "", "--plan: auto (default: exact up to 2^27 rows, lazy above), exact or lazy")
	cmd.Flags().BoolVar(&o.anyTok, "any-tokenizer", false, "decode with --tokenizer even when its hash is not the one that wrote the dataset")
	return cmd
}

func (o *inspectOptions) run(w io.Writer, dir string) error {
	ds, err := dataset.Open(dir, dataset.OpenOptions{Logger: o.g.logger(), IndexDir: o.indexDir, Verify: o.verify, WriteIndex: true})
	if errors.Is(err, dataset.ErrNotDataset) {
		if run, jerr := pipeline.Interrupted(dir); jerr != nil {
			return fmt.Errorf("%w (and its tokenize journal: %v)", err, jerr)
		} else if run != nil {
			finished := ""
			if run.Finished {
				finished = ", every record written: only finalisation remained"
			}
			return fmt.Errorf("%s is not a dataset yet: a gload tokenize run into it was interrupted (or is still "+
				"running): its journal %s records %d shards completed (%d rows, %d tokens from %d records read)%s; "+
				"run the same gload tokenize command with --resume to continue it, or with --overwrite to start again",
				dir, run.Journal, run.Shards, run.Rows, run.Tokens, run.Documents, finished)
		}
	}
	if err != nil {
		return err
	}
	defer ds.Close()
	// Rows, tokens and the longest row come from the index's block table; the exact percentiles and histogram
	// read every length, so only for datasets of at most inspectExactRows rows.
	ls := ds.LengthSource()
	total, maxL := ds.TotalTokens(), ds.MaxLength()
	var lengths []uint32
	if ls.Len() <= inspectExactRows {
		lengths = ds.Lengths()
		if err := ls.Err(); err != nil {
			return err
		}
	}
	fmt.Fprintf(w, "dataset     %s\n", dir)
	fmt.Fprintf(w, "rows        %d\n", ds.Len())
	fmt.Fprintf(w, "tokens      %d\n", total)
	if len(lengths) > 0 {
		sorted := append([]uint32(nil), lengths...)
		slices.Sort(sorted)
		fmt.Fprintf(w, "length      min %d, median %d, mean %.1f, p99 %d, max %d\n", sorted[0],
			sorted[len(sorted)/2], float64(total)/float64(len(lengths)), sorted[(len(sorted)*99)/100], maxL)
	} else if ls.Len() > 0 {
		fmt.Fprintf(w, "length      mean %.1f, max %d (from the index's block summaries)\n", float64(total)/float64(ls.Len()), maxL)
	}
	fmt.Fprintf(w, "fingerprint %s\n", ds.Fingerprint())
	if o.plan {
		id, err := loader.EpochPlanIdentity(ds, &o.policy, o.seed, o.epoch, o.world)
		if err != nil {
			return fmt.Errorf("--plan: %w", err)
		}
		fmt.Fprintf(w, "plan        %s (seed %d, epoch %d, world %d, %s: %d global batches)\n", id.PlanHash, o.seed, o.epoch, o.world, o.policy.Policy, id.Batches)
	}
	if n := ds.ShardsVerified(); n > 0 {
		fmt.Fprintf(w, "verified    %d of %d shards hashed against the index\n", n, len(ds.Shards()))
	}
	if cols := ds.Columns(); len(cols) > 0 {
		fmt.Fprintf(w, "columns     input_ids, %s\n", strings.Join(cols, ", "))
	} else {
		fmt.Fprintf(w, "columns     input_ids (no kept columns)\n")
	}
	if h := ds.TokenizerHash(); h != "" {
		fmt.Fprintf(w, "tokenizer   %s\n", h)
	} else {
		fmt.Fprintf(w, "tokenizer   unknown (not written by gload)\n")
	}
	fmt.Fprintf(w, "shards\n")
	for _, s := range ds.Shards() {
		fmt.Fprintf(w, "  %-28s %10d rows %12d bytes %6d batches\n", s.Name, s.Rows, s.Bytes, s.Batches)
	}
	if len(lengths) > 0 {
		fmt.Fprintf(w, "length histogram (rows per power-of-two bucket)\n")
		writeHistogram(w, lengths)
	} else if ls.Len() > 0 {
		fmt.Fprintf(w, "length histogram (rows per power-of-two bucket, from the index's block summaries)\n")
		writeBlockHistogram(w, ls)
	}
	if len(o.decode) == 0 {
		return nil
	}
	var eng tokenize.Engine
	if o.tokenizer != "" {
		if eng, err = tokenize.LoadEngine(o.engine, o.tokenizer, tokenize.Options{}); err != nil {
			return err
		}
		if h := ds.TokenizerHash(); h != "" && h != eng.Hash() {
			if !o.anyTok {
				return fmt.Errorf("--tokenizer %s has hash %s, but %s was written by tokenizer %s: its text would be wrong "+
					"(pass the tokenizer that wrote it, or --any-tokenizer to decode anyway)", o.tokenizer, eng.Hash(), dir, h)
			}
			fmt.Fprintf(o.g.stderr, "gload: warning: --tokenizer %s (hash %s) is not the tokenizer that wrote %s (%s): the text below is likely wrong\n",
				o.tokenizer, eng.Hash(), dir, h)
		}
	}
	for _, n := range o.decode {
		if n < 0 || n >= ds.Len() {
			return fmt.Errorf("--decode %d: dataset has rows 0..%d", n, ds.Len()-1)
		}
		ids, err := ds.AppendTokens(nil, n)
		if err != nil {
			return err
		}
		fmt.Fprintf(w, "row %d: %d tokens\n  ids  %v\n", n, len(ids), ids)
		if eng != nil {
			fmt.Fprintf(w, "  text %q\n", eng.Decode(ids, false))
		}
		if o.labels {
			if err := showLabels(w, ds, eng, n, ids); err != nil {
				return err
			}
		}
	}
	return nil
}

// inspectExactRows: gload inspect reads every length (exact percentiles and histogram) of datasets of at most
// this many rows, and uses the index's block summaries for larger ones.
const inspectExactRows = 1 << 24

func writeHistogram(w io.Writer, lengths []uint32) {
	var counts [33]int
	top := 0
	for _, l := range lengths {
		b := bits.Len32(l)
		counts[b]++
		top = max(top, b)
	}
	writeCounts(w, counts[:top+1], -1)
}

// writeBlockHistogram writes the sum of the index's block histograms (dataset.HistBucket's buckets; the last
// holds every row of at least 2^14 tokens).
func writeBlockHistogram(w io.Writer, ls *dataset.IndexLengths) {
	var counts [dataset.HistBuckets]int
	top := 0
	for b := range ls.NumBlocks() {
		for k, c := range ls.Block(b).Hist {
			counts[k] += int(c)
			if c > 0 {
				top = max(top, k)
			}
		}
	}
	writeCounts(w, counts[:top+1], dataset.HistBuckets-1)
}

// writeCounts writes counts[b], the rows of bucket b (lengths 2^(b-1) to 2^b-1; 0 for b = 0), as bars; bucket
// open, if not -1, has no upper bound.
func writeCounts(w io.Writer, counts []int, open int) {
	top := len(counts) - 1
	peak := 0
	for _, c := range counts {
		peak = max(peak, c)
	}
	for b := 0; b <= top; b++ {
		lo, hi := 0, 0
		if b > 0 {
			lo, hi = 1<<(b-1), (1<<b)-1
		}
		bar := strings.Repeat("#", (counts[b]*50+peak-1)/max(peak, 1))
		if b == open {
			fmt.Fprintf(w, "  %7d+%-7s %9d %s\n", lo, "", counts[b], bar)
			continue
		}
		fmt.Fprintf(w, "  %7d-%-7d %9d %s\n", lo, hi, counts[b], bar)
	}
}
