package gpuwatch

import (
	"fmt"
	"time"
)

// Simulate replays tr through a new Watcher on a simulated clock: it polls
// every opts.Interval from the trace's first record to its last (and once at
// the last), feeds the trace's client records at their times, and returns
// the report as of the last record. opts.Now is replaced by the simulated
// clock. It is how `--trace` debugging and the tests run a recording.
func Simulate(tr Trace, opts Options) (Report, error) {
	return SimulateEach(tr, opts, nil)
}

// SimulateEach is Simulate calling each (when not nil) with the report after
// every poll.
func SimulateEach(tr Trace, opts Options, each func(Report)) (Report, error) {
	w, err := simulate(tr, opts, each)
	if err != nil {
		return Report{}, err
	}
	return w.Report(), nil
}

// simulate replays tr and returns the Watcher, its clock left at the end.
func simulate(tr Trace, opts Options, each func(Report)) (*Watcher, error) {
	start, end := tr.start(), tr.end()
	if end.Before(start) {
		return nil, fmt.Errorf("simulate trace: ends (%s) before it starts (%s): %w", end, start, ErrTrace)
	}
	clock := start
	now := func() time.Time { return clock }
	src := NewTraceSource(tr)
	src.Now = now
	opts.Now = now
	w := New(src, opts)
	interval := w.opts.Interval
	if n := end.Sub(start) / interval; n > 10_000_000 {
		return nil, fmt.Errorf("simulate trace: %s at %s per poll is %d polls: %w", end.Sub(start), interval, n, ErrTrace)
	}
	events := tr.events()
	next := 0
	feed := func(upTo time.Time) {
		for ; next < len(events) && !events[next].t.After(upTo); next++ {
			e := events[next]
			clock = e.t
			switch e.rank {
			case rankAssign:
				a := tr.Assignments[e.i]
				w.SetClientDevice(a.Client, a.Device)
			case rankQueue:
				q := tr.Queues[e.i]
				w.SetQueue(q.Client, q.Depth, q.Capacity)
			case rankNotReady:
				w.NotReady(tr.NotReady[e.i].Client)
			case rankStep:
				s := tr.Steps[e.i]
				w.RecordStep(s.Client, s.WaitUS, s.StepUS, s.ClientTime)
			}
		}
	}
	for t := start; ; t = t.Add(interval) {
		if t.After(end) {
			t = end
		}
		feed(t)
		clock = t
		w.Poll()
		if each != nil {
			each(w.Report())
		}
		if !t.Before(end) {
			break
		}
	}
	return w, nil
}
