package gpuwatch

import (
	"fmt"
	"strings"
	"time"
)

// Cause is what idles the GPU, as gload doctor names it.
type Cause string

// Causes, one per pipeline of DESIGN.md's table, plus the states with
// nothing to judge.
const (
	CauseInput     Cause = "input pipeline"
	CauseOptimizer Cause = "optimizer/gradient sync"
	CauseHostSync  Cause = "host work/sync points"
	CausePadding   Cause = "padding/uneven lengths"
	CauseLaunch    Cause = "kernel-launch overhead"
	CauseCompute   Cause = "compute bound (fine)"
	CauseIdle      Cause = "GPU idle"
	CauseUnknown   Cause = "unknown"
)

// DiagnoseThresholds are the phase shares above which a cause is named.
type DiagnoseThresholds struct {
	// Data: the GPU waits for the next batch ≥ Data (0.15) of the step.
	Data float64 `json:"data_share_min"`
	// Optimizer: optimizer step and gradient sync ≥ Optimizer (0.25), or
	// NCCL kernels ≥ NCCL (0.25) of the profiled GPU busy time.
	Optimizer float64 `json:"optimizer_share_min"`
	NCCL      float64 `json:"nccl_share_min"`
	// Host: host work and syncs inside the step ≥ Host (0.20).
	Host float64 `json:"host_share_min"`
	// Padding: ≥ Padding (0.20) of the batches' tokens are padding.
	Padding float64 `json:"padding_share_min"`
	// Launch: the profiled GPU is busy < LaunchBusy (0.6) of the window.
	LaunchBusy float64 `json:"launch_busy_max"`
}

// DefaultDiagnoseThresholds returns the thresholds zero fields stand for.
func DefaultDiagnoseThresholds() DiagnoseThresholds {
	return DiagnoseThresholds{Data: 0.15, Optimizer: 0.25, NCCL: 0.25, Host: 0.20, Padding: 0.20, LaunchBusy: 0.6}
}

func (t DiagnoseThresholds) withDefaults() DiagnoseThresholds {
	d := DefaultDiagnoseThresholds()
	for _, f := range []struct{ v, def *float64 }{
		{&t.Data, &d.Data}, {&t.Optimizer, &d.Optimizer}, {&t.NCCL, &d.NCCL}, {&t.Host, &d.Host},
		{&t.Padding, &d.Padding}, {&t.LaunchBusy, &d.LaunchBusy},
	} {
		if *f.v <= 0 {
			*f.v = *f.def
		}
	}
	return t
}

// Diagnosis is gload doctor's answer for a job: the cause that idles the
// GPU, the numbers that show it, the evidence it had, the success criteria
// and the remedies in order of cost.
type Diagnosis struct {
	Cause Cause `json:"cause"`
	// State is the watch's verdict over the same span.
	State State `json:"state"`
	// Evidence names what the answer rests on: "NVML", "client reports",
	// "phases", "profiler", joined by " + "; "none" without any.
	Evidence string `json:"evidence"`
	// Numbers are the figures that show the cause, in words.
	Numbers []string `json:"numbers"`
	// GPU is the device judged (the one with the lowest SM median), -1
	// when no GPU was visible.
	GPU          int     `json:"gpu"`
	SMMedian     float64 `json:"sm_median"`
	SMP10        float64 `json:"sm_p10"`
	SMBelowShare float64 `json:"sm_below_share"`
	Checks       []Check `json:"checks,omitempty"`
	// CriteriaMet is set when every check passed (false without a GPU).
	CriteriaMet bool     `json:"criteria_met"`
	Remedies    []string `json:"remedies"`
	// NoGPU says why no GPU was visible.
	NoGPU   string        `json:"no_gpu,omitempty"`
	Phases  *PhaseSummary `json:"phases,omitempty"`
	Profile *Profile      `json:"profile,omitempty"`
}

// The remedy ladder, cheapest first.
var (
	remDataLoader = "DataLoader: num_workers, pin_memory, prefetch_factor; pre-tokenize, or feed from gload"
	remBucketing  = "length bucketing or packing in the data pipeline (gload: --pad-multiple, GLOAD_AUTO_BUCKETS)"
	remFused      = "fused optimizer (AdamW(fused=True) or foreach=True); DDP bucket_cap_mb, gradient_as_bucket_view, no_sync under gradient accumulation"
	remSyncs      = "remove per-step sync points (.item(), .cpu(), printing tensors): log every N steps; move host work off the step"
	remCompile    = "torch.compile (mode=\"reduce-overhead\") or CUDA graphs; larger batches per kernel"
	remShapes     = "fewer distinct shapes (pad to a multiple) so torch.compile and CUDA graphs can follow"
	remLayout     = "parallel layout: fewer GPUs with larger per-GPU batches, overlap gradient sync with backward, FSDP/TP sizes"
	remFaster     = "nothing to feed faster; the next levers are faster math (bf16/FP8, fused attention, torch.compile)"
	remIdle       = "check that the job runs on this GPU (CUDA_VISIBLE_DEVICES, device placement)"
)

