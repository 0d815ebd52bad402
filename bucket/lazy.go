package bucket

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"math"
	"math/bits"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
)

// Lazy block plans: epoch plans whose memory does not grow with the rows (see the package documentation, "Lazy
// plans"). Rows are grouped into blocks of LazyBlockRows consecutive rows; a keyed permutation of the blocks, a
// keyed permutation of the rows of each window of LazyWindowBlocks permuted blocks and a keyed permutation of each
// window's batches are evaluated at any index (Feistel networks with cycle walking), so global batch g is built on
// demand from one mega-batch's rows.

const (
	// LazyBlockRows is the rows of a block of a lazy plan (the last block of a dataset may be shorter).
	LazyBlockRows = 1 << lazyBlockBits
	// LazyWindowBlocks is the blocks of a window: rows are shuffled, length-grouped and batched inside a window.
	LazyWindowBlocks = 16
	// LazyThreshold: [NewEpochPlan] plans datasets of at most this many rows with [NewPlan] (today's exact plans,
	// golden-tested, whose resume states stay valid) and larger ones with [NewLazyPlan].
	LazyThreshold = 1 << 27
	// MaxPlanRows is the most rows of one epoch plan (about 1.1·10^12, past the largest corpora): its per-window
	// tables stay under 20 MB, and no batch number of any plan reaches it.
	MaxPlanRows = 1 << 40

	lazyBlockBits = 16

	// Random streams of lazy plans (see rng.go for 1–3; 4 is the mixture's).
	streamLazyBlocks  uint64 = 5 // block permutation
	streamLazyRows    uint64 = 6 // row permutation of each window
	streamLazyBatches uint64 = 7 // batch-order permutation of each window

	lazyAlgorithm = "gload/plan/lazy-blocks/v1"
	feistelRounds = 6
)

// Runner runs f(0) … f(n−1), in any order and concurrently if it likes, and returns when all have returned. nil
// runs them one after another. Lazy plans use it for their counting pass (package bucket starts no goroutines of
// its own); the result does not depend on the Runner.
type Runner func(n int, f func(i int))

// Parallel is a [Runner] on GOMAXPROCS goroutines, for callers that want the counting pass on every core (the
// server, gload bench plan); bucket never passes it itself.
func Parallel(n int, f func(i int)) {
	var next atomic.Int64
	var wg sync.WaitGroup
	for range min(runtime.GOMAXPROCS(0), n) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := int(next.Add(1) - 1); i < n; i = int(next.Add(1) - 1) {
				f(i)
			}
		}()
	}
	wg.Wait()
}

// EpochPlan is an epoch plan, exact ([Plan]) or lazy ([LazyPlan]).
type EpochPlan interface {
	Len() int
	Batch(g int) Batch
	Assign(start, rank, world, worker, workers int) ([]int, error)
	Hash() string
}

var (
	_ EpochPlan = (*Plan)(nil)
	_ EpochPlan = (*LazyPlan)(nil)
)

// NewEpochPlan plans one epoch of lengths: with [NewPlan] (over the lengths copied into a slice unless they are a
// [SliceLengths] or a [Viewer]) when the dataset has at most [LazyThreshold] rows, or when the plan is a sequential
// tokens plan (the lazy plans do not do those: at most 2^31−1 rows); else bucketed sequential plans with
// [NewSeqPlan], packed plans with [NewLazyPacked] and the others with [NewLazyPlan] (see [EpochPlanner]).
// cfg.Planner overrides the size rule: exact plans every size up to 2^31−1 rows, lazy every size.
func NewEpochPlan(lengths Lengths, fingerprint string, seed uint64, epoch int, cfg Config, run Runner) (EpochPlan, error) {
	n := lengths.Len()
	planner := EpochPlanner(n, cfg)
	if cfg.Planner == PlannerLazy && planner == "exact" {
		if _, err := cfg.normalize(); err != nil {
			return nil, err // the configuration's own error (an unknown policy, a sequential packed plan, …)
		}
		return nil, cfgErr("planner", "lazy: sequential tokens plans are exact only (at most %d rows)", math.MaxInt32)
	}
	switch planner {
	case "lazy-sequential":
		return NewSeqPlan(lengths, fingerprint, cfg)
	case "lazy-packed":
		return NewLazyPacked(lengths, fingerprint, seed, epoch, cfg, run)
	case "lazy":
		return NewLazyPlan(lengths, fingerprint, seed, epoch, cfg, run)
	}
	if n > math.MaxInt32 {
		what := "exact plans" // planner exact
		if cfg.Planner != PlannerExact {
			what = "sequential tokens plans, which are exact"
		}
		return nil, fmt.Errorf("plan %d rows: %w (%s: at most %d rows)", n, ErrTooLarge, what, math.MaxInt32)
	}
	return NewPlan(lengthsSlice(lengths), fingerprint, seed, epoch, cfg)
}

