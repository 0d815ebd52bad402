package bucket

import (
	"fmt"
	"math"
	"slices"
)

// Lazy packed plans: the packed policy past [LazyThreshold] rows, in O(windows) memory (see the package
// documentation, "Lazy packed plans"). The blocks, block permutation, windows and row permutation of each window
// are a [LazyPlan]'s; each window's rows are packed on their own by the exact planner's first-fit-decreasing, the
// window's packed rows are permuted by a keyed permutation and grouped BatchSize at a time. A counting pass packs
// every window once (through the caller's [Runner]) to fill the prefix table of batches per window; its result
// ([PackedCounts]) can be kept by the caller, under [LazyPackedKey], and given to [NewLazyPackedFrom] to skip it.

const (
	lazyPackedAlgorithm       = "gload/plan/lazy-packed/v1"
	lazyPackedCountsAlgorithm = "gload/plan/lazy-packed-counts/v1"

	// streamLazyPacked permutes each window's packed rows (8 is the lazy mixture's).
	streamLazyPacked uint64 = 9

	// MaxWindowPieces is the most pieces (SeqLen runs of a split document, tails, whole documents) one window of a
	// lazy packed plan may hold: 32 per row of a full window on average, documents of 128 Ki tokens at SeqLen
	// 4096. It bounds a window's memory (about 90 bytes per piece while it is packed); a plan that would pass it
	// is refused with [ErrTooLarge] (raise SeqLen or set MaxLength).
	MaxWindowPieces = 1 << 25

	// packedVerifyWindows is how many windows beside window 0 [NewLazyPackedFrom] packs again to check the
	// counts it is given.
	packedVerifyWindows = 2
	// lazyPackedKeep is how many packed windows a plan keeps: enough for consumers a few windows apart (a stream
	// from object storage looks 4 096 of its batches ahead, several windows at world sizes of 8 and more).
	lazyPackedKeep = 4
	// packedHistMax: the counting pass counts item lengths in a histogram when SeqLen is below it, else sorts them.
	packedHistMax = 1 << 20
)

// PackedCounts is the result of a lazy packed plan's counting pass: what the plan needs to know of every window
// without packing it again. Keep it (MarshalBinary) under the plan's [LazyPackedKey] and give it to
// [NewLazyPackedFrom] to plan the same epoch again without the counting pass.
type PackedCounts struct {
	Key            string  // LazyPackedKey of the plan counted
	Rows           []int32 // packed rows of every window
	Pieces         int64   // pieces of the epoch
	RealTokens     int64   // tokens delivered
	Tokens         int64   // tokens of all rows before truncation
	MaxBatchPieces int64   // the most pieces any BatchSize packed rows of one window hold
}

// winCount is one window's counting-pass result.
type winCount struct {
	rows        int32
	pieces      int64
	real        int64
	tokens      int64
	batchPieces int64
}

// LazyPacked is one epoch of a packed plan, computed on demand: O(windows) memory (12 bytes per window of about
// 2^20 rows) plus the lazyPackedKeep windows last served (8 bytes per row and 12 per piece of a window: about
// 23 MB for 2^20 rows of web text). It is safe for
// concurrent use.
type LazyPacked struct {
	cfg         Config
	fingerprint string
	seed        uint64
	epoch       int
	lengths     Lengths
	pd          padder

	lazyLayout
	keyPacked uint64
	counts    PackedCounts
	shapes0   []Shape
	stats     Stats
	bound     Bound

	cache winCache[*packTable] // the lazyPackedKeep most recently packed windows
}

var _ EpochPlan = (*LazyPacked)(nil)

// LazyPackedKey names the counting pass of the lazy packed plan of (rows, fingerprint, seed, epoch, cfg): 32 hex
// digits of SHA-256 laid out as [LazyPacked.Hash]'s, over "gload/plan/lazy-packed-counts/v1" and without the
// prefix table. Counts are valid for exactly the plans of one key.
func LazyPackedKey(rows int64, fingerprint string, seed uint64, epoch int, cfg Config) (string, error) {
	p, err := newLazyPacked(rows, nil, fingerprint, seed, epoch, cfg)
	if err != nil {
		return "", err
	}
	return p.key(), nil
}

