package gpuwatch

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"slices"
	"time"
)

// ErrEvidence means an evidence file (the JSON lines of the Python helper
// gload.doctor) is malformed.
var ErrEvidence = errors.New("gpuwatch: bad evidence")

// Phases of a training step, as gload.doctor names them. PhaseOther is time
// inside a step outside any named phase.
const (
	PhaseData      = "data"
	PhaseForward   = "forward"
	PhaseBackward  = "backward"
	PhaseOptimizer = "optimizer"
	PhaseSync      = "sync"
	PhaseHost      = "host"
	PhaseOther     = "other"
)

// PhaseNames lists the phases in step order.
var PhaseNames = []string{PhaseData, PhaseForward, PhaseBackward, PhaseOptimizer, PhaseSync, PhaseHost, PhaseOther}

// Bounds of ReadEvidence.
const (
	maxEvidenceLine  = 1 << 20
	maxEvidenceSteps = 2_000_000
	maxEvidenceRanks = 4096
	maxProfiles      = 4096
)

// Evidence is what the training loop's gload.doctor helper recorded: per-step
// phase timings of every rank, and the summaries of its profiler windows.
type Evidence struct {
	// Ranks counts the processes that wrote a head record.
	Ranks int `json:"ranks"`
	// CUDA is set when a rank timed its phases with CUDA events (GPU time);
	// otherwise the phases are host time.
	CUDA     bool           `json:"cuda"`
	Device   string         `json:"device,omitempty"`
	Steps    []EvidenceStep `json:"-"`
	Profiles []Profile      `json:"profiles,omitempty"`
	// Dropped counts step records past the bound on steps.
	Dropped int `json:"dropped,omitempty"`
}

// EvidenceStep is one step of one rank.
type EvidenceStep struct {
	Rank, Step int
	// Time is when the step began (the rank's clock).
	Time time.Time
	// WallMS is the step's host time, GPUMS its GPU time (0 without CUDA).
	WallMS, GPUMS float64
	// Phases holds the host and GPU milliseconds of each phase.
	Phases map[string]PhaseTime
	// Real and Total count the batch's tokens (0, 0: not reported).
	Real, Total int64
}

// PhaseTime is one phase of a step.
type PhaseTime struct{ HostMS, GPUMS float64 }

// Profile is the summary of a torch.profiler window of a rank.
type Profile struct {
	Rank           int     `json:"rank"`
	Steps          int     `json:"steps"`
	Kernels        int     `json:"kernels"`
	KernelsPerStep float64 `json:"kernels_per_step"`
	SpanMS         float64 `json:"span_ms"`
	BusyMS         float64 `json:"busy_ms"`
	BusyShare      float64 `json:"busy_share"`
	MeanKernelUS   float64 `json:"mean_kernel_us"`
	MeanGapUS      float64 `json:"mean_gap_us"`
	NCCLShare      float64 `json:"nccl_share"`
	Note           string  `json:"note,omitempty"`
	Error          string  `json:"error,omitempty"`
}

type wireEvidence struct {
	Kind   string                `json:"kind"`
	Rank   int                   `json:"rank"`
	T      int64                 `json:"t_us"`
	CUDA   bool                  `json:"cuda"`
	Device string                `json:"device"`
	Step   int                   `json:"step"`
	WallMS float64               `json:"wall_ms"`
	GPUMS  *float64              `json:"gpu_ms"`
	Phases map[string][]*float64 `json:"phases"`
	Tokens []int64               `json:"tokens"`
	Profile
}

func evErr(line int, format string, args ...any) error {
	return fmt.Errorf("read evidence line %d: %s: %w", line, fmt.Sprintf(format, args...), ErrEvidence)
}

func finiteMS(v float64) bool { return !math.IsNaN(v) && !math.IsInf(v, 0) && v >= 0 && v < 1e12 }

