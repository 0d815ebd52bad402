package gpuwatch

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"
)

// fakeClock is a settable clock.
type fakeClock struct {
	mu sync.Mutex
	t  time.Time
}

func newClock() *fakeClock { return &fakeClock{t: traceStart} }

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *fakeClock) Set(sec float64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = at(sec)
}

// fakeSource answers Sample with a function of the device and since.
type fakeSource struct {
	devs   []DeviceInfo
	devErr error
	sample func(i int, since time.Time) (DeviceSample, error)

	mu     sync.Mutex
	sinces []time.Time
	calls  int
}

func (f *fakeSource) Devices() ([]DeviceInfo, error) { return f.devs, f.devErr }
func (f *fakeSource) Close() error                   { return nil }
func (f *fakeSource) Sample(i int, since time.Time) (DeviceSample, error) {
	f.mu.Lock()
	f.sinces = append(f.sinces, since)
	f.calls++
	f.mu.Unlock()
	return f.sample(i, since)
}

func gpus(n int) []DeviceInfo {
	out := make([]DeviceInfo, n)
	for i := range out {
		out[i] = DeviceInfo{Index: i, Name: "Fake", UUID: fmt.Sprintf("GPU-fake-%d", i)}
	}
	return out
}

// pointNow is a source giving one SM and one mem-ctl point at the clock's
// time, with values from util(device, second).
func pointNow(clk *fakeClock, util func(i int, sec float64) (sm, mem float64)) func(int, time.Time) (DeviceSample, error) {
	return func(i int, _ time.Time) (DeviceSample, error) {
		now := clk.Now()
		sm, mem := util(i, now.Sub(traceStart).Seconds())
		return DeviceSample{Time: now, SM: []Point{{now, sm}}, MemCtl: []Point{{now, mem}}, PowerW: 100}, nil
	}
}

func TestWindowAgesOutSamples(t *testing.T) {
	clk := newClock()
	src := &fakeSource{devs: gpus(1)}
	src.sample = pointNow(clk, func(_ int, sec float64) (float64, float64) {
		if sec <= 10 {
			return 10, 50
		}
		return 95, 50
	})
	w := New(src, Options{Window: 10 * time.Second, MinCoverage: 2 * time.Second, MinSamples: 1, Now: clk.Now})
	for s := 0; s <= 20; s++ {
		clk.Set(float64(s))
		w.Poll()
	}
	d := w.Report().Devices[0]
	// Window [10 s, 20 s]: the point at 10 s (10%) and ten at 95%.
	if d.Samples != 11 || d.SMMedian != 95 || !near(d.SMBelowShare, 1.0/11) || d.CoveredS != 10 {
		t.Errorf("samples %d median %v below %v covered %v, want 11, 95, 1/11, 10", d.Samples, d.SMMedian, d.SMBelowShare, d.CoveredS)
	}
	// A report between polls windows by the report's time too.
	clk.Set(25.5)
	if d := w.Report().Devices[0]; d.Samples != 5 {
		t.Errorf("at 25.5 s: %d samples in the window, want 5 (16..20 s)", d.Samples)
	}
}

func TestSinceAndDedup(t *testing.T) {
	clk := newClock()
	// A source that ignores since and returns every point so far: the
	// watcher must count each once.
	src := &fakeSource{devs: gpus(1)}
	src.sample = func(int, time.Time) (DeviceSample, error) {
		now := clk.Now()
		var s DeviceSample
		s.Time = now
		for t := traceStart; !t.After(now); t = t.Add(500 * time.Millisecond) {
			s.SM = append(s.SM, Point{t, 50})
		}
		return s, nil
	}
	w := New(src, Options{Now: clk.Now})
	for s := 0; s <= 4; s++ {
		clk.Set(float64(s))
		w.Poll()
	}
	if n := w.Report().Devices[0].Samples; n != 9 {
		t.Errorf("%d samples, want 9 (0, 0.5, …, 4 s)", n)
	}
	// since is the newest point seen so far (zero at first).
	want := []time.Time{{}, at(0), at(1), at(2), at(3)}
	for i, s := range src.sinces {
		if !s.Equal(want[i]) {
			t.Errorf("poll %d: since %v, want %v", i, s, want[i])
		}
	}
}