func (p *LazyPacked) key() string {
	return p.hash(lazyPackedCountsAlgorithm, p.fingerprint, p.seed, p.epoch, p.cfg, 0, false)
}

// newLazyPacked checks the configuration and lays out the plan, without counting.
func newLazyPacked(n int64, lengths Lengths, fingerprint string, seed uint64, epoch int, cfg Config) (*LazyPacked, error) {
	c, err := cfg.normalize()
	if err != nil {
		return nil, err
	}
	if epoch < 0 {
		return nil, cfgErr("epoch", "must be >= 0, got %d", epoch)
	}
	switch {
	case c.Policy != Packed:
		return nil, cfgErr("policy", "a lazy packed plan packs (policy is %s; see NewLazyPlan)", c.Policy)
	case c.ShuffleWindow > 0:
		return nil, cfgErr("shuffle_window", "not supported by the lazy plan (it reads the dataset in windows of %d rows already)", LazyBlockRows*LazyWindowBlocks)
	}
	layout, err := newLazyLayout(n, fingerprint, seed, epoch, c.Remainder)
	if err != nil {
		return nil, err
	}
	return &LazyPacked{cfg: c, fingerprint: fingerprint, seed: seed, epoch: epoch, lengths: lengths,
		pd: newMultiplePadder(lengthLimit(c.MaxLength), 1), lazyLayout: layout,
		keyPacked: streamKey(fingerprint, seed, epoch, streamLazyPacked), cache: newWinCache[*packTable](lazyPackedKeep)}, nil
}

// NewLazyPacked plans one epoch of lengths under the packed policy as a lazy block plan: BatchSize, SeqLen,
// SplitDocs, MaxLength and Remainder apply as in [NewPlan]; WarmupShapes is ignored (as by exact packed plans);
// ShuffleWindow is an error. Its counting pass packs every window once through run (parallel if it likes; the
// result does not depend on it); keep [LazyPacked.Counts] to skip it next time ([NewLazyPackedFrom]).
func NewLazyPacked(lengths Lengths, fingerprint string, seed uint64, epoch int, cfg Config, run Runner) (*LazyPacked, error) {
	p, err := newLazyPacked(lengths.Len(), lengths, fingerprint, seed, epoch, cfg)
	if err != nil {
		return nil, err
	}
	nwin := p.windows()
	wcs := make([]winCount, nwin)
	errs := make([]error, nwin)
	run.orSerial()(nwin, func(w int) { wcs[w], errs[w] = p.countWindow(int64(w)) })
	for _, err := range errs {
		if err != nil {
			return nil, err // the first window's that failed
		}
	}
	c := PackedCounts{Key: p.key(), Rows: make([]int32, nwin)}
	for w, wc := range wcs {
		c.Rows[w] = wc.rows
		c.Pieces += wc.pieces
		c.RealTokens += wc.real
		c.Tokens += wc.tokens
		c.MaxBatchPieces = max(c.MaxBatchPieces, wc.batchPieces)
	}
	return p, p.setPackedCounts(c)
}

