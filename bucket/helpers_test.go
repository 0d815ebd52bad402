package bucket

import (
	"math"
	"slices"
	"testing"
)

// logNormalLengths returns n lengths drawn from a log-normal distribution with
// the given mean and sigma (of the underlying normal), clamped to [1, maxLen].
// It uses the package's own generator so the data is the same everywhere.
func logNormalLengths(n int, mean, sigma float64, maxLen int, key uint64) []uint32 {
	r := newRNG(key)
	mu := math.Log(mean) - sigma*sigma/2
	out := make([]uint32, n)
	for i := range out {
		// Box–Muller from two uniforms in (0, 1].
		u1 := (float64(r.next()>>11) + 1) / (1 << 53)
		u2 := float64(r.next()>>11) / (1 << 53)
		z := math.Sqrt(-2*math.Log(u1)) * math.Cos(2*math.Pi*u2)
		v := math.Exp(mu + sigma*z)
		out[i] = uint32(min(max(math.Round(v), 1), float64(maxLen)))
	}
	return out
}

// uniformLengths returns n lengths uniform in [lo, hi].
func uniformLengths(n, lo, hi int, key uint64) []uint32 {
	r := newRNG(key)
	out := make([]uint32, n)
	for i := range out {
		out[i] = uint32(lo + int(r.below(uint64(hi-lo+1))))
	}
	return out
}

// delivered is what the plan must deliver of row l under cfg (normalized).
func delivered(p *Plan, l uint32) int64 {
	c := p.cfg
	e := int64(l)
	if c.MaxLength > 0 {
		e = min(e, int64(c.MaxLength))
	}
	if c.Policy == Packed {
		if !c.SplitDocs {
			e = min(e, int64(c.SeqLen))
		}
		return e
	}
	if len(p.bounds) > 0 {
		e = min(e, int64(p.bounds[len(p.bounds)-1]))
	}
	return e
}

