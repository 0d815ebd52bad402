package bucket

import (
	"fmt"
	"math"
	"slices"
)

// maxAutoDistinct bounds the distinct rounded lengths the boundary search
// works over; a wider histogram is coarsened first (see AutoBoundaries).
const maxAutoDistinct = 1 << 16

// AutoBoundaries chooses k padded lengths that minimise the total padding
// Σ(boundary(l) − l) over all rows, where boundary(l) is the smallest chosen
// boundary ≥ l. Every length is first rounded up to a multiple of multiple
// (≤ 1 means exact lengths; an empty row counts as one token), so boundaries
// are multiples of it, and the largest boundary is the longest row rounded
// up: no row is truncated by the result.
//
// The result is the exact optimum over the distinct rounded lengths, found by
// dynamic programming (f_t(j) = min_i f_{t−1}(i) + v_j·(C_j − C_i) over the
// sorted distinct values v with prefix counts C); the cost satisfies the
// quadrangle inequality, so each layer is solved by divide and conquer in
// O(D log D), O(k·D log D) in all. When the rounded lengths have more than
// 65536 distinct values the multiple is doubled until they do not, so the
// answer is exact on that coarser grid. Ties are broken towards the smaller
// boundary. It returns min(k, D) ascending boundaries, or nil when lengths is
// empty or k ≤ 0.
func AutoBoundaries(lengths []uint32, k int, multiple int) []int {
	return autoBoundaries(lengths, math.MaxInt64, k, multiple)
}

// autoBoundaries is AutoBoundaries over lengths truncated to limit.
func autoBoundaries(lengths []uint32, limit int64, k int, multiple int) []int {
	if len(lengths) == 0 || k <= 0 {
		return nil
	}
	m := int64(max(multiple, 1))
	vals, counts := roundedHistogram(lengths, limit, m)
	for len(vals) > maxAutoDistinct {
		m *= 2
		vals, counts = roundedHistogram(lengths, limit, m)
	}
	d := len(vals)
	if k >= d {
		out := make([]int, d)
		for i, v := range vals {
			out[i] = int(v)
		}
		return out
	}
	// C[j] = rows with rounded length ≤ vals[j-1]; cost(i, j) = vals[j-1]·(C[j]−C[i])
	// is the padded total of the rows vals[i..j-1] padded to vals[j-1].
	c := make([]uint64, d+1)
	for i, n := range counts {
		c[i+1] = c[i] + n
	}
	prev := make([]uint64, d+1)
	cur := make([]uint64, d+1)
	for j := 1; j <= d; j++ {
		prev[j] = vals[j-1] * c[j]
	}
	// opt[t][j]: start index i of the last segment in the best t+2-segment
	// cover of the first j values (layer 0 is the single-segment cover).
	opt := make([][]int32, k-1)
	for t := 1; t < k; t++ {
		o := make([]int32, d+1)
		var solve func(lo, hi, optLo, optHi int)
		solve = func(lo, hi, optLo, optHi int) {
			for lo <= hi {
				mid := (lo + hi) / 2
				best, bestI := uint64(math.MaxUint64), optLo
				for i := optLo; i <= min(mid-1, optHi); i++ {
					if v := prev[i] + vals[mid-1]*(c[mid]-c[i]); v < best {
						best, bestI = v, i
					}
				}
				cur[mid], o[mid] = best, int32(bestI)
				// Recurse on the smaller half, loop on the other.
				if mid-lo < hi-mid {
					solve(lo, mid-1, optLo, bestI)
					lo, optLo = mid+1, bestI
				} else {
					solve(mid+1, hi, bestI, optHi)
					hi, optHi = mid-1, bestI
				}
			}
		}
		// t+1 segments need at least t+1 values; the previous layer is valid
		// from t values on.
		solve(t+1, d, t, d-1)
		opt[t-1] = o
		prev, cur = cur, prev
	}
	out := make([]int, k)
	j := d
	for t := k - 1; t >= 0; t-- {
		out[t] = int(vals[j-1])
		if t > 0 {
			j = int(opt[t-1][j])
		}
	}
	return out
}