// NewLazyPackedFrom is [NewLazyPacked] with the counting pass's result given (from [LazyPacked.Counts] of the
// same plan, kept by the caller). It checks that the counts are of this plan (their key) and of its windows, and
// packs window 0, the last window and a few keyed-random windows again to check that they match the lengths; it
// fails with an error naming the mismatch rather than plan from wrong counts. The other windows' counts are checked
// when a window is packed to serve a batch: Batch panics, naming the window. Only counts that [NewLazyPacked]
// computed for the same key should be given.
func NewLazyPackedFrom(lengths Lengths, fingerprint string, seed uint64, epoch int, cfg Config, counts PackedCounts) (*LazyPacked, error) {
	p, err := newLazyPacked(lengths.Len(), lengths, fingerprint, seed, epoch, cfg)
	if err != nil {
		return nil, err
	}
	if k := p.key(); counts.Key != k {
		return nil, fmt.Errorf("lazy packed plan: counts of plan %q given for plan %q", counts.Key, k)
	}
	nwin := p.windows()
	if len(counts.Rows) != nwin {
		return nil, fmt.Errorf("lazy packed plan: counts of %d windows given for %d", len(counts.Rows), nwin)
	}
	if nwin > 0 {
		check := []int64{0, int64(nwin - 1)} // the first, the last (often short) and keyed-random ones
		for i := range packedVerifyWindows {
			check = append(check, int64(splitmixAt(p.keyPacked, uint64(1)<<32+uint64(i))%uint64(nwin)))
		}
		for _, w := range check {
			wc, err := p.countWindow(w)
			if err != nil {
				return nil, err
			}
			if wc.rows != counts.Rows[w] {
				return nil, fmt.Errorf("lazy packed plan: counts do not match the lengths: window %d packs into %d rows, the counts say %d", w, wc.rows, counts.Rows[w])
			}
			if wc.batchPieces > counts.MaxBatchPieces {
				return nil, fmt.Errorf("lazy packed plan: counts do not match the lengths: window %d has %d pieces in %d rows, the counts say at most %d", w, wc.batchPieces, p.cfg.BatchSize, counts.MaxBatchPieces)
			}
		}
	}
	counts.Rows = slices.Clone(counts.Rows)
	return p, p.setPackedCounts(counts)
}

// setPackedCounts sets the prefix table, shapes, stats and bound from counts.
func (p *LazyPacked) setPackedCounts(c PackedCounts) error {
	b := int64(p.cfg.BatchSize)
	s := int64(p.cfg.SeqLen)
	batches := make([]int64, len(c.Rows))
	var rows, most int64
	for w, r := range c.Rows {
		if r < 0 {
			return fmt.Errorf("lazy packed plan: window %d: %d packed rows", w, r)
		}
		batches[w] = (int64(r) + b - 1) / b
		rows += int64(r)
		most = max(most, int64(r))
	}
	if err := p.setCounts(batches); err != nil {
		return err
	}
	p.counts = c
	if len(c.Rows) > 0 {
		if nr := int(c.Rows[0]); nr > 0 {
			p.shapes0 = append(p.shapes0, Shape{Rows: min(int(b), nr), Length: int(s)})
			if last := nr % int(b); last != 0 && nr > int(b) {
				p.shapes0 = append(p.shapes0, Shape{Rows: last, Length: int(s)})
			}
		}
	}
	p.stats = Stats{Rows: int(p.n), Pieces: int(c.Pieces), Batches: p.Len(), Shapes: len(p.shapes0),
		PackedRows: int(rows), RealTokens: c.RealTokens, TruncatedTokens: c.Tokens - c.RealTokens, PaddedTokens: rows * s}
	if p.stats.PaddedTokens > 0 {
		p.stats.PaddingShare = float64(p.stats.PaddedTokens-c.RealTokens) / float64(p.stats.PaddedTokens)
		p.stats.PackingEfficiency = float64(c.RealTokens) / float64(p.stats.PaddedTokens)
	}
	br := min(b, most)
	p.bound = Bound{Rows: int(br), Length: int(s), Cells: br * s, Pieces: c.MaxBatchPieces}
	return nil
}

// Counts returns the counting pass's result, to keep for [NewLazyPackedFrom].
func (p *LazyPacked) Counts() PackedCounts {
	c := p.counts
	c.Rows = slices.Clone(c.Rows)
	return c
}

// Config returns the plan's configuration with defaults applied.
func (p *LazyPacked) Config() Config { return p.cfg }

// Algorithm names the planner ("gload/plan/lazy-packed/v1"): a resume state saved under another planner (an exact
// packed plan of the same dataset, policy, seed and epoch) does not continue this plan.
func (p *LazyPacked) Algorithm() string { return lazyPackedAlgorithm }

// Shapes returns the shapes of window 0's batches: (BatchSize, SeqLen) and, when window 0's packed rows are not a
// multiple of BatchSize, its last batch's. Every window's last batch may be short; every batch is within
// [LazyPacked.Bound].
func (p *LazyPacked) Shapes() []Shape { return slices.Clone(p.shapes0) }

