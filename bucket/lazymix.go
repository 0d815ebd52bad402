package bucket

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"math"
	"math/bits"
	"slices"
	"sort"
	"sync"
)

// Lazy mixtures: mixture epochs whose memory does not grow with the slots (see the package documentation, "Lazy
// mixtures"). Each source's slot count in any prefix of the epoch's slots is an exact integer function evaluated in
// O(sources) at chunk boundaries; slots are dealt to sources inside a chunk by smooth weighted round-robin; source
// s's j-th row of the epoch is a keyed Feistel permutation of its stream position; windows of chunks are
// length-grouped and batched as the exact mixture groups its slots.

const (
	// MaxLazyMixRows is the most slots of one lazy mixture epoch and the most rows of one of its sources (the
	// prefix table holds 8 bytes per window of 2^20 slots: 8 MB at this bound).
	MaxLazyMixRows = 1 << 40
	// LazyMixChunk is the slots of a chunk: per-source counts are fixed at chunk boundaries.
	LazyMixChunk = 1 << 12
	// LazyMixWindowChunks is the chunks of a window (2^20 slots): batches are cut inside a window.
	LazyMixWindowChunks = 1 << 8

	lazyMixWindow = LazyMixChunk * LazyMixWindowChunks
	// A source is big when it has at least one row per LazyMixChunk − 2·MaxSources slots on average; the others
	// (tiny) have at most 2 rows in a chunk.
	lazyMixBigSpan = LazyMixChunk - 2*MaxSources

	streamLazyMixSource uint64 = 8 // a source's pass permutations in a lazy mixture
	lazyMixAlgorithm           = "gload/mixture/lazy-chunks/v1"
	lazyMixPhaseBits           = 16
)

// MixSource is one dataset of a mixture given by a [Lengths] (int64 rows): see [Source].
type MixSource struct {
	Name        string
	Fingerprint string
	Lengths     Lengths
	Weight      float64
	// MaxLength, when not 0, is at least the source's longest row (a dataset's index knows it); 0: a lazy mixture
	// finds it with [MaxLengthOf] (a pass over the lengths unless they are a [MaxLengther]). It sets [LazyMixture.Bound].
	MaxLength uint32
}

// MixturePlan is one mixture epoch, exact ([Mixture]) or lazy ([LazyMixture]): what a server serves of it.
type MixturePlan interface {
	EpochPlan
	Fingerprint() string
	Shares() []SourceShare
	Shapes() []Shape
	Stats() Stats
	Config() Config
	PerRank(start, world int) int
	// Bound is the largest batch the plan may hold (exact mixtures: the bound of Shapes, which lists every shape).
	Bound() Bound
}

var (
	_ MixturePlan = (*Mixture)(nil)
	_ MixturePlan = (*LazyMixture)(nil)
)

// Hash is [HashBatches] over the mixture's batches (one pass over them).
func (m *Mixture) Hash() string { return HashBatches(m.Len(), m.Batch) }

// Bound is [BoundOf] the mixture's shapes (it lists every one).
func (m *Mixture) Bound() Bound { return BoundOf(m.Shapes()) }

func mixSourceInputs(sources []MixSource) []mixIn {
	out := make([]mixIn, len(sources))
	for i, s := range sources {
		var n int64
		if s.Lengths != nil {
			n = s.Lengths.Len()
		}
		out[i] = mixIn{name: s.Name, fp: s.Fingerprint, rows: n, weight: s.Weight}
	}
	return out
}

// MixSourcesFingerprint is [MixtureFingerprint] for sources given by [Lengths]: the same value for the same
// sources, reading no lengths but their count, for sources of up to [MaxLazyMixRows] rows. Exact and lazy plans of
// one mixture share it (the plan's algorithm is in its Hash).
func MixSourcesFingerprint(sources []MixSource, mc MixConfig) (string, error) {
	in := mixSourceInputs(sources)
	w, until, err := checkMixIn(in, mc, Config{}, MaxLazyMixRows)
	if err != nil {
		return "", err
	}
	return mixFingerprint(in, w, until, mc), nil
}

// lazyMaxRows is the most slots mc allows a lazy epoch.
func (mc MixConfig) lazyMaxRows() int64 {
	if mc.MaxRows <= 0 || mc.MaxRows > MaxLazyMixRows {
		return MaxLazyMixRows
	}
	return mc.MaxRows
}

