package bench

// gload doctor: a training command run as `gload bench run` runs it, with the
// Python helper gload.doctor recording per-step phases into an evidence file,
// then judged over the loop's own steps by gpuwatch.Diagnose.

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/gload/gload/loader/gpuwatch"
)

// Environment variables the doctor sets for the command (read by the Python
// helper gload.doctor).
const (
	EnvDoctorEvidence = "GLOAD_DOCTOR_EVIDENCE"
	EnvDoctorProfile  = "GLOAD_DOCTOR_PROFILE"
)

// DefaultDoctorSkip is how many of each rank's first steps the doctor leaves
// out of the judged span (CUDA context, allocator and autotuning warm-up).
const DefaultDoctorSkip = 5

// DoctorOptions configure Doctor.
type DoctorOptions struct {
	// Run runs the command (its Env, Trace and SkipSteps are the doctor's).
	Run RunOptions
	// Evidence is the evidence file handed to the command ("": a temporary
	// file, removed afterwards). An existing file is truncated first.
	Evidence string
	// Profile, "START:COUNT", asks gload.doctor for a torch.profiler window
	// of COUNT steps from step START ("": none).
	Profile string
	// SkipSteps leaves each rank's first steps out (negative: none; 0:
	// DefaultDoctorSkip).
	SkipSteps int
	// Thresholds of the diagnosis (zero fields: the defaults).
	Thresholds gpuwatch.DiagnoseThresholds
}

// DoctorResult is what Doctor found.
type DoctorResult struct {
	// Run is the run as `gload bench run` reports it (its Report is over its
	// own span); Report is the watch's report over the doctor's span.
	Run       *RunResult         `json:"run"`
	Report    gpuwatch.Report    `json:"report"`
	Diagnosis gpuwatch.Diagnosis `json:"diagnosis"`
	// Span is the judged span: from the first counted step's start to the
	// last step's end (the run's span when no step was recorded).
	Span Span `json:"span"`
	// Evidence is the evidence file read ("" when it was a temporary one),
	// EvidenceError why it could not be read, Ranks the ranks that wrote it.
	Evidence      string `json:"evidence,omitempty"`
	EvidenceError string `json:"evidence_error,omitempty"`
	Ranks         int    `json:"ranks"`
	// Steps are the counted steps' phases, for the report's drawing (at most
	// maxDrawnSteps, evenly thinned).
	Steps []StepPhases `json:"steps,omitempty"`
	// SMPoints are each GPU's fine-grained SM samples over the run (thinned),
	// seconds since the run's start.
	SMPoints []Series `json:"sm_points,omitempty"`
}

// StepPhases is one step: when it began (seconds since the run's start) and
// its phases in milliseconds (GPU time with CUDA, else host time).
type StepPhases struct {
	T      float64            `json:"t"`
	Rank   int                `json:"rank"`
	Phases map[string]float64 `json:"phases"`
}

const (
	maxDrawnSteps  = 2000
	maxDrawnPoints = 4000
)

// Doctor runs the command with GLOAD_DOCTOR_EVIDENCE set, then diagnoses it
// over the span of the steps gload.doctor recorded (after SkipSteps per
// rank); without any, over the run's own span, from NVML (and the server's
// client reports with Run.Addr) alone. The error is Run's, or the evidence
// file's that could not be created; evidence that cannot be read is noted
// in the result and the diagnosis goes on without it.
func Doctor(ctx context.Context, o DoctorOptions) (*DoctorResult, error) {
	skip := o.SkipSteps
	switch {
	case skip == 0:
		skip = DefaultDoctorSkip
	case skip < 0:
		skip = 0
	}
	tmp, err := os.MkdirTemp("", "gload-doctor-")
	if err != nil {
		return nil, fmt.Errorf("doctor: %w", err)
	}
	defer os.RemoveAll(tmp)
	evPath := o.Evidence
	if evPath == "" {
		evPath = filepath.Join(tmp, "evidence.jsonl")
	}
	if err := os.WriteFile(evPath, nil, 0o644); err != nil {
		return nil, fmt.Errorf("doctor: evidence file: %w", err)
	}
	traceFile, err := os.Create(filepath.Join(tmp, "trace.jsonl"))
	if err != nil {
		return nil, fmt.Errorf("doctor: %w", err)
	}
	defer traceFile.Close()
	ro := o.Run
	var userTrace io.Writer = ro.Trace
	ro.Trace = traceFile
	ro.SkipSteps = 0
	env := ro.Env
	if env == nil {
		env = os.Environ()
	}
	env = slices.DeleteFunc(slices.Clone(env), func(kv string) bool {
		return strings.HasPrefix(kv, EnvDoctorEvidence+"=") || strings.HasPrefix(kv, EnvDoctorProfile+"=")
	})
	env = append(env, EnvDoctorEvidence+"="+evPath)
	if o.Profile != "" {
		env = append(env, EnvDoctorProfile+"="+o.Profile)
	}
	ro.Env = env
	run, err := Run(ctx, ro)
	if run == nil {
		return nil, err
	}
	res := &DoctorResult{Run: run, Report: run.Report, Span: run.Span}
	if o.Evidence != "" {
		res.Evidence = o.Evidence
	}
	var ev *gpuwatch.Evidence
	if f, ferr := os.Open(evPath); ferr != nil {
		res.EvidenceError = ferr.Error()
	} else {
		e, rerr := gpuwatch.ReadEvidence(f)
		f.Close()
		if rerr != nil {
			res.EvidenceError = rerr.Error()
		} else {
			ev = &e
			res.Ranks = e.Ranks
		}
	}
	tr, terr := readBack(traceFile)
	if terr != nil {
		run.Notes = append(run.Notes, "reading the recording back failed: "+terr.Error())
	}
	if userTrace != nil && terr == nil {
		if werr := gpuwatch.WriteTrace(userTrace, tr); werr != nil {
			err = errors.Join(err, fmt.Errorf("doctor: %w", werr))
		}
	}
	res.SMPoints = smPoints(tr, run.Start)
	var ph *gpuwatch.PhaseSummary
	var prof *gpuwatch.Profile
	if ev != nil {
		prof = ev.FirstProfile()
		if from, to, n, ok := stepSpan(*ev, skip); ok && terr == nil {
			res.Span = Span{Basis: SpanLoopSteps, Start: from, End: to, FromS: from.Sub(run.Start).Seconds(),
				ToS: to.Sub(run.Start).Seconds(), Seconds: to.Sub(from).Seconds(), Steps: n, Skipped: skip}
			res.Report = judgeSpan(tr, from, to, ro.Interval, run.Report.Thresholds)
			if res.Report.NoGPU == "" {
				res.Report.NoGPU = run.Report.NoGPU
			}
			s := ev.Summarize(from, to, skip)
			ph = &s
			res.Steps = drawnSteps(*ev, skip, run.Start)
		} else if len(ev.Steps) > 0 {
			s := ev.Summarize(time.Time{}, time.Time{}, 0)
			ph = &s
		}
	}
	res.Diagnosis = gpuwatch.Diagnose(res.Report, ph, prof, o.Thresholds)
	return res, err
}

