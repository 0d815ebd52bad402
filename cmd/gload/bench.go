package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/gload/gload/bench"
	"github.com/gload/gload/loader"
)

func newBenchCmd(g *globalOptions) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "bench",
		Short: "Measure feeding: how fast gload serves (feed), whether a training command starves (run), how fast it plans (plan)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return cmd.Help()
		},
	}
	cmd.AddCommand(newBenchFeedCmd(g), newBenchRunCmd(g), newBenchPlanCmd(), newBenchWebscaleCmd())
	return cmd
}

type benchFeedOptions struct {
	g          *globalOptions
	dataset    string
	sources    []string // NAME=DIR of a mixture's datasets (in-process server)
	weights    string   // NAME:WEIGHT,… of the mixture over sources
	addr       string
	batchSize  int
	transports string
	clients    string
	prefetch   int
	consumeMS  float64
	duration   time.Duration
	seed       uint64
	json       bool
}

func newBenchFeedCmd(g *globalOptions) *cobra.Command {
	o := &benchFeedOptions{g: g}
	cmd := &cobra.Command{
		Use:   "feed (--dataset DIR | --source NAME=DIR ... --weights NAME:W,...) [--transport grpc,shm] [--clients 1,4,8] [--consume-ms MS] [--json]",
		Short: "Measure the highest sustained feed rate per transport and number of clients",
		Long: `Starts a gload server in this process on a temporary unix socket over the dataset directory (or, with --addr,
uses a running server, and --dataset names a dataset it serves), then for each transport × number of clients runs
that many concurrent Go clients for --duration, each pulling its share of the epoch (and the next epochs) as fast as
it can. Reports batches/s, real tokens/s, GB/s of batch buffers and next() latency p50/p99.

With --consume-ms each configuration runs a second time with every client sleeping that long after each batch (a
simulated training step): the report adds the wait share and the headroom = feed capacity / consumption rate
(above 1: gload feeds faster than the step consumes). shm needs the server on this host; where it cannot be used
it is skipped with the reason.

A mixture: --source NAME=DIR (repeatable) and --weights NAME:WEIGHT,… serve the sources and measure the mixture
of them (the other --mixture options may follow the weights: --weights web:0.6,code:0.4,mix_by=tokens); with --addr,
--dataset names a mixture the server serves like a dataset.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return o.run(cmd.Context(), cmd.OutOrStdout(), cmd.ErrOrStderr())
		},
	}
	f := cmd.Flags()
	f.StringVar(&o.dataset, "dataset", "", "dataset directory (with --addr: the name the server serves it under)")
	f.StringVar(&o.addr, "addr", "", "measure a running server at this address instead of an in-process one")
	f.IntVar(&o.batchSize, "batch-size", 16, "rows per batch")
	f.StringVar(&o.transports, "transport", "grpc,shm", "transports to measure, comma-separated: grpc, shm")
	f.StringVar(&o.clients, "clients", "1", "numbers of concurrent clients to measure, comma-separated")
	f.IntVar(&o.prefetch, "prefetch", 8, "prefetch depth of each client")
	f.Float64Var(&o.consumeMS, "consume-ms", 0, "simulated step after each batch, in milliseconds (0: none)")
	f.DurationVar(&o.duration, "duration", 10*time.Second, "how long each configuration runs")
	f.Uint64Var(&o.seed, "seed", 0, "epoch plan seed")
	f.BoolVar(&o.json, "json", false, "print the results as JSON")
	f.StringArrayVar(&o.sources, "source", nil, "a mixture's dataset as NAME=DIR (repeatable; with --weights)")
	f.StringVar(&o.weights, "weights", "", "the mixture over --source datasets: NAME:WEIGHT,… (as gload serve --mixture)")
	return cmd
}

// feedReport is the JSON of `gload bench feed`.
type feedReport struct {
	Dataset   string             `json:"dataset"`
	Server    string             `json:"server"`
	BatchSize int                `json:"batch_size"`
	Prefetch  int                `json:"prefetch"`
	Results   []bench.FeedResult `json:"results"`
}

func (o *benchFeedOptions) run(ctx context.Context, stdout, stderr io.Writer) error {
	if ctx == nil {
		ctx = context.Background()
	}
	transports, err := bench.ParseTransports(o.transports)
	if err != nil {
		return fmt.Errorf("--transport: %w", err)
	}
	clients, err := bench.ParseClients(o.clients)
	if err != nil {
		return fmt.Errorf("--clients: %w", err)
	}
	if o.consumeMS < 0 || o.batchSize < 1 || o.duration <= 0 || o.prefetch < 0 {
		return fmt.Errorf("--consume-ms, --batch-size, --duration and --prefetch must be positive")
	}
	if (o.dataset == "") == (len(o.sources) == 0) || (len(o.sources) == 0) != (o.weights == "") || (o.addr != "" && len(o.sources) > 0) {
		return fmt.Errorf("give --dataset DIR (with --addr: a served dataset or mixture), or --source NAME=DIR ... with --weights NAME:W,... (without --addr)")
	}
	cfg := loader.Config{Datasets: map[string]string{benchDataset: o.dataset}}
	if o.addr == "" && len(o.sources) == 0 {
		if _, err := os.Stat(o.dataset); err != nil {
			return fmt.Errorf("--dataset: %w", err)
		}
	}
	if len(o.sources) > 0 {
		if cfg.Datasets, err = parseDatasets(o.sources); err != nil {
			return fmt.Errorf("--source: %w", err)
		}
		_, spec, err := parseMixtureFlag(benchDataset + "=" + o.weights)
		if err != nil {
			return fmt.Errorf("--weights: %w", err)
		}
		cfg.Mixtures = map[string]loader.MixtureSpec{benchDataset: spec}
		o.dataset = strings.Join(o.sources, ",") + " (" + o.weights + ")"
	}
	addr, name, server := o.addr, o.dataset, "in-process"
	if addr == "" {
		var stop func() error
		addr, stop, err = startBenchServer(ctx, cfg, o.g.quietLogger())
		if err != nil {
			return err
		}
		defer func() {
			if serr := stop(); serr != nil {
				fmt.Fprintf(stderr, "gload bench feed: stopping the server: %v\n", serr)
			}
		}()
		name = benchDataset
	} else {
		server = addr
	}
	var progress io.Writer
	if !o.json {
		progress = stderr
	}
	res, err := bench.Feed(ctx, bench.FeedOptions{
		Addr: addr, Dataset: name, BatchSize: o.batchSize, Transports: transports, Clients: clients,
		Prefetch: o.prefetch, Duration: o.duration, Consume: time.Duration(o.consumeMS * float64(time.Millisecond)),
		Seed: o.seed, Progress: progress,
	})
	if o.json {
		rep := feedReport{Dataset: o.dataset, Server: server, BatchSize: o.batchSize, Prefetch: o.prefetch, Results: res}
		if rep.Results == nil {
			rep.Results = []bench.FeedResult{}
		}
		b, jerr := json.MarshalIndent(rep, "", "  ")
		if jerr != nil {
			return fmt.Errorf("encode results: %w", jerr)
		}
		fmt.Fprintln(stdout, string(b))
	} else {
		writeFeedTable(stdout, res, o.consumeMS > 0)
	}
	return err
}

// quietLogger logs errors only (everything with --log-level debug): the
// in-process server's stream logs, and its warnings about the streams the
// benchmark cuts off at the end of each run, would drown the measurements.
func (g *globalOptions) quietLogger() *slog.Logger {
	lvl := slog.LevelError
	if g.logLevel == "debug" {
		lvl = slog.LevelDebug
	}
	return slog.New(slog.NewTextHandler(g.stderr, &slog.HandlerOptions{Level: lvl}))
}

// benchDataset is the name the in-process server serves the dataset under.
const benchDataset = "bench"

// startBenchServer serves dir on a unix socket in a temporary directory and
// returns its address and how to stop it.
func startBenchServer(ctx context.Context, cfg loader.Config, log *slog.Logger) (string, func() error, error) {
	for name, dir := range cfg.Datasets {
		if _, err := os.Stat(dir); err != nil {
			return "", nil, fmt.Errorf("dataset %s: %w", name, err)
		}
	}
	cfg.NoGPUWatch, cfg.NoWriteIndex, cfg.DrainTimeout = true, true, time.Second
	cfg.Logger = log.With("part", "bench-server")
	srv, err := loader.NewServer(cfg)
	if err != nil {
		return "", nil, err
	}
	tmp, err := os.MkdirTemp("", "gload-bench-")
	if err != nil {
		return "", nil, errors.Join(fmt.Errorf("socket directory: %w", err), srv.Close())
	}
	addr := "unix://" + filepath.Join(tmp, "gload.sock")
	lis, err := loader.Listen(addr, loader.ListenOptions{})
	if err != nil {
		return "", nil, errors.Join(err, srv.Close(), os.RemoveAll(tmp))
	}
	sctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	done := make(chan error, 1)
	go func() { done <- srv.Serve(sctx, lis) }()
	return addr, func() error {
		cancel()
		return errors.Join(<-done, os.RemoveAll(tmp))
	}, nil
}

func writeFeedTable(w io.Writer, res []bench.FeedResult, consume bool) {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	head := "transport\tclients\tbatches/s\ttokens/s\tGB/s\tnext p50\tnext p99\t"
	if consume {
		head += "step ms\tconsumed/s\twait\theadroom\t"
	}
	fmt.Fprintln(tw, head)
	for _, r := range res {
		if r.Skipped != "" {
			fmt.Fprintf(tw, "%s\t%d\t%s\t\n", r.Transport, r.Clients, r.Skipped)
			continue
		}
		c := r.Capacity
		line := fmt.Sprintf("%s\t%d\t%.0f\t%.4g\t%.2f\t%s\t%s\t", r.Transport, r.Clients, c.BatchesPerS, c.TokensPerS, c.GBPerS,
			latency(c.NextP50US), latency(c.NextP99US))
		if cr := r.Consume; cr != nil {
			line += fmt.Sprintf("%.1f\t%.0f\t%.1f%%\t%.1f×\t", cr.StepMS, cr.BatchesPerS, 100*cr.WaitShare, cr.Headroom)
		}
		fmt.Fprintln(tw, line)
	}
	tw.Flush()
}

func latency(us float64) string {
	switch {
	case us >= 1e6:
		return fmt.Sprintf("%.2f s", us/1e6)
	case us >= 1e3:
		return fmt.Sprintf("%.2f ms", us/1e3)
	}
	return fmt.Sprintf("%.1f µs", us)
}

type benchRunOptions struct {
	g         *globalOptions
	addr      string
	json      bool
	out       string
	plot      string
	trace     string
	skipSteps int
	interval  time.Duration
}

func newBenchRunCmd(g *globalOptions) *cobra.Command {
	o := &benchRunOptions{g: g}
	cmd := &cobra.Command{
		Use:   "run [--addr ADDR] [--json] [--plot out.svg|out.png] -- CMD [ARGS...]",
		Short: "Run a training command and judge whether its GPUs were starved while it ran",
		Long: `Runs CMD (its stdin, stdout and stderr passed through) while sampling the GPUs through NVML and, with --addr,
the step reports the server at that address received from its clients (the Watch RPC: the clients of its batch
streams and of its Report RPC). At the end it prints a table: per GPU the SM utilisation median, P10 and share of
time below 30%, memory-controller utilisation, PCIe and power; per client the data-wait share and step time; and the
verdict with its likely cause and usual fix.

The span judged is the one in which clients reported steps (from the first report to the last; --skip-steps leaves
out warm-up steps), or the whole run when no client reported any (the report says which). Without a GPU it says
"no GPU visible" and still runs the command. The command's exit status is gload's; the report is printed even when
the command fails.

--json prints the result as JSON (the command's stdout then goes to stderr, so that stdout holds the JSON alone);
--out writes the result (JSON with --json) to a file instead, and the table still goes to stdout. --plot draws SM
utilisation and the feed rate (batches/s from the clients' reports) over time, as SVG or PNG by the file's
extension; --trace writes the recording as a gpuwatch trace (replayable with gpuwatch.Simulate).`,
		Args: cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return o.run(cmd.Context(), args, cmd.InOrStdin(), cmd.OutOrStdout(), cmd.ErrOrStderr())
		},
	}
	f := cmd.Flags()
	f.SetInterspersed(false) // flags after CMD belong to CMD
	f.StringVar(&o.addr, "addr", "", "gload server whose clients' step reports to read (unix:///path.sock or host:port)")
	f.BoolVar(&o.json, "json", false, "print the result as JSON")
	f.StringVar(&o.out, "out", "", "write the result (JSON with --json) to this file; stdout still gets the table")
	f.StringVar(&o.plot, "plot", "", "draw SM utilisation and feed rate over time into this .svg or .png file")
	f.StringVar(&o.trace, "trace", "", "write the recording (GPU samples and client steps) as a gpuwatch trace (JSON lines)")
	f.IntVar(&o.skipSteps, "skip-steps", 0, "leave the clients' first N steps out of the judged span (warm-up)")
	f.DurationVar(&o.interval, "interval", bench.DefaultRunInterval, "how often the GPUs are polled")
	return cmd
}

func (o *benchRunOptions) run(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) error {
	if ctx == nil {
		ctx = context.Background()
	}
	ext := strings.ToLower(filepath.Ext(o.plot))
	if o.plot != "" && ext != ".svg" && ext != ".png" {
		return fmt.Errorf("--plot %s: want a .svg or .png file", o.plot)
	}
	var trace *os.File
	if o.trace != "" {
		var err error
		if trace, err = os.Create(o.trace); err != nil {
			return fmt.Errorf("--trace: %w", err)
		}
		defer trace.Close()
	}
	cmdOut := stdout
	if o.json && o.out == "" {
		cmdOut = stderr // stdout carries the JSON alone
	}
	opts := bench.RunOptions{
		Command: args, Stdin: stdin, Stdout: cmdOut, Stderr: stderr, Log: stderr,
		Addr: o.addr, Interval: o.interval, SkipSteps: o.skipSteps,
	}
	if trace != nil {
		opts.Trace = trace
	}
	res, err := bench.Run(ctx, opts)
	if res == nil {
		return err
	}
	var errs []error
	if err != nil {
		errs = append(errs, err)
	}
	if trace != nil {
		if cerr := trace.Close(); cerr != nil {
			errs = append(errs, fmt.Errorf("--trace: %w", cerr))
		}
	}
	if o.plot != "" {
		if perr := writePlot(o.plot, ext, res); perr != nil {
			errs = append(errs, perr)
		}
	}
	report := res.Format()
	if o.json {
		b, jerr := json.MarshalIndent(res, "", "  ")
		if jerr != nil {
			errs = append(errs, fmt.Errorf("encode result: %w", jerr))
		}
		report = string(b) + "\n"
	}
	if o.out != "" {
		if werr := os.WriteFile(o.out, []byte(report), 0o644); werr != nil {
			errs = append(errs, fmt.Errorf("--out: %w", werr))
		}
		report = res.Format() // the table still goes to stdout
	}
	fmt.Fprint(stdout, report)
	if res.ExitCode != 0 {
		// The command's status is gload's, whatever else went wrong.
		errs = append([]error{fmt.Errorf("%s exited with status %d", args[0], res.ExitCode)}, errs...)
		return &exitError{code: res.ExitCode, err: errors.Join(errs...)}
	}
	return errors.Join(errs...)
}

// writePlot draws res into path (SVG or PNG by ext).
func writePlot(path, ext string, res *bench.RunResult) error {
	f, err := os.Create(path)
	if err != nil {
		return fmt.Errorf("--plot: %w", err)
	}
	if ext == ".png" {
		err = bench.WritePNG(f, res)
	} else {
		err = bench.WriteSVG(f, res)
	}
	return errors.Join(err, f.Close())
}