// NewEpochMixture plans epoch epoch of the mixture of sources: with [NewMixtureContext], exactly as before (same
// batches, fingerprint and resume states), when every source has at most 2^31−1 rows and the epoch at most
// [LazyThreshold] slots, or when the plan is one the lazy mixture does not make (mix_by=tokens, packed,
// single-source batches, automatic boundaries: then at most 2^31−1 rows per source and mc's MaxRows slots);
// otherwise with [NewLazyMixture]. cfg.Planner overrides the size rule: exact always plans with
// [NewMixtureContext], lazy always with [NewLazyMixture] (an error for what it does not plan). run is the lazy
// plan's counting pass's [Runner] (tokens policy).
func NewEpochMixture(ctx context.Context, sources []MixSource, seed uint64, epoch int, cfg Config, mc MixConfig, run Runner) (MixturePlan, error) {
	exact := func() (MixturePlan, error) {
		src := make([]Source, len(sources))
		for i, s := range sources {
			if s.Lengths != nil && s.Lengths.Len() > math.MaxInt32 {
				return nil, fmt.Errorf("mixture source %q of %d rows: %w (at most %d rows for this plan)", s.Name, s.Lengths.Len(), ErrTooLarge, math.MaxInt32)
			}
			src[i] = Source{Name: s.Name, Fingerprint: s.Fingerprint, Weight: s.Weight}
			if s.Lengths != nil {
				src[i].Lengths = lengthsSlice(s.Lengths)
			}
		}
		return NewMixtureContext(ctx, src, seed, epoch, cfg, mc)
	}
	c, err := cfg.normalize()
	if err != nil {
		return nil, err
	}
	switch c.Planner {
	case PlannerExact:
		return exact()
	case PlannerLazy:
		if err := lazyMixUnsupported(c, mc); err != nil {
			return nil, fmt.Errorf("planner lazy: %w", err)
		}
		return NewLazyMixture(ctx, sources, seed, epoch, cfg, mc, run)
	}
	if lazyMixUnsupported(c, mc) != nil {
		return exact()
	}
	in := mixSourceInputs(sources)
	w, until, err := checkMixIn(in, mc, c, MaxLazyMixRows)
	if err != nil {
		return nil, err
	}
	counts, err := sampleCounts(in, w, until, mc, mc.lazyMaxRows())
	if err != nil {
		return nil, err
	}
	var n int64
	fits := true
	for i, k := range counts {
		n += k
		fits = fits && in[i].rows <= math.MaxInt32
	}
	if fits && n <= LazyThreshold {
		return exact()
	}
	return NewLazyMixture(ctx, sources, seed, epoch, cfg, mc, run)
}

// lazyMixUnsupported is the ConfigError for what lazy mixtures do not plan, or nil.
func lazyMixUnsupported(c Config, mc MixConfig) error {
	switch {
	case mc.MixBy == MixTokens:
		return cfgErr("mix_by", "tokens: not offered by lazy mixtures (finding where epoch e starts walks every row of epochs 0…e−1); exact mixtures: at most %d rows", MaxMixRows)
	case c.Policy == Packed:
		return cfgErr("policy", "the lazy mixture does not pack yet (packed mixtures: at most %d rows)", MaxMixRows)
	case mc.SingleSourceBatches:
		return cfgErr("single_source_batches", "not offered by lazy mixtures (at most %d rows)", MaxMixRows)
	case c.AutoBuckets > 0:
		return cfgErr("auto_buckets", "not supported by lazy mixtures (it needs the whole length histogram); give boundaries")
	case c.Sequential:
		return cfgErr("sequential", "not used by mixtures (rows come in mixture order)")
	case c.ShuffleWindow > 0:
		return cfgErr("shuffle_window", "not used by mixtures (rows come in mixture order)")
	}
	return nil
}

// lazySrc is one source of a lazy mixture.
type lazySrc struct {
	lengths Lengths
	fp      string
	rows    int64  // rows of the source
	count   int64  // slots of the epoch (c_s)
	start   int64  // stream position of the epoch's first row
	big     bool   // counted by largest remainder (else by rounding with phase)
	phase   uint64 // tiny: the rounding offset, in units of 2^-lazyMixPhaseBits
}

// LazyMixture is one mixture epoch computed on demand (see the package documentation, "Lazy mixtures"). It holds
// O(windows + sources) memory plus the windows being served, and is safe for concurrent use. Its batches carry in
// each Piece the Source and the row within that source, like [Mixture]'s.
type LazyMixture struct {
	cfg         Config
	fingerprint string
	seed        uint64
	epoch       int
	pd          padder
	src         []lazySrc
	n           int64 // slots
	cBig        int64 // Σ counts of big sources
	bigIdx      []int // big sources with count > 0, in source order
	tinyIdx     []int
	shares      []SourceShare
	winEnd      []int64 // global batches of windows 0 … w
	shapes      []Shape
	stats       Stats
	bound       Bound

	mu     sync.Mutex
	cache  []*mixTable
	last   int64
	streak int64
}

