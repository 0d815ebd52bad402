package bucket

import (
	"context"
	"errors"
	"fmt"
	"math"
	"math/big"
	"slices"
	"sync"
	"testing"
)

func mustLazyMix(t testing.TB, src []MixSource, seed uint64, epoch int, cfg Config, mc MixConfig, run Runner) *LazyMixture {
	t.Helper()
	m, err := NewLazyMixture(context.Background(), src, seed, epoch, cfg, mc, run)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// goRunner runs f concurrently on a few goroutines, in an order unlike nil's.
func goRunner(n int, f func(int)) {
	var wg sync.WaitGroup
	for g := range 3 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := n - 1 - g; i >= 0; i -= 3 {
				f(i)
			}
		}()
	}
	wg.Wait()
}

func sliceSource(name string, n int, mean float64, w float64, key uint64) MixSource {
	return MixSource{Name: name, Fingerprint: "fp-" + name, Lengths: SliceLengths(logNormalLengths(n, mean, 0.9, 6000, key)), Weight: w}
}

// checkMixBatch checks a lazy mixture batch's pieces and shape.
func checkMixBatch(t *testing.T, m *LazyMixture, src []MixSource, g int, b Batch) {
	t.Helper()
	c := m.Config()
	if b.Rows != len(b.Pieces) || b.Rows == 0 || b.RowStart != nil {
		t.Fatalf("batch %d: rows %d, pieces %d", g, b.Rows, len(b.Pieces))
	}
	var longest int64
	for _, pc := range b.Pieces {
		if pc.Source < 0 || pc.Source >= len(src) || int64(pc.Index) >= src[pc.Source].Lengths.Len() || pc.Index < 0 {
			t.Fatalf("batch %d: piece source %d row %d out of range", g, pc.Source, pc.Index)
		}
		if want := m.pd.eff(src[pc.Source].Lengths.Length(int64(pc.Index))); int64(pc.Len) != want {
			t.Fatalf("batch %d: row %d has length %d, want %d", g, pc.Index, pc.Len, want)
		}
		longest = max(longest, int64(pc.Len))
	}
	if int64(b.Length) != m.pd.pad(longest) {
		t.Fatalf("batch %d: length %d, longest row %d pads to %d", g, b.Length, longest, m.pd.pad(longest))
	}
	if c.Policy == Bucketed && b.Rows > c.BatchSize {
		t.Fatalf("batch %d: %d rows, batch size %d", g, b.Rows, c.BatchSize)
	}
	if c.Policy == Tokens && int64(b.Rows)*int64(b.Length) > int64(c.TokenBudget) {
		t.Fatalf("batch %d: %d×%d over the budget %d", g, b.Rows, b.Length, c.TokenBudget)
	}
}