// remedies returns the ladder for a cause, cheapest first.
func remedies(c Cause) []string {
	switch c {
	case CauseInput:
		return []string{remDataLoader, remBucketing, remCompile}
	case CausePadding:
		return []string{remBucketing, remShapes, remCompile}
	case CauseOptimizer:
		return []string{remFused, remSyncs, remCompile, remLayout}
	case CauseHostSync:
		return []string{remSyncs, remFused, remCompile}
	case CauseLaunch:
		return []string{remFused, remCompile, remLayout}
	case CauseCompute:
		return []string{remFaster}
	case CauseIdle:
		return []string{remIdle}
	}
	return nil
}

// Diagnose names what idles the GPU of a job from the watch's report over
// the judged span, the loop's phase summary over the same span (nil: none)
// and its profiler window (nil: none). Phase evidence outranks NVML's
// guesses: with phases, a cause is named from the share of the step the GPU
// spends waiting in a phase (data, optimizer and sync, host work), then from
// padding, then from the success criteria (met: compute bound; not met:
// launch overhead, confirmed by the profiler's busy share when it ran).
// Without phases the watch's own cause is mapped (NVML, client reports).
func Diagnose(rep Report, ph *PhaseSummary, prof *Profile, th DiagnoseThresholds) Diagnosis {
	d := diagnose(rep, ph, prof, th.withDefaults())
	d.Remedies = remedies(d.Cause)
	return d
}

func diagnose(rep Report, ph *PhaseSummary, prof *Profile, th DiagnoseThresholds) Diagnosis {
	d := Diagnosis{State: rep.Verdict.State, GPU: -1, NoGPU: rep.NoGPU}
	if ph != nil && ph.Steps == 0 {
		ph = nil
	}
	if prof != nil && (prof.Error != "" || prof.Kernels == 0) {
		prof = nil
	}
	d.Phases, d.Profile = ph, prof
	var ev []string
	var dev *DeviceReport
	for i := range rep.Devices {
		r := &rep.Devices[i]
		if r.Lost || r.Samples == 0 {
			continue
		}
		if dev == nil || r.SMMedian < dev.SMMedian {
			dev = r
		}
	}
	if dev != nil {
		ev = append(ev, "NVML")
		d.GPU, d.SMMedian, d.SMP10, d.SMBelowShare = dev.Index, dev.SMMedian, dev.SMP10, dev.SMBelowShare
		d.Checks = checklist(*dev, rep.Thresholds.withDefaults())
		d.CriteriaMet = true
		for _, c := range d.Checks {
			d.CriteriaMet = d.CriteriaMet && c.Pass
		}
	}
	if rep.Verdict.State == StateStarvedData {
		ev = append(ev, "client reports")
	}
	if ph != nil {
		ev = append(ev, "phases")
	}
	if prof != nil {
		ev = append(ev, "profiler")
	}
	d.Evidence = strings.Join(ev, " + ")
	if d.Evidence == "" {
		d.Evidence = "none"
	}
	say := func(format string, args ...any) { d.Numbers = append(d.Numbers, fmt.Sprintf(format, args...)) }
	gpuNumbers := func() {
		if dev != nil {
			say("SM median %.1f%%, P10 %.1f%%, below %.0f%% for %s of samples; mem-ctl median %.1f%%",
				dev.SMMedian, dev.SMP10, rep.Thresholds.withDefaults().Low, pct(dev.SMBelowShare), dev.MemCtlMedian)
		}
	}

	if ph != nil {
		on := "of the GPU's step time"
		if ph.Basis != "GPU time" {
			on = "of the step's host time"
		}
		opt := ph.Share(PhaseOptimizer, PhaseSync)
		nccl := 0.0
		if prof != nil {
			nccl = prof.NCCLShare
		}
		switch {
		case ph.Share(PhaseData) >= th.Data:
			d.Cause = CauseInput
			say("waiting for data %s %s (≥ %s)", pct(ph.Share(PhaseData)), on, pct(th.Data))
		case opt >= th.Optimizer || nccl >= th.NCCL:
			d.Cause = CauseOptimizer
			if opt >= th.Optimizer {
				say("optimizer step %s and gradient sync %s %s (together ≥ %s)", pct(ph.Share(PhaseOptimizer)), pct(ph.Share(PhaseSync)), on, pct(th.Optimizer))
			}
			if nccl >= th.NCCL {
				say("NCCL kernels %s of the profiled GPU busy time (≥ %s): all-reduce", pct(nccl), pct(th.NCCL))
			}
		case ph.HostShare() >= th.Host:
			d.Cause = CauseHostSync
			say("host work and syncs inside the step %s %s (≥ %s): the GPU waits for the host", pct(ph.HostShare()), on, pct(th.Host))
		case ph.HasTokens && ph.PadShare >= th.Padding:
			d.Cause = CausePadding
			say("padding %s of the batches' tokens (≥ %s): the GPU computes on pad", pct(ph.PadShare), pct(th.Padding))
		case dev == nil:
			d.Cause = CauseUnknown
			say("no phase takes a large share (data %s, optimizer+sync %s, host %s); without a GPU nothing tells compute from launch overhead",
				pct(ph.Share(PhaseData)), pct(opt), pct(ph.HostShare()))
		case d.CriteriaMet && (prof == nil || prof.BusyShare >= th.LaunchBusy):
			d.Cause = CauseCompute
			say("no idle phase: data %s, optimizer+sync %s, host %s", pct(ph.Share(PhaseData)), pct(opt), pct(ph.HostShare()))
		case dev.SMP90 < rep.Thresholds.withDefaults().Idle:
			d.Cause = CauseIdle
			say("SM P90 %.1f%%: no kernels on the GPU judged", dev.SMP90)
		default:
			d.Cause = CauseLaunch
			say("compute phases take the step (forward+backward %s) yet the GPU is not kept busy", pct(ph.Share(PhaseForward, PhaseBackward, PhaseOther)))
		}
		if ph.HasTokens && d.Cause != CausePadding && ph.PadShare >= th.Padding/2 {
			say("padding %s of the tokens", pct(ph.PadShare))
		}
		if prof != nil {
			say("profiler: %.0f kernels per step, GPU busy %s of the window, mean kernel %.1f µs, mean gap %.1f µs, NCCL %s",
				prof.KernelsPerStep, pct(prof.BusyShare), prof.MeanKernelUS, prof.MeanGapUS, pct(prof.NCCLShare))
		}
		say("%d steps of %d rank(s), %.1f ms per step (%s)", ph.Steps, ph.Ranks, ph.StepMS, ph.Basis)
		gpuNumbers()
		return d
	}
	if prof != nil && dev != nil && !d.CriteriaMet && prof.BusyShare < th.LaunchBusy && prof.NCCLShare < th.NCCL {
		d.Cause = CauseLaunch
		say("profiler: GPU busy %s of the window (< %s), %.0f kernels per step, mean kernel %.1f µs, mean gap %.1f µs",
			pct(prof.BusyShare), pct(th.LaunchBusy), prof.KernelsPerStep, prof.MeanKernelUS, prof.MeanGapUS)
		gpuNumbers()
		return d
	}
	// NVML (and client reports) only: the watch's cause.
	d.Cause = watchCause(rep.Verdict)
	d.Numbers = append(d.Numbers, rep.Verdict.Reasons...)
	if dev != nil && len(rep.Verdict.Reasons) == 0 {
		gpuNumbers()
	}
	return d
}

