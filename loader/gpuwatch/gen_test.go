package gpuwatch

import (
	"bytes"
	"flag"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// update rewrites testdata/ (generated traces and golden reports):
//
//	go test ./loader/gpuwatch/ -run 'TestGenerateTraces|TestTraceVerdicts|TestFormatGolden' -update
var update = flag.Bool("update", false, "rewrite generated traces and golden files under testdata/")

// traceStart is where every synthetic trace begins.
var traceStart = time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)

// finePeriod is NVML's fine-grained sampling period on recent GPUs (1/6 s).
const finePeriod = 166667 * time.Microsecond

// synth builds a synthetic trace, deterministically from its seed.
type synth struct {
	tr  Trace
	rng *rand.Rand
}

func newSynth(ndev int, seed uint64) *synth {
	s := &synth{rng: rand.New(rand.NewPCG(seed, 0x9e3779b97f4a7c15))}
	s.tr.Recorded = traceStart
	s.tr.Devices = []DeviceInfo{}
	for i := range ndev {
		s.tr.Devices = append(s.tr.Devices, DeviceInfo{
			Index: i, Name: "NVIDIA H200", UUID: fmt.Sprintf("GPU-5f1c0b2e-0000-4000-8000-%012d", i),
			MemoryTotal: 150754820096,
		})
	}
	return s
}

// noise returns v plus gaussian noise of sd, rounded to an integer
// percentage as NVML reports it, within [0, 100].
func (s *synth) noise(v, sd float64) float64 {
	return clampPct(math.Round(v + s.rng.NormFloat64()*sd))
}

// at returns the trace time of second t.
func at(t float64) time.Time { return traceStart.Add(time.Duration(t * float64(time.Second))) }

// gpu records device dev for the seconds [from, to): one poll per second
// holding the fine-grained samples since the last one. sm and mem give the
// utilisation at a time in seconds (noise is theirs to add).
func (s *synth) gpu(dev int, from, to float64, sm, mem func(t float64) float64) {
	k := int(math.Ceil(from * float64(time.Second) / float64(finePeriod)))
	for poll := from + 1; poll <= to; poll++ {
		smp := DeviceSample{
			Time:    at(poll),
			MemUsed: 75 << 30, PCIeRx: 2.1e9 + s.rng.Float64()*1e8, PCIeTx: 3e8,
			PowerW: math.Round(400 + 3*sm(poll)), SMClockMHz: 1980,
		}
		for ; ; k++ {
			pt := traceStart.Add(time.Duration(k) * finePeriod).Truncate(time.Microsecond)
			if pt.After(at(poll)) {
				break
			}
			sec := pt.Sub(traceStart).Seconds()
			if sec <= from {
				continue
			}
			smp.SM = append(smp.SM, Point{Time: pt, Value: sm(sec)})
			smp.MemCtl = append(smp.MemCtl, Point{Time: pt, Value: mem(sec)})
		}
		s.tr.Samples = append(s.tr.Samples, TraceSample{Device: dev, Sample: smp})
	}
}

// client records a training loop over [from, to): steps of stepMS after
// waiting waitMS (both jittered by 2%), a queue state once a second
// (depth(second) of capacity), and a not-ready event before every
// notReadyEvery-th step (0: never).
func (s *synth) client(name string, from, to, stepMS, waitMS float64, depth func(sec int) int, capacity, notReadyEvery int, skew time.Duration) {
	for sec := int(from); float64(sec) < to; sec++ {
		s.tr.Queues = append(s.tr.Queues, TraceQueue{Time: at(float64(sec)), Client: name, Depth: depth(sec), Capacity: capacity})
	}
	t := from
	for i := 1; ; i++ {
		w := waitMS * (1 + 0.02*s.rng.NormFloat64())
		st := stepMS * (1 + 0.02*s.rng.NormFloat64())
		w, st = max(w, 0), max(st, 0.1)
		if notReadyEvery > 0 && i%notReadyEvery == 0 {
			s.tr.NotReady = append(s.tr.NotReady, TraceNotReady{Time: at(t).Truncate(time.Microsecond), Client: name})
		}
		t += (w + st) / 1000
		if t >= to {
			return
		}
		now := at(t).Truncate(time.Microsecond)
		s.tr.Steps = append(s.tr.Steps, TraceStep{
			Time: now, Client: name, WaitUS: uint64(w * 1000), StepUS: uint64(st * 1000), ClientTime: now.Add(skew),
		})
	}
}

func (s *synth) assign(client string, dev int) {
	s.tr.Assignments = append(s.tr.Assignments, TraceAssignment{Time: traceStart, Client: client, Device: dev})
}

// Utilisation shapes.
func (s *synth) fedSM(t float64) float64 {
	if math.Mod(t, 10) < 0.17 { // a short dip every 10 s
		return s.noise(60, 5)
	}
	return s.noise(95, 2)
}

// sawtooth ramps from 10% to 90% every 2.5 s (a period that the 1/6 s
// sampling does not alias).
func (s *synth) sawtooth(t float64) float64 { return s.noise(10+80*frac(t/2.5), 2) }
func frac(t float64) float64                { return t - math.Floor(t) }
func (s *synth) flat(v, sd float64) func(float64) float64 {
	return func(float64) float64 { return s.noise(v, sd) }
}
func full(int) int { return 4 }

