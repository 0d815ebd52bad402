package bucket

import (
	"errors"
	"fmt"
	"math"
	"testing"
)

// threeSources are the test mixture: sizes 20000, 6000 and 200 (one
// 100× smaller than another), with very different length distributions.
func threeSources(w0, w1, w2 float64) []Source {
	return []Source{
		{Name: "web", Fingerprint: "fp-web", Lengths: logNormalLengths(20000, 300, 0.8, 4000, 11), Weight: w0},
		{Name: "code", Fingerprint: "fp-code", Lengths: logNormalLengths(6000, 1200, 1.0, 8000, 12), Weight: w1},
		{Name: "math", Fingerprint: "fp-math", Lengths: uniformLengths(200, 20, 120, 13), Weight: w2},
	}
}

func mustMix(t testing.TB, src []Source, seed uint64, epoch int, cfg Config, mc MixConfig) *Mixture {
	t.Helper()
	m, err := NewMixture(src, seed, epoch, cfg, mc)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// sourceRows returns, per batch, the rows (or documents) of each source.
func perBatchCounts(m *Mixture, nsrc int, tokens bool) [][]int64 {
	out := make([][]int64, m.Len())
	for g := range out {
		out[g] = make([]int64, nsrc)
		for _, p := range m.Batch(g).Pieces {
			if tokens {
				out[g][p.Source] += int64(p.Len)
			} else {
				out[g][p.Source]++
			}
		}
	}
	return out
}

// maxWindowError returns, over every window of w consecutive batches, the
// largest |count − share·total| in rows (or tokens) of any source.
func maxWindowError(counts [][]int64, share []float64, w int) float64 {
	var worst float64
	for g0 := 0; g0+w <= len(counts); g0++ {
		sum := make([]int64, len(share))
		var all int64
		for _, c := range counts[g0 : g0+w] {
			for s, v := range c {
				sum[s] += v
				all += v
			}
		}
		for s := range share {
			worst = max(worst, math.Abs(float64(sum[s])-share[s]*float64(all)))
		}
	}
	return worst
}

func TestMixtureSharesBucketed(t *testing.T) {
	src := threeSources(0.6, 0.3, 0.1)
	cfg := DefaultConfig()
	cfg.BatchSize = 16
	m := mustMix(t, src, 7, 0, cfg, MixConfig{})
	sh := m.Shares()
	n := int64(20000 + 6000 + 200)
	want := []int64{15720, 7860, 2620} // 0.6, 0.3, 0.1 of 26200
	for i, s := range sh {
		if s.Rows != want[i] {
			t.Errorf("%s: %d rows in the epoch, want %d", s.Name, s.Rows, want[i])
		}
	}
	if m.Stats().Rows != int(n) {
		t.Fatalf("epoch of %d slots, want %d", m.Stats().Rows, n)
	}
	counts := perBatchCounts(m, 3, false)
	share := []float64{0.6, 0.3, 0.1}
	for _, w := range []int{1, 2, 10, 100, len(counts)} {
		if e := maxWindowError(counts, share, w); e > 2 {
			t.Errorf("window of %d batches: a source is %.2f rows off its share (bound 2)", w, e)
		}
	}
	// Every slot exactly once.
	seen := map[[2]int]int{}
	for g := range m.Len() {
		for _, p := range m.Batch(g).Pieces {
			seen[[2]int{p.Source, p.Index}]++
		}
	}
	// web is downsampled (0.786 passes): every row at most once; code
	// (1.31 passes) once or twice; math (200 rows, 2620 slots, 13.1 passes)
	// 13 or 14 times.
	allowed := [][2]int{{1, 1}, {1, 2}, {13, 14}}
	for k, c := range seen {
		if a := allowed[k[0]]; c != a[0] && c != a[1] {
			t.Fatalf("%s row %d delivered %d times in one epoch, want %d or %d", src[k[0]].Name, k[1], c, a[0], a[1])
		}
	}
	if len(seen) != 15720+6000+200 {
		t.Fatalf("%d distinct rows, want %d", len(seen), 15720+6000+200)
	}
}

// TestMixturePrefixDiscrepancy checks the interleave's bound: after any
// prefix of i slots every source has taken within one row of i·c/N.
func TestMixturePrefixDiscrepancy(t *testing.T) {
	r := newRNG(99)
	for trial := range 200 {
		k := 2 + int(r.below(7))
		src := make([]Source, k)
		for i := range src {
			src[i] = Source{Name: fmt.Sprint("s", i), Fingerprint: fmt.Sprint("f", i),
				Lengths: uniformLengths(1+int(r.below(300)), 1, 50, uint64(trial*10+i)), Weight: float64(1 + r.below(1000))}
		}
		cfg := DefaultConfig()
		cfg.BatchSize = 4
		m := mustMix(t, src, 1, 0, cfg, MixConfig{})
		n := float64(len(m.src))
		taken := make([]float64, k)
		sh := m.Shares()
		for i, s := range m.src {
			taken[s]++
			for j := range k {
				if d := math.Abs(taken[j] - float64(i+1)*float64(sh[j].Rows)/n); d >= 1 {
					t.Fatalf("trial %d: source %d is %.3f rows off after %d slots", trial, j, d, i+1)
				}
			}
		}
	}
}

// TestMixtureNoRepeatBeforeWrap walks three epochs: each source's rows, in
// stream order, form whole permutations pass after pass.
func TestMixtureNoRepeatBeforeWrap(t *testing.T) {
	src := threeSources(0.6, 0.3, 0.1)
	cfg := DefaultConfig()
	cfg.BatchSize = 16
	stream := make([][]int32, 3)
	for e := range 3 {
		m := mustMix(t, src, 3, e, cfg, MixConfig{})
		for i, s := range m.Shares() {
			if s.Start != int64(len(stream[i])) {
				t.Fatalf("epoch %d %s starts at %d, want %d", e, s.Name, s.Start, len(stream[i]))
			}
		}
		for slot, s := range m.src {
			stream[s] = append(stream[s], m.row[slot])
		}
	}
	for i, rows := range stream {
		n := len(src[i].Lengths)
		for p0 := 0; p0 < len(rows); p0 += n {
			seen := make(map[int32]bool, n)
			for _, r := range rows[p0:min(p0+n, len(rows))] {
				if seen[r] {
					t.Fatalf("%s: row %d repeats inside pass %d", src[i].Name, r, p0/n)
				}
				seen[r] = true
			}
		}
	}
	// web (20000 rows, 15720 per epoch) in epoch 1 finishes its first pass
	// and starts its second: the first 4280 rows of epoch 1 are the rows
	// epoch 0 did not take.
	if len(stream[0]) < 20000 {
		t.Fatal("web did not wrap in three epochs")
	}
}

func TestMixtureDeterministic(t *testing.T) {
	cfg := DefaultConfig()
	cfg.BatchSize = 8
	a := mustMix(t, threeSources(0.6, 0.3, 0.1), 5, 2, cfg, MixConfig{})
	b := mustMix(t, threeSources(6, 3, 1), 5, 2, cfg, MixConfig{}) // normalised: the same mixture
	if a.Fingerprint() != b.Fingerprint() || a.Len() != b.Len() {
		t.Fatalf("normalised weights plan differently: %s vs %s", a.Fingerprint(), b.Fingerprint())
	}
	for g := range a.Len() {
		if fmt.Sprint(a.Batch(g)) != fmt.Sprint(b.Batch(g)) {
			t.Fatalf("batch %d differs", g)
		}
	}
	c := mustMix(t, threeSources(0.5, 0.4, 0.1), 5, 2, cfg, MixConfig{})
	if c.Fingerprint() == a.Fingerprint() {
		t.Fatal("other weights, same fingerprint")
	}
}

func TestMixtureTokens(t *testing.T) {
	for _, policy := range []Policy{Bucketed, Packed} {
		t.Run(string(policy), func(t *testing.T) {
			src := threeSources(0.6, 0.3, 0.1)
			cfg := DefaultConfig()
			cfg.Policy = policy
			cfg.BatchSize = 8
			if policy == Packed {
				cfg.SeqLen = 8192
				cfg.SplitDocs = true
			}
			m := mustMix(t, src, 9, 1, cfg, MixConfig{MixBy: MixTokens})
			counts := perBatchCounts(m, 3, true)
			total := make([]int64, 3)
			var all int64
			for _, c := range counts {
				for s, v := range c {
					total[s] += v
					all += v
				}
			}
			for s, w := range []float64{0.6, 0.3, 0.1} {
				got := float64(total[s]) / float64(all)
				if math.Abs(got-w) > 0.001 {
					t.Errorf("%s: %.5f of the epoch's tokens, want %.1f ± 0.001", src[s].Name, got, w)
				}
			}
		})
	}
}

func TestMixturePacked(t *testing.T) {
	src := threeSources(0.6, 0.3, 0.1)
	cfg := DefaultConfig()
	cfg.Policy = Packed
	cfg.BatchSize = 4
	cfg.SeqLen = 4096
	cfg.MegaBatchMult = 4
	m := mustMix(t, src, 1, 0, cfg, MixConfig{})
	counts := perBatchCounts(m, 3, false)
	var docs int64
	for _, c := range counts {
		for _, v := range c {
			docs += v
		}
	}
	if docs != int64(m.Stats().Rows) {
		t.Fatalf("%d documents in the batches, %d slots planned", docs, m.Stats().Rows)
	}
	// The stated bound: within 2 + 2·D documents over any window, D being
	// the most documents of one pack window.
	share := []float64{0.6, 0.3, 0.1}
	win := m.plan.packWindows(m.plan.lengthsOfSlots(m), int64(cfg.SeqLen))
	d := 0
	for i := 1; i < len(win); i++ {
		d = max(d, win[i]-win[i-1])
	}
	for _, w := range []int{1, 8, 64, len(counts)} {
		if e := maxWindowError(counts, share, w); e > float64(2+2*d) {
			t.Errorf("windows of %d packed batches: %.1f documents off (bound %d)", w, e, 2+2*d)
		}
	}
	for g := range m.Len() {
		b := m.Batch(g)
		for r := range b.Rows {
			sum := 0
			for _, p := range b.Pieces[b.RowStart[r]:b.RowStart[r+1]] {
				sum += p.Len
				if p.Index >= len(src[p.Source].Lengths) {
					t.Fatalf("batch %d: row %d beyond source %d", g, p.Index, p.Source)
				}
			}
			if sum > cfg.SeqLen {
				t.Fatalf("batch %d row %d: %d tokens", g, r, sum)
			}
		}
	}
}

func TestMixtureEpochLength(t *testing.T) {
	cfg := DefaultConfig()
	cfg.BatchSize = 16
	cases := []struct {
		name string
		mc   MixConfig
		want []int64
	}{
		{"samples", MixConfig{EpochSamples: 1000}, []int64{600, 300, 100}},
		{"until math", MixConfig{EpochUntil: "math"}, []int64{1200, 600, 200}},
		{"until code", MixConfig{EpochUntil: "code"}, []int64{12000, 6000, 2000}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			m := mustMix(t, threeSources(0.6, 0.3, 0.1), 1, 0, cfg, tc.mc)
			for i, s := range m.Shares() {
				if s.Rows != tc.want[i] {
					t.Errorf("%s: %d rows, want %d", s.Name, s.Rows, tc.want[i])
				}
			}
		})
	}
	// Until S under tokens: S is seen exactly once per epoch.
	for e := range 3 {
		m := mustMix(t, threeSources(0.6, 0.3, 0.1), 1, e, cfg, MixConfig{MixBy: MixTokens, EpochUntil: "math"})
		if s := m.Shares()[2]; s.Rows != 200 || s.Start != int64(200*e) {
			t.Errorf("epoch %d: math %d rows from %d, want 200 from %d", e, s.Rows, s.Start, 200*e)
		}
	}
}

