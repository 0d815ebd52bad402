package gpuwatch

import (
	"fmt"
	"slices"
	"sync"
	"time"
)

// TraceSource replays a recorded Trace as a Source. At a given Now it shows
// what the recording had seen by then: the fine-grained samples of every poll
// recorded up to Now that are newer than Sample's `since`, the gauges of the
// last such poll, and the device's failure when a failure is its latest
// record.
//
// A Watcher windows by its own clock, so a replay under [Watcher.Run] needs
// the two clocks to agree: New(src, Options{Now: src.Now}). [Simulate] does
// this for a replay on a simulated clock.
type TraceSource struct {
	// Now is the clock the replay follows. NewTraceSource sets it to real
	// time shifted so that the trace's first record falls at the call;
	// tests and Simulate replace it with a simulated clock before use.
	Now func() time.Time

	tr   Trace
	devs [][]TraceSample  // per device, by time
	fail [][]TraceFailure // per device, by time

	mu     sync.Mutex
	closed bool
}

var _ Source = (*TraceSource)(nil)

// NewTraceSource returns a Source replaying tr (as ReadTrace returns it:
// records sorted by time).
func NewTraceSource(tr Trace) *TraceSource {
	s := &TraceSource{tr: tr, devs: make([][]TraceSample, len(tr.Devices)), fail: make([][]TraceFailure, len(tr.Devices))}
	for _, x := range tr.Samples {
		if x.Device >= 0 && x.Device < len(s.devs) {
			s.devs[x.Device] = append(s.devs[x.Device], x)
		}
	}
	for _, f := range tr.Failures {
		if f.Device >= 0 && f.Device < len(s.fail) {
			s.fail[f.Device] = append(s.fail[f.Device], f)
		}
	}
	for i := range s.devs {
		slices.SortStableFunc(s.devs[i], func(a, b TraceSample) int { return a.Sample.Time.Compare(b.Sample.Time) })
		slices.SortStableFunc(s.fail[i], func(a, b TraceFailure) int { return a.Time.Compare(b.Time) })
	}
	start := tr.start()
	opened := time.Now()
	s.Now = func() time.Time { return start.Add(time.Since(opened)) }
	return s
}

// start is the time of the trace's first record.
func (tr *Trace) start() time.Time {
	t := tr.Recorded
	if ev := tr.events(); len(ev) > 0 && (t.IsZero() || ev[0].t.Before(t)) {
		t = ev[0].t
	}
	return t
}

// end is the time of the trace's last record.
func (tr *Trace) end() time.Time {
	t := tr.Recorded
	if ev := tr.events(); len(ev) > 0 && ev[len(ev)-1].t.After(t) {
		t = ev[len(ev)-1].t
	}
	return t
}

// Devices implements Source.
func (s *TraceSource) Devices() ([]DeviceInfo, error) {
	if s.isClosed() {
		return nil, fmt.Errorf("trace source: devices: closed: %w", ErrNoGPU)
	}
	if s.tr.NoGPU != "" {
		return nil, fmt.Errorf("trace recorded: %w", recorded{s.tr.NoGPU, ErrNoGPU})
	}
	if len(s.tr.Devices) == 0 {
		return nil, fmt.Errorf("trace lists no device: %w", ErrNoGPU)
	}
	return slices.Clone(s.tr.Devices), nil
}

func (s *TraceSource) isClosed() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.closed
}

// Sample implements Source.
func (s *TraceSource) Sample(i int, since time.Time) (DeviceSample, error) {
	if i < 0 || i >= len(s.devs) {
		return DeviceSample{}, fmt.Errorf("trace source: sample gpu %d of %d: %w", i, len(s.devs), ErrNoDevice)
	}
	if s.isClosed() {
		return DeviceSample{}, fmt.Errorf("trace source: sample gpu %d: closed", i)
	}
	now := s.Now()
	recs := s.devs[i]
	// Records up to now.
	n, _ := slices.BinarySearchFunc(recs, now, func(x TraceSample, t time.Time) int {
		if x.Sample.Time.After(t) {
			return 1
		}
		return -1
	})
	recs = recs[:n]
	fails := s.fail[i]
	k, _ := slices.BinarySearchFunc(fails, now, func(f TraceFailure, t time.Time) int {
		if f.Time.After(t) {
			return 1
		}
		return -1
	})
	if k > 0 {
		f := fails[k-1]
		if f.Lost || len(recs) == 0 || !recs[len(recs)-1].Sample.Time.After(f.Time) {
			err := recorded{msg: f.Error}
			if f.Lost {
				err.is = ErrDeviceLost
			}
			return DeviceSample{}, fmt.Errorf("trace recorded at %s: %w", f.Time.Format(time.RFC3339Nano), err)
		}
	}
	if len(recs) == 0 {
		return DeviceSample{}, nil
	}
	out := DeviceSample{Time: now}
	last := recs[len(recs)-1].Sample
	out.MemUsed, out.PCIeRx, out.PCIeTx, out.PowerW, out.SMClockMHz = last.MemUsed, last.PCIeRx, last.PCIeTx, last.PowerW, last.SMClockMHz
	// Points are no later than their record, so only records after since
	// can hold points after since.
	j, _ := slices.BinarySearchFunc(recs, since, func(x TraceSample, t time.Time) int {
		if x.Sample.Time.After(t) {
			return 1
		}
		return -1
	})
	for _, r := range recs[j:] {
		out.SM = appendAfter(out.SM, r.Sample.SM, since, now)
		out.MemCtl = appendAfter(out.MemCtl, r.Sample.MemCtl, since, now)
	}
	return out, nil
}

func appendAfter(dst, src []Point, since, now time.Time) []Point {
	for _, p := range src {
		if p.Time.After(since) && !p.Time.After(now) {
			dst = append(dst, p)
		}
	}
	return dst
}

// Close implements Source; later calls fail.
func (s *TraceSource) Close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.closed = true
	return nil
}

// recorded is an error read back from a trace: its recorded message, and the
// sentinel it stood for (nil for none).
type recorded struct {
	msg string
	is  error
}

func (e recorded) Error() string { return e.msg }
func (e recorded) Unwrap() error { return e.is }
