package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"time"

	"github.com/spf13/cobra"

	"github.com/gload/gload/bench"
	"github.com/gload/gload/bucket"
	"github.com/gload/gload/loader"
	"github.com/gload/gload/loader/dataset"
	"github.com/gload/gload/proto/gloadpb"
)

// newBenchWebscaleCmd is `gload bench webscale`: a dataset past 2^31 rows served by a real server (a subprocess)
// and read over a slice of its epoch by ranks × workers, resumed with another world size (bench.ScaleRead).
func newBenchWebscaleCmd() *cobra.Command {
	var dir string
	var rows, shardRows int64
	var writers int
	var lastWindow bool
	var o bench.ScaleReadOptions
	cmd := &cobra.Command{
		Use:   "webscale --dir DIR [--rows N] [--batches K --world W --workers P --resume-world W2]",
		Short: "Serve a dataset of more than 2^31 one-token rows and read a slice of its epoch exactly once",
		Long: `Writes DIR (unless it already holds a dataset) with --rows rows of one token each (2.2·10^9 by default: about
27 GB with its index), starts "gload serve" on it as a subprocess, and reads --batches batches per consumer with
--world ranks × --workers workers, then resumes from there with --resume-world ranks: the global batches read must be
exactly the first ones of the epoch, each once, every row of them once, each holding its own token. Prints one JSON
line: the plan's batches, the slice read, rows read (and how many past 2^31), the server's time to its first batch
and its peak RSS (VmHWM of the subprocess).`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			out := map[string]any{}
			if _, err := os.Stat(filepath.Join(dir, dataset.StateFile)); err != nil {
				t := time.Now()
				if err := os.MkdirAll(dir, 0o755); err != nil {
					return err
				}
				if err := bench.WriteScaleDataset(dir, rows, shardRows, writers); err != nil {
					return err
				}
				out["write_s"] = time.Since(t).Seconds()
			}
			self, err := os.Executable()
			if err != nil {
				return err
			}
			sock := filepath.Join(os.TempDir(), fmt.Sprintf("gload-webscale-%d.sock", os.Getpid()))
			o.Addr, o.Dataset, o.TokenOf = "unix://"+sock, "web", bench.ScaleToken
			srv := exec.CommandContext(cmd.Context(), self, "serve", "--dataset", "web="+dir, "--listen", o.Addr)
			srv.Stderr = os.Stderr
			t0 := time.Now()
			if err := srv.Start(); err != nil {
				return err
			}
			defer func() { _ = srv.Process.Kill(); _ = srv.Wait(); _ = os.Remove(sock) }()
			for {
				if _, err := os.Stat(sock); err == nil {
					break
				}
				if time.Since(t0) > 30*time.Minute {
					return fmt.Errorf("the server did not listen on %s", sock)
				}
				time.Sleep(50 * time.Millisecond)
			}
			out["server_ready_s"] = time.Since(t0).Seconds()
			if lastWindow {
				// The plan computed here, as the server computes it: the slice starts at the window holding the
				// dataset's last rows (past 2^31 in a dataset that large), and the two plan hashes must agree.
				from, hash, err := lastWindowStart(dir, o)
				if err != nil {
					return err
				}
				o.From, out["local_plan_hash"] = from, hash
			}
			res, err := bench.ScaleRead(context.Background(), o)
			if err != nil {
				return err
			}
			out["read"] = res
			out["server_peak_rss_mb"] = bench.PeakRSSMB(srv.Process.Pid)
			b, err := json.Marshal(out)
			if err != nil {
				return err
			}
			_, err = fmt.Fprintln(cmd.OutOrStdout(), string(b))
			return err
		},
	}
	f := cmd.Flags()
	f.StringVar(&dir, "dir", "", "the dataset directory (written when it holds none; required)")
	f.Int64Var(&rows, "rows", 2_200_000_000, "rows of the dataset to write")
	f.Int64Var(&shardRows, "shard-rows", 1<<26, "rows per shard when writing")
	f.IntVar(&writers, "writers", 2, "shards written at once")
	f.IntVar(&o.BatchSize, "batch-size", 16, "rows per batch")
	f.Uint64Var(&o.Seed, "seed", 1, "plan seed")
	f.IntVar(&o.Batches, "batches", 2000, "batches each consumer reads per phase")
	f.IntVar(&o.World, "world", 4, "ranks of the first phase")
	f.IntVar(&o.Workers, "workers", 2, "workers per rank")
	f.IntVar(&o.ResumeWorld, "resume-world", 3, "ranks of the resumed phase")
	f.BoolVar(&lastWindow, "last-window", true, "start the slice at the window of the lazy plan that holds the dataset's last rows")
	_ = cmd.MarkFlagRequired("dir")
	return cmd
}

// lastWindowStart plans o's epoch over the dataset in dir as a server does and returns the first global batch of
// the window holding the dataset's last row (0 for an exact plan) and the plan's hash.
func lastWindowStart(dir string, o bench.ScaleReadOptions) (uint64, string, error) {
	ds, err := dataset.Open(dir, dataset.OpenOptions{})
	if err != nil {
		return 0, "", err
	}
	defer ds.Close()
	p, err := loader.EpochPlan(ds, &gloadpb.BatchPolicy{BatchSize: uint32(o.BatchSize)}, o.Seed, 0, o.World)
	if err != nil {
		return 0, "", err
	}
	lp, ok := p.(*bucket.LazyPlan)
	if !ok {
		return 0, p.Hash(), nil
	}
	last := (int64(ds.Len()) - 1) / bucket.LazyBlockRows
	for w := range lp.Windows() {
		if slices.Contains(lp.WindowBlocks(w), last) {
			lo, _ := lp.WindowBatches(w)
			return uint64(lo), p.Hash(), nil
		}
	}
	return 0, "", fmt.Errorf("no window of the plan holds block %d", last)
}