func TestClientsAgeOut(t *testing.T) {
	clk := newClock()
	w := New(&fakeSource{devs: gpus(1), sample: pointNow(clk, func(int, float64) (float64, float64) { return 20, 20 })},
		Options{Now: clk.Now})
	for s := range 30 {
		clk.Set(float64(s))
		w.RecordStep("rank0", 50_000, 50_000, time.Time{})
		w.Poll()
	}
	clk.Set(59)
	c := w.Report().Clients[0]
	if c.Steps != 30 || !near(c.WaitShare, 0.5) || !c.Silent || c.SilentS != 30 {
		t.Errorf("at 59 s: %+v, want 30 steps, share 0.5, silent 30 s", c)
	}
	if !strings.Contains(strings.Join(c.Notes, "\n"), "client rank0 silent for 30 s") {
		t.Errorf("notes %q lack the silence", c.Notes)
	}
	if r := w.Report(); r.Verdict.State != StateStarvedData {
		t.Errorf("while its reports are in the window the client still counts: %q", r.Verdict.State)
	}
	for s := 30; s <= 95; s++ {
		clk.Set(float64(s))
		w.Poll()
	}
	r := w.Report()
	if c := r.Clients[0]; c.Steps != 0 || c.WaitShare != 0 || c.Waiting {
		t.Errorf("at 95 s the reports aged out: %+v", c)
	}
	if r.Verdict.State != StateStarvedNotLoader {
		t.Errorf("verdict %q once the waits aged out, want not the loader", r.Verdict.State)
	}
	clk.Set(29 + 120) // ForgetAfter = 2 × Window after its last report
	w.Poll()
	if n := len(w.Report().Clients); n != 0 {
		t.Errorf("%d clients after ForgetAfter, want 0", n)
	}
}

func TestClockSkewIgnored(t *testing.T) {
	clk := newClock()
	w := New(nil, Options{Now: clk.Now})
	for s := range 10 {
		clk.Set(float64(s))
		now := clk.Now()
		w.RecordStep("ahead", 10_000, 90_000, now.Add(time.Hour))
		w.RecordStep("behind", 10_000, 90_000, now.Add(-5*time.Minute))
		w.RecordStep("close", 10_000, 90_000, now.Add(500*time.Millisecond))
		w.RecordStep("unknown", 10_000, 90_000, time.Time{})
	}
	want := map[string]float64{"ahead": 3600, "behind": -300, "close": 0.5, "unknown": 0}
	for _, c := range w.Report().Clients {
		if c.Steps != 10 || !near(c.WaitShare, 0.1) {
			t.Errorf("%s: %d steps, share %v: skew must not move reports out of the window", c.Client, c.Steps, c.WaitShare)
		}
		if !near(c.SkewS, want[c.Client]) {
			t.Errorf("%s: skew %v, want %v", c.Client, c.SkewS, want[c.Client])
		}
		noted := strings.Contains(strings.Join(c.Notes, " "), "clock differs")
		if noted != (c.Client == "ahead" || c.Client == "behind") {
			t.Errorf("%s: skew noted %v (notes %q)", c.Client, noted, c.Notes)
		}
	}
}

func TestWaitingSignals(t *testing.T) {
	low := func(int, float64) (float64, float64) { return 20, 20 }
	tests := []struct {
		name    string
		feed    func(w *Watcher)
		waiting bool
	}{
		{"wait share at threshold", func(w *Watcher) { w.RecordStep("c", 5_000, 95_000, time.Time{}) }, true},
		{"wait share under threshold", func(w *Watcher) { w.RecordStep("c", 4_000, 96_000, time.Time{}) }, false},
		{"empty queue, no steps", func(w *Watcher) { w.SetQueue("c", 0, 4) }, true},
		{"full queue, no steps", func(w *Watcher) { w.SetQueue("c", 4, 4) }, false},
		{"not ready, no steps", func(w *Watcher) { w.NotReady("c") }, true},
		{"not ready rarely", func(w *Watcher) {
			w.NotReady("c")
			for range 30 {
				w.RecordStep("c", 0, 100_000, time.Time{})
			}
		}, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			clk := newClock()
			w := New(&fakeSource{devs: gpus(1), sample: pointNow(clk, low)}, Options{Now: clk.Now})
			tc.feed(w)
			for s := 0; s <= 12; s++ {
				clk.Set(float64(s))
				w.Poll()
			}
			r := w.Report()
			if got := r.Clients[0].Waiting; got != tc.waiting {
				t.Fatalf("waiting %v, want %v: %+v", got, tc.waiting, r.Clients[0])
			}
			want := StateStarvedNotLoader
			if tc.waiting {
				want = StateStarvedData
			}
			if r.Verdict.State != want {
				t.Errorf("verdict %q, want %q", r.Verdict.State, want)
			}
		})
	}
}