// TestLazyMixExactlyOnceAndShares walks whole epochs slot by slot: every source's rows are its stream's (each row
// ⌊c/n⌋ or ⌈c/n⌉ times, exactly c mod n rows the more often), every prefix of slots holds each source's share
// within the documented bound, and batches are well formed and the same built alone or with their window.
func TestLazyMixExactlyOnceAndShares(t *testing.T) {
	tiny := func(i int) MixSource {
		return MixSource{Name: fmt.Sprint("tiny", i), Fingerprint: fmt.Sprint("fp-tiny", i),
			Lengths: SliceLengths(uniformLengths(50+i*40, 5, 400, uint64(100+i))), Weight: 0.00011 + 0.00002*float64(i%3)}
	}
	cases := []struct {
		name  string
		src   []MixSource
		slots int64
		cfg   func(*Config)
		big   bool
	}{
		{"three sources bucketed", []MixSource{
			sliceSource("web", 1_000_000, 300, 0.6, 1), sliceSource("code", 300_000, 900, 0.3, 2), sliceSource("math", 20_000, 80, 0.1, 3),
		}, 3_000_000, func(c *Config) { c.BatchSize = 24 }, false},
		{"tiny sources tokens", append([]MixSource{
			sliceSource("web", 1_500_000, 300, 0.7, 4), sliceSource("books", 400_000, 2000, 0.2, 5), sliceSource("wiki", 90_000, 500, 0.1, 6),
		}, tiny(0), tiny(1), tiny(2), tiny(3), tiny(4), tiny(5), tiny(6),
			MixSource{Name: "one", Fingerprint: "fp-one", Lengths: SliceLengths{42}, Weight: 0.001}), 2_600_000,
			func(c *Config) { c.Policy, c.TokenBudget, c.BatchSize, c.MaxLength = Tokens, 16384, 0, 4096 }, false},
		{"eight sources bucketed 10^7", []MixSource{
			sliceSource("a", 3_000_000, 300, 5, 7), sliceSource("b", 2_000_000, 600, 3, 8), sliceSource("c", 700_000, 200, 1, 9),
			sliceSource("d", 400_000, 1200, 1, 10), sliceSource("e", 100_000, 100, 0.5, 11), sliceSource("f", 30_000, 50, 0.25, 12),
			sliceSource("g", 5_000, 3000, 0.25, 13), sliceSource("h", 1_000, 40, 0.02, 14),
		}, 10_000_000, func(c *Config) { c.BatchSize = 64; c.Boundaries = []int{128, 512, 2048, 4096} }, true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if tc.big && testing.Short() {
				t.Skip("10^7 slots: skipped under -short")
			}
			cfg := DefaultConfig()
			tc.cfg(&cfg)
			m := mustLazyMix(t, tc.src, 5, 0, cfg, MixConfig{EpochSamples: tc.slots}, nil)
			if m.Slots() != tc.slots {
				t.Fatalf("%d slots, want %d", m.Slots(), tc.slots)
			}
			k := len(tc.src)
			sh := m.Shares()
			var sum int64
			for _, s := range sh {
				sum += s.Rows
			}
			if sum != tc.slots {
				t.Fatalf("shares sum to %d slots, want %d", sum, tc.slots)
			}
			// The documented bound: tiny sources within 2, the others within 2 + T·c/C.
			bound := make([]float64, k)
			for i := range m.src {
				bound[i] = 2
				if m.src[i].big {
					bound[i] += float64(len(m.tinyIdx)) * float64(m.src[i].count) / float64(m.cBig)
				}
			}
			if tc.name == "tiny sources tokens" && len(m.tinyIdx) != 7 {
				t.Fatalf("%d tiny sources, want 7", len(m.tinyIdx))
			}
			seen := make([][]uint16, k)
			for i, s := range tc.src {
				seen[i] = make([]uint16, s.Lengths.Len())
			}
			taken := make([]int64, k)
			worst := make([]float64, k)
			var x int64
			g := 0
			for w := range m.Windows() {
				tb := m.buildWindow(int64(w))
				lo, hi := m.WindowBatches(w)
				if hi-lo != len(tb.boff)-1 {
					t.Fatalf("window %d: prefix table says %d batches, the window has %d", w, hi-lo, len(tb.boff)-1)
				}
				for i, s := range tb.src {
					seen[s][tb.rows[i]]++
					taken[s]++
					x++
					for j := range k {
						d := math.Abs(float64(taken[j]) - float64(x)*float64(sh[j].Rows)/float64(tc.slots))
						worst[j] = max(worst[j], d)
						if d >= bound[j] {
							t.Fatalf("source %s is %.3f rows off its share after %d slots (bound %.3f)", tc.src[j].Name, d, x, bound[j])
						}
					}
				}
				for ; g < hi; g++ {
					b := m.fromTable(tb, int64(g-lo))
					checkMixBatch(t, m, tc.src, g, b)
					if cfg.Policy == Bucketed && (g%97 == 0 || g == hi-1) {
						if alone := m.fromMega(int64(w), int64(g-lo)); !sameBatch(alone, b) {
							t.Fatalf("batch %d built alone differs from its window's", g)
						}
					}
					if g%1009 == 0 {
						if got := m.Batch(g); !sameBatch(got, b) {
							t.Fatalf("Batch(%d) differs from its window's", g)
						}
					}
				}
			}
			if g != m.Len() || x != tc.slots {
				t.Fatalf("walked %d batches and %d slots, want %d and %d", g, x, m.Len(), tc.slots)
			}
			for i, s := range sh {
				n := int64(len(seen[i]))
				q, r := s.Rows/n, s.Rows%n
				var more int64
				for row, c := range seen[i] {
					switch int64(c) {
					case q:
					case q + 1:
						more++
					default:
						t.Fatalf("%s row %d delivered %d times, want %d or %d", s.Name, row, c, q, q+1)
					}
				}
				if more != r {
					t.Fatalf("%s: %d rows delivered %d times, want %d", s.Name, more, q+1, r)
				}
			}
			t.Logf("%d slots, %d windows, %d batches; worst share error per source (rows): %.3f", x, m.Windows(), m.Len(), worst)
		})
	}
}

