package bench

import (
	"math"
	"testing"
	"time"

	"github.com/gload/gload/loader/gpuwatch"
)

func TestLatencyHist(t *testing.T) {
	tests := []struct {
		name     string
		values   []time.Duration
		p50, p99 time.Duration
	}{
		{"empty", nil, 0, 0},
		{"one", []time.Duration{5 * time.Microsecond}, 5 * time.Microsecond, 5 * time.Microsecond},
		{"tiny", []time.Duration{0, 1, 50}, 50, 50}, // never above the largest value
		{"spread", func() []time.Duration {
			var v []time.Duration
			for i := 1; i <= 1000; i++ {
				v = append(v, time.Duration(i)*time.Microsecond)
			}
			return v
		}(), 500 * time.Microsecond, 990 * time.Microsecond},
		{"outlier", append(make([]time.Duration, 99), 10*time.Second), histMin, histMin},
		{"huge", []time.Duration{time.Hour}, time.Hour, time.Hour},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var h latencyHist
			for _, v := range tc.values {
				h.add(v)
			}
			for _, c := range []struct {
				q    float64
				want time.Duration
			}{{0.5, tc.p50}, {0.99, tc.p99}} {
				got := h.quantile(c.q)
				if c.want == 0 {
					if got != 0 {
						t.Errorf("q%.2f = %v, want 0", c.q, got)
					}
					continue
				}
				if rel := math.Abs(float64(got-c.want)) / float64(c.want); rel > 0.011 && c.want < 200*time.Second {
					t.Errorf("q%.2f = %v, want %v ±1.1%%", c.q, got, c.want)
				}
			}
		})
	}
	var a, b latencyHist
	a.add(time.Millisecond)
	b.add(3 * time.Millisecond)
	b.add(3 * time.Millisecond)
	a.merge(&b)
	if a.n != 3 || a.max != 3*time.Millisecond || a.quantile(0.5) < 2900*time.Microsecond {
		t.Fatalf("merge: n %d max %v p50 %v", a.n, a.max, a.quantile(0.5))
	}
}

// TestClientSteps checks the rebuilding of step records from windowed
// reports, the span, and the feed series.
func TestClientSteps(t *testing.T) {
	t0 := time.Unix(1000, 0)
	at := func(ms int) time.Time { return t0.Add(time.Duration(ms) * time.Millisecond) }
	rep := func(cs ...gpuwatch.ClientReport) *gpuwatch.Report { return &gpuwatch.Report{Clients: cs} }
	c := func(name string, steps int, waitMS, stepMS float64, notReady int) gpuwatch.ClientReport {
		return gpuwatch.ClientReport{Client: name, Steps: steps, WaitMS: waitMS, StepMS: stepMS, NotReady: notReady, QueueCapacity: 8, QueueDepth: 2}
	}
	sw := newServerWatch("unix:///x", time.Second, time.Now, nil)
	sw.add(at(0), rep(c("old", 100, 5, 5, 0)))                          // baseline: steps before the run
	sw.add(at(1000), rep(c("old", 100, 5, 5, 0)))                       // nothing new
	sw.add(at(2000), rep(c("old", 100, 5, 5, 0), c("a", 2, 10, 30, 1))) // a: 2 steps (wait 10, step 30)
	sw.add(at(3000), rep(c("old", 100, 5, 5, 0), c("a", 4, 20, 30, 1))) // a: 2 more, wait 30 each
	sw.add(at(4000), rep(c("old", 100, 5, 5, 0), c("a", 4, 20, 30, 3))) // not ready twice, no step
	sw.add(at(5000), rep(c("old", 100, 5, 5, 0), c("a", 5, 20, 30, 3))) // 1 more: wait 20, step 30
	cs := sw.steps(time.Time{})
	if len(cs.steps) != 5 || len(cs.notReady) != 3 || len(cs.notes) != 0 {
		t.Fatalf("steps %d, not ready %d, notes %q", len(cs.steps), len(cs.notReady), cs.notes)
	}
	wantWait := []uint64{10000, 10000, 30000, 30000, 20000}
	for i, s := range cs.steps {
		if s.Client != "a" || s.WaitUS != wantWait[i] || s.StepUS != 30000 {
			t.Errorf("step %d: %+v", i, s)
		}
	}
	sp := cs.span(at(0), at(6000), 0)
	if sp.Basis != SpanClientSteps || !sp.Start.Equal(at(1000)) || !sp.End.Equal(at(5000)) || sp.Steps != 5 || sp.Seconds != 4 {
		t.Fatalf("span %+v", sp)
	}
	sp = cs.span(at(0), at(6000), 3)
	if !sp.Start.Equal(at(2000)) || sp.Steps != 3 || sp.Skipped != 2 {
		t.Fatalf("span skipping 3: %+v", sp)
	}
	if sp := cs.span(at(0), at(6000), 5); sp.Basis != SpanWholeRun || sp.Seconds != 6 {
		t.Fatalf("span skipping all: %+v", sp)
	}
	steps, nr, qs := cs.in(at(2000), at(5000))
	if len(steps) != 3 || len(nr) != 2 || len(qs) != 3 { // no queue for "old": it did not step
		t.Fatalf("in (2 s, 5 s]: %d steps, %d not ready, %d queues", len(steps), len(nr), len(qs))
	}
	feed := cs.series(at(0), time.Second)
	if len(feed) != 5 || feed[0].T != 1.5 || feed[1].V != 2 || feed[4].V != 1 {
		t.Fatalf("feed %+v", feed)
	}

	// A window shorter than the run: the sums shrink.
	sw = newServerWatch("unix:///x", time.Second, time.Now, nil)
	sw.add(at(0), rep())
	sw.add(at(1000), rep(c("a", 10, 10, 10, 0)))
	sw.add(at(2000), rep(c("a", 8, 10, 10, 0)))
	if cs := sw.steps(at(500)); len(cs.notes) != 1 || len(cs.steps) != 10 {
		t.Fatalf("aging: %d steps, notes %q", len(cs.steps), cs.notes)
	} else if !cs.steps[0].Time.Equal(at(500)) {
		t.Fatalf("a report after the run's end counts at its end: %v", cs.steps[0].Time)
	}
}

// BenchmarkLatencyHist measures recording one next() latency.
func BenchmarkLatencyHist(b *testing.B) {
	var h latencyHist
	b.SetBytes(8)
	b.ReportAllocs()
	d := time.Duration(0)
	for b.Loop() {
		d = (d + 7919) % (10 * time.Millisecond)
		h.add(d)
	}
	if h.n == 0 {
		b.Fatal("nothing recorded")
	}
}
