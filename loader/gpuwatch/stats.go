package gpuwatch

import (
	"math"
	"slices"
)

// percentile returns the p-th percentile (0..100) of sorted by linear
// interpolation between closest ranks (numpy.percentile's default,
// Hyndman–Fan type 7); 0 for no values.
func percentile(sorted []float64, p float64) float64 {
	n := len(sorted)
	if n == 0 {
		return 0
	}
	h := float64(n-1) * p / 100
	lo := math.Floor(h)
	i := int(lo)
	if i >= n-1 {
		return sorted[n-1]
	}
	if i < 0 {
		return sorted[0]
	}
	return sorted[i] + (h-lo)*(sorted[i+1]-sorted[i])
}

// clampPct bounds a utilisation percentage to [0, 100] (NaN becomes 0).
func clampPct(v float64) float64 {
	switch {
	case v > 100:
		return 100
	case v >= 0:
		return v
	}
	return 0
}

// utilStats summarises one utilisation series.
type utilStats struct {
	n                     int
	median, p10, p90, min float64
	below                 float64 // share of samples strictly below the low threshold
}

// summarize computes utilStats of vals (sorted in place) with low as the
// "below" threshold.
func summarize(vals []float64, low float64) utilStats {
	if len(vals) == 0 {
		return utilStats{}
	}
	slices.Sort(vals)
	below, _ := slices.BinarySearch(vals, low) // first index with vals[i] >= low
	return utilStats{
		n:      len(vals),
		median: percentile(vals, 50),
		p10:    percentile(vals, 10),
		p90:    percentile(vals, 90),
		min:    vals[0],
		below:  float64(below) / float64(len(vals)),
	}
}

// mean returns the mean of vals, 0 for none.
func mean(vals []float64) float64 {
	if len(vals) == 0 {
		return 0
	}
	s := 0.0
	for _, v := range vals {
		s += v
	}
	return s / float64(len(vals))
}