// Stats returns the epoch's summary, exact (the counting pass saw every row): Rows, Pieces, Batches, PackedRows,
// RealTokens, TruncatedTokens, PaddedTokens, PaddingShare, PackingEfficiency; Shapes counts window 0's shapes.
func (p *LazyPacked) Stats() Stats { return p.stats }

// Bound returns the largest batch: BatchSize rows (fewer when no window packs that many) of SeqLen tokens, and
// Pieces, the most pieces any batch holds: for each window the sum of the BatchSize largest piece counts of its
// packed rows, the most over the windows (from the counting pass). A packed row of S tokens holds at most S
// non-empty pieces, so Pieces ≤ BatchSize·SeqLen plus the window's empty documents (which all go to a window's
// first packed row).
func (p *LazyPacked) Bound() Bound { return p.bound }

// Hash identifies the plan: 32 hex digits of SHA-256 laid out as [LazyPlan.Hash]'s, over
// "gload/plan/lazy-packed/v1", with 0 for the warm-up and the prefix table of batches per window. No lazy packed
// plan hashes like an exact or a lazy bucketed one.
func (p *LazyPacked) Hash() string {
	return p.hash(lazyPackedAlgorithm, p.fingerprint, p.seed, p.epoch, p.cfg, 0, true)
}

// countWindow packs window w's rows by first-fit-decreasing from their lengths alone (the packing of a window
// depends only on the multiset of its item lengths; ties change which documents share a row, not the rows'
// fill) and returns what the plan needs of it.
func (p *LazyPacked) countWindow(w int64) (winCount, error) {
	var blk [LazyWindowBlocks]int64
	k, _ := p.windowBlocks(w, &blk)
	s := int64(p.cfg.SeqLen)
	split := p.cfg.SplitDocs
	var wc winCount
	var hist []int64
	if s < packedHistMax {
		hist = make([]int64, s+1)
	}
	var items int64
	// each calls f for every row of the window (in block order: the order does not matter here).
	each := func(f func(e int64)) {
		for i := range k {
			lo := blk[i] << lazyBlockBits
			for r := lo; r < min(lo+LazyBlockRows, p.n); r++ {
				f(int64(p.lengths.Length(r)))
			}
		}
	}
	each(func(l int64) {
		wc.tokens += l
		e := p.pd.eff(uint32(l))
		if !split || e <= s {
			items++
			if hist != nil {
				hist[min(e, s)]++
			}
			return
		}
		items += e / s
		if hist != nil {
			hist[s] += e / s
		}
		if e%s != 0 {
			items++
			if hist != nil {
				hist[e%s]++
			}
		}
	})
	if items > MaxWindowPieces {
		return wc, fmt.Errorf("lazy packed plan: window %d holds %d pieces: %w (at most %d a window; raise seq_len or set max_length)", w, items, ErrTooLarge, MaxWindowPieces)
	}
	pk := packer{tree: newBinTree(), s: s, split: split, maxRows: math.MaxInt32 - 1}
	var rowPieces []int32
	put := func(r int, k, x int64) {
		for len(rowPieces) <= r {
			rowPieces = append(rowPieces, 0)
		}
		rowPieces[r] += int32(k)
		wc.real += k * x
		wc.pieces += k
	}
	one := func(parts []part) {
		for _, pt := range parts {
			put(int(pt.row), 1, int64(pt.n))
		}
	}
	run := func(x, c int64) { pk.placeRun(x, c, put, one) }
	if hist != nil {
		for x := s; x >= 0; x-- {
			if hist[x] > 0 {
				run(x, hist[x])
			}
		}
	} else {
		lens := make([]uint32, 0, items)
		each(func(l int64) {
			e := p.pd.eff(uint32(l))
			if !split || e <= s {
				lens = append(lens, uint32(min(e, s)))
				return
			}
			for range e / s {
				lens = append(lens, uint32(s))
			}
			if e%s != 0 {
				lens = append(lens, uint32(e%s))
			}
		})
		slices.Sort(lens)
		for hi := len(lens); hi > 0; {
			lo := hi - 1
			for lo > 0 && lens[lo-1] == lens[hi-1] {
				lo--
			}
			run(int64(lens[hi-1]), int64(hi-lo))
			hi = lo
		}
	}
	wc.rows = int32(pk.tree.open)
	wc.batchPieces = topSum(rowPieces, p.cfg.BatchSize)
	return wc, nil
}

