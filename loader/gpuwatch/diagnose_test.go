package gpuwatch

import (
	"bytes"
	"errors"
	"math"
	"strings"
	"testing"
	"time"
)

// synthEvidence builds the evidence of ranks ranks stepping through [from,
// to) seconds of the synthetic trace, each step stepMS long and split by
// shares (phase → share of the step); pad is the padding share (0: no token
// counts).
func synthEvidence(cuda bool, ranks int, from, to, stepMS float64, shares map[string]float64, pad float64) *Evidence {
	ev := &Evidence{Ranks: ranks, CUDA: cuda}
	n := int((to - from) * 1000 / stepMS)
	for r := range ranks {
		for i := range n {
			st := EvidenceStep{Rank: r, Step: i, Time: at(from + float64(i)*stepMS/1000), WallMS: stepMS, Phases: map[string]PhaseTime{}}
			for name, s := range shares {
				pt := PhaseTime{HostMS: s * stepMS}
				if cuda {
					pt.GPUMS = s * stepMS
					st.GPUMS += pt.GPUMS
				}
				st.Phases[name] = pt
			}
			if pad > 0 {
				st.Total = 16384
				st.Real = int64(math.Round(16384 * (1 - pad)))
			}
			ev.Steps = append(ev.Steps, st)
		}
	}
	return ev
}

// duty is an SM pattern busy at `on` for a share `duty` of each period of
// `period` seconds, at `off` the rest.
func duty(on, off, share, period float64) func(float64) float64 {
	return func(t float64) float64 {
		if f := math.Mod(t, period) / period; f < share {
			return on
		}
		return off
	}
}

func steady(v float64) func(float64) float64 { return func(float64) float64 { return v } }

