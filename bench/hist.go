package bench

import (
	"math"
	"time"
)

// Histogram bounds: buckets grow by histGrowth from histMin.
const (
	histMin     = 100 * time.Nanosecond
	histGrowth  = 1.02
	histBuckets = 1100 // 100 ns · 1.02^1100 ≈ 280 s
)

// latencyHist is a fixed-size histogram of durations with buckets 2% wide:
// bounded memory whatever the run length, percentiles exact to about 1%.
type latencyHist struct {
	counts [histBuckets]uint64
	n      uint64
	max    time.Duration
}

var logGrowth = math.Log(histGrowth)

// bucket returns the bucket of d.
func bucket(d time.Duration) int {
	if d <= histMin {
		return 0
	}
	i := int(math.Log(float64(d)/float64(histMin)) / logGrowth)
	return min(max(i, 0), histBuckets-1)
}

// add records one duration.
func (h *latencyHist) add(d time.Duration) {
	h.counts[bucket(d)]++
	h.n++
	h.max = max(h.max, d)
}

// merge adds o's counts to h.
func (h *latencyHist) merge(o *latencyHist) {
	for i, c := range o.counts {
		h.counts[i] += c
	}
	h.n += o.n
	h.max = max(h.max, o.max)
}

// quantile returns the q-th quantile (0..1): the geometric middle of the
// bucket holding the ceil(q·n)-th smallest value (never more than the
// largest value seen); 0 when empty.
func (h *latencyHist) quantile(q float64) time.Duration {
	if h.n == 0 {
		return 0
	}
	rank := uint64(math.Ceil(q * float64(h.n)))
	rank = min(max(rank, 1), h.n)
	var seen uint64
	for i, c := range h.counts {
		seen += c
		if seen >= rank {
			mid := float64(histMin) * math.Pow(histGrowth, float64(i)+0.5)
			if i == 0 {
				mid = float64(histMin)
			}
			return min(time.Duration(mid), h.max)
		}
	}
	return h.max
}