func TestClientDevices(t *testing.T) {
	clk := newClock()
	src := &fakeSource{devs: gpus(3), sample: pointNow(clk, func(i int, _ float64) (float64, float64) {
		if i == 2 {
			return 95, 50
		}
		return 20, 20
	})}
	w := New(src, Options{Now: clk.Now})
	w.SetClientDevice("a", 0)
	w.SetClientDevice("b", 1)
	w.SetClientDevice("c", 2)
	for s := 0; s <= 12; s++ {
		clk.Set(float64(s))
		w.RecordStep("a", 50_000, 50_000, time.Time{}) // waits: GPU 0 is data-starved
		w.RecordStep("b", 0, 100_000, time.Time{})     // does not: GPU 1 is not the loader's fault
		w.RecordStep("c", 50_000, 50_000, time.Time{}) // waits, but GPU 2 is fed
		w.Poll()
	}
	r := w.Report()
	want := []State{StateStarvedData, StateStarvedNotLoader, StateFed}
	for i, d := range r.Devices {
		if d.Verdict.State != want[i] {
			t.Errorf("GPU %d: %q, want %q\n%s", i, d.Verdict.State, want[i], Format(r))
		}
	}
	if r.Verdict.State != StateStarvedData || len(r.Verdict.Devices) != 1 || r.Verdict.Devices[0] != 0 {
		t.Errorf("overall %q on %v, want starved: data on [0]", r.Verdict.State, r.Verdict.Devices)
	}
	if r.Clients[0].Device != 0 || r.Clients[1].Device != 1 {
		t.Errorf("client devices %d %d", r.Clients[0].Device, r.Clients[1].Device)
	}
}

func TestNoGPU(t *testing.T) {
	w := New(nil, Options{})
	if r := w.Report(); r.Verdict.State != StateInsufficient {
		t.Errorf("before any poll: %q, want insufficient data", r.Verdict.State)
	}
	w.Poll()
	r := w.Report()
	if r.Verdict.State != StateNoGPU || r.Verdict.Fix == "" || !strings.Contains(r.NoGPU, "no GPU visible") {
		t.Errorf("nil source: %+v", r.Verdict)
	}
	// The service keeps serving client statistics.
	w.RecordStep("rank0", 1, 2, time.Time{})
	if n := len(w.Report().Clients); n != 1 {
		t.Errorf("%d clients, want 1", n)
	}
	cause := errors.New("open nvml: ERROR_LIBRARY_NOT_FOUND")
	src := Unavailable(cause)
	if _, err := src.Devices(); !errors.Is(err, ErrNoGPU) || !errors.Is(err, cause) {
		t.Errorf("Unavailable: %v, want ErrNoGPU wrapping the cause", err)
	}
	w = New(&fakeSource{devs: nil}, Options{})
	w.Poll()
	if r := w.Report(); r.Verdict.State != StateNoGPU {
		t.Errorf("empty device list: %q", r.Verdict.State)
	}
}

func TestDeviceLost(t *testing.T) {
	clk := newClock()
	var fail error
	src := &fakeSource{devs: gpus(2)}
	ok := pointNow(clk, func(int, float64) (float64, float64) { return 95, 50 })
	src.sample = func(i int, since time.Time) (DeviceSample, error) {
		if i == 1 && fail != nil {
			return DeviceSample{}, fail
		}
		return ok(i, since)
	}
	w := New(src, Options{Now: clk.Now})
	poll := func(from, to int) {
		for s := from; s <= to; s++ {
			clk.Set(float64(s))
			w.Poll()
		}
	}
	poll(0, 12)
	fail = errors.New("nvml gpu 1: ERROR_TIMEOUT")
	poll(13, 13)
	r := w.Report()
	if d := r.Devices[1]; !d.Lost || d.Verdict.State != StateLost || !strings.Contains(d.Error, "ERROR_TIMEOUT") {
		t.Errorf("after an error: %+v", d)
	}
	if r.Verdict.State != StateFed || !strings.Contains(strings.Join(r.Verdict.Reasons, "\n"), "GPU 1 (Fake) lost") {
		t.Errorf("overall %+v: GPU 0 is fed, GPU 1 lost", r.Verdict)
	}
	fail = nil
	poll(14, 14)
	if d := w.Report().Devices[1]; d.Lost || d.Verdict.State != StateFed {
		t.Errorf("a transient error recovers: %+v", d)
	}
	fail = fmt.Errorf("nvml gpu 1: %w", ErrDeviceLost)
	poll(15, 15)
	fail = nil
	poll(16, 20)
	if d := w.Report().Devices[1]; !d.Lost {
		t.Errorf("ErrDeviceLost is for good: %+v", d)
	}
	src.sample = func(int, time.Time) (DeviceSample, error) { return DeviceSample{}, fmt.Errorf("x: %w", ErrDeviceLost) }
	poll(21, 21)
	if r := w.Report(); r.Verdict.State != StateNoGPU || !strings.Contains(r.Verdict.Reasons[0], "all 2 GPUs lost") {
		t.Errorf("all lost: %+v", r.Verdict)
	}
}

