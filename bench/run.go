package bench

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/gload/gload/loader/gpuwatch"
)

// Defaults of RunOptions.
const (
	DefaultRunInterval   = time.Second
	DefaultWatchInterval = 250 * time.Millisecond
	DefaultMaxPoints     = 4 << 20
	DefaultKillAfter     = 10 * time.Second
	// interruptGrace is how long a command may take to stop on its own
	// once ctx ended, before Run sends it SIGINT.
	interruptGrace = time.Second
)

// Span bases: what the judged span of a run is.
const (
	SpanClientSteps = "client steps"
	SpanWholeRun    = "whole run"
)

// RunOptions configure Run. Zero fields take the defaults named.
type RunOptions struct {
	// Command is the program and its arguments.
	Command []string
	// Stdin, Stdout and Stderr are the command's (nil: /dev/null).
	Stdin          io.Reader
	Stdout, Stderr io.Writer
	// Env is the command's environment (nil: this process's).
	Env []string
	// Log receives Run's own messages ("no GPU visible", a server that does
	// not answer); nil: none.
	Log io.Writer
	// Addr is a gload server whose Watch RPC supplies the clients' step
	// reports ("": no client data, the whole run is judged).
	Addr string
	// Source samples the GPUs (nil: NVML; without a GPU the command still
	// runs and the result says "no GPU visible"). Run closes a source it
	// opened, never one it was given.
	Source gpuwatch.Source
	// Interval is how often the GPUs are polled (default 1 s: NVML keeps
	// the fine-grained samples in between).
	Interval time.Duration
	// WatchInterval is the Watch RPC's report interval (default 250 ms): the
	// resolution of the client data and of the judged span's edges.
	WatchInterval time.Duration
	// SkipSteps leaves the clients' first steps out of the judged span
	// (a training script's warm-up steps).
	SkipSteps int
	// Thresholds of the verdict (zero fields: gpuwatch's defaults).
	Thresholds gpuwatch.Thresholds
	// MaxPoints bounds the utilisation samples recorded (default 4 Mi).
	MaxPoints int
	// KillAfter is how long a command may take to exit after ctx ends and
	// it was sent SIGINT, before it is killed (default 10 s).
	KillAfter time.Duration
	// Trace, when not nil, receives the run's recording as a gpuwatch trace
	// (JSON lines, replayable with gpuwatch.Simulate).
	Trace io.Writer
	// Now is the clock (default time.Now).
	Now func() time.Time
}

// RunResult is what Run saw. Times in series are seconds since Start.
type RunResult struct {
	Command  []string  `json:"command"`
	ExitCode int       `json:"exit_code"`
	Error    string    `json:"error,omitempty"`
	Start    time.Time `json:"start"`
	End      time.Time `json:"end"`
	Seconds  float64   `json:"seconds"`
	// Span is the part of the run the report judges.
	Span Span `json:"span"`
	// GPUs says where the GPU figures come from.
	GPUs string `json:"gpus"`
	// NoGPU says why this host shows no GPU ("" when it does).
	NoGPU string `json:"no_gpu,omitempty"`
	// Server is the address whose client reports were read ("" for none);
	// ServerErrors are the distinct errors its Watch stream gave.
	Server       string   `json:"server,omitempty"`
	ServerErrors []string `json:"server_errors,omitempty"`
	// ServerVerdict is the server's own verdict (over its own window) at the
	// end of the span, for comparison.
	ServerVerdict string `json:"server_verdict,omitempty"`
	// Report is the verdict over the span, with per-GPU and per-client
	// statistics.
	Report gpuwatch.Report `json:"report"`
	// Notes say what limits the figures.
	Notes []string `json:"notes,omitempty"`
	// SM holds each GPU's SM utilisation per second (mean of its samples);
	// Feed the clients' steps (batches consumed) per second, from the
	// server's reports.
	SM   []Series      `json:"sm"`
	Feed []SeriesPoint `json:"feed"`
}