// NewLazyMixture plans epoch epoch of the mixture of sources as a lazy mixture (MixSamples only; bucketed and tokens
// policies). The result is a pure function of (the sources in the order given — fingerprints, row counts, lengths
// and weights —, seed, epoch, cfg, mc). Under tokens it reads every slot's length once (the counting pass, through
// run, stopping once ctx is done); under bucketed only the first window's. Errors are *ConfigError, ErrTooLarge (an
// epoch beyond mc's MaxRows or [MaxLazyMixRows]), ErrTokenBudget, or ctx's cause.
func NewLazyMixture(ctx context.Context, sources []MixSource, seed uint64, epoch int, cfg Config, mc MixConfig, run Runner) (*LazyMixture, error) {
	m, err := newLazyMixCounts(sources, seed, epoch, cfg, mc)
	if err != nil {
		return nil, err
	}
	c := m.cfg
	if run == nil {
		run = func(n int, f func(int)) {
			for i := range n {
				f(i)
			}
		}
	}
	nwin := int((m.n + lazyMixWindow - 1) / lazyMixWindow)
	wcount := make([]int64, nwin)
	if c.Policy == Bucketed {
		mb := int64(c.MegaBatchMult) * int64(c.BatchSize)
		for wi := range nwin {
			if wi%4096 == 0 && ctx.Err() != nil {
				return nil, fmt.Errorf("mixture plan: %w", context.Cause(ctx))
			}
			a, b := m.windowSlots(int64(wi))
			r := b - a
			wcount[wi] = r/mb*int64(c.MegaBatchMult) + (r%mb+int64(c.BatchSize)-1)/int64(c.BatchSize)
		}
		if nwin > 0 {
			t := m.buildWindow(0)
			m.shapes = t.shapeList()
			m.cache = append(m.cache, t)
		}
	} else if err := m.countTokens(ctx, run, wcount); err != nil {
		return nil, err
	}
	m.winEnd = make([]int64, nwin)
	var sum int64
	for wi, k := range wcount {
		sum += k
		m.winEnd[wi] = sum
	}
	if sum > math.MaxInt {
		return nil, fmt.Errorf("lazy mixture: %w: %d batches", ErrTooLarge, sum)
	}
	if c.Policy == Bucketed {
		var longest uint32
		for i, s := range sources {
			if m.src[i].count == 0 {
				continue
			}
			if s.MaxLength > 0 {
				longest = max(longest, s.MaxLength)
			} else {
				longest = max(longest, MaxLengthOf(s.Lengths))
			}
		}
		rows := int(min(int64(c.BatchSize), m.n))
		length := int(m.pd.pad(m.pd.eff(longest)))
		m.bound = Bound{Rows: rows, Length: length, Cells: int64(rows) * int64(length)}
	} else {
		m.bound = BoundOf(m.shapes) // the counting pass saw every batch
	}
	m.stats.Rows = int(m.n)
	m.stats.Pieces = int(m.n)
	m.stats.Batches = int(sum)
	m.stats.Shapes = len(m.shapes)
	if m.stats.PaddedTokens > 0 {
		m.stats.PaddingShare = float64(m.stats.PaddedTokens-m.stats.RealTokens) / float64(m.stats.PaddedTokens)
		m.stats.PackingEfficiency = float64(m.stats.RealTokens) / float64(m.stats.PaddedTokens)
	}
	return m, nil
}