// EpochPlanner names the planner [NewEpochPlan] uses for n rows under cfg: "exact" ([NewPlan]) up to
// [LazyThreshold] rows (any size under [PlannerExact], none under [PlannerLazy]) and for sequential tokens plans,
// else "lazy-sequential" ([NewSeqPlan]) for bucketed sequential plans, "lazy-packed" ([NewLazyPacked]) for packed
// plans and "lazy" ([NewLazyPlan]) for the others.
func EpochPlanner(n int64, cfg Config) string {
	switch {
	case cfg.Planner == PlannerExact, n <= LazyThreshold && cfg.Planner != PlannerLazy:
		return "exact"
	case cfg.Sequential && (cfg.Policy == Bucketed || cfg.Policy == ""):
		return "lazy-sequential"
	case cfg.Sequential:
		return "exact"
	case cfg.Policy == Packed:
		return "lazy-packed"
	}
	return "lazy"
}

// LazyPlan is one epoch's batches, computed on demand (see the package documentation, "Lazy plans"). It holds
// O(windows) memory plus, under tokens, a few windows' mega-batch tables. It is safe for concurrent use.
type LazyPlan struct {
	cfg         Config
	fingerprint string
	seed        uint64
	epoch       int
	lengths     Lengths
	pd          padder

	lazyLayout
	keyBatch uint64
	winRows  []int32 // rows of window w
	order0   []int32 // with a warm-up: window 0's internal batch at each of its positions
	shapes0  []Shape // window 0's shapes, warm-up order
	lead     int     // > 0: global position of the batch holding the longest row, swapped with position 0
	stats    Stats   // see Stats
	bound    Bound   // see Bound

	cache winCache[*winTable] // the two most recently built window tables
}

// NewLazyPlan plans one epoch of lengths as a lazy block plan. It supports the bucketed and tokens policies with
// BatchSize, TokenBudget, MaxLength, PadMultiple, Boundaries, MegaBatchMult, Remainder, WarmupShapes and PlanWorld
// (a warm-up within the first window: see the package documentation); AutoBuckets, ShuffleWindow, Sequential and
// packed are errors. Under tokens it reads every length once (the counting pass, through run); under bucketed none.
func NewLazyPlan(lengths Lengths, fingerprint string, seed uint64, epoch int, cfg Config, run Runner) (*LazyPlan, error) {
	p, err := newLazyPlan(lengths.Len(), lengths, fingerprint, seed, epoch, cfg)
	if err != nil {
		return nil, err
	}
	return p.finish(run, nil)
}

// newLazyPlan checks the configuration and lays out the plan of n rows, without counting or reading lengths (nil
// lengths: only the key is wanted).
func newLazyPlan(n int64, lengths Lengths, fingerprint string, seed uint64, epoch int, cfg Config) (*LazyPlan, error) {
	c, err := cfg.normalize()
	if err != nil {
		return nil, err
	}
	if epoch < 0 {
		return nil, cfgErr("epoch", "must be >= 0, got %d", epoch)
	}
	switch {
	case c.Policy == Packed:
		return nil, cfgErr("policy", "NewLazyPlan does not pack (see NewLazyPacked)")
	case c.Sequential:
		return nil, cfgErr("sequential", "not supported by the lazy plan")
	case c.AutoBuckets > 0:
		return nil, cfgErr("auto_buckets", "not supported by the lazy plan (it needs the whole length histogram); give boundaries")
	case c.ShuffleWindow > 0:
		return nil, cfgErr("shuffle_window", "not supported by the lazy plan (it reads the dataset in windows of %d rows already)", LazyBlockRows*LazyWindowBlocks)
	}
	layout, err := newLazyLayout(n, fingerprint, seed, epoch, c.Remainder)
	if err != nil {
		return nil, err
	}
	p := &LazyPlan{cfg: c, fingerprint: fingerprint, seed: seed, epoch: epoch, lengths: lengths, lazyLayout: layout,
		cache: newWinCache[*winTable](2)}
	limit := lengthLimit(c.MaxLength)
	if len(c.Boundaries) > 0 {
		p.pd = newBoundsPadder(limit, c.Boundaries)
	} else {
		p.pd = newMultiplePadder(limit, c.PadMultiple)
	}
	p.keyBatch = streamKey(fingerprint, seed, epoch, streamLazyBatches)
	return p, nil
}

