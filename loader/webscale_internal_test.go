package loader

import (
	"context"
	"math"
	"slices"
	"testing"
	"time"

	"github.com/gload/gload/bucket"
	"github.com/gload/gload/loader/dataset"
	"github.com/gload/gload/proto/gloadpb"
)

// Plans past 2^31 rows, the way the server makes and deals them (planCache.get, bucket.Deal, planHash,
// checkShapes), over synthetic lengths: no dataset of that size fits in CI, the plan level does.

const beyondInt32 = math.MaxInt32 + 1 + 12345 // rows: past 2^31, the last block short

func webscaleCache() *planCache {
	return newPlanCache(context.Background(), 4, func(string, time.Duration, bool) {})
}

func webscalePlan(t *testing.T, c *planCache, rows int64, batch int, seed uint64, epoch int) (epochPlan, bucket.Config) {
	t.Helper()
	cfg := policyConfig(&gloadpb.BatchPolicy{BatchSize: uint32(batch)}, 1)
	key := planKey{fingerprint: "synthetic", seed: seed, epoch: epoch, policy: policyHash(cfg), planWorld: 1}
	p, err := c.get(t.Context(), key, bucket.Synthetic{Rows: rows, Seed: 7}, cfg)
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := p.(*bucket.LazyPlan); !ok {
		t.Fatalf("%d rows planned by %T, want a lazy plan", rows, p)
	}
	return p, cfg
}

func TestWebscalePlanBeyondInt32(t *testing.T) {
	c := webscaleCache()
	p, cfg := webscalePlan(t, c, beyondInt32, 16, 1, 0)
	if want := (beyondInt32 + 15) / 16; p.Len() < want || p.Len() > want+p.(*bucket.LazyPlan).Windows() {
		t.Fatalf("%d batches for %d rows of 16", p.Len(), beyondInt32)
	}
	// Identical on every node: another cache (another server) makes the same plan; another epoch another one.
	p2, _ := webscalePlan(t, webscaleCache(), beyondInt32, 16, 1, 0)
	if planHash(p) != planHash(p2) {
		t.Fatal("two servers hash one plan differently")
	}
	p3, _ := webscalePlan(t, c, beyondInt32, 16, 1, 1)
	if planHash(p) == planHash(p3) {
		t.Fatal("epochs 0 and 1 hash alike")
	}
	// Its resume states name the lazy planner; an exact plan's keep the policy hash alone (states saved before).
	probe := policyConfig(&gloadpb.BatchPolicy{BatchSize: 16}, 1)
	if resumeHash(probe, p) == policyHash(probe) {
		t.Fatal("a lazy plan's resume hash equals the exact plans' policy hash")
	}
	small, err := bucket.NewPlan(make([]uint32, 100), "fp", 1, 0, cfg)
	if err != nil {
		t.Fatal(err)
	}
	if resumeHash(probe, small) != policyHash(probe) {
		t.Fatal("an exact plan's resume hash changed")
	}
	for _, g := range []int{0, p.Len() / 2, p.Len() - 1} {
		a, b := p.Batch(g), p2.Batch(g)
		if !slices.Equal(a.Pieces, b.Pieces) {
			t.Fatalf("batch %d differs between servers", g)
		}
	}
	// The shapes the server sizes rings and checks limits by cover every batch it builds.
	bound := planBound(p)
	if bound.Rows != 16 || bound.Length < bucket.SyntheticMaxLength {
		t.Fatalf("bound %+v", bound)
	}
	s := &Server{cfg: Config{MaxBatchBytes: 1 << 30}}
	if err := s.checkShapes(p, cfg); err != nil {
		t.Fatal(err)
	}
	s.cfg.MaxBatchBytes = 16 * 1024 * 4 // window 0 might fit; the longest rows (32768) do not
	if err := s.checkShapes(p, cfg); err == nil {
		t.Fatal("a bound past --max-batch-bytes passed")
	}

	// One slice of the epoch — the window holding the dataset's last (short) block, whose rows are past 2^31 — read
	// by 4 ranks × 2 workers: each of its rows exactly once; resumed on 3 ranks half-way through: the same rows.
	lp := p.(*bucket.LazyPlan)
	var w int
	for w = range lp.Windows() {
		if slices.Contains(lp.WindowBlocks(w), (beyondInt32-1)/bucket.LazyBlockRows) {
			break
		}
	}
	lo, hi := lp.WindowBatches(w)
	want := map[int]bool{}
	for _, b := range lp.WindowBlocks(w) {
		for r := b * bucket.LazyBlockRows; r < min((b+1)*bucket.LazyBlockRows, beyondInt32); r++ {
			want[int(r)] = true
		}
	}
	read := func(consumed, world, workers int, from, to int) map[int]int {
		seen := map[int]int{}
		for rank := range world {
			for worker := range workers {
				a, err := bucket.Deal(p.Len(), cfg.Remainder, consumed, rank, world, worker, workers)
				if err != nil {
					t.Fatal(err)
				}
				for i := range a.Len() {
					if g := a.At(i); g >= from && g < to {
						for _, pc := range p.Batch(g).Pieces {
							seen[pc.Index]++
						}
					}
				}
			}
		}
		return seen
	}
	// Dealing a whole epoch of 2^27 batches to 8 consumers is arithmetic; building them is not: only the window's.
	mid := lo + (hi-lo)/2
	mid -= mid % 12 // a step boundary of both 4 and 3 ranks
	first := read(0, 4, 2, lo, mid)
	second := read(mid, 3, 2, mid, hi)
	total := 0
	for r, n := range first {
		second[r] += n
	}
	for r, n := range second {
		if n != 1 || !want[r] {
			t.Fatalf("row %d read %d times (in the window: %v)", r, n, want[r])
		}
		total++
	}
	if total != len(want) {
		t.Fatalf("%d of the window's %d rows read", total, len(want))
	}
	if hi > p.Len()-3 {
		t.Log("the window is the epoch's last: drop may have left out its last batches") // not the case for seed 1
	}
}