// Span is a judged interval.
type Span struct {
	Basis string    `json:"basis"`
	Start time.Time `json:"start"`
	End   time.Time `json:"end"`
	// FromS and ToS are Start and End in seconds since the run's start.
	FromS   float64 `json:"from_s"`
	ToS     float64 `json:"to_s"`
	Seconds float64 `json:"seconds"`
	// Steps counts the client steps inside the span; Skipped those left out
	// before it (RunOptions.SkipSteps, to a report interval: the span opens
	// at the report before the one in which the count passed SkipSteps).
	Steps   int `json:"steps"`
	Skipped int `json:"skipped_steps,omitempty"`
}

// Series is one GPU's utilisation over time.
type Series struct {
	GPU    int           `json:"gpu"`
	Points []SeriesPoint `json:"points"`
}

// SeriesPoint is a value at a time (seconds since the run's start).
type SeriesPoint struct {
	T float64 `json:"t"`
	V float64 `json:"v"`
}

func (o RunOptions) withDefaults() (RunOptions, error) {
	if len(o.Command) == 0 || o.Command[0] == "" {
		return o, fmt.Errorf("%w: no command to run", ErrOptions)
	}
	if o.Interval <= 0 {
		o.Interval = DefaultRunInterval
	}
	if o.WatchInterval <= 0 {
		o.WatchInterval = DefaultWatchInterval
	}
	if o.MaxPoints <= 0 {
		o.MaxPoints = DefaultMaxPoints
	}
	if o.KillAfter <= 0 {
		o.KillAfter = DefaultKillAfter
	}
	if o.SkipSteps < 0 {
		return o, fmt.Errorf("%w: skip steps %d", ErrOptions, o.SkipSteps)
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	return o, nil
}

// Run runs the command while recording the GPUs and, with Addr, the
// server's client reports; then it judges the span in which clients
// reported steps (from the first to the last report; the whole run when
// none did). The command's exit status is in the result (127 when it could
// not be started, 128+N when signal N ended it); the error is for options
// that cannot be run and for a trace that could not be written. When ctx
// ends, the command gets a second to stop on its own (a Ctrl-C at the
// terminal reaches it directly), then SIGINT, then SIGKILL after KillAfter.
func Run(ctx context.Context, opts RunOptions) (*RunResult, error) {
	o, err := opts.withDefaults()
	if err != nil {
		return nil, err
	}
	res := &RunResult{Command: slices.Clone(o.Command), Server: o.Addr}
	src := o.Source
	if src == nil {
		s, err := gpuwatch.OpenNVML()
		if err != nil {
			src = gpuwatch.Unavailable(err)
		} else {
			src = s
			defer s.Close()
		}
	}
	rec := newRecorder(src, o.Now, o.MaxPoints)
	rec.poll()
	if rec.devErr != nil {
		res.NoGPU = rec.devErr.Error()
		logf(o.Log, "gload bench run: no GPU visible (%v); running the command anyway\n", rec.devErr)
	}
	wctx, stop := context.WithCancel(context.WithoutCancel(ctx))
	done := make(chan struct{})
	go func() {
		defer close(done)
		t := time.NewTicker(o.Interval)
		defer t.Stop()
		for {
			select {
			case <-wctx.Done():
				return
			case <-t.C:
				rec.poll()
			}
		}
	}()
	var sw *serverWatch
	swDone := make(chan struct{})
	if o.Addr != "" {
		sw = newServerWatch(o.Addr, o.WatchInterval, o.Now, o.Log)
		go func() {
			defer close(swDone)
			sw.run(wctx)
		}()
	} else {
		close(swDone)
	}

	res.Start = o.Now()
	res.ExitCode, err = runCommand(ctx, o)
	if err != nil {
		res.Error = err.Error()
	}
	res.End = o.Now()
	res.Seconds = res.End.Sub(res.Start).Seconds()
	stop()
	<-done
	<-swDone
	rec.poll()
	if sw != nil {
		sw.final(context.WithoutCancel(ctx))
	}
	res.judge(o, rec, sw)
	if o.Trace != nil {
		if err := gpuwatch.WriteTrace(o.Trace, rec.trace(sw)); err != nil {
			return res, fmt.Errorf("bench run: %w", err)
		}
	}
	return res, nil
}

func logf(w io.Writer, format string, args ...any) {
	if w != nil {
		fmt.Fprintf(w, format, args...)
	}
}

// runCommand runs o.Command to its end and returns its exit status.
func runCommand(ctx context.Context, o RunOptions) (int, error) {
	cmd := exec.Command(o.Command[0], o.Command[1:]...)
	cmd.Stdin, cmd.Stdout, cmd.Stderr, cmd.Env = o.Stdin, o.Stdout, o.Stderr, o.Env
	cmd.WaitDelay = o.KillAfter // a grandchild holding the output pipes does not hang us
	if err := cmd.Start(); err != nil {
		return 127, fmt.Errorf("start %s: %w", o.Command[0], err)
	}
	waited := make(chan error, 1)
	go func() { waited <- cmd.Wait() }()
	var err error
	select {
	case err = <-waited:
	case <-ctx.Done():
		// A Ctrl-C at the terminal reached the command too (same process
		// group): give it a moment to stop on its own before signalling it
		// again, then SIGKILL after KillAfter.
		select {
		case err = <-waited:
		case <-time.After(interruptGrace):
			_ = cmd.Process.Signal(os.Interrupt)
			t := time.NewTimer(o.KillAfter)
			select {
			case err = <-waited:
			case <-t.C:
				_ = cmd.Process.Kill()
				err = <-waited
			}
			t.Stop()
		}
	}
	return exitStatus(cmd.ProcessState, err)
}

// exitStatus turns a finished command's state into a shell-style status.
func exitStatus(ps *os.ProcessState, err error) (int, error) {
	if ps == nil {
		return 127, err
	}
	if ws, ok := ps.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		return 128 + int(ws.Signal()), fmt.Errorf("command ended by signal %v", ws.Signal())
	}
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		err = nil // a non-zero status is the command's business, not an error of ours
	}
	return ps.ExitCode(), err
}

