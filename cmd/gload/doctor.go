package main

// gload doctor: run a training command and name what idles its GPU (the
// logic is bench.Doctor and gpuwatch.Diagnose).

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"html"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/gload/gload/bench"
)

type doctorOptions struct {
	g         *globalOptions
	addr      string
	json      bool
	out       string
	report    string
	trace     string
	evidence  string
	profile   string
	skipSteps int
	interval  time.Duration
}

func newDoctorCmd(g *globalOptions) *cobra.Command {
	o := &doctorOptions{g: g}
	cmd := &cobra.Command{
		Use:   "doctor [--report FILE.svg|.html] [--profile START:COUNT] [--json] -- CMD [ARGS...]",
		Short: "Run a training command and name what idles its GPU: input, optimizer/sync, host syncs, padding, launch overhead, or nothing",
		Long: `Runs CMD as gload bench run does (NVML sampling; with --addr, the step reports of that server's clients) with
GLOAD_DOCTOR_EVIDENCE set to an evidence file: a loop that times itself with the Python helper gload.doctor.Doctor
writes each step's phases there (data wait, forward, backward, optimizer, gradient sync, host work; token counts;
with --profile, a short torch.profiler window). At the end it prints, for this job, the cause that idles the GPU —
input pipeline, optimizer/gradient sync, host work/sync points, padding/uneven lengths, kernel-launch overhead, or
compute bound (fine) — with the numbers that show it and the evidence it had (NVML, client reports, phases,
profiler), the SM median, P10 and share of time below 30% judged against the success criteria (median ≥ 70%,
P10 ≥ 40%, < 10% of the time below 30%), and the remedies cheapest first.

The span judged is the loop's steps (from the first step after --skip-steps of each rank to the last one's end);
without evidence, the span gload bench run would judge. Without a GPU the command still runs and the report says
"no GPU visible", with whatever the phases show. --report draws the SM utilisation timeline and the step phases
(SVG, or HTML holding it). The command's exit status is gload's.`,
		Args: cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return o.run(cmd.Context(), args, cmd.InOrStdin(), cmd.OutOrStdout(), cmd.ErrOrStderr())
		},
	}
	f := cmd.Flags()
	f.SetInterspersed(false) // flags after CMD belong to CMD
	f.StringVar(&o.addr, "addr", "", "gload server whose clients' step reports to read too (unix:///path.sock or host:port)")
	f.BoolVar(&o.json, "json", false, "print the result as JSON (the command's stdout then goes to stderr)")
	f.StringVar(&o.out, "out", "", "write the result (JSON with --json) to this file; stdout still gets the table")
	f.StringVar(&o.report, "report", "", "draw the utilisation timeline and step phases into this .svg or .html file")
	f.StringVar(&o.trace, "trace", "", "write the NVML recording as a gpuwatch trace (JSON lines)")
	f.StringVar(&o.evidence, "evidence", "", "keep the loop's evidence in this file (default: a temporary one)")
	f.StringVar(&o.profile, "profile", "", "ask gload.doctor for a torch.profiler window of COUNT steps from step START (START:COUNT)")
	f.IntVar(&o.skipSteps, "skip-steps", bench.DefaultDoctorSkip, "leave each rank's first N steps out (warm-up; 0 keeps all)")
	f.DurationVar(&o.interval, "interval", bench.DefaultRunInterval, "how often the GPUs are polled")
	return cmd
}

func (o *doctorOptions) run(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) error {
	if ctx == nil {
		ctx = context.Background()
	}
	ext := strings.ToLower(filepath.Ext(o.report))
	if o.report != "" && ext != ".svg" && ext != ".html" {
		return fmt.Errorf("--report %s: want a .svg or .html file", o.report)
	}
	if o.profile != "" {
		var start, count int
		if n, err := fmt.Sscanf(o.profile, "%d:%d", &start, &count); err != nil || n != 2 || start < 0 || count < 1 || count > 1000 ||
			fmt.Sprintf("%d:%d", start, count) != o.profile {
			return fmt.Errorf("--profile %q: want START:COUNT steps, START >= 0, 1 <= COUNT <= 1000", o.profile)
		}
	}
	if o.skipSteps < 0 {
		return fmt.Errorf("--skip-steps %d: want >= 0", o.skipSteps)
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
		cmdOut = stderr
	}
	skip := o.skipSteps
	if skip == 0 {
		skip = -1 // bench.Doctor: negative keeps every step
	}
	opts := bench.DoctorOptions{
		Run: bench.RunOptions{Command: args, Stdin: stdin, Stdout: cmdOut, Stderr: stderr, Log: stderr,
			Addr: o.addr, Interval: o.interval},
		Evidence: o.evidence, Profile: o.profile, SkipSteps: skip,
	}
	if trace != nil {
		opts.Run.Trace = trace
	}
	res, err := bench.Doctor(ctx, opts)
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
	if o.report != "" {
		if rerr := writeDoctorReport(o.report, ext, res); rerr != nil {
			errs = append(errs, rerr)
		}
	}
	table := res.Format()
	report := table
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
		report = table
	}
	fmt.Fprint(stdout, report)
	if code := res.Run.ExitCode; code != 0 {
		errs = append([]error{fmt.Errorf("%s exited with status %d", args[0], code)}, errs...)
		return &exitError{code: code, err: errors.Join(errs...)}
	}
	return errors.Join(errs...)
}

// writeDoctorReport writes the SVG, or an HTML page holding it and the table.
func writeDoctorReport(path, ext string, res *bench.DoctorResult) error {
	var buf bytes.Buffer
	if ext == ".html" {
		buf.WriteString("<!doctype html>\n<html><head><meta charset=\"utf-8\"><title>gload doctor</title></head><body>\n")
	}
	if err := bench.WriteDoctorSVG(&buf, res); err != nil {
		return fmt.Errorf("--report: %w", err)
	}
	if ext == ".html" {
		fmt.Fprintf(&buf, "<pre>%s</pre>\n</body></html>\n", html.EscapeString(res.Format()))
	}
	if err := os.WriteFile(path, buf.Bytes(), 0o644); err != nil {
		return fmt.Errorf("--report: %w", err)
	}
	return nil
}
