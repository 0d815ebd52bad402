package bucket

import (
	"math"
	"sort"
)

// padder maps a row's token count to the tokens it delivers (eff) and to the
// padded length of a batch whose longest row it is (pad).
type padder struct {
	limit    int64   // rows are truncated to this many tokens (math.MaxInt64: none)
	multiple int64   // used when bounds is nil
	bounds   []int64 // ascending; limit never exceeds the last one
}

func newMultiplePadder(limit int64, multiple int) padder {
	return padder{limit: limit, multiple: int64(multiple)}
}

// newBoundsPadder pads to bounds; rows above the last bound are truncated to it.
func newBoundsPadder(limit int64, bounds []int) padder {
	p := padder{limit: limit, bounds: make([]int64, len(bounds))}
	for i, b := range bounds {
		p.bounds[i] = int64(b)
	}
	if last := p.bounds[len(p.bounds)-1]; last < p.limit {
		p.limit = last
	}
	return p
}

func lengthLimit(maxLength int) int64 {
	if maxLength > 0 {
		return int64(maxLength)
	}
	return math.MaxInt64
}

// eff is the number of tokens a row of l tokens delivers after truncation.
func (p *padder) eff(l uint32) int64 {
	return min(int64(l), p.limit)
}

// pad is the padded length for a longest row of e delivered tokens. An empty
// row pads like a row of one token, so no batch has length 0.
func (p *padder) pad(e int64) int64 {
	e = max(e, 1)
	if p.bounds == nil {
		return roundUp(e, p.multiple)
	}
	i := sort.Search(len(p.bounds), func(i int) bool { return p.bounds[i] >= e })
	if i == len(p.bounds) {
		// Unreachable for truncated rows; the last bound is the safe answer.
		i--
	}
	return p.bounds[i]
}

func roundUp(v, m int64) int64 {
	if m <= 1 {
		return v
	}
	return (v + m - 1) / m * m
}