func TestMixtureZeroWeight(t *testing.T) {
	cfg := DefaultConfig()
	cfg.BatchSize = 16
	m := mustMix(t, threeSources(0.6, 0.4, 0), 1, 0, cfg, MixConfig{})
	if s := m.Shares()[2]; s.Rows != 0 {
		t.Fatalf("a source of weight 0 got %d rows", s.Rows)
	}
}

func TestMixtureErrors(t *testing.T) {
	cfg := DefaultConfig()
	cfg.BatchSize = 16
	empty := threeSources(1, 1, 1)
	empty[1].Lengths = nil
	dup := threeSources(1, 1, 1)
	dup[2].Name = "web"
	noName := threeSources(1, 1, 1)
	noName[0].Name = ""
	zeroTok := threeSources(1, 1, 1)
	zeroTok[2].Lengths = make([]uint32, 10)
	cases := []struct {
		name string
		src  []Source
		mc   MixConfig
		msg  string
	}{
		{"no sources", nil, MixConfig{}, "bucket: mixture: has no sources"},
		{"all zero", threeSources(0, 0, 0), MixConfig{}, "bucket: mixture: weights sum to 0; at least one must be > 0"},
		{"negative", threeSources(0.5, -0.1, 0.6), MixConfig{}, `bucket: mixture: source "code": weight -0.1 must be a finite number >= 0`},
		{"nan", threeSources(0.5, math.NaN(), 0.6), MixConfig{}, `bucket: mixture: source "code": weight NaN must be a finite number >= 0`},
		{"empty source", empty, MixConfig{}, `bucket: mixture: source "code" has weight 1 but no rows`},
		{"duplicate", dup, MixConfig{}, `bucket: mixture: source "web" is named twice`},
		{"no name", noName, MixConfig{}, "bucket: mixture: source 0 has no name"},
		{"mix_by", threeSources(1, 1, 1), MixConfig{MixBy: "bytes"}, `bucket: mix_by: unknown value "bytes" (want samples or tokens)`},
		{"until unknown", threeSources(1, 1, 1), MixConfig{EpochUntil: "chat"}, `bucket: epoch_until: "chat" is not a source of the mixture`},
		{"until zero", threeSources(1, 1, 0), MixConfig{EpochUntil: "math"}, `bucket: epoch_until: source "math" has weight 0: it is never exhausted`},
		{"two lengths", threeSources(1, 1, 1), MixConfig{EpochSamples: 5, EpochUntil: "math"}, "bucket: epoch_until: give at most one of epoch_samples, epoch_tokens and epoch_until"},
		{"samples under tokens", threeSources(1, 1, 1), MixConfig{MixBy: MixTokens, EpochSamples: 5}, "bucket: epoch_samples: measures rows: with mix_by=tokens give epoch_tokens"},
		{"tokens under samples", threeSources(1, 1, 1), MixConfig{EpochTokens: 5}, "bucket: epoch_tokens: only with mix_by=tokens (mix_by is samples)"},
		{"no tokens", zeroTok, MixConfig{MixBy: MixTokens}, `bucket: mixture: source "math" has no tokens to give its token share`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := NewMixture(tc.src, 1, 0, cfg, tc.mc)
			if err == nil || err.Error() != tc.msg {
				t.Fatalf("error %v, want %q", err, tc.msg)
			}
			if !errors.Is(err, ErrConfig) {
				t.Fatalf("%v does not match ErrConfig", err)
			}
		})
	}
}