// TestLazyMixEpochsContinue: epoch e+1 takes each source's rows where epoch e stopped, so a downsampled source
// repeats no row before its pass ends.
func TestLazyMixEpochsContinue(t *testing.T) {
	src := []MixSource{sliceSource("down", 400_000, 300, 0.25, 21), sliceSource("up", 30_000, 500, 0.75, 22)}
	cfg := DefaultConfig()
	cfg.BatchSize = 32
	seen := make([]int, 400_000)
	for e := range 4 {
		m := mustLazyMix(t, src, 9, e, cfg, MixConfig{EpochSamples: 500_000}, nil)
		if sh := m.Shares()[0]; sh.Rows != 125_000 || sh.Start != int64(e)*125_000 {
			t.Fatalf("epoch %d: share %+v, want 125000 rows from %d", e, sh, e*125_000)
		}
		for g := range m.Len() {
			for _, p := range m.Batch(g).Pieces {
				if p.Source == 0 {
					seen[p.Index]++
				}
			}
		}
		if e == 2 {
			for r, c := range seen {
				if c > 1 {
					t.Fatalf("epochs 0–2: row %d of the downsampled source delivered %d times", r, c)
				}
			}
		}
	}
	twice := 0
	for r, c := range seen {
		if c < 1 || c > 2 {
			t.Fatalf("epochs 0–3: row %d delivered %d times, want 1 or 2", r, c)
		}
		if c == 2 {
			twice++
		}
	}
	if twice != 100_000 {
		t.Fatalf("epochs 0–3 (500000 slots of 400000 rows): %d rows twice, want 100000", twice)
	}
}

// TestLazyMixDeterminism: the same inputs give the same plan, whatever the Runner.
func TestLazyMixDeterminism(t *testing.T) {
	src := []MixSource{sliceSource("a", 600_000, 400, 2, 31), sliceSource("b", 200_000, 1500, 1, 32)}
	for _, pol := range []Policy{Bucketed, Tokens} {
		cfg := DefaultConfig()
		cfg.BatchSize = 16
		if pol == Tokens {
			cfg.Policy, cfg.TokenBudget, cfg.BatchSize, cfg.MaxLength = Tokens, 8192, 0, 4096
		}
		mc := MixConfig{EpochSamples: 2_500_000}
		a := mustLazyMix(t, src, 3, 1, cfg, mc, nil)
		b := mustLazyMix(t, src, 3, 1, cfg, mc, goRunner)
		if a.Hash() != b.Hash() || a.Len() != b.Len() || !slices.Equal(a.winEnd, b.winEnd) {
			t.Fatalf("%s: another Runner gives another plan", pol)
		}
		if !slices.Equal(a.Shares(), b.Shares()) || a.Stats() != b.Stats() || !slices.Equal(a.Shapes(), b.Shapes()) {
			t.Fatalf("%s: another Runner gives other shares, stats or shapes", pol)
		}
		for _, g := range []int{0, 1, a.Len() / 3, a.Len() / 2, a.Len() - 1} {
			if !sameBatch(a.Batch(g), b.Batch(g)) {
				t.Fatalf("%s: batch %d differs between equal plans", pol, g)
			}
		}
		c := mustLazyMix(t, src, 4, 1, cfg, mc, nil)
		if c.Hash() == a.Hash() || sameBatch(c.Batch(0), a.Batch(0)) {
			t.Fatalf("%s: another seed gives the same plan", pol)
		}
		if pol == Tokens {
			st := a.Stats()
			var tok int64
			for _, s := range a.Shares() {
				tok += s.Tokens
			}
			if st.RealTokens <= 0 || st.PaddedTokens < st.RealTokens || tok < st.RealTokens || len(a.Shapes()) < 2 {
				t.Fatalf("tokens stats %+v, share tokens %d, %d shapes", st, tok, len(a.Shapes()))
			}
		}
	}
}

