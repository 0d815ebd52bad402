package bench

import (
	"errors"
	"math"
	"slices"
	"sync"
	"time"

	"github.com/gload/gload/loader/gpuwatch"
)

// recorder polls a gpuwatch.Source and keeps every reading, bounded by
// maxPoints utilisation samples.
type recorder struct {
	src       gpuwatch.Source
	now       func() time.Time
	maxPoints int

	mu       sync.Mutex
	opened   time.Time
	devs     []gpuwatch.DeviceInfo
	devErr   error
	samples  []gpuwatch.TraceSample
	failures []gpuwatch.TraceFailure
	lastSM   []time.Time // per device: the newest SM point seen
	lastMem  []time.Time // per device: the newest mem-ctl point seen
	failing  []bool
	points   int
	full     bool
}

func newRecorder(src gpuwatch.Source, now func() time.Time, maxPoints int) *recorder {
	return &recorder{src: src, now: now, maxPoints: maxPoints}
}

// poll takes one reading of every device (listing them first until that
// succeeds). Source calls happen outside the lock.
func (r *recorder) poll() {
	r.mu.Lock()
	known := r.devs != nil
	r.mu.Unlock()
	if !known {
		devs, err := r.src.Devices()
		if err == nil && len(devs) == 0 {
			err = gpuwatch.ErrNoGPU
		}
		r.mu.Lock()
		if r.opened.IsZero() {
			r.opened = r.now()
		}
		r.devErr = err
		if err == nil {
			r.devs = devs
			r.lastSM = make([]time.Time, len(devs))
			r.lastMem = make([]time.Time, len(devs))
			r.failing = make([]bool, len(devs))
		}
		r.mu.Unlock()
		if err != nil {
			return
		}
	}
	r.mu.Lock()
	since := make([]time.Time, len(r.devs))
	for i := range since {
		// The older of the two series' newest points: each is deduplicated
		// against its own.
		since[i] = r.lastSM[i]
		if r.lastMem[i].Before(since[i]) {
			since[i] = r.lastMem[i]
		}
	}
	r.mu.Unlock()
	type reading struct {
		s   gpuwatch.DeviceSample
		err error
	}
	got := make([]reading, len(since))
	for i := range since {
		got[i].s, got[i].err = r.src.Sample(i, since[i])
	}
	now := r.now()
	r.mu.Lock()
	defer r.mu.Unlock()
	for i, g := range got {
		if g.err != nil {
			if !r.failing[i] || errors.Is(g.err, gpuwatch.ErrDeviceLost) {
				r.failures = append(r.failures, gpuwatch.TraceFailure{
					Time: now, Device: i, Error: g.err.Error(), Lost: errors.Is(g.err, gpuwatch.ErrDeviceLost),
				})
			}
			r.failing[i] = true
			continue
		}
		r.failing[i] = false
		s := g.s
		if s.Time.IsZero() && len(s.SM) == 0 && len(s.MemCtl) == 0 {
			continue // no reading yet
		}
		s.Time = now
		s.SM, r.lastSM[i] = r.fresh(s.SM, r.lastSM[i])
		s.MemCtl, r.lastMem[i] = r.fresh(s.MemCtl, r.lastMem[i])
		r.samples = append(r.samples, gpuwatch.TraceSample{Device: i, Sample: s})
	}
}

// fresh returns the points of ps newer than last (as a copy, within the
// points budget) and the newest time. Called with r.mu held.
func (r *recorder) fresh(ps []gpuwatch.Point, last time.Time) ([]gpuwatch.Point, time.Time) {
	var out []gpuwatch.Point
	for _, p := range ps {
		if !p.Time.After(last) {
			continue
		}
		if r.points >= r.maxPoints {
			r.full = true
			break
		}
		out = append(out, gpuwatch.Point{Time: p.Time, Value: clampPct(p.Value)})
		r.points++
	}
	for _, p := range out {
		if p.Time.After(last) {
			last = p.Time
		}
	}
	return out, last
}

func clampPct(v float64) float64 {
	if math.IsNaN(v) || v < 0 {
		return 0
	}
	return min(v, 100)
}

// trace returns the recording as a gpuwatch trace, with the client records
// of sw when it is not nil.
func (r *recorder) trace(sw *serverWatch) gpuwatch.Trace {
	r.mu.Lock()
	defer r.mu.Unlock()
	tr := gpuwatch.Trace{
		Recorded: r.opened, Devices: slices.Clone(r.devs),
		Samples: slices.Clone(r.samples), Failures: slices.Clone(r.failures),
	}
	if r.devErr != nil {
		tr.NoGPU = r.devErr.Error()
	}
	if sw != nil {
		cs := sw.steps(time.Time{})
		tr.Steps, tr.NotReady, tr.Queues = cs.in(time.Time{}, time.Unix(1<<40, 0))
	}
	return tr
}

// series returns each device's SM utilisation per bin (mean of the samples
// in it), in seconds since start.
func (r *recorder) series(start time.Time, bin time.Duration) []Series {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := make([]Series, len(r.devs))
	for i := range out {
		out[i].GPU = r.devs[i].Index
		sums := map[int64]float64{}
		counts := map[int64]int{}
		for _, s := range r.samples {
			if s.Device != i {
				continue
			}
			for _, p := range s.Sample.SM {
				k := int64(math.Floor(float64(p.Time.Sub(start)) / float64(bin)))
				sums[k] += p.Value
				counts[k]++
			}
		}
		keys := make([]int64, 0, len(sums))
		for k := range sums {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		out[i].Points = []SeriesPoint{}
		for _, k := range keys {
			t := (float64(k) + 0.5) * bin.Seconds()
			out[i].Points = append(out[i].Points, SeriesPoint{T: t, V: sums[k] / float64(counts[k])})
		}
	}
	return out
}