// finish reads the lengths: the tokens budget check, every window's rows and batches (kept: the tokens plan's
// batches per window, already known; nil: counted, building every window through run), window 0, the warm-up and
// the bound.
func (p *LazyPlan) finish(run Runner, kept []int64) (*LazyPlan, error) {
	c := p.cfg
	if c.Policy == Tokens {
		if err := p.checkBudget(); err != nil {
			return nil, err
		}
	}
	nwin := p.windows()
	p.winRows = make([]int32, nwin)
	counts := kept
	if counts == nil {
		counts = make([]int64, nwin)
	}
	run.orSerial()(nwin, func(w int) {
		var blk [LazyWindowBlocks]int64
		_, rows := p.windowBlocks(int64(w), &blk)
		p.winRows[w] = int32(rows)
		switch {
		case c.Policy == Bucketed:
			mb := int64(c.MegaBatchMult) * int64(c.BatchSize)
			full, rem := rows/mb, rows%mb
			counts[w] = full*int64(c.MegaBatchMult) + (rem+int64(c.BatchSize)-1)/int64(c.BatchSize)
		case kept == nil:
			counts[w] = int64(len(p.buildWindow(int64(w)).boff) - 1)
		}
	})
	if err := p.setCounts(counts); err != nil {
		return nil, err
	}
	if nwin > 0 {
		t := p.buildWindow(0)
		p.cache.put(0, t)
		p.summarize(t)
		if c.WarmupShapes {
			p.warmup(t)
			if lr, ok := p.lengths.(LongestRower); ok {
				p.lead = p.positionOf(lr.LongestRow())
			}
		}
	}
	p.bound = p.boundFor(MaxLengthOf(p.lengths)) // a pass over the lengths unless they are a MaxLengther
	return p, nil
}

// summarize sets shapes0 and stats from window 0's table.
func (p *LazyPlan) summarize(t *winTable) {
	seen := map[Shape]bool{}
	var real, padded int64
	for b := range len(t.boff) - 1 {
		lo, hi := t.boff[b], t.boff[b+1]
		sh := Shape{Rows: int(hi - lo), Length: int(p.pd.pad(int64(t.effs[lo])))}
		if !seen[sh] {
			seen[sh] = true
			p.shapes0 = append(p.shapes0, sh)
		}
		padded += int64(sh.Rows) * int64(sh.Length)
		for _, e := range t.effs[lo:hi] {
			real += int64(e)
		}
	}
	sortShapes(p.shapes0)
	p.stats = Stats{Rows: int(p.n), Pieces: int(p.n), Batches: p.Len(), Shapes: len(p.shapes0)}
	if padded > 0 {
		p.stats.PaddingShare = float64(padded-real) / float64(padded)
		p.stats.PackingEfficiency = float64(real) / float64(padded)
	}
}

// boundFor is the plan's [Bound] when no row is longer than longest tokens.
func (p *LazyPlan) boundFor(longest uint32) Bound {
	length := int(p.pd.pad(p.pd.eff(longest)))
	if p.cfg.Policy == Bucketed {
		rows := int(min(int64(p.cfg.BatchSize), p.n))
		return Bound{Rows: rows, Length: length, Cells: int64(rows) * int64(length)}
	}
	budget := int64(p.cfg.TokenBudget)
	rows := budget / max(p.pd.pad(p.pd.eff(1)), 1)
	if p.cfg.BatchSize > 0 {
		rows = min(rows, int64(p.cfg.BatchSize))
	}
	rows = min(rows, p.n)
	return Bound{Rows: int(rows), Length: length, Cells: min(rows*int64(length), budget)}
}