// newLazyMixCounts checks the inputs and sets up a lazy mixture's sources and slot counts (no windows yet).
func newLazyMixCounts(sources []MixSource, seed uint64, epoch int, cfg Config, mc MixConfig) (*LazyMixture, error) {
	c, err := cfg.normalize()
	if err != nil {
		return nil, err
	}
	if epoch < 0 {
		return nil, cfgErr("epoch", "must be >= 0, got %d", epoch)
	}
	if err := lazyMixUnsupported(c, mc); err != nil {
		return nil, err
	}
	in := mixSourceInputs(sources)
	w, until, err := checkMixIn(in, mc, c, MaxLazyMixRows)
	if err != nil {
		return nil, err
	}
	for _, s := range sources {
		if s.Lengths == nil && s.Weight > 0 {
			return nil, cfgErr("mixture", "source %q has no lengths", s.Name)
		}
	}
	maxRows := mc.lazyMaxRows()
	counts, err := sampleCounts(in, w, until, mc, maxRows)
	if err != nil {
		return nil, err
	}
	m := &LazyMixture{cfg: c, seed: seed, epoch: epoch, last: -1, src: make([]lazySrc, len(sources)), shares: make([]SourceShare, len(sources))}
	m.fingerprint = mixFingerprint(in, w, until, mc)
	limit := lengthLimit(c.MaxLength)
	if len(c.Boundaries) > 0 {
		m.pd = newBoundsPadder(limit, c.Boundaries)
	} else {
		m.pd = newMultiplePadder(limit, c.PadMultiple)
	}
	for i, k := range counts {
		m.n += k
		if m.n > maxRows {
			return nil, fmt.Errorf("mixture epoch of more than %d rows: %w (at most %d rows per lazy mixture epoch)", maxRows, ErrTooLarge, maxRows)
		}
		hi, lo := bits.Mul64(uint64(epoch)+1, uint64(k))
		if hi != 0 || lo > math.MaxInt64 {
			return nil, fmt.Errorf("mixture epoch %d: %w (source %q's stream position passes 2^63)", epoch, ErrTooLarge, sources[i].Name)
		}
		m.src[i] = lazySrc{lengths: sources[i].Lengths, fp: sources[i].Fingerprint, rows: in[i].rows, count: k, start: int64(epoch) * k}
		m.shares[i] = SourceShare{Name: sources[i].Name, Weight: w[i], Rows: k, Start: int64(epoch) * k}
	}
	for i := range m.src {
		s := &m.src[i]
		switch {
		case s.count == 0:
		case s.count*lazyMixBigSpan >= m.n: // s.count ≤ 2^40: no overflow
			s.big = true
			m.bigIdx = append(m.bigIdx, i)
			m.cBig += s.count
		default:
			m.tinyIdx = append(m.tinyIdx, i)
		}
	}
	// Tiny source number j of T gets the rounding offset (j + ½)/T, so that equal tiny sources' rounding errors
	// cancel.
	for j, i := range m.tinyIdx {
		m.src[i].phase = uint64((2*j + 1) << (lazyMixPhaseBits - 1) / len(m.tinyIdx))
	}
	return m, nil
}

// countTokens is the tokens policy's counting pass: every window built once (through run), its batches counted,
// its tokens and shapes summed; a row longer than the budget or a done ctx fails it.
func (m *LazyMixture) countTokens(ctx context.Context, run Runner, wcount []int64) error {
	var mu sync.Mutex
	var firstErr error
	budget := int64(m.cfg.TokenBudget)
	tokens := make([]int64, len(m.src))
	shapes := map[Shape]bool{}
	run(len(wcount), func(wi int) {
		mu.Lock()
		stop := firstErr != nil
		mu.Unlock()
		if stop {
			return
		}
		if ctx.Err() != nil {
			mu.Lock()
			if firstErr == nil {
				firstErr = fmt.Errorf("mixture plan: %w", context.Cause(ctx))
			}
			mu.Unlock()
			return
		}
		a, b := m.windowSlots(int64(wi))
		st := newMixStreams(m)
		srcs := make([]uint8, b-a)
		rows := make([]int64, b-a)
		m.deal(a, b, srcs, rows)
		raw := make([]int64, len(m.src))
		for k, r := range rows {
			l := st.length(int(srcs[k]), r)
			if v := m.pd.pad(m.pd.eff(l)); v > budget {
				mu.Lock()
				if firstErr == nil {
					firstErr = fmt.Errorf("%w: token_budget %d is smaller than row %d of source %q (length %d, padded %d)",
						ErrTokenBudget, budget, r, m.shares[srcs[k]].Name, l, v)
				}
				mu.Unlock()
				return
			}
			raw[srcs[k]] += int64(l)
		}
		t := m.tableOf(int64(wi), a, srcs, rows)
		wcount[wi] = int64(len(t.boff) - 1)
		var real, padded int64
		for _, e := range t.effs {
			real += int64(e)
		}
		for bi := range len(t.boff) - 1 {
			padded += int64(t.boff[bi+1]-t.boff[bi]) * int64(t.blen[bi])
		}
		mu.Lock()
		for s, v := range raw {
			tokens[s] += v
		}
		m.stats.RealTokens += real
		m.stats.PaddedTokens += padded
		for bi := range len(t.boff) - 1 {
			shapes[Shape{Rows: int(t.boff[bi+1] - t.boff[bi]), Length: int(t.blen[bi])}] = true
		}
		if wi == 0 {
			m.cache = append(m.cache, t)
		}
		mu.Unlock()
	})
	if firstErr != nil {
		return firstErr
	}
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("mixture plan: %w", context.Cause(ctx))
	}
	for s, v := range tokens {
		m.shares[s].Tokens = v
	}
	for sh := range shapes {
		m.shapes = append(m.shapes, sh)
	}
	sortShapes(m.shapes)
	return nil
}