// Global batch numbers past 2^31: a plan of batch size 1 over 2^31+ rows, resumed from past 2^31 batches.
func TestWebscaleResumePastInt32Batches(t *testing.T) {
	c := webscaleCache()
	p, cfg := webscalePlan(t, c, beyondInt32, 1, 3, 0)
	if p.Len() != beyondInt32 {
		t.Fatalf("%d batches of one row for %d rows", p.Len(), beyondInt32)
	}
	consumed := math.MaxInt32 + 100
	a, err := bucket.Deal(p.Len(), cfg.Remainder, consumed, 1, 3, 0, 2)
	if err != nil {
		t.Fatal(err)
	}
	if n := (p.Len() - consumed) / 3; a.Len() != (n+1)/2 {
		t.Fatalf("rank 1 worker 0 of 3×2 gets %d batches of the last %d", a.Len(), p.Len()-consumed)
	}
	if g := a.At(0); g != consumed+1 {
		t.Fatalf("first batch %d, want %d", g, consumed+1)
	}
	if g := a.At(a.Len() - 1); g >= p.Len() || g < consumed {
		t.Fatalf("last batch %d", g)
	}
	if b := p.Batch(a.At(a.Len() - 1)); b.Rows != 1 || b.Pieces[0].Index < 0 || b.Pieces[0].Index >= beyondInt32 {
		t.Fatalf("batch %+v", b)
	}
}

// A lazy packed plan's shared-memory ring is sized by its pieces bound, without packing every window: every batch
// fits it.
func TestRingNeedLazyPacked(t *testing.T) {
	dir := t.TempDir()
	writeRows(t, dir, 1, dataset.WriterOptions{}, func(int) []int32 { return []int32{1, 2, 3} })
	ds, err := dataset.Open(dir, dataset.OpenOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer ds.Close()
	cfg := policyConfig(&gloadpb.BatchPolicy{Policy: "packed", BatchSize: 8, SeqLen: 2048, SplitDocs: true}, 1)
	p, err := bucket.NewLazyPacked(bucket.Synthetic{Rows: 3_000_000, Seed: 1}, "fp", 1, 0, cfg, bucket.Parallel)
	if err != nil {
		t.Fatal(err)
	}
	a, err := bucket.Deal(p.Len(), cfg.Remainder, 0, 0, 1, 0, 1)
	if err != nil {
		t.Fatal(err)
	}
	c := &consumer{ds: &served{name: "t", ds: ds}, cfg: cfg, plan: p, assigned: a}
	need := ringNeed(c)
	if need.Pieces != p.Bound().Pieces || need.Pieces <= 0 || !need.Positions {
		t.Fatalf("need %+v, bound %+v", need, p.Bound())
	}
	for g := 0; g < p.Len(); g += max(1, p.Len()/200) {
		b := p.Batch(g)
		if int64(len(b.Pieces)) > need.Pieces || int64(b.Rows)*int64(b.Length) > need.Cells || 1+int64(len(b.Pieces))+int64(b.Rows) > need.CuLen {
			t.Fatalf("batch %d (%d pieces, %d×%d) does not fit %+v", g, len(b.Pieces), b.Rows, b.Length, need)
		}
	}
}