// The induced workloads of bench/suites/doctor.sh, as NVML would show them on
// one H200, with the phases gload.doctor would record; each at full and at
// half strength.
func TestDiagnoseWorkloads(t *testing.T) {
	compute := map[string]float64{PhaseForward: 0.35, PhaseBackward: 0.55, PhaseOptimizer: 0.08, PhaseOther: 0.02}
	launchProf := &Profile{Steps: 5, Kernels: 2400, KernelsPerStep: 480, SpanMS: 40, BusyMS: 11, BusyShare: 0.28, MeanKernelUS: 4.6, MeanGapUS: 12}
	computeProf := &Profile{Steps: 5, Kernels: 60, KernelsPerStep: 12, SpanMS: 90, BusyMS: 88, BusyShare: 0.98, MeanKernelUS: 1400, MeanGapUS: 3}
	cases := []struct {
		name     string
		sm, mem  func(float64) float64
		shares   map[string]float64
		pad      float64
		prof     *Profile
		noPhases bool
		want     Cause
		evidence string
		met      bool
	}{
		{name: "input starved", sm: duty(96, 2, 0.45, 0.7), mem: duty(45, 0, 0.45, 0.7),
			shares: map[string]float64{PhaseData: 0.55, PhaseForward: 0.15, PhaseBackward: 0.25, PhaseOptimizer: 0.05},
			want:   CauseInput, evidence: "NVML + phases"},
		{name: "input starved, halved", sm: duty(96, 2, 0.7, 0.7), mem: duty(45, 0, 0.7, 0.7),
			shares: map[string]float64{PhaseData: 0.3, PhaseForward: 0.25, PhaseBackward: 0.4, PhaseOptimizer: 0.05},
			want:   CauseInput, evidence: "NVML + phases"},
		{name: "non-fused optimizer", sm: steady(38), mem: steady(8),
			shares: map[string]float64{PhaseForward: 0.05, PhaseBackward: 0.2, PhaseOptimizer: 0.73, PhaseOther: 0.02},
			want:   CauseOptimizer, evidence: "NVML + phases"},
		{name: "non-fused optimizer, halved", sm: steady(45), mem: steady(10),
			shares: map[string]float64{PhaseForward: 0.1, PhaseBackward: 0.3, PhaseOptimizer: 0.58, PhaseOther: 0.02},
			want:   CauseOptimizer, evidence: "NVML + phases"},
		{name: "host syncs", sm: duty(95, 0, 0.4, 0.5), mem: duty(40, 0, 0.4, 0.5),
			shares: map[string]float64{PhaseForward: 0.15, PhaseBackward: 0.25, PhaseOptimizer: 0.03, PhaseHost: 0.57},
			want:   CauseHostSync, evidence: "NVML + phases"},
		{name: "host syncs, halved", sm: duty(95, 0, 0.6, 0.5), mem: duty(40, 0, 0.6, 0.5),
			shares: map[string]float64{PhaseForward: 0.2, PhaseBackward: 0.35, PhaseOptimizer: 0.05, PhaseHost: 0.4},
			want:   CauseHostSync, evidence: "NVML + phases"},
		{name: "padding", sm: steady(93), mem: steady(55), shares: compute, pad: 0.62,
			want: CausePadding, evidence: "NVML + phases", met: true},
		{name: "padding, halved", sm: steady(93), mem: steady(55), shares: compute, pad: 0.31,
			want: CausePadding, evidence: "NVML + phases", met: true},
		{name: "launch bound", sm: steady(24), mem: steady(3),
			shares: map[string]float64{PhaseForward: 0.45, PhaseBackward: 0.45, PhaseOptimizer: 0.07, PhaseOther: 0.03},
			prof:   launchProf, want: CauseLaunch, evidence: "NVML + phases + profiler"},
		{name: "launch bound, halved, no profiler", sm: steady(45), mem: steady(6),
			shares: map[string]float64{PhaseForward: 0.45, PhaseBackward: 0.45, PhaseOptimizer: 0.07, PhaseOther: 0.03},
			want:   CauseLaunch, evidence: "NVML + phases"},
		{name: "compute bound", sm: steady(99), mem: steady(62), shares: compute, prof: computeProf,
			want: CauseCompute, evidence: "NVML + phases + profiler", met: true},
		{name: "compute bound, NVML only", sm: steady(99), mem: steady(62), noPhases: true,
			want: CauseCompute, evidence: "NVML", met: true},
		{name: "launch bound, NVML + profiler", sm: steady(24), mem: steady(3), noPhases: true, prof: launchProf,
			want: CauseLaunch, evidence: "NVML + profiler"},
		{name: "launch bound, NVML only", sm: steady(24), mem: steady(3), noPhases: true,
			want: CauseLaunch, evidence: "NVML"},
		{name: "idle GPU", sm: steady(0), mem: steady(0), shares: compute,
			want: CauseIdle, evidence: "NVML + phases"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			s := newSynth(1, 7)
			s.gpu(0, 0, 30, func(t float64) float64 { return s.noise(c.sm(t), 2) }, func(t float64) float64 { return s.noise(c.mem(t), 1) })
			var ev *Evidence
			if !c.noPhases {
				ev = synthEvidence(true, 1, 0.5, 29.5, 50, c.shares, c.pad)
			} else if c.prof != nil {
				ev = &Evidence{CUDA: true}
			}
			if c.prof != nil {
				ev.Profiles = []Profile{*c.prof}
			}
			_, d, err := SimulateDiagnosis(s.tr, ev, 0, Options{Window: time.Minute}, DiagnoseThresholds{})
			if err != nil {
				t.Fatal(err)
			}
			if d.Cause != c.want || d.Evidence != c.evidence || d.CriteriaMet != c.met {
				t.Fatalf("cause %q (want %q), evidence %q (want %q), criteria met %v (want %v)\nnumbers: %s",
					d.Cause, c.want, d.Evidence, c.evidence, d.CriteriaMet, c.met, strings.Join(d.Numbers, "; "))
			}
			if len(d.Remedies) == 0 || len(d.Numbers) == 0 || len(d.Checks) != 3 {
				t.Fatalf("remedies %v, numbers %v, checks %v", d.Remedies, d.Numbers, d.Checks)
			}
		})
	}
}