// TestMixtureTokensPolicy plans the token-budget policy over a mixture:
// every batch within budget, every slot delivered once.
func TestMixtureTokensPolicy(t *testing.T) {
	src := threeSources(0.6, 0.3, 0.1)
	cfg := DefaultConfig()
	cfg.Policy = Tokens
	cfg.TokenBudget = 16384
	m := mustMix(t, src, 2, 0, cfg, MixConfig{})
	var rows int
	for g := range m.Len() {
		b := m.Batch(g)
		if b.Rows*b.Length > cfg.TokenBudget {
			t.Fatalf("batch %d: %d×%d over budget", g, b.Rows, b.Length)
		}
		rows += b.Rows
	}
	if rows != m.Stats().Rows {
		t.Fatalf("%d rows delivered, %d planned", rows, m.Stats().Rows)
	}
}

// lengthsOfSlots returns the token count of every slot of m.
func (p *Plan) lengthsOfSlots(m *Mixture) []uint32 {
	out := make([]uint32, len(m.src))
	for g := range m.Len() {
		for _, pc := range m.plan.Batch(g).Pieces {
			out[pc.Index] += uint32(pc.Len)
		}
	}
	return out
}

// TestMixtureSingleSource: every batch holds rows of one source, every slot
// is delivered once, and any run of W batches holds each source's share of
// batches to within two.
func TestMixtureSingleSource(t *testing.T) {
	for _, policy := range []Policy{Bucketed, Tokens} {
		t.Run(string(policy), func(t *testing.T) {
			src := threeSources(0.6, 0.3, 0.1)
			cfg := DefaultConfig()
			cfg.Policy = policy
			if policy == Tokens {
				cfg.TokenBudget = 16384
			} else {
				cfg.BatchSize = 16
			}
			m := mustMix(t, src, 4, 0, cfg, MixConfig{SingleSourceBatches: true})
			perSource := make([][3]int64, m.Len())
			var rows int
			var nb [3]int64
			for g := range m.Len() {
				b := m.Batch(g)
				rows += b.Rows
				for _, p := range b.Pieces {
					if p.Source != b.Pieces[0].Source {
						t.Fatalf("batch %d mixes sources %d and %d", g, b.Pieces[0].Source, p.Source)
					}
				}
				perSource[g][b.Pieces[0].Source] = 1
				nb[b.Pieces[0].Source]++
			}
			if rows != m.Stats().Rows {
				t.Fatalf("%d rows delivered of %d", rows, m.Stats().Rows)
			}
			share := make([]float64, 3)
			for s := range share {
				share[s] = float64(nb[s]) / float64(m.Len())
			}
			for _, w := range []int{1, 5, 50, m.Len()} {
				if e := maxWindowError(toSlices(perSource), share, w); e > 2 {
					t.Errorf("window of %d batches: %.2f batches off", w, e)
				}
			}
		})
	}
	if _, err := NewMixture(threeSources(1, 1, 1), 1, 0, Config{Policy: Packed, BatchSize: 2, SeqLen: 64}, MixConfig{SingleSourceBatches: true}); err == nil {
		t.Fatal("single-source packed batches accepted")
	}
}

func toSlices(a [][3]int64) [][]int64 {
	out := make([][]int64, len(a))
	for i := range a {
		out[i] = a[i][:]
	}
	return out
}