// Shapes returns the shapes of window 0's batches (what the warm-up covers), longest first: a lazy plan does not
// build its other windows to list theirs. Every batch of the plan is within [LazyPlan.Bound].
func (p *LazyPlan) Shapes() []Shape { return append([]Shape(nil), p.shapes0...) }

// Stats returns Rows, Pieces (every row is one piece), Batches and, from window 0 alone (an estimate of the
// epoch's), Shapes, PaddingShare and PackingEfficiency; token totals are left 0 (they would need every length).
func (p *LazyPlan) Stats() Stats { return p.stats }

// Bound returns the largest batch the plan may hold, from the longest row of its lengths ([MaxLengthOf]) and the
// policy: bucketed, BatchSize rows of that row's padded length; tokens, at most TokenBudget padded tokens.
func (p *LazyPlan) Bound() Bound { return p.bound }

// checkBudget fails when the longest padded row exceeds the token budget: at once when the lengths know their
// longest row ([MaxLengther]) and it fits, else by a pass over the lengths that names the first row too long.
func (p *LazyPlan) checkBudget() error {
	budget := int64(p.cfg.TokenBudget)
	if m, ok := p.lengths.(MaxLengther); ok && p.pd.pad(p.pd.eff(m.MaxLength())) <= budget {
		return nil
	}
	for i := range p.n {
		if v := p.pd.pad(p.pd.eff(p.lengths.Length(i))); v > budget {
			return fmt.Errorf("%w: token_budget %d is smaller than row %d (length %d, padded %d)",
				ErrTokenBudget, budget, i, p.lengths.Length(i), v)
		}
	}
	return nil
}

// Config returns the plan's configuration with defaults applied.
func (p *LazyPlan) Config() Config { return p.cfg }

// Algorithm names the planner ("gload/plan/lazy-blocks/v1"): a resume state saved under another planner (an exact
// plan of the same dataset, policy, seed and epoch) does not continue this plan.
func (p *LazyPlan) Algorithm() string { return lazyAlgorithm }

// Hash identifies the plan without building its batches: 32 hex digits of SHA-256 over
//
//	"gload/plan/lazy-blocks/v1" 0x00 ‖ u64le(LazyBlockRows) ‖ u64le(LazyWindowBlocks) ‖ u64le(rows) ‖
//	u64le(len(fingerprint)) ‖ fingerprint ‖ u64le(seed) ‖ u64le(epoch) ‖ the policy (see appendPolicy) ‖
//	u64le(PlanWorld with WarmupShapes, else 0) ‖
//	u64le(windows) ‖ u64le(global batches after window w) for every window
//
// The plan is a pure function of these (the lengths enter through the fingerprint, and under tokens through the
// batch counts too), and the algorithm is named, so no lazy plan hashes like an exact one.
func (p *LazyPlan) Hash() string {
	var warm uint64
	if p.cfg.WarmupShapes {
		warm = uint64(p.cfg.PlanWorld)
	}
	h := p.hash(lazyAlgorithm, p.fingerprint, p.seed, p.epoch, p.cfg, warm, true)
	if p.lead > 0 {
		sum := sha256.Sum256(binary.LittleEndian.AppendUint64([]byte(h+"\x00lead\x00"), uint64(p.lead)))
		h = hex.EncodeToString(sum[:16])
	}
	return h
}

// positionOf returns the global position of the batch holding row r in the plan without a lead batch (0 when r is
// out of range or that batch is already first): the window holding r's block is found through the block
// permutation (O(blocks)), built, and searched.
func (p *LazyPlan) positionOf(r int64) int {
	if r < 0 || r >= p.n {
		return 0
	}
	b := r >> lazyBlockBits
	w := int64(-1)
	for i := range p.nblocks {
		if int64(p.blocks.at(uint64(i))) == b {
			w = i / LazyWindowBlocks
			break
		}
	}
	if w < 0 {
		return 0
	}
	tb := p.table(w, true)
	k := slices.Index(tb.rows, r)
	if k < 0 {
		return 0
	}
	t, _ := slices.BinarySearch(tb.boff, int32(k)+1)
	t-- // internal batch t holds rows boff[t] … boff[t+1]−1
	lo, hi := p.WindowBatches(int(w))
	for g := lo; g < hi; g++ {
		if _, tt := p.locate(g); tt == int64(t) {
			return g
		}
	}
	return 0
}