// Gradient sync on several GPUs: two ranks on two GPUs, the sync phase (a DDP
// comm hook) or the profiler's NCCL share names the all-reduce.
func TestDiagnoseAllReduce(t *testing.T) {
	cases := []struct {
		name   string
		shares map[string]float64
		nccl   float64
		want   Cause
		number string
	}{
		{"sync phase", map[string]float64{PhaseForward: 0.2, PhaseBackward: 0.35, PhaseSync: 0.4, PhaseOptimizer: 0.05}, 0, CauseOptimizer, "gradient sync 40.0%"},
		{"nccl kernels", map[string]float64{PhaseForward: 0.3, PhaseBackward: 0.62, PhaseOptimizer: 0.05, PhaseOther: 0.03}, 0.45, CauseOptimizer, "NCCL kernels 45.0%"},
		{"sync small", map[string]float64{PhaseForward: 0.3, PhaseBackward: 0.55, PhaseSync: 0.1, PhaseOptimizer: 0.05}, 0.08, CauseLaunch, "forward+backward"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			s := newSynth(2, 11)
			for dev := range 2 {
				s.gpu(dev, 0, 30, func(t float64) float64 { return s.noise(duty(92, 5, 0.55, 0.4)(t), 2) }, func(float64) float64 { return 30 })
			}
			ev := synthEvidence(true, 2, 0.5, 29.5, 40, c.shares, 0)
			ev.Profiles = []Profile{{Steps: 5, Kernels: 900, KernelsPerStep: 180, SpanMS: 200, BusyMS: 110, BusyShare: 0.55, MeanKernelUS: 120, MeanGapUS: 100, NCCLShare: c.nccl}}
			_, d, err := SimulateDiagnosis(s.tr, ev, 0, Options{Window: time.Minute}, DiagnoseThresholds{})
			if err != nil {
				t.Fatal(err)
			}
			all := strings.Join(d.Numbers, "; ")
			if d.Cause != c.want || !strings.Contains(all, c.number) {
				t.Fatalf("cause %q (want %q); numbers %s (want %q in them)", d.Cause, c.want, all, c.number)
			}
			if d.Phases.Ranks != 2 || d.Evidence != "NVML + phases + profiler" {
				t.Fatalf("ranks %d, evidence %q", d.Phases.Ranks, d.Evidence)
			}
			if c.want == CauseOptimizer && d.Remedies[len(d.Remedies)-1] != remLayout {
				t.Fatalf("remedies %v: want the parallel layout last", d.Remedies)
			}
		})
	}
}

// Without a GPU the phases still say what they can (host time).
func TestDiagnoseNoGPU(t *testing.T) {
	tr := Trace{Recorded: at(0), Devices: []DeviceInfo{}, NoGPU: "open nvml: init: ERROR_LIBRARY_NOT_FOUND"}
	tr.Steps = []TraceStep{{Time: at(10), Client: "x", StepUS: 1}} // a span of 10 s to replay
	for _, c := range []struct {
		name   string
		shares map[string]float64
		want   Cause
	}{
		{"data", map[string]float64{PhaseData: 0.6, PhaseForward: 0.4}, CauseInput},
		{"compute", map[string]float64{PhaseForward: 0.5, PhaseBackward: 0.5}, CauseUnknown},
	} {
		ev := synthEvidence(false, 1, 0, 10, 100, c.shares, 0)
		_, d, err := SimulateDiagnosis(tr, ev, 0, Options{}, DiagnoseThresholds{})
		if err != nil {
			t.Fatal(err)
		}
		if d.Cause != c.want || d.State != StateNoGPU || d.Evidence != "phases" || d.CriteriaMet || d.GPU != -1 {
			t.Fatalf("%s: %+v", c.name, d)
		}
		if !strings.Contains(strings.Join(d.Numbers, "; "), "host time") {
			t.Fatalf("%s: numbers %v should say the basis", c.name, d.Numbers)
		}
	}
}

// The warm-up steps (skip) stay out of the summary.
func TestSummarizeSkip(t *testing.T) {
	ev := synthEvidence(true, 1, 0, 1, 100, map[string]float64{PhaseForward: 1}, 0)
	for i := range 3 {
		ev.Steps[i].Phases = map[string]PhaseTime{PhaseData: {HostMS: 100, GPUMS: 100}}
	}
	if s := ev.Summarize(time.Time{}, time.Time{}, 0); s.Share(PhaseData) != 0.3 {
		t.Fatalf("data share with warm-up %v, want 0.3", s.Share(PhaseData))
	}
	if s := ev.Summarize(time.Time{}, time.Time{}, 3); s.Share(PhaseData) != 0 || s.Steps != 7 {
		t.Fatalf("skip 3: data share %v, steps %d", s.Share(PhaseData), s.Steps)
	}
}

