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
		Long: `gload moves the input pipeline out of the training process: tokenize a corpus once into a memory-mapped
Arrow dataset (gload tokenize), then serve length-bucketed, token-budget or packed batches of it to every rank and
DataLoader worker of a training loop (gload serve, or the server a Python gload.Loader starts for itself), and watch
whether the GPUs starve (gload watch, gload bench).`,
		Version:       version.String(),
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	root.SetVersionTemplate("gload {{.Version}}\n")
	root.PersistentFlags().StringVar(&g.logLevel, "log-level", "info", "log level: debug, info, warn, error")
	root.AddCommand(newEncodeCmd(g), newTokenizeCmd(g), newCompressCmd(g), newInspectCmd(g), newIndexCmd(g), newMergeCmd(g), newServeCmd(g), newWatchCmd(g), newBenchCmd(g), newDoctorCmd(g), newSyncCmd(g))
	prof := &profileOptions{}
	prof.register(root)
	return root, prof
}
