package bucket

import (
	"errors"
	"slices"
	"testing"
)

// A lazy sequential plan has the batches of the exact sequential plan, whatever the padding policy.
func TestSeqPlanMatchesExact(t *testing.T) {
	syn := Synthetic{Rows: 10_007, Seed: 3}
	lengths := make([]uint32, syn.Rows)
	for i := range lengths {
		lengths[i] = syn.Length(int64(i))
	}
	cases := []struct {
		name string
		edit func(*Config)
	}{
		{"plain", func(*Config) {}},
		{"max length", func(c *Config) { c.MaxLength = 512 }},
		{"pad multiple", func(c *Config) { c.PadMultiple = 64 }},
		{"boundaries", func(c *Config) { c.Boundaries = []int{128, 1024, 8192}; c.MaxLength = 8192 }},
		{"keep", func(c *Config) { c.Remainder = Keep; c.BatchSize = 7 }},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			cfg := DefaultConfig()
			cfg.BatchSize = 16
			cfg.Sequential = true
			tc.edit(&cfg)
			exact, err := NewPlan(lengths, "fp", 1, 0, cfg)
			if err != nil {
				t.Fatal(err)
			}
			lazy, err := NewSeqPlan(SliceLengths(lengths), "fp", cfg)
			if err != nil {
				t.Fatal(err)
			}
			if lazy.Len() != exact.Len() {
				t.Fatalf("%d batches, exact %d", lazy.Len(), exact.Len())
			}
			bound := lazy.Bound()
			for g := range exact.Len() {
				a, b := lazy.Batch(g), exact.Batch(g)
				if a.Rows != b.Rows || a.Length != b.Length || !slices.Equal(a.Pieces, b.Pieces) {
					t.Fatalf("batch %d: lazy %d×%d %v, exact %d×%d %v", g, a.Rows, a.Length, a.Pieces, b.Rows, b.Length, b.Pieces)
				}
				if a.Rows > bound.Rows || a.Length > bound.Length {
					t.Fatalf("batch %d (%d×%d) outside the bound %+v", g, a.Rows, a.Length, bound)
				}
			}
			for _, w := range []int{1, 3, 8} {
				for r := range w {
					x, _ := lazy.Assign(5, r, w, 0, 1)
					y, _ := exact.Assign(5, r, w, 0, 1)
					if !slices.Equal(x, y) {
						t.Fatalf("world %d rank %d: assignments differ", w, r)
					}
				}
			}
		})
	}
}

func TestNewEpochPlanSequentialPastThreshold(t *testing.T) {
	cfg := DefaultConfig()
	cfg.BatchSize = 32
	cfg.Sequential = true
	p, err := NewEpochPlan(Synthetic{Rows: LazyThreshold + 5}, "fp", 1, 0, cfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	sp, ok := p.(*SeqPlan)
	if !ok {
		t.Fatalf("%T", p)
	}
	if sp.Len() != LazyThreshold/32+1 {
		t.Fatalf("%d batches", sp.Len())
	}
	if last := sp.Batch(sp.Len() - 1); last.Rows != 5 || last.Pieces[4].Index != LazyThreshold+4 {
		t.Fatalf("last batch %+v", last)
	}
	cfg.Policy, cfg.BatchSize, cfg.TokenBudget = Tokens, 0, 1<<16
	if _, err := NewEpochPlan(Synthetic{Rows: 1 << 31}, "fp", 1, 0, cfg, nil); !errors.Is(err, ErrTooLarge) {
		t.Fatalf("a sequential tokens plan of 2^31 rows: %v, want ErrTooLarge (exact plans only)", err)
	}
}
