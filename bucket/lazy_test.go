package bucket

import (
	"errors"
	"fmt"
	"math"
	"slices"
	"sync"
	"testing"
)

// hashLengths is a cheap Lengths for large plans: row i has 1 + mix64(i) mod max tokens.
type hashLengths struct {
	n   int64
	max uint64
}

func (h hashLengths) Len() int64            { return h.n }
func (h hashLengths) Length(i int64) uint32 { return uint32(1 + mix64(uint64(i)+12345)%h.max) }

func TestFeistelIsPermutation(t *testing.T) {
	for _, n := range []uint64{0, 1, 2, 3, 5, 16, 17, 1000, 65536, 1<<20 + 7} {
		f := newFeistel(n, 42)
		seen := make([]bool, n)
		moved := 0
		for i := range n {
			v := f.at(i)
			if v >= n || seen[v] {
				t.Fatalf("n=%d: at(%d)=%d repeats or is out of range", n, i, v)
			}
			seen[v] = true
			if v != i {
				moved++
			}
		}
		if n >= 16 && moved < int(n)/2 {
			t.Fatalf("n=%d: only %d of %d values moved", n, moved, n)
		}
	}
}

// checkBatch checks a lazy batch's shape against its pieces.
func checkBatch(t *testing.T, p *LazyPlan, g int, b Batch, l Lengths) {
	t.Helper()
	c := p.Config()
	if b.Rows != len(b.Pieces) || b.Rows == 0 || b.RowStart != nil {
		t.Fatalf("batch %d: rows %d, pieces %d", g, b.Rows, len(b.Pieces))
	}
	var longest int64
	for _, pc := range b.Pieces {
		if want := p.pd.eff(l.Length(int64(pc.Index))); int64(pc.Len) != want {
			t.Fatalf("batch %d: row %d has length %d, want %d", g, pc.Index, pc.Len, want)
		}
		longest = max(longest, int64(pc.Len))
	}
	if int64(b.Length) != p.pd.pad(longest) {
		t.Fatalf("batch %d: length %d, longest row %d pads to %d", g, b.Length, longest, p.pd.pad(longest))
	}
	switch c.Policy {
	case Bucketed:
		if b.Rows > c.BatchSize {
			t.Fatalf("batch %d: %d rows > batch size %d", g, b.Rows, c.BatchSize)
		}
	case Tokens:
		if int64(b.Rows)*int64(b.Length) > int64(c.TokenBudget) {
			t.Fatalf("batch %d: %d×%d over the budget %d", g, b.Rows, b.Length, c.TokenBudget)
		}
	}
}

func sameBatch(a, b Batch) bool {
	if a.Rows != b.Rows || a.Length != b.Length || len(a.Pieces) != len(b.Pieces) {
		return false
	}
	for i := range a.Pieces {
		if a.Pieces[i] != b.Pieces[i] {
			return false
		}
	}
	return true
}