// checkPlan verifies a plan's structural invariants and that every row's
// delivered tokens appear exactly once. It returns the batches.
func checkPlan(t testing.TB, p *Plan, lengths []uint32) []Batch {
	t.Helper()
	c := p.cfg
	batches := make([]Batch, p.Len())
	shapes := map[Shape]bool{}
	var real, padded int64
	cover := make([][][2]int64, len(lengths))
	for g := range batches {
		b := p.Batch(g)
		batches[g] = b
		if got := p.Shape(g); got != (Shape{b.Rows, b.Length}) {
			t.Fatalf("batch %d: Shape %v, Batch has (%d,%d)", g, got, b.Rows, b.Length)
		}
		shapes[Shape{b.Rows, b.Length}] = true
		if b.Rows <= 0 || b.Length <= 0 {
			t.Fatalf("batch %d: empty shape (%d,%d)", g, b.Rows, b.Length)
		}
		padded += int64(b.Rows) * int64(b.Length)
		for _, pc := range b.Pieces {
			if pc.Index < 0 || pc.Index >= len(lengths) || pc.Start < 0 || pc.Len < 0 {
				t.Fatalf("batch %d: bad piece %+v", g, pc)
			}
			real += int64(pc.Len)
			cover[pc.Index] = append(cover[pc.Index], [2]int64{int64(pc.Start), int64(pc.Len)})
		}
		switch c.Policy {
		case Packed:
			if b.Length != c.SeqLen || b.Rows > c.BatchSize || len(b.RowStart) != b.Rows+1 {
				t.Fatalf("batch %d: shape (%d,%d) rowstart %d, want length %d rows ≤ %d", g, b.Rows, b.Length, len(b.RowStart), c.SeqLen, c.BatchSize)
			}
			if b.RowStart[0] != 0 || b.RowStart[b.Rows] != len(b.Pieces) {
				t.Fatalf("batch %d: RowStart %v for %d pieces", g, b.RowStart, len(b.Pieces))
			}
			for r := 0; r < b.Rows; r++ {
				if b.RowStart[r] > b.RowStart[r+1] {
					t.Fatalf("batch %d: RowStart not monotone %v", g, b.RowStart)
				}
				sum := 0
				for _, pc := range b.Pieces[b.RowStart[r]:b.RowStart[r+1]] {
					sum += pc.Len
				}
				if sum > c.SeqLen {
					t.Fatalf("batch %d row %d: %d tokens > seq_len %d", g, r, sum, c.SeqLen)
				}
			}
			if g < p.Len()-1 && b.Rows != c.BatchSize {
				t.Fatalf("batch %d of %d: %d rows, want %d", g, p.Len(), b.Rows, c.BatchSize)
			}
		default:
			if len(b.Pieces) != b.Rows || b.RowStart != nil {
				t.Fatalf("batch %d: %d pieces for %d rows", g, len(b.Pieces), b.Rows)
			}
			longest := int64(0)
			for _, pc := range b.Pieces {
				if pc.Start != 0 {
					t.Fatalf("batch %d: piece %+v does not start at 0", g, pc)
				}
				longest = max(longest, int64(pc.Len))
				if int64(pc.Len) > int64(b.Length) {
					t.Fatalf("batch %d: piece %+v longer than L=%d", g, pc, b.Length)
				}
			}
			if want := p.pd.pad(longest); int64(b.Length) != want {
				t.Fatalf("batch %d: L=%d, want pad(%d)=%d", g, b.Length, longest, want)
			}
			if c.Policy == Bucketed && b.Rows > c.BatchSize {
				t.Fatalf("batch %d: %d rows > batch_size %d", g, b.Rows, c.BatchSize)
			}
			if c.Policy == Tokens {
				if b.Rows*b.Length > c.TokenBudget {
					t.Fatalf("batch %d: %d×%d > token_budget %d", g, b.Rows, b.Length, c.TokenBudget)
				}
				if c.BatchSize > 0 && b.Rows > c.BatchSize {
					t.Fatalf("batch %d: %d rows > batch_size %d", g, b.Rows, c.BatchSize)
				}
			}
		}
	}
	// Coverage: each row's pieces tile [0, delivered) exactly.
	for i, l := range lengths {
		want := delivered(p, l)
		ps := cover[i]
		if len(ps) == 0 {
			t.Fatalf("row %d (length %d) missing from the plan", i, l)
		}
		if c.Policy != Packed || !c.SplitDocs {
			if len(ps) != 1 || ps[0][0] != 0 || ps[0][1] != want {
				t.Fatalf("row %d (length %d): pieces %v, want one piece [0,%d)", i, l, ps, want)
			}
			continue
		}
		slices.SortFunc(ps, func(a, b [2]int64) int { return int(a[0] - b[0]) })
		at := int64(0)
		for _, pc := range ps {
			if pc[0] != at || (pc[1] == 0 && want != 0) {
				t.Fatalf("row %d (length %d): pieces %v do not tile [0,%d)", i, l, ps, want)
			}
			at += pc[1]
		}
		if at != want {
			t.Fatalf("row %d (length %d): pieces %v cover %d tokens, want %d", i, l, ps, at, want)
		}
	}
	// Shapes and stats.
	got := p.Shapes()
	if len(got) != len(shapes) {
		t.Fatalf("Shapes() = %v, batches have %d distinct shapes", got, len(shapes))
	}
	for i, s := range got {
		if !shapes[s] {
			t.Fatalf("Shapes() lists %v, no batch has it", s)
		}
		if i > 0 && (s.Length > got[i-1].Length || s.Length == got[i-1].Length && s.Rows >= got[i-1].Rows) {
			t.Fatalf("Shapes() not in warm-up order: %v", got)
		}
	}
	st := p.Stats()
	if st.RealTokens != real || st.PaddedTokens != padded || st.Batches != p.Len() || st.Rows != len(lengths) || st.Shapes != len(shapes) {
		t.Fatalf("Stats %+v, counted real %d padded %d batches %d", st, real, padded, p.Len())
	}
	return batches
}