// bigSlotCounts is LazyMixture.prefix written again with math/big (no tiny sources): largest remainder of x by
// the counts.
func bigSlotCounts(counts []int64, n, x int64) []int64 {
	out := make([]int64, len(counts))
	rem := make([]*big.Int, len(counts))
	var given int64
	for i, c := range counts {
		q, r := new(big.Int).QuoRem(new(big.Int).Mul(big.NewInt(x), big.NewInt(c)), big.NewInt(n), new(big.Int))
		out[i], rem[i] = q.Int64(), r
		given += out[i]
	}
	order := make([]int, len(counts))
	for i := range order {
		order[i] = i
	}
	slices.SortStableFunc(order, func(a, b int) int { return rem[b].Cmp(rem[a]) })
	for _, i := range order[:x-given] {
		out[i]++
	}
	return out
}

// TestLazyMixBeyondInt32 plans a mixture of synthetic sources of 2.7·10^9 rows together (one of 1.5·10^9), an
// epoch of more than 2^31 slots, and checks windows at the start, middle and end exactly: their slot counts
// against a math/big computation, their rows against each source's pass permutation evaluated directly, their
// batches against Batch.
func TestLazyMixBeyondInt32(t *testing.T) {
	src := []MixSource{
		{Name: "web", Fingerprint: "fp-web", Lengths: Synthetic{Rows: 1_500_000_000, Seed: 1}, Weight: 0.5},
		{Name: "books", Fingerprint: "fp-books", Lengths: Synthetic{Rows: 1_200_000_000, Seed: 2}, Weight: 0.3},
		{Name: "code", Fingerprint: "fp-code", Lengths: Synthetic{Rows: 300_000_000, Seed: 3}, Weight: 0.2},
	}
	cfg := DefaultConfig()
	cfg.BatchSize = 32
	cfg.MaxLength = 8192
	mp, err := NewEpochMixture(context.Background(), src, 11, 2, cfg, MixConfig{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	m, ok := mp.(*LazyMixture)
	if !ok {
		t.Fatalf("NewEpochMixture of 3·10^9 slots gave %T, want *LazyMixture", mp)
	}
	const n = 3_000_000_000
	if m.Slots() != n || n <= math.MaxInt32 {
		t.Fatalf("%d slots, want %d", m.Slots(), int64(n))
	}
	counts := []int64{1_500_000_000, 900_000_000, 600_000_000}
	for i, s := range m.Shares() {
		if s.Rows != counts[i] || s.Start != 2*counts[i] {
			t.Fatalf("share %+v, want %d rows from %d", s, counts[i], 2*counts[i])
		}
	}
	if fp, err := MixSourcesFingerprint(src, MixConfig{}); err != nil || fp != m.Fingerprint() {
		t.Fatalf("MixSourcesFingerprint %q, %v; plan's %q", fp, err, m.Fingerprint())
	}
	nw := int64(m.Windows())
	for _, w := range []int64{0, 1, nw / 2, nw - 2, nw - 1} {
		a, b := m.windowSlots(w)
		fa, fb := m.SlotCounts(a), m.SlotCounts(b)
		if want := bigSlotCounts(counts, n, a); !slices.Equal(fa, want) {
			t.Fatalf("slot counts at %d: %v, want %v", a, fa, want)
		}
		tb := m.buildWindow(w)
		got := make([][]int64, len(src))
		for i, s := range tb.src {
			got[s] = append(got[s], tb.rows[i])
		}
		for s := range src {
			want := make([]int64, 0, fb[s]-fa[s])
			rows := src[s].Lengths.Len()
			for u := m.src[s].start + fa[s]; u < m.src[s].start+fb[s]; u++ {
				f := newFeistel(uint64(rows), streamKey(src[s].Fingerprint, 11, int(u/rows), streamLazyMixSource))
				want = append(want, int64(f.at(uint64(u%rows))))
			}
			slices.Sort(got[s])
			slices.Sort(want)
			if !slices.Equal(got[s], want) {
				t.Fatalf("window %d: source %d's rows are not its stream's positions %d…%d", w, s, fa[s], fb[s])
			}
			if len(want) > 0 && (want[0] < 0 || want[len(want)-1] >= rows) {
				t.Fatalf("window %d: rows out of range", w)
			}
		}
		lo, hi := m.WindowBatches(int(w))
		if hi-lo != len(tb.boff)-1 {
			t.Fatalf("window %d: %d batches in the prefix table, %d built", w, hi-lo, len(tb.boff)-1)
		}
		for _, g := range []int{lo, lo + 1, (lo + hi) / 2, hi - 1} {
			want := m.fromTable(tb, int64(g-lo))
			checkMixBatch(t, m, src, g, want)
			if got := m.Batch(g); !sameBatch(got, want) {
				t.Fatalf("Batch(%d) differs from window %d's", g, w)
			}
		}
	}
	if m.Hash() == "" || len(m.Shapes()) == 0 {
		t.Fatal("no hash or shapes")
	}
}

// TestLazyMixConcurrent reads batches from several goroutines (run with -race).
func TestLazyMixConcurrent(t *testing.T) {
	src := []MixSource{sliceSource("a", 300_000, 400, 1, 41), sliceSource("b", 100_000, 900, 1, 42)}
	for _, pol := range []Policy{Bucketed, Tokens} {
		cfg := DefaultConfig()
		cfg.BatchSize = 16
		if pol == Tokens {
			cfg.Policy, cfg.TokenBudget, cfg.BatchSize, cfg.MaxLength = Tokens, 8192, 0, 4096
		}
		m := mustLazyMix(t, src, 1, 0, cfg, MixConfig{EpochSamples: 2_200_000}, goRunner)
		ref := mustLazyMix(t, src, 1, 0, cfg, MixConfig{EpochSamples: 2_200_000}, nil)
		var wg sync.WaitGroup
		errs := make(chan error, 4)
		for k := range 4 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				reads := 40
				if pol == Tokens {
					reads = 8 // every read of a window not among the two kept builds it whole
				}
				for i := range reads {
					g := (i*7919 + k*104729) % m.Len()
					if !sameBatch(m.Batch(g), ref.Batch(g)) {
						errs <- fmt.Errorf("%s: batch %d differs under concurrent reads", pol, g)
						return
					}
				}
			}()
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			t.Fatal(err)
		}
	}
}