// topSum returns the sum of the k largest values of v.
func topSum(v []int32, k int) int64 {
	var sum int64
	if k >= len(v) {
		for _, x := range v {
			sum += int64(x)
		}
		return sum
	}
	top := slices.Clone(v[:k]) // a min-heap of the k largest so far
	heapify(top)
	for _, x := range v[k:] {
		if x > top[0] {
			top[0] = x
			siftDown(top, 0)
		}
	}
	for _, x := range top {
		sum += int64(x)
	}
	return sum
}

func heapify(h []int32) {
	for i := len(h)/2 - 1; i >= 0; i-- {
		siftDown(h, i)
	}
}

func siftDown(h []int32, i int) {
	for {
		c := 2*i + 1
		if c >= len(h) {
			return
		}
		if c+1 < len(h) && h[c+1] < h[c] {
			c++
		}
		if h[i] <= h[c] {
			return
		}
		h[i], h[c] = h[c], h[i]
		i = c
	}
}

// packTable is window w packed: place r of the window's permuted packed rows holds pieces [roff[r], roff[r+1]),
// piece k being tokens [pstart[k], pstart[k]+plen[k]) of row rows[pos[k]].
type packTable struct {
	rows   []int64 // the window's rows in window-position order (ρ_w)
	roff   []int32
	pos    []int32
	pstart []uint32
	plen   []uint32
}

// buildWindow packs window w (see the package documentation): its rows in ρ_w order become items (as [NewPlan]'s
// packer makes them, ties in that order), placed first-fit-decreasing; packed row k (in the order rows are opened)
// goes to place π_w(k) of the window.
func (p *LazyPacked) buildWindow(w int64) *packTable {
	win := p.window(w)
	m := int(win.rows)
	s := int64(p.cfg.SeqLen)
	t := &packTable{rows: make([]int64, m)}
	lengths := make([]uint32, m)
	perm := make([]int32, m)
	for q := range m {
		t.rows[q] = win.row(int64(q))
		lengths[q] = p.lengths.Length(t.rows[q])
		perm[q] = int32(q)
	}
	items, err := packItems(&p.pd, p.cfg.SplitDocs, lengths, perm, s)
	if err != nil {
		panic(fmt.Sprintf("bucket: lazy packed plan: window %d: %v", w, err)) // unreachable: the counting pass capped its pieces
	}
	lengths, perm = nil, nil
	pk := packer{tree: newBinTree(), s: s, split: p.cfg.SplitDocs, maxRows: math.MaxInt32 - 1}
	plBin := make([]int32, 0, len(items))
	plItem := make([]item, 0, len(items))
	next := 0 // the next item to place
	whole := func(r int, k, x int64) {
		for _, it := range items[next : next+int(k)] {
			plBin = append(plBin, int32(r))
			plItem = append(plItem, item{row: it.row, start: it.start, len: uint32(x)})
		}
		next += int(k)
	}
	one := func(parts []part) {
		it := items[next]
		for _, pt := range parts {
			plBin = append(plBin, pt.row)
			plItem = append(plItem, item{row: it.row, start: it.start + pt.off, len: pt.n})
		}
		next++
	}
	for lo := 0; lo < len(items); {
		hi := lo + 1
		for hi < len(items) && items[hi].len == items[lo].len {
			hi++
		}
		pk.placeRun(int64(items[lo].len), int64(hi-lo), whole, one)
		lo = hi
	}
	items = nil
	nr := pk.tree.open
	if want := p.counts.Rows[w]; int32(nr) != want {
		panic(fmt.Sprintf("bucket: lazy packed plan: window %d packs into %d rows, its counts say %d (counts not made for these lengths)", w, nr, want))
	}
	perm2 := newFeistel(uint64(nr), splitmixAt(p.keyPacked, uint64(w)+1))
	pos := make([]int32, nr)
	for k := range pos {
		pos[k] = int32(perm2.at(uint64(k)))
	}
	t.roff, t.pos, t.pstart, t.plen = gatherPieces(nr, plBin, plItem, pos)
	return t
}