// genTraces returns every synthetic trace by name.
func genTraces() map[string]Trace {
	out := map[string]Trace{}
	{ // fed: ~95% with small dips, the client never waits.
		s := newSynth(1, 1)
		s.gpu(0, 0, 60, s.fedSM, s.flat(55, 3))
		s.client("rank0", 0, 60, 250, 0.5, full, 4, 0, 0)
		out["fed"] = s.tr
	}
	{ // starved_data: sawtooth 10%↔90%, the client waits 40% of its time, queue mostly empty.
		s := newSynth(1, 2)
		s.gpu(0, 0, 60, s.sawtooth, func(t float64) float64 { return s.noise(15+15*frac(t/2.5), 2) })
		s.client("rank0", 0, 60, 150, 100, func(sec int) int { return []int{0, 0, 0, 1}[sec%4] }, 4, 2, 0)
		out["starved_data"] = s.tr
	}
	{ // launch_overhead: steady 40% with mid mem-ctl, no waits.
		s := newSynth(1, 3)
		s.gpu(0, 0, 60, s.flat(40, 3), s.flat(25, 3))
		s.client("rank0", 0, 60, 250, 0.5, full, 4, 0, 0)
		out["launch_overhead"] = s.tr
	}
	{ // padding: swings with a 4 s period between ~85% and ~25%, mem-ctl high, no waits.
		s := newSynth(1, 4)
		hi := func(t float64) bool { return math.Mod(t, 4) < 2 }
		s.gpu(0, 0, 60,
			func(t float64) float64 {
				if hi(t) {
					return s.noise(85, 3)
				}
				return s.noise(25, 3)
			},
			func(t float64) float64 {
				if hi(t) {
					return s.noise(75, 4)
				}
				return s.noise(50, 4)
			})
		s.client("rank0", 0, 60, 400, 0.3, full, 4, 0, 0)
		out["padding"] = s.tr
	}
	{ // gradsync: busy half of each 1 s step, idle the other half, mem-ctl low, long steps without waits.
		s := newSynth(1, 5)
		s.gpu(0, 0, 60,
			func(t float64) float64 {
				if frac(t) < 0.5 {
					return s.noise(95, 2)
				}
				return s.noise(3, 1)
			},
			func(t float64) float64 {
				if frac(t) < 0.5 {
					return s.noise(12, 2)
				}
				return s.noise(2, 1)
			})
		s.client("rank0", 0, 60, 1000, 1, full, 4, 0, 0)
		out["gradsync"] = s.tr
	}
	{ // multi2: GPU 0 fed, GPU 1 data-starved; clients tied to their GPUs.
		s := newSynth(2, 6)
		s.gpu(0, 0, 60, s.fedSM, s.flat(55, 3))
		s.gpu(1, 0, 60, s.sawtooth, s.flat(20, 3))
		s.assign("rank0", 0)
		s.assign("rank1", 1)
		s.client("rank0", 0, 60, 250, 0.5, full, 4, 0, 0)
		s.client("rank1", 0, 60, 160, 90, func(int) int { return 0 }, 4, 3, 0)
		out["multi2"] = s.tr
	}
	{ // multi4: GPU 2 steady at 35% while no client waits; clients tied to no GPU.
		s := newSynth(4, 7)
		for d := range 4 {
			if d == 2 {
				s.gpu(d, 0, 60, s.flat(35, 3), s.flat(25, 3))
				continue
			}
			s.gpu(d, 0, 60, s.fedSM, s.flat(55, 3))
		}
		for r := range 4 {
			s.client(fmt.Sprintf("rank%d", r), 0, 60, 250, 0.5, full, 4, 0, 0)
		}
		out["multi4"] = s.tr
	}
	{ // lost: GPU 1 falls off the bus at 30.5 s; GPU 0 stays fed.
		s := newSynth(2, 8)
		s.gpu(0, 0, 60, s.fedSM, s.flat(55, 3))
		s.gpu(1, 0, 30, s.fedSM, s.flat(55, 3))
		s.tr.Failures = append(s.tr.Failures, TraceFailure{
			Time: at(30.5), Device: 1, Lost: true,
			Error: "nvml gpu 1: gpu utilisation samples: gpuwatch: device lost: ERROR_GPU_IS_LOST",
		})
		s.client("rank0", 0, 60, 250, 0.5, full, 4, 0, 0)
		out["lost"] = s.tr
	}
	{ // nogpu: no driver; the client still reports (and its clock runs 3 s ahead).
		s := newSynth(0, 9)
		s.tr.NoGPU = "open nvml: init: gpuwatch: no GPU visible: ERROR_LIBRARY_NOT_FOUND"
		s.client("rank0", 0, 20, 250, 0.5, full, 4, 0, 3*time.Second)
		out["nogpu"] = s.tr
	}
	{ // warmup: 6 s of a fed GPU: not enough for a verdict.
		s := newSynth(1, 10)
		s.gpu(0, 0, 6, s.fedSM, s.flat(55, 3))
		s.client("rank0", 0, 6, 250, 0.5, full, 4, 0, 0)
		out["warmup"] = s.tr
	}
	return out
}

// TestGenerateTraces keeps testdata/*.jsonl equal to what genTraces writes
// (-update rewrites them).
func TestGenerateTraces(t *testing.T) {
	for name, tr := range genTraces() {
		var b bytes.Buffer
		if err := WriteTrace(&b, tr); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		path := filepath.Join("testdata", name+".jsonl")
		if *update {
			if err := os.WriteFile(path, b.Bytes(), 0o644); err != nil {
				t.Fatal(err)
			}
			continue
		}
		got, err := os.ReadFile(path)
		if err != nil {
			t.Fatalf("%v (run with -update)", err)
		}
		if !bytes.Equal(got, b.Bytes()) {
			t.Errorf("%s differs from what the generator writes (run with -update)", path)
		}
	}
}