func TestLazyMixCancel(t *testing.T) {
	src := []MixSource{sliceSource("a", 300_000, 400, 1, 51), sliceSource("b", 100_000, 900, 1, 52)}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	for _, pol := range []Policy{Bucketed, Tokens} {
		cfg := DefaultConfig()
		cfg.BatchSize = 16
		if pol == Tokens {
			cfg.Policy, cfg.TokenBudget, cfg.BatchSize, cfg.MaxLength = Tokens, 8192, 0, 4096
		}
		_, err := NewLazyMixture(ctx, src, 1, 0, cfg, MixConfig{EpochSamples: 5_000_000}, nil)
		if !errors.Is(err, context.Canceled) {
			t.Fatalf("%s: canceled plan: %v, want context.Canceled", pol, err)
		}
	}
}

// TestLazyMixLimitsAndErrors: what lazy mixtures refuse, before any work of the epoch's size.
func TestLazyMixLimitsAndErrors(t *testing.T) {
	src := []MixSource{sliceSource("a", 1000, 400, 1, 61), sliceSource("b", 500, 900, 1, 62)}
	ctx := context.Background()
	cfe := func(field string) func(error) bool {
		return func(err error) bool {
			var ce *ConfigError
			return errors.As(err, &ce) && ce.Field == field
		}
	}
	tooLarge := func(err error) bool { return errors.Is(err, ErrTooLarge) }
	def := DefaultConfig()
	def.BatchSize = 8
	packed := DefaultConfig()
	packed.Policy, packed.SeqLen, packed.BatchSize = Packed, 512, 4
	tok := DefaultConfig()
	tok.Policy, tok.TokenBudget = Tokens, 100
	cases := []struct {
		name string
		cfg  Config
		mc   MixConfig
		src  []MixSource
		ok   func(error) bool
	}{
		{"mix_by tokens", def, MixConfig{MixBy: MixTokens}, src, cfe("mix_by")},
		{"packed", packed, MixConfig{}, src, cfe("policy")},
		{"single source batches", def, MixConfig{SingleSourceBatches: true}, src, cfe("single_source_batches")},
		{"epoch beyond MaxLazyMixRows", def, MixConfig{EpochSamples: MaxLazyMixRows + 1}, src, tooLarge},
		{"epoch beyond MaxRows", def, MixConfig{EpochSamples: 1 << 33, MaxRows: 1 << 32}, src, tooLarge},
		{"source beyond MaxLazyMixRows", def, MixConfig{}, []MixSource{{Name: "x", Fingerprint: "x", Lengths: Synthetic{Rows: MaxLazyMixRows + 1}, Weight: 1}}, tooLarge},
		{"token budget", tok, MixConfig{EpochSamples: 10_000}, src, func(err error) bool { return errors.Is(err, ErrTokenBudget) }},
		{"no sources", def, MixConfig{}, nil, cfe("mixture")},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := NewLazyMixture(ctx, tc.src, 1, 0, tc.cfg, tc.mc, nil)
			if err == nil || !tc.ok(err) {
				t.Fatalf("got %v", err)
			}
		})
	}
	// Above 2^31−1 rows, what only exact mixtures plan is refused.
	huge := []MixSource{{Name: "x", Fingerprint: "x", Lengths: Synthetic{Rows: 1 << 32}, Weight: 1}}
	if _, err := NewEpochMixture(ctx, huge, 1, 0, packed, MixConfig{}, nil); !tooLarge(err) {
		t.Fatalf("packed mixture of 2^32 rows: %v, want ErrTooLarge", err)
	}
}