// SpanLoopSteps is the basis of a doctor's span: the steps gload.doctor
// recorded.
const SpanLoopSteps = "loop steps"

// stepSpan is the span of the counted steps: the first one's start to the
// latest end.
func stepSpan(ev gpuwatch.Evidence, skip int) (from, to time.Time, n int, ok bool) {
	for _, st := range ev.Steps {
		if st.Step < skip {
			continue
		}
		end := st.Time.Add(time.Duration(st.WallMS * float64(time.Millisecond)))
		if n == 0 || st.Time.Before(from) {
			from = st.Time
		}
		if n == 0 || end.After(to) {
			to = end
		}
		n++
	}
	return from, to, n, n > 0 && to.After(from)
}

// readBack reads the recording Run wrote into f.
func readBack(f *os.File) (gpuwatch.Trace, error) {
	if _, err := f.Seek(0, io.SeekStart); err != nil {
		return gpuwatch.Trace{}, err
	}
	return gpuwatch.ReadTrace(f)
}

// judgeSpan replays the GPU records of tr that bear on [from, to], as
// RunResult.judge does for its span.
func judgeSpan(tr gpuwatch.Trace, from, to time.Time, interval time.Duration, th gpuwatch.Thresholds) gpuwatch.Report {
	if interval <= 0 {
		interval = DefaultRunInterval
	}
	tr = cutTrace(tr, from, to, interval)
	tr.Steps, tr.Queues, tr.NotReady, tr.Assignments = nil, nil, nil, nil
	tr.Recorded = from
	last := to
	for _, s := range tr.Samples {
		if s.Sample.Time.After(last) {
			last = s.Sample.Time
		}
	}
	window := last.Sub(from) + time.Millisecond
	rep, err := gpuwatch.Simulate(tr, gpuwatch.Options{Interval: interval, Window: window, MinCoverage: min(time.Second, window), Thresholds: th})
	if err != nil {
		rep.Verdict.Reasons = append(rep.Verdict.Reasons, "judging the span failed: "+err.Error())
	}
	return rep
}

// drawnSteps returns the counted steps for the drawing, thinned evenly.
func drawnSteps(ev gpuwatch.Evidence, skip int, start time.Time) []StepPhases {
	var out []StepPhases
	n := 0
	for _, st := range ev.Steps {
		if st.Step >= skip {
			n++
		}
	}
	every := max(1, (n+maxDrawnSteps-1)/maxDrawnSteps)
	i := 0
	for _, st := range ev.Steps {
		if st.Step < skip {
			continue
		}
		i++
		if i%every != 0 {
			continue
		}
		sp := StepPhases{T: st.Time.Sub(start).Seconds(), Rank: st.Rank, Phases: map[string]float64{}}
		for name, p := range st.Phases {
			if ev.CUDA {
				sp.Phases[name] = p.GPUMS
			} else {
				sp.Phases[name] = p.HostMS
			}
		}
		out = append(out, sp)
	}
	return out
}

