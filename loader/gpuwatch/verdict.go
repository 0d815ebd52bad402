package gpuwatch

import (
	"fmt"
	"math"
)

// diagnosis is one row of DESIGN.md's table (and two rows of our own: an
// idle GPU, and no GPU at all).
type diagnosis struct{ cause, fix string }

var (
	diagData     = diagnosis{"input pipeline starved", "more prefetch, pre-tokenized data, faster transport"}
	diagGradSync = diagnosis{"gradient sync or optimizer step", "fused AdamW, DDP bucket_cap_mb, gradient_as_bucket_view, gradient accumulation"}
	diagPadding  = diagnosis{"sequence lengths uneven, padding waste", "length bucketing, packing, fewer shapes"}
	diagLaunch   = diagnosis{"many small kernels, launch overhead", "torch.compile, CUDA graphs, larger batches"}
	diagBound    = diagnosis{"truly compute/memory bound", "nothing for the loader to do"}
	diagBusy     = diagnosis{"GPU kept busy", "nothing for the loader to do"}
	diagIdle     = diagnosis{"no kernels running: the GPU is idle", "check that the training job runs on this GPU (CUDA_VISIBLE_DEVICES, device placement)"}
	diagNoGPU    = diagnosis{"no NVIDIA driver, NVML library or device visible to the service", "run on a GPU node with the NVIDIA driver (the service keeps serving batches meanwhile)"}
	diagLost     = diagnosis{"the GPU stopped answering NVML", "check the kernel log for Xid errors; the GPU needs a reset or the node a reboot"}
)

func (v *Verdict) set(d diagnosis) { v.Cause, v.Fix = d.cause, d.fix }

// checklist evaluates the three checks of DESIGN.md on a device.
func checklist(r DeviceReport, th Thresholds) []Check {
	return []Check{
		{Name: "sm_median", Value: r.SMMedian, Op: ">=", Threshold: th.SMMedian, Pass: r.SMMedian >= th.SMMedian},
		{Name: "sm_p10", Value: r.SMP10, Op: ">=", Threshold: th.SMP10, Pass: r.SMP10 >= th.SMP10},
		{Name: "sm_below_share", Value: r.SMBelowShare, Op: "<", Threshold: th.LowShare, Pass: r.SMBelowShare < th.LowShare},
	}
}

// checkReason says a failed check in words.
func checkReason(c Check, th Thresholds) string {
	switch c.Name {
	case "sm_median":
		return fmt.Sprintf("SM median %.1f%% < %.0f%%", c.Value, c.Threshold)
	case "sm_p10":
		return fmt.Sprintf("SM P10 %.1f%% < %.0f%%", c.Value, c.Threshold)
	default:
		return fmt.Sprintf("SM below %.0f%% for %s of samples (limit %s)", th.Low, pct(c.Value), pct(c.Threshold))
	}
}