func TestInsufficientData(t *testing.T) {
	clk := newClock()
	w := New(&fakeSource{devs: gpus(1), sample: pointNow(clk, func(int, float64) (float64, float64) { return 95, 50 })},
		Options{Now: clk.Now, MinCoverage: 10 * time.Second})
	for s := 0; s <= 3; s++ {
		clk.Set(float64(s))
		w.Poll()
	}
	r := w.Report()
	if r.Verdict.State != StateInsufficient || r.Verdict.SecondsLeft != 7 {
		t.Errorf("%+v, want insufficient data with 7 s left", r.Verdict)
	}
	if !strings.Contains(Format(r), "insufficient data (GPU 0), 7 s left") {
		t.Errorf("Format:\n%s", Format(r))
	}
}

func TestMaxClientsAndForget(t *testing.T) {
	w := New(nil, Options{MaxClients: 2})
	w.RecordStep("a", 0, 1, time.Time{})
	w.SetQueue("b", 1, 2)
	w.NotReady("c")
	w.SetClientDevice("d", 0)
	r := w.Report()
	if len(r.Clients) != 2 || r.ClientsDropped != 2 {
		t.Errorf("%d clients, %d dropped, want 2 and 2", len(r.Clients), r.ClientsDropped)
	}
	w.Forget("a")
	w.NotReady("c")
	if r := w.Report(); len(r.Clients) != 2 || r.Clients[1].Client != "c" {
		t.Errorf("after Forget: %+v", r.Clients)
	}
}

func TestRunStopsOnCancel(t *testing.T) {
	src := &fakeSource{devs: gpus(1), sample: func(int, time.Time) (DeviceSample, error) { return DeviceSample{}, nil }}
	w := New(src, Options{Interval: time.Hour})
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := w.Run(ctx); err != nil {
		t.Fatal(err)
	}
	if src.calls != 1 {
		t.Errorf("%d polls, want the one Run starts with", src.calls)
	}
}

func TestReportJSON(t *testing.T) {
	// Every report, even of an empty or no-GPU watcher, encodes (no NaN).
	clk := newClock()
	for _, w := range []*Watcher{
		New(nil, Options{}),
		New(&fakeSource{devs: gpus(2), sample: func(int, time.Time) (DeviceSample, error) { return DeviceSample{}, nil }}, Options{Now: clk.Now}),
	} {
		w.Poll()
		w.RecordStep("x", 0, 0, time.Time{})
		w.SetQueue("y", 0, 0)
		b, err := json.Marshal(w.Report())
		if err != nil {
			t.Fatal(err)
		}
		var back Report
		if err := json.Unmarshal(b, &back); err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(string(b), `"state":`) {
			t.Errorf("json %s", b)
		}
	}
}

func TestConcurrentUse(t *testing.T) {
	clk := newClock()
	w := New(&fakeSource{devs: gpus(2), sample: pointNow(clk, func(int, float64) (float64, float64) { return 50, 50 })}, Options{Now: clk.Now})
	var wg sync.WaitGroup
	for g := range 4 {
		wg.Go(func() {
			for i := range 200 {
				name := fmt.Sprintf("c%d", g)
				switch i % 5 {
				case 0:
					w.Poll()
				case 1:
					w.RecordStep(name, 1, 2, time.Time{})
				case 2:
					w.SetQueue(name, i%3, 4)
				case 3:
					w.NotReady(name)
				default:
					_ = Format(w.Report())
				}
			}
		})
	}
	wg.Wait()
}

// TestTraceReplayUnderRun replays a trace through Run with the source's
// clock (a simulated one here, so no timing matters).
func TestTraceReplayUnderRun(t *testing.T) {
	tr := readTraceFile(t, "hand_odd.jsonl")
	src := NewTraceSource(tr)
	clk := newClock()
	clk.Set(11)
	src.Now = clk.Now
	w := New(src, Options{Now: src.Now, Interval: time.Hour})
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := w.Run(ctx); err != nil {
		t.Fatal(err)
	}
	if d := w.Report().Devices[0]; d.Samples != 11 || d.SMMedian != 50 {
		t.Errorf("replay: %d samples, median %v; want 11, 50", d.Samples, d.SMMedian)
	}
}