// ReadEvidence parses the evidence file gload.doctor writes (JSON lines of
// kinds "doctor", "step" and "profile"; blank lines skipped). A last line
// cut short (the job killed mid-write) is dropped; any other malformed line
// is an error wrapping ErrEvidence that names the line. At most 2 million
// steps are kept (the rest counted in Dropped). Steps are sorted by time.
func ReadEvidence(r io.Reader) (Evidence, error) {
	var ev Evidence
	ranks := map[int]bool{}
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 64<<10), maxEvidenceLine)
	line := 0
	var pendingErr error
	for sc.Scan() {
		line++
		if pendingErr != nil {
			return Evidence{}, pendingErr // a bad line that was not the last
		}
		b := bytes.TrimSpace(sc.Bytes())
		if len(b) == 0 {
			continue
		}
		var w wireEvidence
		if err := json.Unmarshal(b, &w); err != nil {
			pendingErr = evErr(line, "%v", err)
			continue
		}
		if w.Rank < 0 || w.Rank >= 1<<20 {
			return Evidence{}, evErr(line, "rank %d out of [0, 2^20)", w.Rank)
		}
		if w.T < 0 || w.T >= maxTraceUS {
			return Evidence{}, evErr(line, "t_us %d out of [0, 2^53)", w.T)
		}
		switch w.Kind {
		case "doctor":
			if !ranks[w.Rank] {
				if len(ranks) >= maxEvidenceRanks {
					return Evidence{}, evErr(line, "more than %d ranks", maxEvidenceRanks)
				}
				ranks[w.Rank] = true
			}
			ev.CUDA = ev.CUDA || w.CUDA
			if ev.Device == "" && len(w.Device) <= 256 {
				ev.Device = w.Device
			}
		case "step":
			st, err := parseStep(w)
			if err != nil {
				return Evidence{}, evErr(line, "step: %v", err)
			}
			if len(ev.Steps) >= maxEvidenceSteps {
				ev.Dropped++
				continue
			}
			ev.Steps = append(ev.Steps, st)
		case "profile":
			p := w.Profile
			p.Rank = w.Rank
			for _, v := range []float64{p.KernelsPerStep, p.SpanMS, p.BusyMS, p.BusyShare, p.MeanKernelUS, p.MeanGapUS, p.NCCLShare} {
				if !finiteMS(v) {
					return Evidence{}, evErr(line, "profile: %v is not a finite number >= 0", v)
				}
			}
			if p.Steps < 0 || p.Kernels < 0 || p.BusyShare > 1 || p.NCCLShare > 1 {
				return Evidence{}, evErr(line, "profile: steps %d, kernels %d, busy share %v, nccl share %v out of range", p.Steps, p.Kernels, p.BusyShare, p.NCCLShare)
			}
			if len(p.Note) > 1024 {
				p.Note = p.Note[:1024]
			}
			if len(p.Error) > 1024 {
				p.Error = p.Error[:1024]
			}
			if len(ev.Profiles) < maxProfiles {
				ev.Profiles = append(ev.Profiles, p)
			}
		default:
			return Evidence{}, evErr(line, "unknown kind %.40q", w.Kind)
		}
	}
	if err := sc.Err(); err != nil {
		if errors.Is(err, bufio.ErrTooLong) {
			err = fmt.Errorf("%w: %w", ErrEvidence, err)
		}
		return Evidence{}, fmt.Errorf("read evidence after line %d: %w", line, err)
	}
	// pendingErr, if set, is the last line: cut short by a killed job.
	ev.Ranks = len(ranks)
	slices.SortStableFunc(ev.Steps, func(a, b EvidenceStep) int { return a.Time.Compare(b.Time) })
	return ev, nil
}

