package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"

	"github.com/gload/gload/internal/version"
	"github.com/spf13/cobra"
)

// exitError carries a specific exit status out of a command.
type exitError struct {
	code int
	err  error
}

func (e *exitError) Error() string { return e.err.Error() }
func (e *exitError) Unwrap() error { return e.err }

// run builds the command tree, executes args and returns the process exit status.
func run(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	root, prof := newRootCmdProfiled(stdin, stdout, stderr)
	root.SetArgs(args)
	root.SetIn(stdin)
	root.SetOut(stdout)
	root.SetErr(stderr)
	err := root.ExecuteContext(ctx)
	if perr := prof.stop(); perr != nil && err == nil {
		err = perr
	}
	if err == nil {
		return 0
	}
	fmt.Fprintf(stderr, "gload: %v\n", err)
	var ee *exitError
	if errors.As(err, &ee) {
		return ee.code
	}
	if errors.Is(err, context.Canceled) {
		return 130
	}
	return 1
}

type globalOptions struct {
	logLevel string
	stderr   io.Writer
}

func (g *globalOptions) logger() *slog.Logger {
	var lvl slog.Level
	if err := lvl.UnmarshalText([]byte(g.logLevel)); err != nil {
		lvl = slog.LevelInfo
	}
	return slog.New(slog.NewTextHandler(g.stderr, &slog.HandlerOptions{Level: lvl}))
}

func newRootCmdProfiled(stdin io.Reader, stdout, stderr io.Writer) (*cobra.Command, *profileOptions) {
	g := &globalOptions{stderr: stderr}
	root := &cobra.Command{
		Use:   "gload",
		Short: "Keep GPUs fed: pre-tokenize corpora into Arrow datasets and serve length-bucketed batches",
		Long: `gload moves the input pipeline out of the training process.

  gload encode     tokenize JSONL text from stdin with a tokenizer.json (check ids against Hugging Face)
  gload tokenize   turn corpora (JSONL, text, Parquet, HF datasets) into a memory-mapped Arrow dataset
  gload inspect    show what a dataset holds
  gload compress   rewrite a big .gz/.zst corpus file as independent frames that tokenize decodes on several cores
  gload merge      join the parts of gload tokenize --task I/N into one dataset
  gload index      check a dataset's shards against its index (content hashes) and rewrite the index
  gload serve      serve length-bucketed batches of datasets to training loops (gRPC or shared memory)
  gload watch      show whether the GPUs starve: NVML utilisation beside the clients' data waits
  gload bench      measure feeding: how fast gload serves, and whether a training command starves
  gload sync       copy a dataset between object storage and a local directory, verified`,
		Version:       version.String(),
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	root.SetVersionTemplate("gload {{.Version}}\n")
	root.PersistentFlags().StringVar(&g.logLevel, "log-level", "info", "log level: debug, info, warn, error")
	root.AddCommand(newEncodeCmd(g), newTokenizeCmd(g), newCompressCmd(g), newInspectCmd(g), newIndexCmd(g), newMergeCmd(g), newServeCmd(g), newWatchCmd(g), newBenchCmd(g), newSyncCmd(g))
	prof := &profileOptions{}
	prof.register(root)
	return root, prof
}
