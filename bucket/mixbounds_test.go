package bucket

import (
	"context"
	"errors"
	"math"
	"strings"
	"testing"
	"time"
)

// planOrTimeout runs NewMixtureContext and fails the test when it has not
// returned after a minute: planning that spins (issue 34) must fail the
// test, not hang it.
func planOrTimeout(t *testing.T, ctx context.Context, src []Source, epoch int, cfg Config, mc MixConfig) (*Mixture, error) {
	t.Helper()
	type result struct {
		m   *Mixture
		err error
	}
	done := make(chan result, 1)
	go func() {
		m, err := NewMixtureContext(ctx, src, 1, epoch, cfg, mc)
		done <- result{m, err}
	}()
	select {
	case r := <-done:
		return r.m, r.err
	case <-time.After(time.Minute):
		t.Fatalf("mixture planning (epoch %d, %+v) has not returned after a minute", epoch, mc)
		return nil, nil
	}
}

// TestMixtureBounds feeds mixture planning hostile epoch lengths, epochs and
// weights: each fails at once with ErrTooLarge or a config error naming the
// limit, before it allocates or walks anything of the asked size.
func TestMixtureBounds(t *testing.T) {
	small := func(w0, w1, w2 float64) []Source {
		return []Source{
			{Name: "web", Fingerprint: "fp-web", Lengths: uniformLengths(4000, 1, 300, 1), Weight: w0},
			{Name: "code", Fingerprint: "fp-code", Lengths: uniformLengths(1200, 200, 900, 2), Weight: w1},
			{Name: "math", Fingerprint: "fp-math", Lengths: uniformLengths(40, 5, 30, 3), Weight: w2},
		}
	}
	bucketed := Config{Policy: Bucketed, BatchSize: 8}
	for _, tc := range []struct {
		name  string
		src   []Source
		epoch int
		cfg   Config
		mc    MixConfig
		large bool // ErrTooLarge, else ErrConfig
		msg   string
	}{
		{"epoch_samples 2^63-1", small(6, 3, 1), 0, bucketed, MixConfig{EpochSamples: math.MaxInt64}, true,
			"at most 2147483647 rows per mixture epoch"},
		{"epoch_samples 2^62", small(6, 3, 1), 0, bucketed, MixConfig{EpochSamples: 1 << 62}, true,
			"at most 2147483647 rows per mixture epoch"},
		{"epoch_samples over MaxRows", small(6, 3, 1), 0, bucketed, MixConfig{EpochSamples: 1 << 20, MaxRows: 1 << 16}, true,
			"mixture epoch of 1048576 rows: bucket: too large (at most 65536 rows per mixture epoch)"},
		{"default epoch over MaxRows", small(6, 3, 1), 0, bucketed, MixConfig{MaxRows: 1000}, true,
			"mixture epoch of 5240 rows: bucket: too large (at most 1000 rows per mixture epoch)"},
		{"epoch_until of a tiny weight", small(1, 1, 1e-9), 0, bucketed, MixConfig{EpochUntil: "math"}, true,
			"at most 2147483647 rows per mixture epoch"},
		{"weight rounding to zero", small(1, 1, 1e-13), 0, bucketed, MixConfig{EpochUntil: "math"}, false,
			`source "math": weight 1e-13 is less than 1e-12 of the sum`},
		{"weight denormal", small(1e-300, 1, 5e-324), 0, bucketed, MixConfig{}, false,
			`source "web": weight 1e-300 is less than 1e-12 of the sum`},
		{"epoch_tokens 2^63-1", small(6, 3, 1), 0, bucketed, MixConfig{MixBy: MixTokens, EpochTokens: math.MaxInt64}, true,
			"at most 2147483647 rows per mixture epoch"},
		{"epoch_tokens 2^40", small(6, 3, 1), 0, bucketed, MixConfig{MixBy: MixTokens, EpochTokens: 1 << 40}, true,
			"at most 2147483647 rows per mixture epoch"},
		{"epoch_tokens over MaxRows", small(6, 3, 1), 0, bucketed, MixConfig{MixBy: MixTokens, EpochTokens: 1 << 24, MaxRows: 1 << 16}, true,
			"at most 65536 rows per mixture epoch"},
		{"tokens epoch_until tiny weight", small(1, 1, 1e-11), 0, bucketed, MixConfig{MixBy: MixTokens, EpochUntil: "math"}, true,
			"at most 2147483647 rows per mixture epoch"},
		{"tokens epoch 2^32-1", small(6, 3, 1), math.MaxUint32, bucketed, MixConfig{MixBy: MixTokens}, true,
			"found by walking at least"},
		{"tokens epoch 1e6", small(6, 3, 1), 1_000_000, bucketed, MixConfig{MixBy: MixTokens}, true,
			"at most 2147483648"},
		{"tokens epoch over MaxReplay", small(6, 3, 1), 100, bucketed, MixConfig{MixBy: MixTokens, MaxReplay: 10_000}, true,
			"at most 10000)"},
		{"samples stream position overflow", small(6, 3, 1), math.MaxInt64 / 1000, bucketed, MixConfig{}, true,
			"stream position passes 2^63"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := planOrTimeout(t, t.Context(), tc.src, tc.epoch, tc.cfg, tc.mc)
			if err == nil || !strings.Contains(err.Error(), tc.msg) {
				t.Fatalf("error %v, want one containing %q", err, tc.msg)
			}
			if want := map[bool]error{true: ErrTooLarge, false: ErrConfig}[tc.large]; !errors.Is(err, want) {
				t.Fatalf("%v does not match %v", err, want)
			}
		})
	}
}