// Batch builds global batch g, g in [0, Len()); it panics, like a slice index, for any other g. Batch j of window
// w (g = the window's first batch + j) is places j·BatchSize … of the window's permuted packed rows; the window is
// packed when a batch of it is first asked for and kept (the lazyPackedKeep newest windows), so a consumer reading the
// windows' batches in turn packs each window once.
func (p *LazyPacked) Batch(g int) Batch {
	w := p.windowOf(g)
	lo, _ := p.WindowBatches(w)
	t, _ := p.cache.get(int64(w), func(int32) bool { return true }, func() *packTable { return p.buildWindow(int64(w)) })
	nr := len(t.roff) - 1
	r0 := (g - lo) * p.cfg.BatchSize
	r1 := min(r0+p.cfg.BatchSize, nr)
	plo, phi := int(t.roff[r0]), int(t.roff[r1])
	b := Batch{Rows: r1 - r0, Length: p.cfg.SeqLen, Pieces: make([]Piece, phi-plo), RowStart: make([]int, r1-r0+1)}
	for k := plo; k < phi; k++ {
		b.Pieces[k-plo] = Piece{Index: int(t.rows[t.pos[k]]), Start: int(t.pstart[k]), Len: int(t.plen[k])}
	}
	for r := r0; r <= r1; r++ {
		b.RowStart[r-r0] = int(t.roff[r]) - plo
	}
	return b
}

// Shape returns the shape of global batch g without building it.
func (p *LazyPacked) Shape(g int) Shape {
	w := p.windowOf(g)
	lo, _ := p.WindowBatches(w)
	r0 := (g - lo) * p.cfg.BatchSize
	return Shape{Rows: min(p.cfg.BatchSize, int(p.counts.Rows[w])-r0), Length: p.cfg.SeqLen}
}

// MarshalBinary encodes the counts: "gload/plan/lazy-packed-counts/v1" 0x00 ‖ u64le(len(Key)) ‖ Key ‖
// u64le(windows) ‖ u32le(Rows[w]) for every window ‖ u64le of Pieces, RealTokens, Tokens, MaxBatchPieces ‖ the
// first 16 bytes of SHA-256 of everything before.
func (c PackedCounts) MarshalBinary() ([]byte, error) {
	return encodeWindowCounts(lazyPackedCountsAlgorithm, c.Key, c.Rows, []int64{c.Pieces, c.RealTokens, c.Tokens, c.MaxBatchPieces}), nil
}

// UnmarshalBinary decodes counts encoded by MarshalBinary, checking their checksum and every size before use.
func (c *PackedCounts) UnmarshalBinary(data []byte) error {
	key, rows, totals, err := decodeWindowCounts(lazyPackedCountsAlgorithm, "lazy packed counts", "packed rows", data, 4)
	if err != nil {
		return err
	}
	*c = PackedCounts{Key: key, Rows: rows, Pieces: totals[0], RealTokens: totals[1], Tokens: totals[2], MaxBatchPieces: totals[3]}
	return nil
}

// placeRun places c items of x tokens (the items of one length, in order) exactly as c calls of place would, but k
// at a time where they go to one row in a row: the leftmost row with room ≥ x takes the next item as long as its
// room stays ≥ x (rows left of it have less room, and rooms only shrink), and so does a row just opened. It calls
// whole(r, k, x) for k whole items placed in row r, and one(parts) for an item split across rows (SplitDocs), in
// placement order.
func (k *packer) placeRun(x, c int64, whole func(r int, k, x int64), one func(parts []part)) {
	for c > 0 {
		r := k.tree.first(x)
		if r < 0 && k.split && x > 0 && k.tree.maxRoom() > 0 {
			k.parts, _ = k.place(x, k.parts[:0]) // lazy packed windows open at most 2·MaxWindowPieces rows
			one(k.parts)
			c--
			continue
		}
		room := k.s
		if r >= 0 {
			room = k.tree.room(r)
		}
		n := c
		if x > 0 {
			n = min(c, room/x)
		}
		if r < 0 {
			r = k.tree.add(room - n*x)
		} else {
			k.tree.set(r, room-n*x)
		}
		whole(r, n, x)
		c -= n
	}
}
