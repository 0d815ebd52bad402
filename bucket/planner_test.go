package bucket

import (
	"context"
	"errors"
	"math"
	"strings"
	"testing"
)

// TestPlannerChoice: Config.Planner overrides the size rule of NewEpochPlan and NewEpochMixture. "lazy" plans a
// small dataset with the plan the size rule uses past LazyThreshold (same hash as the lazy constructor's), "exact"
// plans a large one with NewPlan, "auto" and "" keep the size rule, and what a lazy planner cannot plan is an
// error naming the planner, never a silent exact plan.
func TestPlannerChoice(t *testing.T) {
	bk := Config{Policy: Bucketed, BatchSize: 8}
	tok := Config{Policy: Tokens, TokenBudget: 1 << 16}
	pk := Config{Policy: Packed, BatchSize: 4, SeqLen: 2048}
	with := func(c Config, p Planner) Config { c.Planner = p; return c }
	for _, tc := range []struct {
		n    int64
		cfg  Config
		want string
	}{
		{10_000, bk, "exact"},
		{10_000, with(bk, PlannerAuto), "exact"},
		{10_000, with(bk, PlannerLazy), "lazy"},
		{10_000, with(tok, PlannerLazy), "lazy"},
		{10_000, with(pk, PlannerLazy), "lazy-packed"},
		{10_000, with(Config{BatchSize: 8, Sequential: true}, PlannerLazy), "lazy-sequential"},
		{LazyThreshold + 1, with(bk, PlannerExact), "exact"},
		{LazyThreshold + 1, with(bk, PlannerAuto), "lazy"},
		{LazyThreshold + 1, with(pk, PlannerExact), "exact"},
	} {
		if got := EpochPlanner(tc.n, tc.cfg); got != tc.want {
			t.Errorf("EpochPlanner(%d, %s/%q) = %s, want %s", tc.n, tc.cfg.Policy, tc.cfg.Planner, got, tc.want)
		}
	}

	lengths := Synthetic{Rows: 10_000, Seed: 3}
	for _, c := range []Config{bk, tok} {
		ep, err := NewEpochPlan(lengths, "fp", 1, 2, with(c, PlannerLazy), nil)
		if err != nil {
			t.Fatal(err)
		}
		ref, err := NewLazyPlan(lengths, "fp", 1, 2, c, nil)
		if err != nil {
			t.Fatal(err)
		}
		if lp, ok := ep.(*LazyPlan); !ok || lp.Hash() != ref.Hash() || lp.Len() != ref.Len() {
			t.Fatalf("%s, planner lazy: %T, want the lazy plan %s", c.Policy, ep, ref.Hash())
		}
		exact, err := NewPlan(lengthsSlice(lengths), "fp", 1, 2, c)
		if err != nil {
			t.Fatal(err)
		}
		for _, p := range []Planner{"", PlannerAuto, PlannerExact} {
			ep, err := NewEpochPlan(lengths, "fp", 1, 2, with(c, p), nil)
			if err != nil || ep.Hash() != exact.Hash() {
				t.Fatalf("%s, planner %q: %v, hash %s, want the exact plan's %s", c.Policy, p, err, ep.Hash(), exact.Hash())
			}
		}
	}
	ep, err := NewEpochPlan(lengths, "fp", 1, 0, with(pk, PlannerLazy), nil)
	if _, ok := ep.(*LazyPacked); err != nil || !ok {
		t.Fatalf("packed, planner lazy: %T, %v", ep, err)
	}

	for _, tc := range []struct {
		name  string
		cfg   Config
		field string // the ConfigError's field
	}{
		{"unknown planner", with(bk, "fast"), "planner"},
		{"lazy sequential tokens", with(Config{Policy: Tokens, TokenBudget: 4096, Sequential: true}, PlannerLazy), "planner"},
		{"lazy auto buckets", with(Config{BatchSize: 8, AutoBuckets: 4}, PlannerLazy), "auto_buckets"},
		{"lazy shuffle window", with(Config{BatchSize: 8, ShuffleWindow: 100}, PlannerLazy), "shuffle_window"},
		{"lazy sequential packed", with(Config{Policy: Packed, SeqLen: 512, BatchSize: 2, Sequential: true}, PlannerLazy), "sequential"},
		{"lazy unknown policy", with(Config{Policy: "sorted", BatchSize: 2, Sequential: true}, PlannerLazy), "policy"},
	} {
		_, err := NewEpochPlan(lengths, "fp", 1, 0, tc.cfg, nil)
		var ce *ConfigError
		if !errors.Is(err, ErrConfig) || !errors.As(err, &ce) || ce.Field != tc.field {
			t.Errorf("%s: %v, want a ConfigError about %s", tc.name, err, tc.field)
		}
	}
	if _, err := NewEpochPlan(hashLengths{n: math.MaxInt32 + 1, max: 10}, "fp", 1, 0, with(bk, PlannerExact), nil); !errors.Is(err, ErrTooLarge) || !strings.Contains(err.Error(), "exact plans: at most") {
		t.Errorf("planner exact past 2^31−1 rows: %v, want ErrTooLarge saying exact plans' limit", err)
	}
}

// TestPlannerChoiceMixture: the same override for mixtures.
func TestPlannerChoiceMixture(t *testing.T) {
	exactSrc := threeSources(0.6, 0.3, 0.1)
	src := asMixSources(exactSrc)
	cfg := DefaultConfig()
	cfg.BatchSize = 16
	ctx := context.Background()
	ref := mustLazyMix(t, src, 7, 1, cfg, MixConfig{}, nil)
	lazy := cfg
	lazy.Planner = PlannerLazy
	mp, err := NewEpochMixture(ctx, src, 7, 1, lazy, MixConfig{}, nil)
	if lm, ok := mp.(*LazyMixture); err != nil || !ok || lm.Hash() != ref.Hash() {
		t.Fatalf("planner lazy: %T, %v; want the lazy mixture %s", mp, err, ref.Hash())
	}
	if _, err := NewEpochMixture(ctx, src, 7, 1, lazy, MixConfig{MixBy: MixTokens}, nil); !errors.Is(err, ErrConfig) {
		t.Fatalf("planner lazy, mix_by tokens: %v, want ErrConfig", err)
	}
	exact := cfg
	exact.Planner = PlannerExact
	big := []MixSource{{Name: "big", Fingerprint: "fp-big", Lengths: Synthetic{Rows: 1 << 31, Seed: 1}, Weight: 1}, src[2]}
	if _, err := NewEpochMixture(ctx, big, 7, 0, exact, MixConfig{EpochSamples: 100_000}, nil); !errors.Is(err, ErrTooLarge) {
		t.Fatalf("planner exact, a source of 2^31 rows: %v, want ErrTooLarge", err)
	}
}