const goodEvidence = `{"kind":"doctor","v":1,"t_us":1700000000000000,"rank":0,"pid":1,"cuda":true,"torch":"2.11","device":"NVIDIA H200"}
{"kind":"step","rank":0,"step":0,"t_us":1700000000000000,"wall_ms":10.5,"gpu_ms":10.0,"phases":{"data":[5.0,4.0],"forward":[1.0,3.0],"other":[4.5,3.0]},"tokens":[30,40]}

{"kind":"profile","rank":0,"t_us":1700000000100000,"steps":2,"kernels":10,"kernels_per_step":5,"span_ms":3,"busy_ms":2,"busy_share":0.66,"mean_kernel_us":200,"mean_gap_us":100,"nccl_share":0}
`

func TestReadEvidence(t *testing.T) {
	ev, err := ReadEvidence(strings.NewReader(goodEvidence + `{"kind":"step","rank":0,"st`))
	if err != nil {
		t.Fatal(err)
	}
	if ev.Ranks != 1 || !ev.CUDA || ev.Device != "NVIDIA H200" || len(ev.Steps) != 1 || len(ev.Profiles) != 1 {
		t.Fatalf("%+v", ev)
	}
	st := ev.Steps[0]
	if st.Phases[PhaseData] != (PhaseTime{5, 4}) || st.Real != 30 || st.Total != 40 || st.GPUMS != 10 {
		t.Fatalf("%+v", st)
	}
	s := ev.Summarize(time.Time{}, time.Time{}, 0)
	if s.Share(PhaseData) != 0.4 || math.Abs(s.PadShare-0.25) > 1e-9 || !s.Named || math.Abs(s.HostShare()-0.3) > 1e-9 {
		t.Fatalf("%+v", s)
	}
	for _, c := range []struct{ name, in, want string }{
		{"bad middle line", "{nope\n" + goodEvidence, "line 1"},
		{"unknown kind", `{"kind":"lunch","t_us":1}`, "unknown kind"},
		{"unknown phase", `{"kind":"step","t_us":1,"wall_ms":1,"phases":{"lunch":[1,1]}}`, "phase \"lunch\""},
		{"negative", `{"kind":"step","t_us":1,"wall_ms":-1,"phases":{}}`, "wall_ms -1"},
		{"short phase", `{"kind":"step","t_us":1,"wall_ms":1,"phases":{"data":[1]}}`, "phase data"},
		{"tokens", `{"kind":"step","t_us":1,"wall_ms":1,"phases":{},"tokens":[5,4]}`, "tokens"},
		{"time", `{"kind":"step","t_us":-5,"wall_ms":1,"phases":{}}`, "t_us -5"},
		{"rank", `{"kind":"doctor","t_us":1,"rank":-1}`, "rank -1"},
		{"share", `{"kind":"profile","t_us":1,"busy_share":2}`, "busy share 2"},
		{"long line", `{"kind":"doctor","t_us":1,"device":"` + strings.Repeat("x", maxEvidenceLine) + `"}` + "\n", "too long"},
	} {
		_, err := ReadEvidence(strings.NewReader(c.in + "\n{}\n"))
		if c.name == "long line" {
			_, err = ReadEvidence(strings.NewReader(c.in))
		}
		if !errors.Is(err, ErrEvidence) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: error %v, want ErrEvidence naming %q", c.name, err, c.want)
		}
	}
}

func FuzzReadEvidence(f *testing.F) {
	f.Add([]byte(goodEvidence))
	f.Add([]byte(`{"kind":"step","t_us":1,"wall_ms":1e308,"phases":{"data":[null,1]}}`))
	f.Add([]byte("{\"kind\":\"doctor\"}\n{\"kind\":\"profile\",\"kernels\":-1}"))
	f.Fuzz(func(t *testing.T, b []byte) {
		ev, err := ReadEvidence(bytes.NewReader(b))
		if err != nil {
			if !errors.Is(err, ErrEvidence) {
				t.Fatalf("error %v does not wrap ErrEvidence", err)
			}
			return
		}
		s := ev.Summarize(time.Time{}, time.Time{}, 0)
		for name, v := range s.Shares {
			if math.IsNaN(v) || v < 0 || v > 1+1e-9 {
				t.Fatalf("share %s = %v", name, v)
			}
		}
		_ = Diagnose(Report{}, &s, ev.FirstProfile(), DiagnoseThresholds{})
	})
}