// appendPolicy appends the plan-shaping fields of a normalized config: u64le(len) ‖ bytes of policy and remainder,
// then u64le of BatchSize, TokenBudget, SeqLen, MaxLength, PadMultiple, MegaBatchMult, SplitDocs (0/1),
// len(Boundaries) and each boundary.
func (c Config) appendPolicy(b []byte) []byte {
	for _, s := range []string{string(c.Policy), string(c.Remainder)} {
		b = binary.LittleEndian.AppendUint64(b, uint64(len(s)))
		b = append(b, s...)
	}
	split := 0
	if c.SplitDocs {
		split = 1
	}
	for _, v := range []int{c.BatchSize, c.TokenBudget, c.SeqLen, c.MaxLength, c.PadMultiple, c.MegaBatchMult, split, len(c.Boundaries)} {
		b = binary.LittleEndian.AppendUint64(b, uint64(v))
	}
	for _, v := range c.Boundaries {
		b = binary.LittleEndian.AppendUint64(b, uint64(v))
	}
	return b
}

// winTable is window w built whole: its rows in window-position order with every mega-batch sorted longest first
// (ties in shuffled order), and internal batch t = rows[boff[t]:boff[t+1]].
type winTable struct {
	w    int64
	rows []int64
	effs []uint32
	boff []int32
}

// buildWindow builds window w's table (one pass over its rows: O(window) time and memory).
func (p *LazyPlan) buildWindow(w int64) *winTable {
	win := p.window(w)
	m := int(win.rows)
	t := &winTable{w: w, rows: make([]int64, m), effs: make([]uint32, m), boff: []int32{0}}
	var idx, scratchR []int32
	var scratchK []uint32
	var rows []int64
	for q := range m {
		t.rows[q] = win.row(int64(q))
		t.effs[q] = uint32(p.pd.eff(p.lengths.Length(t.rows[q])))
	}
	for lo := 0; lo < m; {
		hi := megaEnd(&p.pd, p.cfg, t.effs, lo)
		k := hi - lo
		if cap(idx) < k {
			idx, scratchR, scratchK, rows = make([]int32, k), make([]int32, k), make([]uint32, k), make([]int64, k)
		}
		idx, rows = idx[:k], rows[:k]
		for i := range k {
			idx[i] = int32(i)
		}
		sortDesc(t.effs[lo:hi], idx, scratchK[:k], scratchR[:k])
		copy(rows, t.rows[lo:hi])
		for i, j := range idx {
			t.rows[lo+i] = rows[j]
		}
		for s := lo; s < hi; {
			s += p.cut(t.effs[s:hi])
			t.boff = append(t.boff, int32(s))
		}
		lo = hi
	}
	return t
}

// megaEnd returns the end of the mega-batch of a window's delivered lengths effs that starts at lo: M·B rows under
// bucketed, else the longest run whose padded lengths sum to at most M·TokenBudget (at least one row).
func megaEnd(pd *padder, c Config, effs []uint32, lo int) int {
	if c.Policy == Bucketed {
		return min(lo+c.MegaBatchMult*c.BatchSize, len(effs))
	}
	megaTokens := int64(c.MegaBatchMult) * int64(c.TokenBudget)
	hi := lo + 1
	sum := pd.pad(int64(effs[lo]))
	for hi < len(effs) {
		v := pd.pad(int64(effs[hi]))
		if sum+v > megaTokens {
			break
		}
		sum += v
		hi++
	}
	return hi
}

