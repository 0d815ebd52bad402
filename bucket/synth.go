package bucket

import "math"

// Synthetic lengths: a documented, deterministic long-tailed length distribution for plan benchmarks and for tests
// at a scale where no lengths array fits in memory. Row i's length is a pure function of (seed, i), computed from a
// counter-based hash, so any row's length is available without an array.

// Synthetic is a [Lengths] of Rows rows whose lengths follow a log-normal distribution, clipped to [1, 32768]:
//
//	u1, u2 = the top 53 bits of SplitMix64 outputs 2i+1 and 2i+2 of a generator seeded with Seed, scaled to (0, 1]
//	         and [0, 1) (SplitMix64's output k depends only on Seed + k·0x9E3779B97F4A7C15: no state is kept)
//	z      = sqrt(−2 ln u1) · cos(2π u2)                      (Box–Muller: a standard normal)
//	length = clip(round(exp(ln(Median) + Sigma·z)), 1, 32768)
//
// With the defaults (Median 300, Sigma 1.2) the mean is about 615 tokens, the 99th percentile about 4 900 and
// 0.1 % of rows are 12 000 tokens or longer: the shape of web text tokenized by a BPE tokenizer. Lengths are
// identical on every machine of one architecture (the math package's Log, Exp and Cos are used).
type Synthetic struct {
	Rows   int64
	Seed   uint64
	Median float64 // 0: 300
	Sigma  float64 // 0: 1.2
}

// SyntheticMaxLength is the longest length [Synthetic] returns.
const SyntheticMaxLength = 32768

// Len returns the number of rows.
func (s Synthetic) Len() int64 { return s.Rows }

// Length returns row i's length.
func (s Synthetic) Length(i int64) uint32 {
	med, sig := s.Median, s.Sigma
	if med <= 0 {
		med = 300
	}
	if sig <= 0 {
		sig = 1.2
	}
	a := splitmixAt(s.Seed, 2*uint64(i)+1)
	b := splitmixAt(s.Seed, 2*uint64(i)+2)
	u1 := float64(a>>11+1) / (1 << 53) // (0, 1]
	u2 := float64(b>>11) / (1 << 53)   // [0, 1)
	z := math.Sqrt(-2*math.Log(u1)) * math.Cos(2*math.Pi*u2)
	v := math.Round(math.Exp(math.Log(med) + sig*z))
	switch {
	case v < 1:
		return 1
	case v > SyntheticMaxLength:
		return SyntheticMaxLength
	}
	return uint32(v)
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
