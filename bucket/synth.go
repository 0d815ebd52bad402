package bucket

import (
	"math"
	"sync"
)

// Synthetic lengths: a documented, deterministic long-tailed length distribution for plan benchmarks and for tests
// at a scale where no lengths array fits in memory. Row i's length is a pure function of (seed, i), computed from a
// counter-based hash, so any row's length is available without an array.

// Synthetic is a [Lengths] of Rows rows whose lengths follow a log-normal distribution, clipped to [1, 32768],
// through a quantile table:
//
//	table[k] = clip(round(exp(ln(300) + 1.2·√2·erfinv(2·(k+½)/65536 − 1))), 1, 32768)   for k in [0, 65536)
//	length(i) = table[top 16 bits of SplitMix64 output i+1 of a generator seeded with Seed]
//
// (SplitMix64's output k depends only on Seed + k·0x9E3779B97F4A7C15, so no state is kept and any row costs a
// few nanoseconds.) The median is 300 tokens, the mean about 615, the 99th percentile about 4 900, and 0.1 % of
// rows are 12 000 tokens or longer: the shape of web text tokenized by a BPE tokenizer. The table is computed with
// the math package (Erfinv, Exp), so lengths are identical on every machine of one architecture.
type Synthetic struct {
	Rows int64
	Seed uint64
}

// SyntheticMaxLength is the longest length [Synthetic] returns.
const SyntheticMaxLength = 32768

var synthTable = sync.OnceValue(func() *[1 << 16]uint32 {
	var t [1 << 16]uint32
	for k := range t {
		u := (float64(k) + 0.5) / (1 << 16)
		v := math.Round(math.Exp(math.Log(300) + 1.2*math.Sqrt2*math.Erfinv(2*u-1)))
		t[k] = uint32(min(max(v, 1), SyntheticMaxLength))
	}
	return &t
})

// Len returns the number of rows.
func (s Synthetic) Len() int64 { return s.Rows }

// Length returns row i's length.
func (s Synthetic) Length(i int64) uint32 {
	return synthTable()[splitmixAt(s.Seed, uint64(i)+1)>>48]
}

// Fill writes the lengths of rows [lo, lo+len(dst)) to dst.
func (s Synthetic) Fill(lo int64, dst []uint32) {
	for k := range dst {
		dst[k] = s.Length(lo + int64(k))
	}
}

// splitmixAt is output k (k ≥ 1) of SplitMix64 seeded with seed: the generator's state after k steps is
// seed + k·γ, so any output is computed directly.
func splitmixAt(seed, k uint64) uint64 {
	return mix64(seed + k*0x9E3779B97F4A7C15)
}

// mix64 is SplitMix64's output function.
func mix64(z uint64) uint64 {
	z = (z ^ z>>30) * 0xBF58476D1CE4E5B9
	z = (z ^ z>>27) * 0x94D049BB133111EB
	return z ^ z>>31
}