// judgeDevice gives one device its verdict, weighing the clients that bear
// on it.
func judgeDevice(r DeviceReport, clients []ClientReport, o Options) Verdict {
	th := o.Thresholds
	var v Verdict
	if r.Lost {
		v.State = StateLost
		v.set(diagLost)
		v.Reasons = []string{r.Error}
		return v
	}
	minCov := o.MinCoverage.Seconds()
	if r.CoveredS < minCov || r.Samples < o.MinSamples {
		v.State = StateInsufficient
		v.SecondsLeft = math.Max(minCov-r.CoveredS, 0)
		if v.SecondsLeft == 0 {
			v.SecondsLeft = o.Interval.Seconds() // waiting for samples, not for time
		}
		v.Reasons = []string{fmt.Sprintf("%.0f s of %.0f s sampled, %d SM samples (need %d)", r.CoveredS, minCov, r.Samples, o.MinSamples)}
		return v
	}
	v.Checks = checklist(r, th)
	for _, c := range v.Checks {
		if !c.Pass {
			v.Reasons = append(v.Reasons, checkReason(c, th))
		}
	}
	if len(v.Reasons) == 0 {
		v.State = StateFed
		if r.MemCtlMedian >= th.MemCtlHigh {
			v.set(diagBound)
		} else {
			v.set(diagBusy)
		}
		v.Reasons = []string{fmt.Sprintf("SM median %.1f%%, P10 %.1f%%, below %.0f%% for %s of samples", r.SMMedian, r.SMP10, th.Low, pct(r.SMBelowShare))}
		return v
	}
	var waiting []string
	for _, c := range clients {
		if c.Waiting {
			waiting = append(waiting, waitReasons(c, th)...)
		}
	}
	if len(waiting) > 0 {
		v.State = StateStarvedData
		v.set(diagData)
		const maxListed = 4
		if len(waiting) > maxListed {
			waiting = append(waiting[:maxListed], fmt.Sprintf("and %d more", len(waiting)-maxListed))
		}
		v.Reasons = append(v.Reasons, waiting...)
		return v
	}
	v.State = StateStarvedNotLoader
	v.Reasons = append(v.Reasons, noWaitReason(clients, th))
	swing := r.SMSpread >= th.Swing
	// Step timing: clients report steps with (almost) no wait.
	var steps, longest = 0, 0.0
	for _, c := range clients {
		steps += c.Steps
		longest = max(longest, c.StepMS)
	}
	switch {
	case r.SMP90 < th.Idle:
		v.set(diagIdle)
		v.Reasons = append(v.Reasons, fmt.Sprintf("SM P90 %.1f%% < %.0f%%", r.SMP90, th.Idle))
	case swing && r.MemCtlMedian >= th.MemCtlHigh:
		v.set(diagPadding)
		v.Reasons = append(v.Reasons,
			fmt.Sprintf("SM swings: P90−P10 = %.1f points (≥ %.0f)", r.SMSpread, th.Swing),
			fmt.Sprintf("mem-ctl median %.1f%% is high (≥ %.0f%%)", r.MemCtlMedian, th.MemCtlHigh))
	case swing || (r.MemCtlMedian < th.MemCtlLow && steps > 0):
		v.set(diagGradSync)
		if swing {
			v.Reasons = append(v.Reasons, fmt.Sprintf("SM swings: P90−P10 = %.1f points (≥ %.0f)", r.SMSpread, th.Swing))
		}
		v.Reasons = append(v.Reasons, fmt.Sprintf("mem-ctl median %.1f%% is not high (< %.0f%%)", r.MemCtlMedian, th.MemCtlHigh))
		if steps > 0 {
			v.Reasons = append(v.Reasons, fmt.Sprintf("steps of up to %.1f ms without waiting for data: the GPU idles inside the step", longest))
		} else {
			v.Reasons = append(v.Reasons, "no step reports to confirm (client step timing would)")
		}
	default:
		v.set(diagLaunch)
		v.Reasons = append(v.Reasons,
			fmt.Sprintf("SM steady but low: P90−P10 = %.1f points (< %.0f)", r.SMSpread, th.Swing),
			fmt.Sprintf("mem-ctl median %.1f%%", r.MemCtlMedian))
	}
	return v
}

// noWaitReason says why the clients are not blamed.
func noWaitReason(clients []ClientReport, th Thresholds) string {
	if len(clients) == 0 {
		return "no client reports: nothing says the input pipeline waits"
	}
	top := clients[0]
	for _, c := range clients[1:] {
		if c.WaitShare > top.WaitShare {
			top = c
		}
	}
	return fmt.Sprintf("no client waits for data: highest wait share %s (%s) < %s", pct(top.WaitShare), top.Client, pct(th.WaitShare))
}

// severity orders device states for the overall verdict.
func severity(s State) int {
	switch s {
	case StateStarvedData:
		return 4
	case StateStarvedNotLoader:
		return 3
	case StateInsufficient:
		return 2
	case StateFed:
		return 1
	}
	return 0
}

// overall combines the device verdicts.
func overall(r Report, s snapshot, o Options) Verdict {
	var v Verdict
	if len(r.Devices) == 0 {
		if !s.polled && s.devErr == nil {
			v.State = StateInsufficient
			v.SecondsLeft = o.MinCoverage.Seconds()
			v.Reasons = []string{"no poll yet"}
			return v
		}
		v.State = StateNoGPU
		v.set(diagNoGPU)
		if s.devErr != nil {
			v.Reasons = []string{s.devErr.Error()}
		}
		return v
	}
	best := 0
	var lost []string
	for _, d := range r.Devices {
		if d.Verdict.State == StateLost {
			lost = append(lost, fmt.Sprintf("GPU %d (%s) lost: %s", d.Index, d.Name, d.Error))
			continue
		}
		best = max(best, severity(d.Verdict.State))
	}
	if best == 0 {
		v.State = StateNoGPU
		v.set(diagLost)
		v.Reasons = append([]string{fmt.Sprintf("all %d GPUs lost", len(r.Devices))}, lost...)
		return v
	}
	for _, d := range r.Devices {
		if d.Verdict.State == StateLost || severity(d.Verdict.State) != best {
			continue
		}
		if len(v.Devices) == 0 {
			v.State, v.Cause, v.Fix, v.Checks = d.Verdict.State, d.Verdict.Cause, d.Verdict.Fix, d.Verdict.Checks
		}
		v.Devices = append(v.Devices, d.Index)
		v.SecondsLeft = max(v.SecondsLeft, d.Verdict.SecondsLeft)
		for _, why := range d.Verdict.Reasons {
			v.Reasons = append(v.Reasons, fmt.Sprintf("GPU %d: %s", d.Index, why))
		}
	}
	v.Reasons = append(v.Reasons, lost...)
	return v
}