// prefix writes to f every source's slot count among slots [0, x) (0 ≤ x ≤ N): F_s(x).
//
//   - a tiny source t: ⌊x·c_t/N + φ_t⌋, φ_t its phase (exact 128-bit arithmetic);
//   - the big sources share B = x − Σ_t F_t(x) by largest remainder: ⌊B·c_b/C⌋, C = Σ_b c_b, plus one for the
//     B − Σ_b ⌊B·c_b/C⌋ big sources of largest remainder B·c_b mod C (ties to the lower index).
func (m *LazyMixture) prefix(x int64, f []int64) {
	clear(f)
	var tiny int64
	for _, i := range m.tinyIdx {
		s := &m.src[i]
		// ⌊(x·c·2^P + phase·N) / (N·2^P)⌋
		hi, lo := bits.Mul64(uint64(x), uint64(s.count))
		hi = hi<<lazyMixPhaseBits | lo>>(64-lazyMixPhaseBits)
		lo <<= lazyMixPhaseBits
		add := s.phase * uint64(m.n)
		var carry uint64
		lo, carry = bits.Add64(lo, add, 0)
		hi += carry
		q, _ := bits.Div64(hi, lo, uint64(m.n)<<lazyMixPhaseBits)
		f[i] = int64(q)
		tiny += int64(q)
	}
	b := uint64(x - tiny)
	var given int64
	var rems [MaxSources]uint64
	for k, i := range m.bigIdx {
		hi, lo := bits.Mul64(b, uint64(m.src[i].count))
		q, r := bits.Div64(hi, lo, uint64(m.cBig))
		f[i] = int64(q)
		rems[k] = r
		given += int64(q)
	}
	d := int(int64(b) - given)
	if d <= 0 {
		return
	}
	// The d largest remainders, ties to the lower index (d < number of big sources).
	order := make([]int, len(m.bigIdx))
	for k := range order {
		order[k] = k
	}
	sort.SliceStable(order, func(a, b int) bool { return rems[order[a]] > rems[order[b]] })
	for _, k := range order[:d] {
		f[m.bigIdx[k]]++
	}
}

// windowSlots returns window w's slots [a, b).
func (m *LazyMixture) windowSlots(w int64) (a, b int64) {
	return min(w*lazyMixWindow, m.n), min((w+1)*lazyMixWindow, m.n)
}

// deal writes the source and the source row of every slot of [a, b) (a chunk-aligned or not) to srcs and rows:
// chunk by chunk, source s's k_s = F_s(end) − F_s(start) slots of the chunk are dealt by smooth weighted round-robin
// (every source's credit grows by k_s, the most credit, lowest index among equals, takes the slot and pays the
// chunk's length), and source s's j-th slot of the epoch reads the row at its stream position start_s + j.
func (m *LazyMixture) deal(a, b int64, srcs []uint8, rows []int64) {
	k := len(m.src)
	f0, f1 := make([]int64, k), make([]int64, k)
	credit := make([]int64, k)
	cnt := make([]int64, k)
	active := make([]int, 0, k)
	st := newMixStreams(m)
	c := a / LazyMixChunk
	m.prefix(min(c*LazyMixChunk, m.n), f0)
	for ; c*LazyMixChunk < b; c++ {
		lo, hi := c*LazyMixChunk, min((c+1)*LazyMixChunk, m.n)
		m.prefix(hi, f1)
		active = active[:0]
		for s := range k {
			cnt[s] = f1[s] - f0[s]
			credit[s] = 0
			if cnt[s] > 0 {
				active = append(active, s)
			}
		}
		l := hi - lo
		// The deal of slot x depends on the chunk's slots before it only: stop at b.
		for x := lo; x < min(hi, b); x++ {
			best := swrrNext(active, credit, cnt, l)
			if x >= a {
				srcs[x-a] = uint8(best)
				rows[x-a] = st.row(best, f0[best])
			}
			f0[best]++
		}
		f0, f1 = f1, f0
	}
}

// mixStreams evaluates sources' pass permutations, keeping one pass's per source.
type mixStreams struct {
	m     *LazyMixture
	pass  []int64
	perms []feistel
}

func newMixStreams(m *LazyMixture) *mixStreams {
	st := &mixStreams{m: m, pass: make([]int64, len(m.src)), perms: make([]feistel, len(m.src))}
	for i := range st.pass {
		st.pass[i] = -1
	}
	return st
}

// row returns source s's row at the epoch's j-th slot of s: stream position u = start_s + j, pass u div rows,
// row π_{s,pass}(u mod rows).
func (st *mixStreams) row(s int, j int64) int64 {
	src := &st.m.src[s]
	if src.rows == 1 {
		return 0 // every pass of a one-row source is that row: no key to derive
	}
	u := src.start + j
	k := u / src.rows
	if k != st.pass[s] {
		st.pass[s] = k
		st.perms[s] = newFeistel(uint64(src.rows), streamKey(src.fp, st.m.seed, int(k), streamLazyMixSource))
	}
	return int64(st.perms[s].at(uint64(u % src.rows)))
}