// smPoints returns each GPU's fine-grained SM samples, thinned evenly.
func smPoints(tr gpuwatch.Trace, start time.Time) []Series {
	var out []Series
	for i, d := range tr.Devices {
		var pts []SeriesPoint
		for _, s := range tr.Samples {
			if s.Device != i {
				continue
			}
			for _, p := range s.Sample.SM {
				pts = append(pts, SeriesPoint{T: p.Time.Sub(start).Seconds(), V: p.Value})
			}
		}
		slices.SortFunc(pts, func(a, b SeriesPoint) int {
			switch {
			case a.T < b.T:
				return -1
			case a.T > b.T:
				return 1
			}
			return 0
		})
		if every := (len(pts) + maxDrawnPoints - 1) / maxDrawnPoints; every > 1 {
			thin := pts[:0]
			for j := 0; j < len(pts); j += every {
				thin = append(thin, pts[j])
			}
			pts = thin
		}
		out = append(out, Series{GPU: d.Index, Points: pts})
	}
	return out
}

// Format renders the doctor's table.
func (r *DoctorResult) Format() string {
	var b strings.Builder
	run, d := r.Run, r.Diagnosis
	status := fmt.Sprintf("exit %d", run.ExitCode)
	if run.Error != "" {
		status += " (" + run.Error + ")"
	}
	fmt.Fprintf(&b, "gload doctor: %s: %s after %.1f s\n", strings.Join(run.Command, " "), status, run.Seconds)
	sp := r.Span
	switch sp.Basis {
	case SpanLoopSteps:
		fmt.Fprintf(&b, "judged:    the loop's steps, +%.1f s to +%.1f s (%.1f s, %d steps of %d rank(s), first %d of each skipped)\n",
			sp.FromS, sp.ToS, sp.Seconds, sp.Steps, max(r.Ranks, 1), sp.Skipped)
	case SpanClientSteps:
		fmt.Fprintf(&b, "judged:    the clients' steps reported to %s, +%.1f s to +%.1f s (%.1f s)\n", run.Server, sp.FromS, sp.ToS, sp.Seconds)
	default:
		fmt.Fprintf(&b, "judged:    the whole run (%.1f s): no step evidence\n", sp.Seconds)
	}
	gpus := run.GPUs
	if run.NoGPU != "" {
		gpus = "no GPU visible (" + run.NoGPU + ")"
	} else if d.GPU >= 0 {
		gpus += fmt.Sprintf(" (GPU %d judged, the lowest SM median)", d.GPU)
	}
	fmt.Fprintf(&b, "GPUs:      %s\n", gpus)
	fmt.Fprintf(&b, "evidence:  %s\n", d.Evidence)
	if r.EvidenceError != "" {
		fmt.Fprintf(&b, "           (the evidence file could not be read: %s)\n", r.EvidenceError)
	} else if d.Phases == nil {
		b.WriteString("           (no phases: the job did not use gload.doctor.Doctor)\n")
	}
	fmt.Fprintf(&b, "\ncause:     %s\n", d.Cause)
	if run.NoGPU != "" {
		fmt.Fprintf(&b, "           no GPU visible: judged from the phases alone\n")
	}
	for i, n := range d.Numbers {
		lead := "           "
		if i == 0 {
			lead = "numbers:   "
		}
		fmt.Fprintf(&b, "%s- %s\n", lead, n)
	}
	if d.GPU >= 0 {
		th := r.Report.Thresholds
		yes := func(ok bool) string {
			if ok {
				return "yes"
			}
			return "no"
		}
		var c [3]gpuwatch.Check
		copy(c[:], d.Checks)
		met := "met"
		if !d.CriteriaMet {
			met = "not met"
		}
		fmt.Fprintf(&b, "criteria:  SM median %.1f%% (≥ %.0f%%: %s), P10 %.1f%% (≥ %.0f%%: %s), below %.0f%% %.1f%% of the time (< %.0f%%: %s): %s\n",
			d.SMMedian, th.SMMedian, yes(c[0].Pass), d.SMP10, th.SMP10, yes(c[1].Pass), th.Low, 100*d.SMBelowShare, 100*th.LowShare, yes(c[2].Pass), met)
	} else {
		b.WriteString("criteria:  not judged (no GPU figures)\n")
	}
	if ph := d.Phases; ph != nil {
		var parts []string
		for _, name := range gpuwatch.PhaseNames {
			if v, ok := ph.Shares[name]; ok {
				parts = append(parts, fmt.Sprintf("%s %.1f%%", name, 100*v))
			}
		}
		fmt.Fprintf(&b, "phases:    %s (%s, %.1f ms per step)\n", strings.Join(parts, ", "), ph.Basis, ph.StepMS)
	}
	fmt.Fprintf(&b, "watch:     %s\n", r.Report.Verdict.State)
	b.WriteString("remedies, cheapest first:\n")
	for i, rem := range d.Remedies {
		fmt.Fprintf(&b, "  %d. %s\n", i+1, rem)
	}
	for _, n := range run.Notes {
		fmt.Fprintf(&b, "note: %s\n", n)
	}
	return b.String()
}