// watchCause maps the watch's verdict to a Cause.
func watchCause(v Verdict) Cause {
	switch v.State {
	case StateStarvedData:
		return CauseInput
	case StateFed:
		return CauseCompute
	case StateStarvedNotLoader:
		switch v.Cause {
		case diagGradSync.cause:
			return CauseOptimizer
		case diagPadding.cause:
			return CausePadding
		case diagLaunch.cause:
			return CauseLaunch
		case diagIdle.cause:
			return CauseIdle
		}
	}
	return CauseUnknown
}

// SimulateDiagnosis replays tr (see [Simulate]) and diagnoses it with the
// evidence of the steps that began inside the trace's span and whose index
// is at least skip (ev nil: NVML only), and the first profile that ran.
func SimulateDiagnosis(tr Trace, ev *Evidence, skip int, opts Options, th DiagnoseThresholds) (Report, Diagnosis, error) {
	rep, err := Simulate(tr, opts)
	if err != nil {
		return Report{}, Diagnosis{}, err
	}
	ph, prof := ev.over(tr.start(), tr.end(), skip)
	return rep, Diagnose(rep, ph, prof, th), nil
}

// over is the phase summary and profile of ev over [from, to].
func (ev *Evidence) over(from, to time.Time, skip int) (*PhaseSummary, *Profile) {
	if ev == nil {
		return nil, nil
	}
	var ph *PhaseSummary
	if s := ev.Summarize(from, to, skip); s.Steps > 0 {
		ph = &s
	}
	return ph, ev.FirstProfile()
}

// FirstProfile returns the first profile with kernels, nil for none.
func (ev *Evidence) FirstProfile() *Profile {
	for i := range ev.Profiles {
		if p := &ev.Profiles[i]; p.Error == "" && p.Kernels > 0 {
			return p
		}
	}
	return nil
}