func (st *mixStreams) length(s int, r int64) uint32 { return st.m.src[s].lengths.Length(r) }

// mixTable is window w built whole: its slots' sources, rows and delivered lengths in batch order, and batch t =
// slots boff[t] … boff[t+1]−1 of length blen[t].
type mixTable struct {
	w    int64
	src  []uint8
	rows []int64
	effs []uint32
	boff []int32
	blen []int32
}

func (t *mixTable) shapeList() []Shape {
	seen := map[Shape]bool{}
	var out []Shape
	for b := range len(t.boff) - 1 {
		sh := Shape{Rows: int(t.boff[b+1] - t.boff[b]), Length: int(t.blen[b])}
		if !seen[sh] {
			seen[sh] = true
			out = append(out, sh)
		}
	}
	sortShapes(out)
	return out
}

// buildWindow builds window w's table.
func (m *LazyMixture) buildWindow(w int64) *mixTable {
	a, b := m.windowSlots(w)
	srcs := make([]uint8, b-a)
	rows := make([]int64, b-a)
	m.deal(a, b, srcs, rows)
	return m.tableOf(w, a, srcs, rows)
}

// tableOf groups window w's dealt slots (srcs, rows; the window starts at slot a) into batches.
func (m *LazyMixture) tableOf(w, a int64, srcs []uint8, rows []int64) *mixTable {
	n := len(srcs)
	t := &mixTable{w: w, src: srcs, rows: rows, effs: make([]uint32, n), boff: []int32{0}}
	for i, r := range rows {
		t.effs[i] = uint32(m.pd.eff(m.src[srcs[i]].lengths.Length(r)))
	}
	c := m.cfg
	g := newMixGrouper(len(m.src))
	for lo := 0; lo < n; {
		hi := megaEnd(&m.pd, c, t.effs, lo)
		g.group(t.src[lo:hi], t.rows[lo:hi], t.effs[lo:hi])
		for s := lo; s < hi; {
			cnt, l := m.cut(t.effs[s:hi])
			s += cnt
			t.boff = append(t.boff, int32(s))
			t.blen = append(t.blen, int32(l))
		}
		lo = hi
	}
	return t
}

// mixGrouper sorts, within one mega-batch, each source's rows by delivered length descending (ties in slot order)
// and puts them back into that source's slots (buildMixGrouped's step 2).
type mixGrouper struct {
	count        []int
	pos, idx, tr []int32
	keys, tk     []uint32
	rows         []int64
	effs         []uint32
}

func newMixGrouper(k int) *mixGrouper { return &mixGrouper{count: make([]int, k+1)} }

func (g *mixGrouper) group(src []uint8, rows []int64, effs []uint32) {
	m := len(src)
	if cap(g.pos) < m {
		g.pos, g.idx, g.tr = make([]int32, m), make([]int32, m), make([]int32, m)
		g.keys, g.tk, g.rows, g.effs = make([]uint32, m), make([]uint32, m), make([]int64, m), make([]uint32, m)
	}
	pos, idx, keys := g.pos[:m], g.idx[:m], g.keys[:m]
	clear(g.count)
	for _, s := range src {
		g.count[int(s)+1]++
	}
	k := len(g.count) - 1
	for s := 1; s <= k; s++ {
		g.count[s] += g.count[s-1]
	}
	for i, s := range src {
		at := g.count[s]
		g.count[s]++
		pos[at] = int32(i)
		idx[at] = int32(i)
		keys[at] = effs[i]
	}
	lo := 0
	for s := range k {
		hi := g.count[s]
		sortDesc(keys[lo:hi], idx[lo:hi], g.tk[:hi-lo], g.tr[:hi-lo])
		lo = hi
	}
	copy(g.rows[:m], rows)
	copy(g.effs[:m], effs)
	for at, p := range pos {
		rows[p] = g.rows[idx[at]]
		effs[p] = g.effs[idx[at]]
	}
}

