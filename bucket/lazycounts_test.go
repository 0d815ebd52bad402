package bucket

import (
	"reflect"
	"slices"
	"strings"
	"testing"
)

// TestLazyTokensCounts: a tokens plan's counts, kept and given back, plan the same epoch (hash, length, batches,
// stats, bound) without the counting pass; their encoding round-trips and refuses corruption; counts of another plan,
// of another window count, or that disagree with the lengths in a checked window are refused, naming why; bucketed
// plans have no counts.
func TestLazyTokensCounts(t *testing.T) {
	l := Synthetic{Rows: 2_300_000, Seed: 5}
	cfg := Config{Policy: Tokens, TokenBudget: 1 << 16, WarmupShapes: true, PlanWorld: 2}
	p, err := NewLazyPlan(l, "fp", 1, 3, cfg, Parallel)
	if err != nil {
		t.Fatal(err)
	}
	c, ok := p.Counts()
	if !ok || len(c.Batches) != p.windows() {
		t.Fatalf("Counts: %v, %d windows; want %d", ok, len(c.Batches), p.windows())
	}
	if key, err := LazyTokensKey(l.Len(), "fp", 1, 3, cfg); err != nil || key != c.Key {
		t.Fatalf("LazyTokensKey = %q, %v; the plan's counts say %q", key, err, c.Key)
	}
	enc, err := c.MarshalBinary()
	if err != nil {
		t.Fatal(err)
	}
	var back TokensCounts
	if err := back.UnmarshalBinary(enc); err != nil || !reflect.DeepEqual(back, c) {
		t.Fatalf("round trip: %v, %+v want %+v", err, back, c)
	}
	q, err := NewLazyPlanFrom(l, "fp", 1, 3, cfg, back, Parallel)
	if err != nil {
		t.Fatal(err)
	}
	if q.Hash() != p.Hash() || q.Len() != p.Len() || q.Stats() != p.Stats() || q.Bound() != p.Bound() {
		t.Fatalf("from counts: hash %s, %d batches, stats %+v; want %s, %d, %+v", q.Hash(), q.Len(), q.Stats(), p.Hash(), p.Len(), p.Stats())
	}
	for _, g := range []int{0, 1, p.Len() / 2, p.Len() - 1} {
		if !reflect.DeepEqual(q.Batch(g), p.Batch(g)) {
			t.Fatalf("batch %d differs from the counted plan's", g)
		}
	}

	for i := range enc {
		bad := slices.Clone(enc)
		bad[i] ^= 0x10
		if err := new(TokensCounts).UnmarshalBinary(bad); err == nil {
			t.Fatalf("byte %d flipped: accepted", i)
		}
	}
	if err := new(TokensCounts).UnmarshalBinary(enc[:len(enc)-1]); err == nil {
		t.Fatal("truncated counts accepted")
	}
	if packed, _ := (PackedCounts{Key: c.Key, Rows: c.Batches}).MarshalBinary(); new(TokensCounts).UnmarshalBinary(packed) == nil {
		t.Fatal("packed counts accepted as tokens counts")
	}

	for _, tc := range []struct {
		name string
		mod  func(c *TokensCounts)
	}{
		{"window 0 off by one", func(c *TokensCounts) { c.Batches[0]++ }},
		{"a checked window off by one", func(c *TokensCounts) { c.Batches[p.checkedWindow(0)]-- }},
		{"one window short", func(c *TokensCounts) { c.Batches = c.Batches[1:] }},
		{"another key", func(c *TokensCounts) { c.Key += "x" }},
	} {
		bad := TokensCounts{Key: c.Key, Batches: slices.Clone(c.Batches)}
		tc.mod(&bad)
		if _, err := NewLazyPlanFrom(l, "fp", 1, 3, cfg, bad, nil); err == nil {
			t.Errorf("%s: accepted", tc.name)
		}
	}
	if _, err := NewLazyPlanFrom(l, "fp", 1, 4, cfg, c, nil); err == nil {
		t.Error("counts of epoch 3 accepted for epoch 4")
	}
	b, err := NewLazyPlan(l, "fp", 1, 3, Config{BatchSize: 8}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := b.Counts(); ok {
		t.Error("a bucketed plan returned counts")
	}
	if _, err := LazyTokensKey(l.Len(), "fp", 1, 3, Config{BatchSize: 8}); err == nil {
		t.Error("LazyTokensKey of a bucketed plan")
	}
}

// checkedWindow is the i-th window NewLazyPlanFrom builds again beside window 0.
func (p *LazyPlan) checkedWindow(i int) int {
	return int(splitmixAt(p.keyBatch, uint64(1)<<32+uint64(i)) % uint64(p.windows()))
}

func FuzzTokensCountsUnmarshal(f *testing.F) {
	for _, c := range []TokensCounts{{}, {Key: "k", Batches: []int32{1, 2, 3}}} {
		b, _ := c.MarshalBinary()
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		var c TokensCounts
		if err := c.UnmarshalBinary(b); err != nil {
			return
		}
		again, _ := c.MarshalBinary()
		if !slices.Equal(again, b) {
			t.Fatalf("decoded %+v re-encodes differently", c)
		}
	})
}

// zeroedBlock reads as a dataset index does when one block fails its check: 0 for each row of [lo, hi).
type zeroedBlock struct {
	Lengths
	lo, hi int64
}

func (z zeroedBlock) Length(i int64) uint32 {
	if i >= z.lo && i < z.hi {
		return 0
	}
	return z.Lengths.Length(i)
}

// TestLazyTokensCountsFromOtherLengths: counts counted over other lengths (one block read as zeros) given for the
// real ones are refused by NewLazyPlanFrom when a checked window differs, and otherwise make Batch panic, naming the
// window, at the first batch of a window that differs: a plan from them never serves an epoch that drops rows.
func TestLazyTokensCountsFromOtherLengths(t *testing.T) {
	real := Synthetic{Rows: 6_300_000, Seed: 5}
	cfg := Config{Policy: Tokens, TokenBudget: 1 << 16}
	for blk := int64(1); blk < 8; blk++ {
		bad := zeroedBlock{Lengths: real, lo: blk * 7 * LazyBlockRows, hi: (blk*7 + 1) * LazyBlockRows}
		counted, err := NewLazyPlan(bad, "fp", 3, 1, cfg, Parallel)
		if err != nil {
			t.Fatal(err)
		}
		c, _ := counted.Counts()
		p, err := NewLazyPlanFrom(real, "fp", 3, 1, cfg, c, Parallel)
		if err != nil {
			continue // a checked window differed
		}
		panicked := func() (msg any) {
			defer func() { msg = recover() }()
			for g := range p.Len() {
				p.Batch(g)
			}
			return nil
		}()
		if panicked == nil {
			t.Fatalf("block at row %d: a plan from counts of other lengths served every batch", bad.lo)
		}
		if s, _ := panicked.(string); !strings.Contains(s, "counts not made for these lengths") {
			t.Fatalf("block at row %d: Batch panicked with %v; want the counts named", bad.lo, panicked)
		}
	}
}