// judge fills the span, the report and the series.
func (res *RunResult) judge(o RunOptions, rec *recorder, sw *serverWatch) {
	var steps clientSteps
	if sw != nil {
		steps = sw.steps(res.End)
		res.ServerErrors = sw.errors()
		res.Notes = append(res.Notes, steps.notes...)
	}
	res.Span = steps.span(res.Start, res.End, o.SkipSteps)
	sp := res.Span
	tr := rec.trace(nil)
	tr = cutTrace(tr, sp.Start, sp.End, o.Interval)
	tr.Steps, tr.NotReady, tr.Queues = steps.in(sp.Start, sp.End)
	if sp.Basis == SpanClientSteps {
		tr.Recorded = sp.Start
	}
	// The window holds the whole trace: the span, and the polls up to an
	// interval after it that carry its last samples.
	last := sp.End
	for _, s := range tr.Samples {
		if s.Sample.Time.After(last) {
			last = s.Sample.Time
		}
	}
	for _, f := range tr.Failures {
		if f.Time.After(last) {
			last = f.Time
		}
	}
	window := last.Sub(sp.Start) + time.Millisecond
	rep, err := gpuwatch.Simulate(tr, gpuwatch.Options{
		Interval: o.Interval, Window: window, MinCoverage: min(time.Second, window), Thresholds: o.Thresholds,
	})
	if err != nil {
		res.Notes = append(res.Notes, "judging the span failed: "+err.Error())
	}
	res.Report = rep
	res.GPUs = "NVML on this host"
	if rec.devErr != nil {
		res.Report.NoGPU = rec.devErr.Error()
		if res.Report.Verdict.State == gpuwatch.StateNoGPU {
			res.Report.Verdict.Reasons = []string{rec.devErr.Error()}
		}
		res.GPUs = "none"
		if sw != nil && sw.lastStepReport != nil && len(sw.lastStepReport.Devices) > 0 {
			// The server sees GPUs this process does not: report its window.
			res.Report = *sw.lastStepReport
			res.GPUs = "the server's watch window (no GPU visible to bench run)"
			res.Notes = append(res.Notes, fmt.Sprintf(
				"GPU figures are the server's, over its own %.0f s window ending at the span's end, not over the span", res.Report.WindowS))
		}
	}
	if rec.full {
		res.Notes = append(res.Notes, fmt.Sprintf("only the first %d utilisation samples were recorded", o.MaxPoints))
	}
	if sw != nil && sw.lastStepReport != nil {
		res.ServerVerdict = string(sw.lastStepReport.Verdict.State)
	} else if sw != nil && sw.last != nil {
		res.ServerVerdict = string(sw.last.Verdict.State)
	}
	res.SM = rec.series(res.Start, time.Second)
	res.Feed = steps.series(res.Start, time.Second)
}