// cut returns the rows and padded length of the batch that starts at effs[0] (buildMixGrouped's step 3: bucketed B
// rows; tokens as many rows as rows × L ≤ TokenBudget allows, L the padded longest so far, at most B when B > 0).
func (m *LazyMixture) cut(effs []uint32) (int, int64) {
	c := m.cfg
	var l int64
	cnt := 0
	if c.Policy == Bucketed {
		cnt = min(c.BatchSize, len(effs))
		for _, e := range effs[:cnt] {
			l = max(l, m.pd.pad(int64(e)))
		}
		return cnt, l
	}
	budget := int64(c.TokenBudget)
	for cnt < len(effs) && (c.BatchSize == 0 || cnt < c.BatchSize) {
		nl := max(l, m.pd.pad(int64(effs[cnt])))
		if int64(cnt+1)*nl > budget {
			break
		}
		l = nl
		cnt++
	}
	if cnt == 0 { // a row above the budget (refused when planning): deliver it alone
		return 1, m.pd.pad(int64(effs[0]))
	}
	return cnt, l
}

// Len returns the number of global batches.
func (m *LazyMixture) Len() int {
	if len(m.winEnd) == 0 {
		return 0
	}
	return int(m.winEnd[len(m.winEnd)-1])
}

// Slots returns the epoch's slots (rows of all sources together).
func (m *LazyMixture) Slots() int64 { return m.n }

// Windows returns the number of windows.
func (m *LazyMixture) Windows() int { return len(m.winEnd) }

// WindowBatches returns the global batches [lo, hi) of window w.
func (m *LazyMixture) WindowBatches(w int) (lo, hi int) {
	if w > 0 {
		lo = int(m.winEnd[w-1])
	}
	return lo, int(m.winEnd[w])
}

// SlotCounts returns every source's slots among the epoch's slots [0, x), 0 ≤ x ≤ Slots() (O(sources)).
func (m *LazyMixture) SlotCounts(x int64) []int64 {
	f := make([]int64, len(m.src))
	m.prefix(min(max(x, 0), m.n), f)
	return f
}

// Fingerprint identifies the mixture (the same as an exact plan's of these sources: [MixSourcesFingerprint]).
func (m *LazyMixture) Fingerprint() string { return m.fingerprint }

// Shares returns what each source contributes to this epoch. Tokens is 0 under bucketed (counting them would be a
// pass over every slot); under tokens the counting pass sums them.
func (m *LazyMixture) Shares() []SourceShare { return slices.Clone(m.shares) }

// Shapes returns the shapes of window 0's batches under bucketed, of every batch under tokens (the counting pass
// sees them all), longest first. Every batch is within [LazyMixture.Bound].
func (m *LazyMixture) Shapes() []Shape { return slices.Clone(m.shapes) }

// Bound returns the largest batch the epoch may hold: under bucketed BatchSize rows of the sources' longest row
// (MixSource.MaxLength, else [MaxLengthOf]) delivered and padded, under tokens the bound of every shape (the
// counting pass saw them all). Shapes lists only window 0's shapes under bucketed; every batch is within Bound.
func (m *LazyMixture) Bound() Bound { return m.bound }

// Stats returns the epoch's summary: Rows and Pieces are the slots, Batches and Shapes as Len and Shapes; under
// tokens the token counts come from the counting pass, under bucketed they are 0.
func (m *LazyMixture) Stats() Stats { return m.stats }

// Config returns the plan's configuration with defaults applied.
func (m *LazyMixture) Config() Config { return m.cfg }

// Assign deals the plan's batches exactly as [Plan.Assign] does.
func (m *LazyMixture) Assign(start, rank, world, worker, workers int) ([]int, error) {
	return assign(m.Len(), m.cfg.Remainder, start, rank, world, worker, workers)
}

// PerRank is [Plan.PerRank].
func (m *LazyMixture) PerRank(start, world int) int {
	return perRank(m.Len(), m.cfg.Remainder, start, world)
}

// Algorithm names the planner ("gload/mixture/lazy-chunks/v1"; see [LazyPlan.Algorithm]).
func (m *LazyMixture) Algorithm() string { return lazyMixAlgorithm }

// Hash identifies the plan without building its batches: 32 hex digits of SHA-256 over
//
//	"gload/mixture/lazy-chunks/v1" 0x00 ‖ u64le(LazyMixChunk) ‖ u64le(LazyMixWindowChunks) ‖
//	u64le(len(fingerprint)) ‖ fingerprint ‖ u64le(seed) ‖ u64le(epoch) ‖ the policy (see appendPolicy) ‖
//	u64le(slots) ‖ u64le(sources) ‖ per source: u64le(len(fingerprint)) ‖ fingerprint ‖ u64le(rows) ‖
//	u64le(slots of the epoch) ‖ u64le(stream start) ‖
//	u64le(windows) ‖ u64le(global batches after window w) for every window
//
// The algorithm is named, so no lazy mixture hashes like an exact plan or a lazy single-dataset plan.
func (m *LazyMixture) Hash() string {
	h := sha256.New()
	var b []byte
	u := func(v uint64) { b = binary.LittleEndian.AppendUint64(b, v) }
	str := func(s string) {
		u(uint64(len(s)))
		b = append(b, s...)
	}
	b = append(b, lazyMixAlgorithm...)
	b = append(b, 0)
	u(LazyMixChunk)
	u(LazyMixWindowChunks)
	str(m.fingerprint)
	u(m.seed)
	u(uint64(m.epoch))
	b = m.cfg.appendPolicy(b)
	u(uint64(m.n))
	u(uint64(len(m.src)))
	for _, s := range m.src {
		str(s.fp)
		u(uint64(s.rows))
		u(uint64(s.count))
		u(uint64(s.start))
	}
	u(uint64(len(m.winEnd)))
	for _, e := range m.winEnd {
		u(uint64(e))
		if len(b) > 60<<10 {
			h.Write(b)
			b = b[:0]
		}
	}
	h.Write(b)
	return hex.EncodeToString(h.Sum(nil)[:16])
}