// cut returns the rows of the batch that starts with effs[0] in a mega-batch sorted longest first.
func (p *LazyPlan) cut(effs []uint32) int {
	cnt := p.cfg.BatchSize
	if p.cfg.Policy == Tokens {
		cnt = int(int64(p.cfg.TokenBudget) / p.pd.pad(int64(effs[0])))
		if p.cfg.BatchSize > 0 {
			cnt = min(cnt, p.cfg.BatchSize)
		}
	}
	return max(1, min(cnt, len(effs)))
}

// table returns window w's table from the cache of the two most recently built ones, building it if asked
// (build) or when the calls before this one read window w often enough (a consumer reading the window's batches
// in turn); nil otherwise.
func (p *LazyPlan) table(w int64, build bool) *winTable {
	// Ski rental: a window read in turn is built once its mega-batch reads have cost about as much as building it
	// (R/(M·B) reads), so a consumer of the whole window pays at most twice the cheaper way, and sampled reads
	// spread over the epoch never build one.
	t, _ := p.cache.get(w, func(streak int32) bool {
		return build || streak > p.winRows[w]/int32(p.cfg.MegaBatchMult*max(p.cfg.BatchSize, 1))
	}, func() *winTable {
		t := p.buildWindow(w)
		if p.cfg.Policy == Tokens { // counted, or given by NewLazyPlanFrom: a mismatch must not drop rows silently
			if lo, hi := p.WindowBatches(int(w)); len(t.boff)-1 != hi-lo {
				panic(fmt.Sprintf("bucket: lazy plan: window %d has %d batches, its counts say %d (counts not made for these lengths)", w, len(t.boff)-1, hi-lo))
			}
		}
		return t
	})
	return t
}

// warmup reorders window 0's batches as [Plan]'s warm-up reorders a plan's: for each shape of window 0 in
// warm-up order (Length descending, then Rows descending) that has at least PlanWorld batches there, the first
// PlanWorld of them in the window's batch order move to the front, shape after shape; every other batch keeps its
// order. t is window 0's table.
func (p *LazyPlan) warmup(t *winTable) {
	nb := len(t.boff) - 1
	bperm := newFeistel(uint64(nb), splitmixAt(p.keyBatch, 1))
	seq := make([]int32, nb)
	for j := range seq {
		seq[j] = int32(bperm.at(uint64(j)))
	}
	ids := map[Shape]int{}
	var shapes []Shape
	var counts []int
	shapeOf := make([]int32, nb)
	for b := range nb {
		lo, hi := t.boff[b], t.boff[b+1]
		sh := Shape{Rows: int(hi - lo), Length: int(p.pd.pad(int64(t.effs[lo])))}
		id, ok := ids[sh]
		if !ok {
			id = len(shapes)
			ids[sh] = id
			shapes = append(shapes, sh)
			counts = append(counts, 0)
		}
		shapeOf[b] = int32(id)
		counts[id]++
	}
	order := append([]Shape(nil), shapes...)
	sortShapes(order)
	w := p.cfg.PlanWorld
	picked := make([][]int32, len(shapes))
	moved := make([]bool, nb)
	for _, b := range seq {
		id := shapeOf[b]
		if counts[id] >= w && len(picked[id]) < w {
			picked[id] = append(picked[id], b)
			moved[b] = true
		}
	}
	out := make([]int32, 0, nb)
	for _, sh := range order {
		out = append(out, picked[ids[sh]]...)
	}
	if len(out) == 0 {
		return
	}
	for _, b := range seq {
		if !moved[b] {
			out = append(out, b)
		}
	}
	p.order0 = out
}

// Shape returns the shape of global batch g (it builds the batch).
func (p *LazyPlan) Shape(g int) Shape {
	b := p.Batch(g)
	return Shape{Rows: b.Rows, Length: b.Length}
}

// Batch builds global batch g, g in [0, Len()); it panics, like a slice index, for any other g:
//
//  1. window w is the one whose batches hold g (binary search of the prefix table), j = g − its first batch;
//  2. the window's internal batch t is the batch permutation of window w at j;
//  3. the window's rows, in the order of its row permutation, are cut into mega-batches (bucketed: M·B rows;
//     tokens: the longest run whose padded lengths sum to ≤ M·TokenBudget, at least one row), each sorted by
//     delivered length descending, ties in shuffled order, and cut into batches as [NewPlan] cuts them; internal
//     batch t, counted over the window's mega-batches in order, is returned.
//
// A bucketed batch is built from its mega-batch alone (every mega-batch but a window's last has M batches);
// otherwise, and when consecutive calls read one window, the whole window is built once and kept (two windows).
func (p *LazyPlan) Batch(g int) Batch {
	w, t := p.locate(g)
	if tb := p.table(w, p.cfg.Policy != Bucketed); tb != nil {
		return p.fromTable(tb, t)
	}
	return p.fromMega(w, t)
}