// TestLazyExactlyOnce plans whole epochs and checks that every row comes exactly once.
func TestLazyExactlyOnce(t *testing.T) {
	for _, tc := range []struct {
		name string
		rows int64
		cfg  Config
	}{
		{"bucketed", 1_000_000, Config{Policy: Bucketed, BatchSize: 16}},
		{"bucketed-1e7", 10_000_000, Config{Policy: Bucketed, BatchSize: 16, WarmupShapes: true, PlanWorld: 8}},
		{"bucketed-small", 70_001, Config{Policy: Bucketed, BatchSize: 7, MegaBatchMult: 3}},
		{"bucketed-one-row", 1, Config{Policy: Bucketed, BatchSize: 4}},
		{"bucketed-warmup", 1_500_000, Config{Policy: Bucketed, BatchSize: 16, WarmupShapes: true, PlanWorld: 4}},
		{"tokens-warmup", 200_000, Config{Policy: Tokens, TokenBudget: 65536, WarmupShapes: true, PlanWorld: 2}},
		{"tokens", 300_000, Config{Policy: Tokens, TokenBudget: 65536, BatchSize: 64, MaxLength: 8192, Boundaries: []int{256, 1024, 4096, 8192}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if testing.Short() && tc.rows > 5_000_000 {
				t.Skip("-short: a whole epoch of 10^7 rows takes about 10 s on a loaded 2-core machine")
			}
			syn := Synthetic{Rows: tc.rows, Seed: 3}
			l := make(SliceLengths, tc.rows)
			syn.Fill(0, l)
			p, err := NewLazyPlan(l, "fp", 9, 2, tc.cfg, nil)
			if err != nil {
				t.Fatal(err)
			}
			seen := make([]bool, tc.rows)
			var got int64
			var tabs = map[int64]*winTable{}
			for g := range p.Len() {
				b := p.Batch(g)
				checkBatch(t, p, g, b, l)
				if tc.cfg.Policy == Bucketed && (tc.rows < 100_000 || g%101 == 0) {
					// The two ways to build a batch agree: from its mega-batch alone and from the whole window.
					w, ti := p.locate(g)
					if tabs[w] == nil {
						tabs[w] = p.buildWindow(w)
					}
					if m, tb := p.fromMega(w, ti), p.fromTable(tabs[w], ti); !sameBatch(m, b) || !sameBatch(tb, b) {
						t.Fatalf("batch %d: Batch %v, from its mega-batch %v, from its window %v", g, b, m, tb)
					}
				}
				for _, pc := range b.Pieces {
					if seen[pc.Index] {
						t.Fatalf("row %d twice (batch %d)", pc.Index, g)
					}
					seen[pc.Index] = true
					got++
				}
			}
			if got != tc.rows {
				t.Fatalf("%d rows delivered, want %d", got, tc.rows)
			}
			// A pure function of its inputs: a second plan agrees; another epoch differs.
			q, err := NewLazyPlan(l, "fp", 9, 2, tc.cfg, func(n int, f func(int)) {
				for i := n - 1; i >= 0; i-- { // another order of the counting pass
					f(i)
				}
			})
			if err != nil {
				t.Fatal(err)
			}
			// Compare batches spread over the epoch (all of them for small plans).
			step := max(1, p.Len()/20_000)
			sample := func(pl *LazyPlan) string {
				n := (pl.Len() + step - 1) / step
				return HashBatches(n, func(i int) Batch { return pl.Batch(i * step) })
			}
			if p.Hash() != q.Hash() || p.Len() != q.Len() || sample(p) != sample(q) {
				t.Fatal("two plans of the same inputs differ")
			}
			if tc.rows > 1000 {
				r, _ := NewLazyPlan(l, "fp", 9, 3, tc.cfg, nil)
				if r.Hash() == p.Hash() || sample(r) == sample(p) {
					t.Fatal("epochs 2 and 3 have the same plan")
				}
			}
		})
	}
}