// Shape returns the shape of global batch g (it builds the batch).
func (m *LazyMixture) Shape(g int) Shape {
	b := m.Batch(g)
	return Shape{Rows: b.Rows, Length: b.Length}
}

// Batch builds global batch g, g in [0, Len()); it panics, like a slice index, for any other g. Window w is the one
// whose batches hold g (binary search of the prefix table) and g is its batch t = g − its first batch, batches in
// slot order. A bucketed batch read alone is built from its mega-batch's slots (its chunks dealt again); a tokens
// batch, or one of a window read in turn, from the window built whole (the two newest are kept).
func (m *LazyMixture) Batch(g int) Batch {
	if g < 0 || g >= m.Len() {
		panic(fmt.Sprintf("bucket: batch index %d out of range [0:%d)", g, m.Len()))
	}
	wi := sort.Search(len(m.winEnd), func(i int) bool { return m.winEnd[i] > int64(g) })
	lo, _ := m.WindowBatches(wi)
	w, t := int64(wi), int64(g-lo)
	if tb := m.table(w, m.cfg.Policy != Bucketed); tb != nil {
		return m.fromTable(tb, t)
	}
	return m.fromMega(w, t)
}

// table is LazyPlan.table for mixture windows.
func (m *LazyMixture) table(w int64, build bool) *mixTable {
	m.mu.Lock()
	for _, t := range m.cache {
		if t.w == w {
			m.mu.Unlock()
			return t
		}
	}
	if m.last == w {
		m.streak++
	} else {
		m.last, m.streak = w, 1
	}
	a, b := m.windowSlots(w)
	build = build || m.streak > (b-a)/int64(m.cfg.MegaBatchMult*max(m.cfg.BatchSize, 1))
	m.mu.Unlock()
	if !build {
		return nil
	}
	t := m.buildWindow(w)
	m.mu.Lock()
	if len(m.cache) >= 2 {
		m.cache = append(m.cache[:0], m.cache[1:]...)
	}
	m.cache = append(m.cache, t)
	m.mu.Unlock()
	return t
}

func (m *LazyMixture) fromTable(tb *mixTable, t int64) Batch {
	lo, hi := int(tb.boff[t]), int(tb.boff[t+1])
	b := Batch{Rows: hi - lo, Length: int(tb.blen[t]), Pieces: make([]Piece, hi-lo)}
	for k := lo; k < hi; k++ {
		b.Pieces[k-lo] = Piece{Index: int(tb.rows[k]), Len: int(tb.effs[k]), Source: int(tb.src[k])}
	}
	return b
}

// fromMega builds bucketed batch t of window w from its mega-batch only.
func (m *LazyMixture) fromMega(w, t int64) Batch {
	a, b := m.windowSlots(w)
	mm := int64(m.cfg.MegaBatchMult)
	mb := mm * int64(m.cfg.BatchSize)
	k := t / mm
	lo, hi := a+k*mb, min(a+(k+1)*mb, b)
	n := int(hi - lo)
	srcs := make([]uint8, n)
	rows := make([]int64, n)
	effs := make([]uint32, n)
	m.deal(lo, hi, srcs, rows)
	for i, r := range rows {
		effs[i] = uint32(m.pd.eff(m.src[srcs[i]].lengths.Length(r)))
	}
	newMixGrouper(len(m.src)).group(srcs, rows, effs)
	s := int((t - k*mm) * int64(m.cfg.BatchSize))
	cnt, l := m.cut(effs[s:])
	out := Batch{Rows: cnt, Length: int(l), Pieces: make([]Piece, cnt)}
	for i := range cnt {
		out.Pieces[i] = Piece{Index: int(rows[s+i]), Len: int(effs[s+i]), Source: int(srcs[s+i])}
	}
	return out
}