// locate returns the window of global batch g and its internal batch index there.
func (p *LazyPlan) locate(g int) (w, t int64) {
	if p.lead > 0 {
		switch g {
		case 0:
			g = p.lead
		case p.lead:
			g = 0
		}
	}
	wi := p.windowOf(g)
	lo, hi := p.WindowBatches(wi)
	if wi == 0 && p.order0 != nil {
		return 0, int64(p.order0[g])
	}
	bperm := newFeistel(uint64(hi-lo), splitmixAt(p.keyBatch, uint64(wi)+1))
	return int64(wi), int64(bperm.at(uint64(g - lo)))
}

func (p *LazyPlan) fromTable(tb *winTable, t int64) Batch {
	lo, hi := int(tb.boff[t]), int(tb.boff[t+1])
	b := Batch{Rows: hi - lo, Length: int(p.pd.pad(int64(tb.effs[lo]))), Pieces: make([]Piece, hi-lo)}
	for k := lo; k < hi; k++ {
		b.Pieces[k-lo] = Piece{Index: int(tb.rows[k]), Len: int(tb.effs[k])}
	}
	return b
}

// fromMega builds bucketed internal batch t of window w from its mega-batch only.
func (p *LazyPlan) fromMega(w, t int64) Batch {
	win := p.window(w)
	mm := int64(p.cfg.MegaBatchMult)
	mb := mm * int64(p.cfg.BatchSize)
	k := t / mm
	mlo, mhi := k*mb, min((k+1)*mb, win.rows)
	m := int(mhi - mlo)
	rows := make([]int64, m)
	effs := make([]uint32, m)
	idx := make([]int32, m)
	for i := range m {
		rows[i] = win.row(mlo + int64(i))
		effs[i] = uint32(p.pd.eff(p.lengths.Length(rows[i])))
		idx[i] = int32(i)
	}
	sortDesc(effs, idx, make([]uint32, m), make([]int32, m))
	s := int((t - k*mm) * int64(p.cfg.BatchSize))
	cnt := p.cut(effs[s:])
	b := Batch{Rows: cnt, Length: int(p.pd.pad(int64(effs[s]))), Pieces: make([]Piece, cnt)}
	for i := range cnt {
		b.Pieces[i] = Piece{Index: int(rows[idx[s+i]]), Len: int(effs[s+i])}
	}
	return b
}

// feistel is a keyed pseudo-random permutation of [0, n) evaluated at any index: a balanced Feistel network of
// feistelRounds rounds over 2h-bit values (h = ⌈log2 n / 2⌉, at least 1), round r mapping (L, R) to
// (R, L xor (mix64(R xor k_r) mod 2^h)), with k_r = SplitMix64 output r+1 of the key; values ≥ n are walked
// through the network again until one falls below n (cycle walking; the domain is under 4n, so under 4 walks on
// average).
type feistel struct {
	n    uint64
	half uint
	mask uint64
	keys [feistelRounds]uint64
}

func newFeistel(n, key uint64) feistel {
	f := feistel{n: n}
	if n <= 1 {
		return f
	}
	b := uint(bits.Len64(n - 1))
	f.half = max((b+1)/2, 1)
	f.mask = 1<<f.half - 1
	for r := range f.keys {
		f.keys[r] = splitmixAt(key, uint64(r)+1)
	}
	return f
}

// at returns the permutation's value at i (i < n).
func (f *feistel) at(i uint64) uint64 {
	if f.n <= 1 {
		return i
	}
	x := i
	for {
		l, r := x>>f.half, x&f.mask
		for _, k := range f.keys {
			l, r = r, l^(mix64(r^k)&f.mask)
		}
		x = l<<f.half | r
		if x < f.n {
			return x
		}
	}
}