func parseStep(w wireEvidence) (EvidenceStep, error) {
	st := EvidenceStep{Rank: w.Rank, Step: w.Step, Time: traceTime(w.T), WallMS: w.WallMS, Phases: make(map[string]PhaseTime, len(w.Phases))}
	if w.Step < 0 {
		return st, fmt.Errorf("step %d < 0", w.Step)
	}
	if !finiteMS(w.WallMS) {
		return st, fmt.Errorf("wall_ms %v: want a finite number >= 0", w.WallMS)
	}
	if w.GPUMS != nil {
		if !finiteMS(*w.GPUMS) {
			return st, fmt.Errorf("gpu_ms %v: want a finite number >= 0", *w.GPUMS)
		}
		st.GPUMS = *w.GPUMS
	}
	for name, v := range w.Phases {
		if !slices.Contains(PhaseNames, name) {
			return st, fmt.Errorf("phase %.40q: not one of %v", name, PhaseNames)
		}
		if len(v) != 2 || v[0] == nil || !finiteMS(*v[0]) || (v[1] != nil && !finiteMS(*v[1])) {
			return st, fmt.Errorf("phase %s: want [host_ms, gpu_ms or null] of finite numbers >= 0", name)
		}
		pt := PhaseTime{HostMS: *v[0]}
		if v[1] != nil {
			pt.GPUMS = *v[1]
		}
		st.Phases[name] = pt
	}
	if w.Tokens != nil {
		if len(w.Tokens) != 2 || w.Tokens[0] < 0 || w.Tokens[1] < w.Tokens[0] || w.Tokens[1] > 1<<40 {
			return st, fmt.Errorf("tokens %v: want [real, total] with 0 <= real <= total <= 2^40", w.Tokens)
		}
		st.Real, st.Total = w.Tokens[0], w.Tokens[1]
	}
	return st, nil
}

// PhaseSummary is the evidence over a span: what share of the step time
// each phase took.
type PhaseSummary struct {
	// Basis is "GPU time" (CUDA events: a phase's share is the GPU's time
	// in it, so the data and host phases measure the GPU waiting) or "host
	// time" (no CUDA).
	Basis string `json:"basis"`
	Steps int    `json:"steps"`
	Ranks int    `json:"ranks"`
	// StepMS is the mean step time (on the basis's clock).
	StepMS float64 `json:"step_ms"`
	// Shares maps each phase seen to its share of the summed step time.
	Shares map[string]float64 `json:"shares"`
	// PadShare is 1 − real/total tokens, when steps reported tokens
	// (HasTokens).
	PadShare  float64 `json:"pad_share"`
	HasTokens bool    `json:"has_tokens"`
	// Named is set when the loop named its compute (a forward or backward
	// phase): unnamed time then counts as host work.
	Named bool `json:"named_compute"`
}

// Summarize sums the steps that began in [from, to] (zero times: no bound)
// whose step index is at least skip.
func (ev Evidence) Summarize(from, to time.Time, skip int) PhaseSummary {
	s := PhaseSummary{Basis: "host time", Shares: map[string]float64{}}
	if ev.CUDA {
		s.Basis = "GPU time"
	}
	sums := map[string]float64{}
	total, real, tokens := 0.0, int64(0), int64(0)
	ranks := map[int]bool{}
	for _, st := range ev.Steps {
		if st.Step < skip || (!from.IsZero() && st.Time.Before(from)) || (!to.IsZero() && st.Time.After(to)) {
			continue
		}
		s.Steps++
		ranks[st.Rank] = true
		for name, p := range st.Phases {
			v := p.HostMS
			if ev.CUDA {
				v = p.GPUMS
			}
			sums[name] += v
			total += v
			if name == PhaseForward || name == PhaseBackward {
				s.Named = true
			}
		}
		if st.Total > 0 {
			real += st.Real
			tokens += st.Total
		}
	}
	s.Ranks = len(ranks)
	if s.Steps > 0 {
		s.StepMS = total / float64(s.Steps) / float64(max(len(ranks), 1))
	}
	if total > 0 {
		for name, v := range sums {
			s.Shares[name] = v / total
		}
	}
	if tokens > 0 {
		s.HasTokens = true
		s.PadShare = 1 - float64(real)/float64(tokens)
	}
	return s
}

// Share returns the share of the named phases.
func (s PhaseSummary) Share(names ...string) float64 {
	v := 0.0
	for _, n := range names {
		v += s.Shares[n]
	}
	return v
}

// HostShare is the share of host work: the host phase, and unnamed time
// when the loop named its compute.
func (s PhaseSummary) HostShare() float64 {
	if s.Named {
		return s.Share(PhaseHost, PhaseOther)
	}
	return s.Share(PhaseHost)
}