// asMixSources is exact mixture sources as NewEpochMixture takes them (lengths as SliceLengths).
func asMixSources(exact []Source) []MixSource {
	src := make([]MixSource, len(exact))
	for i, s := range exact {
		src[i] = MixSource{Name: s.Name, Fingerprint: s.Fingerprint, Lengths: SliceLengths(s.Lengths), Weight: s.Weight}
	}
	return src
}

// TestNewEpochMixtureThreshold: below the threshold NewEpochMixture is NewMixture (same batches, hash and
// fingerprint); a lazy plan of the same mixture hashes otherwise.
func TestNewEpochMixtureThreshold(t *testing.T) {
	exactSrc := threeSources(0.6, 0.3, 0.1)
	src := asMixSources(exactSrc)
	cfg := DefaultConfig()
	cfg.BatchSize = 16
	ref := mustMix(t, exactSrc, 7, 1, cfg, MixConfig{})
	mp, err := NewEpochMixture(context.Background(), src, 7, 1, cfg, MixConfig{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	m, ok := mp.(*Mixture)
	if !ok {
		t.Fatalf("small mixture planned as %T", mp)
	}
	if m.Hash() != ref.Hash() || m.Fingerprint() != ref.Fingerprint() || m.Len() != ref.Len() {
		t.Fatal("NewEpochMixture below the threshold differs from NewMixture")
	}
	fp, err := MixSourcesFingerprint(src, MixConfig{})
	if fp2, _ := MixtureFingerprint(exactSrc, MixConfig{}); err != nil || fp != fp2 {
		t.Fatalf("MixSourcesFingerprint %q (%v), MixtureFingerprint %q", fp, err, fp2)
	}
	lazy := mustLazyMix(t, src, 7, 1, cfg, MixConfig{}, nil)
	if lazy.Hash() == ref.Hash() || lazy.Fingerprint() != ref.Fingerprint() {
		t.Fatalf("lazy plan hash %s (exact %s), fingerprint %s (exact %s)", lazy.Hash(), ref.Hash(), lazy.Fingerprint(), ref.Fingerprint())
	}
	if lazy.Len() == 0 || lazy.Slots() != int64(ref.Stats().Rows) {
		t.Fatalf("lazy plan: %d batches, %d slots (exact %d)", lazy.Len(), lazy.Slots(), ref.Stats().Rows)
	}
	// A source over 2^31−1 rows goes lazy whatever the epoch's length.
	big := []MixSource{{Name: "big", Fingerprint: "fp-big", Lengths: Synthetic{Rows: 1 << 31, Seed: 1}, Weight: 1}, src[2]}
	mp, err = NewEpochMixture(context.Background(), big, 7, 0, cfg, MixConfig{EpochSamples: 100_000}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := mp.(*LazyMixture); !ok {
		t.Fatalf("a source of 2^31 rows planned as %T", mp)
	}
}

// TestLazyMixSlotCounts checks the slot-count function F at chunk boundaries over random mixtures (1 to 255
// sources, shares from 1 to 10^-7, epochs from a few slots to 2^40): F sums to x, every source's F never
// decreases, a tiny source gains at most 2 per chunk, F(N) is the source's count, and F stays within the
// documented distance of x·c/N.
func TestLazyMixSlotCounts(t *testing.T) {
	r := newRNG(2024)
	cfg := DefaultConfig()
	cfg.BatchSize = 8
	for trial := range 60 {
		k := []int{1, 2, 3, 8, 50, 255}[trial%6]
		n := int64(1 + r.below(5_000_000))
		if trial%5 == 4 {
			n = MaxLazyMixRows - int64(r.below(1<<20))
		}
		src := make([]MixSource, k)
		for i := range src {
			w := math.Exp(-16 * float64(r.below(1<<20)) / (1 << 20))
			src[i] = MixSource{Name: fmt.Sprint("s", i), Fingerprint: fmt.Sprint("f", i), Lengths: SliceLengths{7}, Weight: w}
		}
		m, err := newLazyMixCounts(src, 1, 0, cfg, MixConfig{EpochSamples: n})
		if err != nil {
			t.Fatal(err)
		}
		tiny := float64(len(m.tinyIdx))
		prev := make([]int64, k)
		f := make([]int64, k)
		chunks := (n + LazyMixChunk - 1) / LazyMixChunk
		check := func(x int64, prev []int64) {
			m.prefix(x, f)
			var sum int64
			for s := range k {
				sum += f[s]
				c := m.src[s].count
				if prev != nil && (f[s] < prev[s] || (!m.src[s].big && f[s]-prev[s] > 2)) {
					t.Fatalf("trial %d (%d sources, %d slots): source %d goes from %d to %d at slot %d (big %v)", trial, k, n, s, prev[s], f[s], x, m.src[s].big)
				}
				bound := 1.0
				if m.src[s].big {
					bound += tiny * float64(c) / float64(m.cBig)
				}
				if d := math.Abs(float64(f[s]) - float64(x)*float64(c)/float64(n)); d >= bound+1e-6 {
					t.Fatalf("trial %d: source %d has %d slots of the first %d, %.3f off (bound %.3f)", trial, s, f[s], x, d, bound)
				}
			}
			if sum != x {
				t.Fatalf("trial %d: counts at slot %d sum to %d", trial, x, sum)
			}
		}
		if chunks <= 4096 {
			for c := int64(1); c <= chunks; c++ {
				check(min(c*LazyMixChunk, n), prev)
				copy(prev, f)
			}
		} else { // sampled consecutive boundaries, and the last chunk
			for range 2000 {
				c := int64(r.below(uint64(chunks - 1)))
				m.prefix(c*LazyMixChunk, prev)
				check(min((c+1)*LazyMixChunk, n), prev)
			}
			m.prefix((chunks-1)*LazyMixChunk, prev)
			check(n, prev)
		}
		for s := range k {
			if f[s] != m.src[s].count {
				t.Fatalf("trial %d: source %d has %d slots at the end, want %d", trial, s, f[s], m.src[s].count)
			}
		}
	}
}

// TestLazyMixCancelMidPass cancels the counting pass after its first window.
func TestLazyMixCancelMidPass(t *testing.T) {
	src := []MixSource{sliceSource("a", 300_000, 400, 1, 71), sliceSource("b", 100_000, 900, 1, 72)}
	cfg := DefaultConfig()
	cfg.Policy, cfg.TokenBudget, cfg.MaxLength = Tokens, 8192, 4096
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	ran := 0
	run := func(n int, f func(int)) {
		for i := range n {
			if i == 1 {
				cancel()
			}
			f(i)
			ran++
		}
	}
	_, err := NewLazyMixture(ctx, src, 1, 0, cfg, MixConfig{EpochSamples: 5_000_000}, run)
	if !errors.Is(err, context.Canceled) || ran != 5 {
		t.Fatalf("canceled after window 0: %v after %d windows, want context.Canceled", err, ran)
	}
}

// TestLazyMixEpochUntilAndBound: EpochUntil sets the epoch's length as in exact mixtures, and Bound bounds every
// batch.
func TestLazyMixEpochUntilAndBound(t *testing.T) {
	src := []MixSource{sliceSource("a", 900_000, 400, 3, 81), sliceSource("b", 400_000, 900, 1, 82)}
	for _, pol := range []Policy{Bucketed, Tokens} {
		cfg := DefaultConfig()
		cfg.BatchSize = 8
		if pol == Tokens {
			cfg.Policy, cfg.TokenBudget, cfg.BatchSize, cfg.MaxLength = Tokens, 8192, 0, 4096
		}
		m := mustLazyMix(t, src, 2, 0, cfg, MixConfig{EpochUntil: "b"}, nil)
		if sh := m.Shares(); sh[1].Rows != 400_000 || sh[0].Rows != 1_200_000 || m.Slots() != 1_600_000 {
			t.Fatalf("%s: epoch until b: shares %+v, %d slots", pol, sh, m.Slots())
		}
		bound := m.Bound()
		var longest uint32
		for _, s := range src {
			longest = max(longest, slices.Max(s.Lengths.(SliceLengths)))
		}
		if pol == Bucketed && (bound.Rows != 8 || int64(bound.Length) != m.pd.pad(m.pd.eff(longest))) {
			t.Fatalf("bucketed bound %+v, longest row %d", bound, longest)
		}
		for g := 0; g < m.Len(); g += 997 {
			if b := m.Batch(g); b.Rows > bound.Rows || b.Length > bound.Length || int64(b.Rows)*int64(b.Length) > bound.Cells {
				t.Fatalf("%s: batch %d is %d×%d, beyond the bound %+v", pol, g, b.Rows, b.Length, bound)
			}
		}
		// A source's MaxLength, when given, is the bound's (no pass over the lengths).
		given := slices.Clone(src)
		given[0].MaxLength, given[1].MaxLength = 20000, 20000
		if g := mustLazyMix(t, given, 2, 0, cfg, MixConfig{EpochUntil: "b"}, nil).Bound(); pol == Bucketed && int64(g.Length) != m.pd.pad(m.pd.eff(20000)) {
			t.Fatalf("bound %+v with MaxLength 20000 given", g)
		}
	}
}