// roundedHistogram returns the distinct values of roundUp(max(min(l, limit),
// 1), m) in ascending order with their counts.
func roundedHistogram(lengths []uint32, limit, m int64) (vals, counts []uint64) {
	maxV := int64(0)
	for _, l := range lengths {
		maxV = max(maxV, min(int64(l), limit))
	}
	maxV = roundUp(max(maxV, 1), m)
	if slots := maxV / m; slots <= 1<<22 {
		dense := make([]uint64, slots+1)
		for _, l := range lengths {
			dense[roundUp(max(min(int64(l), limit), 1), m)/m]++
		}
		for i, n := range dense {
			if n > 0 {
				vals = append(vals, uint64(i)*uint64(m))
				counts = append(counts, n)
			}
		}
		return vals, counts
	}
	r := make([]uint64, len(lengths))
	for i, l := range lengths {
		r[i] = uint64(roundUp(max(min(int64(l), limit), 1), m))
	}
	slices.Sort(r)
	for i, v := range r {
		if i > 0 && v == r[i-1] {
			counts[len(counts)-1]++
			continue
		}
		vals = append(vals, v)
		counts = append(counts, 1)
	}
	return vals, counts
}

// PaddingReport is the row-level padding of a dataset under one padding rule:
// every row padded alone to its padded length. (Batches pad further, to their
// longest row; [Plan.Stats] has that figure.)
type PaddingReport struct {
	Rule         string // "auto-8", "pad-64", "pad-128", "boundaries", "exact"
	Lengths      int    // distinct padded lengths the rule produces on this data
	RealTokens   int64
	PaddedTokens int64
	Share        float64 // (PaddedTokens − RealTokens) / PaddedTokens
}

func (r PaddingReport) String() string {
	return fmt.Sprintf("%-10s %5d lengths  real %d  padded %d  padding %.2f%%",
		r.Rule, r.Lengths, r.RealTokens, r.PaddedTokens, 100*r.Share)
}

// RowPadding measures one padding rule on lengths truncated to maxLength (0:
// no limit): boundaries when given (rows above the last one count as
// truncated to it), else rounding up to multiple.
func RowPadding(lengths []uint32, maxLength, multiple int, boundaries []int) PaddingReport {
	var p padder
	rule := fmt.Sprintf("pad-%d", multiple)
	limit := lengthLimit(maxLength)
	if len(boundaries) > 0 {
		p = newBoundsPadder(limit, boundaries)
		rule = "boundaries"
	} else {
		p = newMultiplePadder(limit, multiple)
		if multiple <= 1 {
			rule = "exact"
		}
	}
	r := PaddingReport{Rule: rule}
	seen := make(map[int64]struct{})
	for _, l := range lengths {
		e := p.eff(l)
		v := p.pad(e)
		r.RealTokens += e
		r.PaddedTokens += v
		seen[v] = struct{}{}
	}
	r.Lengths = len(seen)
	if r.PaddedTokens > 0 {
		r.Share = float64(r.PaddedTokens-r.RealTokens) / float64(r.PaddedTokens)
	}
	return r
}

// ComparePadding reports, for lengths truncated to maxLength (0: no limit),
// the row-level padding of k automatic boundaries (multiples of
// [AutoMultiple], as a plan with AutoBuckets k uses) next to pad-to-64 and
// pad-to-128, for a loader or tool to print. Mind the Lengths column: with a
// long tail, pad-to-128 can need far more distinct lengths than k.
func ComparePadding(lengths []uint32, k, maxLength int) []PaddingReport {
	auto := RowPadding(lengths, maxLength, 1, autoBoundaries(lengths, lengthLimit(maxLength), k, AutoMultiple))
	auto.Rule = fmt.Sprintf("auto-%d", k)
	return []PaddingReport{auto, RowPadding(lengths, maxLength, 64, nil), RowPadding(lengths, maxLength, 128, nil)}
}