// cutTrace keeps the GPU records of tr that bear on [from, to]: samples
// polled up to one interval after `to`, with their utilisation points
// inside [from, to].
func cutTrace(tr gpuwatch.Trace, from, to time.Time, interval time.Duration) gpuwatch.Trace {
	in := func(t time.Time) bool { return !t.Before(from) && !t.After(to) }
	cut := func(ps []gpuwatch.Point) []gpuwatch.Point {
		var out []gpuwatch.Point
		for _, p := range ps {
			if in(p.Time) {
				out = append(out, p)
			}
		}
		return out
	}
	var samples []gpuwatch.TraceSample
	for _, s := range tr.Samples {
		if s.Sample.Time.Before(from) || s.Sample.Time.After(to.Add(interval)) {
			continue
		}
		s.Sample.SM, s.Sample.MemCtl = cut(s.Sample.SM), cut(s.Sample.MemCtl)
		samples = append(samples, s)
	}
	var fails []gpuwatch.TraceFailure
	for _, f := range tr.Failures {
		if !f.Time.Before(from) && !f.Time.After(to.Add(interval)) {
			fails = append(fails, f)
		}
	}
	tr.Samples, tr.Failures = samples, fails
	if tr.Recorded.Before(from) {
		tr.Recorded = from
	}
	return tr
}

// Format renders a result as the table `gload bench run` prints.
func (res *RunResult) Format() string {
	var b strings.Builder
	status := fmt.Sprintf("exit %d", res.ExitCode)
	if res.Error != "" {
		status += " (" + res.Error + ")"
	}
	fmt.Fprintf(&b, "gload bench run: %s: %s after %.1f s\n", strings.Join(res.Command, " "), status, res.Seconds)
	sp := res.Span
	switch sp.Basis {
	case SpanClientSteps:
		fmt.Fprintf(&b, "judged: the clients' steps, +%.1f s to +%.1f s (%.1f s, %d steps", sp.FromS, sp.ToS, sp.Seconds, sp.Steps)
		if sp.Skipped > 0 {
			fmt.Fprintf(&b, ", first %d skipped", sp.Skipped)
		}
		b.WriteString(")\n")
	default:
		why := "no client reported a step"
		if res.Server == "" {
			why = "no --addr: no client reports"
		}
		fmt.Fprintf(&b, "judged: the whole run (%.1f s; %s)\n", sp.Seconds, why)
	}
	fmt.Fprintf(&b, "GPUs: %s", res.GPUs)
	if res.NoGPU != "" {
		fmt.Fprintf(&b, " — no GPU visible: %s", res.NoGPU)
	}
	b.WriteByte('\n')
	if res.Server != "" {
		fmt.Fprintf(&b, "clients: step reports from %s", res.Server)
		if res.ServerVerdict != "" {
			fmt.Fprintf(&b, " (the server's own verdict: %s)", res.ServerVerdict)
		}
		b.WriteByte('\n')
	}
	for _, e := range res.ServerErrors {
		fmt.Fprintf(&b, "server watch: %s\n", e)
	}
	b.WriteByte('\n')
	b.WriteString(gpuwatch.Format(res.Report))
	for _, n := range res.Notes {
		fmt.Fprintf(&b, "note: %s\n", n)
	}
	return b.String()
}