// TestLazyBeyondInt32 plans 2^31 + 12 345 rows (synthetic lengths) and checks on a sample of windows that each
// delivers exactly the rows of its blocks, once, and that the blocks are a permutation.
func TestLazyBeyondInt32(t *testing.T) {
	n := int64(1)<<31 + 12345
	l := hashLengths{n: n, max: 4096}
	p, err := NewLazyPlan(l, "big", 1, 0, Config{Policy: Bucketed, BatchSize: 16, MegaBatchMult: 2}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if p.Rows() != n {
		t.Fatalf("rows %d", p.Rows())
	}
	nblocks := (n + LazyBlockRows - 1) / LazyBlockRows
	owner := make([]int32, nblocks)
	for i := range owner {
		owner[i] = -1
	}
	short := -1
	for w := range p.Windows() {
		for _, b := range p.WindowBlocks(w) {
			if owner[b] >= 0 {
				t.Fatalf("block %d in windows %d and %d", b, owner[b], w)
			}
			owner[b] = int32(w)
			if b == nblocks-1 {
				short = w
			}
		}
	}
	for b, w := range owner {
		if w < 0 {
			t.Fatalf("block %d in no window", b)
		}
	}
	if want := (n + 15) / 16; int64(p.Len()) != want {
		t.Fatalf("%d batches, want %d", p.Len(), want)
	}
	for _, w := range []int{0, short, p.Windows() / 2, p.Windows() - 1} {
		seen := map[int64]bool{}
		var want int64
		for _, b := range p.WindowBlocks(w) {
			want += min(LazyBlockRows, n-b*LazyBlockRows)
		}
		lo, hi := p.WindowBatches(w)
		for g := lo; g < hi; g++ {
			b := p.Batch(g)
			checkBatch(t, p, g, b, l)
			for _, pc := range b.Pieces {
				r := int64(pc.Index)
				if r < 0 || r >= n || owner[r/LazyBlockRows] != int32(w) {
					t.Fatalf("window %d: batch %d has row %d of another window", w, g, r)
				}
				if seen[r] {
					t.Fatalf("window %d: row %d twice", w, r)
				}
				seen[r] = true
			}
		}
		if int64(len(seen)) != want {
			t.Fatalf("window %d: %d rows delivered, want %d", w, len(seen), want)
		}
	}
	// Batch g goes to rank g mod world (DESIGN), as for exact plans.
	for rank := range 3 {
		got, err := p.Assign(p.Len()-7, rank, 3, 0, 1)
		if err != nil {
			t.Fatal(err)
		}
		for _, g := range got {
			if g%3 != (p.Len()-7+rank)%3 || g > p.Len() {
				t.Fatalf("rank %d got batch %d", rank, g)
			}
		}
	}
}

func TestNewEpochPlanThreshold(t *testing.T) {
	cfg := DefaultConfig()
	cfg.BatchSize = 16
	small := make(SliceLengths, 10_000)
	Synthetic{Rows: 10_000}.Fill(0, small)
	ep, err := NewEpochPlan(small, "fp", 1, 0, cfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	exact, err := NewPlan(small, "fp", 1, 0, cfg)
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := ep.(*Plan); !ok || ep.Hash() != exact.Hash() {
		t.Fatalf("below the threshold: %T, hash %s, want the exact plan %s", ep, ep.Hash(), exact.Hash())
	}
	// Another Lengths (not a slice) gives the same exact plan.
	ep2, err := NewEpochPlan(Synthetic{Rows: 10_000}, "fp", 1, 0, cfg, nil)
	if err != nil || ep2.Hash() != exact.Hash() {
		t.Fatalf("synthetic lengths: %v, hash %s, want %s", err, ep2.Hash(), exact.Hash())
	}
	big := hashLengths{n: LazyThreshold + 1, max: 1000}
	ep, err = NewEpochPlan(big, "fp", 1, 0, cfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := ep.(*LazyPlan); !ok {
		t.Fatalf("above the threshold: %T, want *LazyPlan", ep)
	}
	pk := Config{Policy: Packed, BatchSize: 4, SeqLen: 2048}
	seqTokens := Config{Policy: Tokens, TokenBudget: 4096, Sequential: true}
	if _, err := NewEpochPlan(hashLengths{n: math.MaxInt32 + 1, max: 10}, "fp", 1, 0, seqTokens, nil); !errors.Is(err, ErrTooLarge) {
		t.Fatalf("sequential tokens beyond 2^31 rows: %v, want ErrTooLarge", err)
	}
	for _, bad := range []Config{
		{Policy: Bucketed, BatchSize: 4, AutoBuckets: 4},
		{Policy: Bucketed, BatchSize: 4, ShuffleWindow: 100},
		{Policy: Bucketed, BatchSize: 4, Sequential: true},
		pk,
	} {
		if _, err := NewLazyPlan(big, "fp", 1, 0, bad, nil); !errors.Is(err, ErrConfig) {
			t.Fatalf("%+v: %v, want ErrConfig", bad, err)
		}
	}
	for _, c := range []Config{cfg, {Policy: Tokens, TokenBudget: 4096, WarmupShapes: true}} {
		z, err := NewLazyPlan(SliceLengths{}, "fp", 1, 0, c, nil)
		if err != nil || z.Len() != 0 || z.Hash() == "" {
			t.Fatalf("no rows: %v, %d batches", err, z.Len())
		}
		func() {
			defer func() {
				if recover() == nil {
					t.Fatal("Batch(0) of an empty plan did not panic")
				}
			}()
			z.Batch(0)
		}()
	}
	if _, err := NewLazyPlan(big, "fp", 1, 0, Config{Policy: Tokens, TokenBudget: 512}, nil); !errors.Is(err, ErrTokenBudget) {
		t.Fatalf("budget below a row: %v, want ErrTokenBudget", err)
	}
}

// TestLazyWarmup checks the warm-up prefix: PlanWorld batches of every shape that window 0 has at least PlanWorld
// batches of, longest first, then nothing of those moved again.
func TestLazyWarmup(t *testing.T) {
	l := make(SliceLengths, 1_500_000)
	Synthetic{Rows: int64(len(l)), Seed: 5}.Fill(0, l)
	for _, cfg := range []Config{
		{Policy: Bucketed, BatchSize: 16, WarmupShapes: true, PlanWorld: 4},
		{Policy: Tokens, TokenBudget: 65536, WarmupShapes: true, PlanWorld: 3},
	} {
		p, err := NewLazyPlan(l, "fp", 1, 0, cfg, nil)
		if err != nil {
			t.Fatal(err)
		}
		lo, hi := p.WindowBatches(0)
		counts := map[Shape]int{}
		for g := lo; g < hi; g++ {
			counts[p.Shape(g)]++
		}
		var want []Shape
		for sh, n := range counts {
			if n >= cfg.PlanWorld {
				want = append(want, sh)
			}
		}
		sortShapes(want)
		if len(want) < 5 {
			t.Fatalf("%s: only %d shapes to warm up", cfg.Policy, len(want))
		}
		for i, sh := range want {
			for r := range cfg.PlanWorld {
				if got := p.Shape(i*cfg.PlanWorld + r); got != sh {
					t.Fatalf("%s: batch %d has shape %v, want %v (warm-up shape %d)", cfg.Policy, i*cfg.PlanWorld+r, got, sh, i)
				}
			}
		}
		off := cfg
		off.WarmupShapes = false
		q, err := NewLazyPlan(l, "fp", 1, 0, off, nil)
		if err != nil {
			t.Fatal(err)
		}
		if q.Hash() == p.Hash() || q.Shape(0) == p.Shape(0) && q.Shape(1) == p.Shape(1) && q.Shape(2) == p.Shape(2) {
			t.Fatalf("%s: the warm-up changes neither the hash nor the first batches", cfg.Policy)
		}
		// Past window 0 the plans agree.
		if g := int(p.winEnd[0]); g < p.Len() && !sameBatch(p.Batch(g), q.Batch(g)) {
			t.Fatalf("%s: batch %d differs past the warm-up window", cfg.Policy, g)
		}
	}
}

// Concurrent readers (the server's streams) get the batches a single reader gets.
func TestLazyConcurrent(t *testing.T) {
	l := hashLengths{n: 2_500_000, max: 4096}
	for _, cfg := range []Config{{Policy: Bucketed, BatchSize: 16, MegaBatchMult: 2}, {Policy: Tokens, TokenBudget: 65536}} {
		p, err := NewLazyPlan(l, "fp", 1, 0, cfg, nil)
		if err != nil {
			t.Fatal(err)
		}
		ref, _ := NewLazyPlan(l, "fp", 1, 0, cfg, nil)
		const readers = 4
		errs := make(chan string, readers)
		for r := range readers {
			go func() {
				// Reader r reads its rank's batches of two windows in turn, then a few far ones.
				for g := r; g < p.Len(); g += readers * 13 {
					if g > 3*p.Len()/4 && g%5 != 0 {
						continue
					}
					if !sameBatch(p.Batch(g), ref.fromMega0(g)) {
						errs <- fmt.Sprintf("%s: batch %d differs", cfg.Policy, g)
						return
					}
				}
				errs <- ""
			}()
		}
		for range readers {
			if e := <-errs; e != "" {
				t.Fatal(e)
			}
		}
	}
}

// fromMega0 builds batch g without the cache: from its window built afresh.
func (p *LazyPlan) fromMega0(g int) Batch {
	w, ti := p.locate(g)
	return p.fromTable(p.buildWindowCached(w), ti)
}

var testTables sync.Map // *LazyPlan/window → *winTable

func (p *LazyPlan) buildWindowCached(w int64) *winTable {
	type key struct {
		p *LazyPlan
		w int64
	}
	if t, ok := testTables.Load(key{p, w}); ok {
		return t.(*winTable)
	}
	t := p.buildWindow(w)
	testTables.Store(key{p, w}, t)
	return t
}

// planted is synthetic lengths with one row far longer than the rest, which it names (a LongestRower).
type planted struct {
	Synthetic
	row int64
}

func (p planted) Length(i int64) uint32 {
	if i == p.row {
		return 60000
	}
	return p.Synthetic.Length(i)
}

func (p planted) LongestRow() int64 { return p.row }

// With lengths that name their longest row, the warm-up starts with the batch holding it (the epoch's largest
// shape comes at step 0 even when it lies outside the first window), and the plan stays a permutation.
func TestLazyLeadBatch(t *testing.T) {
	const rows = 3_000_000
	cfg := DefaultConfig()
	cfg.BatchSize = 16
	cfg.PlanWorld = 2
	for _, row := range []int64{2_900_001, 5, rows - 1} {
		lens := planted{Synthetic{Rows: rows, Seed: 4}, row}
		p, err := NewLazyPlan(lens, "fp", 9, 0, cfg, nil)
		if err != nil {
			t.Fatal(err)
		}
		b0 := p.Batch(0)
		if !slices.ContainsFunc(b0.Pieces, func(pc Piece) bool { return int64(pc.Index) == row }) {
			t.Fatalf("row %d: batch 0 (%d×%d) does not hold the longest row", row, b0.Rows, b0.Length)
		}
		plain, err := NewLazyPlan(struct{ Lengths }{lens}, "fp", 9, 0, cfg, nil) // lengths that do not name it
		if err != nil {
			t.Fatal(err)
		}
		if p.lead > 0 && p.Hash() == plain.Hash() {
			t.Fatalf("row %d: a plan with a lead batch hashes like one without", row)
		}
		seen := make([]uint8, rows)
		for g := range p.Len() {
			for _, pc := range p.Batch(g).Pieces {
				seen[pc.Index]++
			}
		}
		for r, n := range seen {
			if n != 1 {
				t.Fatalf("row %d: row %d delivered %d times", row, r, n)
			}
		}
	}
}