// TestMixtureBoundsFit: inputs at the limits still plan, and a limit does not
// change the plan (MaxRows and MaxReplay are not part of the fingerprint).
func TestMixtureBoundsFit(t *testing.T) {
	src := threeSources(6, 3, 1)
	cfg := Config{Policy: Bucketed, BatchSize: 8}
	a, err := planOrTimeout(t, t.Context(), src, 3, cfg, MixConfig{MixBy: MixTokens})
	if err != nil {
		t.Fatal(err)
	}
	var rows int64
	for _, sh := range a.Shares() {
		rows += sh.Rows
	}
	b, err := planOrTimeout(t, t.Context(), src, 3, cfg, MixConfig{MixBy: MixTokens, MaxRows: rows, MaxReplay: 3 * 2 * rows})
	if err != nil {
		t.Fatal(err)
	}
	if a.Fingerprint() != b.Fingerprint() || a.Plan().Hash() != b.Plan().Hash() {
		t.Fatal("limits changed the plan")
	}
	if _, err := planOrTimeout(t, t.Context(), src, 3, cfg, MixConfig{MixBy: MixTokens, MaxRows: rows - 1}); !errors.Is(err, ErrTooLarge) {
		t.Fatalf("one row under the epoch: %v, want ErrTooLarge", err)
	}
	// Samples: an epoch of exactly MaxRows rows plans.
	if _, err := planOrTimeout(t, t.Context(), src, 0, cfg, MixConfig{EpochSamples: 5000, MaxRows: 5000}); err != nil {
		t.Fatal(err)
	}
}

// TestMixtureCancel: planning stops once its context is done, under both
// measures, and says why.
func TestMixtureCancel(t *testing.T) {
	src := threeSources(6, 3, 1)
	cfg := Config{Policy: Bucketed, BatchSize: 8}
	cause := errors.New("client left")
	ctx, cancel := context.WithCancelCause(t.Context())
	cancel(cause)
	for _, tc := range []struct {
		name  string
		epoch int
		mc    MixConfig
	}{
		{"samples", 0, MixConfig{EpochSamples: 1 << 22}},
		{"tokens replay", 50, MixConfig{MixBy: MixTokens}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := planOrTimeout(t, ctx, src, tc.epoch, cfg, tc.mc)
			if !errors.Is(err, cause) {
				t.Fatalf("error %v, want the context's cause", err)
			}
		})
	}
}
