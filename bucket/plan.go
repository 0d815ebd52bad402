package bucket

import (
	"cmp"
	"fmt"
	"math"
	"slices"
)

// Piece is one run of a dataset row's tokens in a batch: tokens
// [Start, Start+Len) of row Index.
type Piece struct {
	Index int // dataset row (in a mixture: the row within its source)
	Start int // first token
	Len   int // token count
	// Source is the mixture source the row comes from (its position in the
	// sources given to [NewMixture]); 0 for single-dataset plans.
	Source int
}

// Shape is a batch's padded shape.
type Shape struct {
	Rows   int
	Length int
}

// Batch is a view of one batch of a plan. For bucketed and tokens plans each
// row is one piece (Pieces[r] is row r, Start 0) and RowStart is nil. For
// packed plans row r is the concatenation of Pieces[RowStart[r]:RowStart[r+1]]
// and len(RowStart) == Rows+1.
type Batch struct {
	Rows     int
	Length   int
	Pieces   []Piece
	RowStart []int
}

// Stats summarises a plan.
type Stats struct {
	Rows            int   // dataset rows planned
	Pieces          int   // pieces over all batches
	Batches         int   // global batches (before remainder handling)
	Shapes          int   // distinct shapes
	PackedRows      int   // packed rows (packed policy; else 0)
	RealTokens      int64 // tokens delivered
	TruncatedTokens int64 // tokens cut off by MaxLength, boundaries or SeqLen
	PaddedTokens    int64 // Σ Rows×Length over batches
	// PaddingShare is (PaddedTokens − RealTokens) / PaddedTokens.
	PaddingShare float64
	// PackingEfficiency is RealTokens / PaddedTokens: for packed plans real
	// tokens / (packed rows × SeqLen); the same ratio for the other policies.
	PackingEfficiency float64
}

// Plan is one epoch's batches. It is immutable and safe for concurrent use.
type Plan struct {
	cfg         Config
	fingerprint string
	seed        uint64
	epoch       int
	bounds      []int // boundaries in use (explicit or automatic); nil for a multiple

	pd      padder
	lengths []uint32 // the caller's slice (bucketed, tokens): piece lengths are pd.eff(lengths[row])

	rows []int32 // row of every piece, batch after batch (internal batch order)

	// bucketed, tokens
	boff []int32 // pieces of internal batch b: rows[boff[b]:boff[b+1]]
	blen []int   // padded length of internal batch b
	seq  []int32 // global batch g is internal batch seq[g]

	// packed
	pstart []uint32 // first token of every piece
	plen   []uint32 // token count of every piece
	roff   []int32  // pieces of packed row r: [roff[r], roff[r+1])

	nbatch int
	shapes []Shape
	stats  Stats

	// mixSrc, for the inner plan of a [Mixture], is the source of every
	// input row: rows arrive in mixture order and are not shuffled (see
	// mixture.go). nil for ordinary plans.
	mixSrc []uint8
	// mixSingle: every batch of the mixture holds rows of one source.
	mixSingle bool
}

// NewPlan plans one epoch of a dataset whose row i holds lengths[i] tokens.
// The plan is a pure function of (fingerprint, lengths, seed, epoch, cfg): the
// same inputs give the same plan on every machine and Go version (see the
// package documentation for the algorithms).
//
// Packed plans place documents by first-fit-decreasing into rows of SeqLen
// tokens. A document is first truncated to MaxLength. Without SplitDocs a
// document longer than SeqLen is truncated to SeqLen and no document is ever
// split. With SplitDocs a document longer than SeqLen is cut into SeqLen-token
// pieces, each filling a row of its own, plus its tail; and a document (or
// tail) that fits in no open row is cut to fill the open row with the most
// room, its rest placed the same way, so a new row is opened only when every
// open row is full. Empty documents are zero-length pieces.
func NewPlan(lengths []uint32, fingerprint string, seed uint64, epoch int, cfg Config) (*Plan, error) {
	return newPlan(lengths, fingerprint, seed, epoch, cfg, nil)
}

// newPlan is NewPlan; with mixSrc non-nil the rows are taken in the given
// (mixture) order instead of being shuffled (see buildGrouped and
// buildPacked).
func newPlan(lengths []uint32, fingerprint string, seed uint64, epoch int, cfg Config, mixSrc []uint8) (*Plan, error) {
	return newMixPlan(lengths, fingerprint, seed, epoch, cfg, mixSrc, false)
}

// newMixPlan is newPlan; single makes every batch single-source.
func newMixPlan(lengths []uint32, fingerprint string, seed uint64, epoch int, cfg Config, mixSrc []uint8, single bool) (*Plan, error) {
	c, err := cfg.normalize()
	if err != nil {
		return nil, err
	}
	if epoch < 0 {
		return nil, cfgErr("epoch", "must be >= 0, got %d", epoch)
	}
	if len(lengths) > math.MaxInt32 {
		return nil, fmt.Errorf("plan %d rows: %w (at most %d rows)", len(lengths), ErrTooLarge, math.MaxInt32)
	}
	p := &Plan{cfg: c, fingerprint: fingerprint, seed: seed, epoch: epoch, mixSrc: mixSrc, mixSingle: single && mixSrc != nil}
	if mixSrc != nil {
		p.cfg.WarmupShapes = false
	}
	limit := lengthLimit(c.MaxLength)
	switch {
	case c.Policy == Packed:
		p.pd = newMultiplePadder(limit, 1)
	case len(c.Boundaries) > 0:
		p.bounds = c.Boundaries
		p.pd = newBoundsPadder(limit, c.Boundaries)
	case c.AutoBuckets > 0:
		p.bounds = autoBoundaries(lengths, limit, c.AutoBuckets, AutoMultiple)
		if len(p.bounds) == 0 {
			p.pd = newMultiplePadder(limit, AutoMultiple)
		} else {
			p.pd = newBoundsPadder(limit, p.bounds)
		}
	default:
		p.pd = newMultiplePadder(limit, c.PadMultiple)
	}
	switch {
	case c.Policy == Packed:
		err = p.buildPacked(lengths)
	case p.mixSingle:
		err = p.buildMixSingle(lengths)
	case mixSrc != nil:
		err = p.buildMixGrouped(lengths)
	default:
		err = p.buildGrouped(lengths)
	}
	if err != nil {
		return nil, err
	}
	p.finishStats(lengths)
	return p, nil
}

// Config returns the plan's configuration with defaults applied.
func (p *Plan) Config() Config {
	c := p.cfg
	c.Boundaries = slices.Clone(c.Boundaries)
	return c
}

// Boundaries returns the padded lengths in use: the explicit or automatic
// boundaries, or nil when lengths are rounded to PadMultiple (or packed).
func (p *Plan) Boundaries() []int { return slices.Clone(p.bounds) }

// Len returns the number of global batches, before remainder handling.
func (p *Plan) Len() int { return p.nbatch }

// Shape returns the shape of global batch g without building the batch.
func (p *Plan) Shape(g int) Shape {
	p.check(g)
	if p.cfg.Policy == Packed {
		r0 := g * p.cfg.BatchSize
		r1 := min(r0+p.cfg.BatchSize, len(p.roff)-1)
		return Shape{Rows: r1 - r0, Length: p.cfg.SeqLen}
	}
	b := p.seq[g]
	return Shape{Rows: int(p.boff[b+1] - p.boff[b]), Length: p.blen[b]}
}

// Batch builds the view of global batch g, g in [0, Len()); it panics,
// like a slice index, for any other g. Each call allocates a new Batch.
func (p *Plan) Batch(g int) Batch {
	p.check(g)
	if p.cfg.Policy == Packed {
		r0 := g * p.cfg.BatchSize
		r1 := min(r0+p.cfg.BatchSize, len(p.roff)-1)
		lo, hi := int(p.roff[r0]), int(p.roff[r1])
		b := Batch{Rows: r1 - r0, Length: p.cfg.SeqLen, Pieces: make([]Piece, hi-lo), RowStart: make([]int, r1-r0+1)}
		for k := lo; k < hi; k++ {
			b.Pieces[k-lo] = Piece{Index: int(p.rows[k]), Start: int(p.pstart[k]), Len: int(p.plen[k])}
		}
		for r := r0; r <= r1; r++ {
			b.RowStart[r-r0] = int(p.roff[r]) - lo
		}
		return b
	}
	ib := p.seq[g]
	lo, hi := int(p.boff[ib]), int(p.boff[ib+1])
	b := Batch{Rows: hi - lo, Length: p.blen[ib], Pieces: make([]Piece, hi-lo)}
	for k := lo; k < hi; k++ {
		row := p.rows[k]
		b.Pieces[k-lo] = Piece{Index: int(row), Len: int(p.pd.eff(p.lengths[row]))}
	}
	return b
}

func (p *Plan) check(g int) {
	if g < 0 || g >= p.nbatch {
		panic(fmt.Sprintf("bucket: batch index %d out of range [0:%d)", g, p.nbatch))
	}
}

// Shapes returns the distinct shapes of the epoch in warm-up order: Length
// descending, then Rows descending.
func (p *Plan) Shapes() []Shape { return slices.Clone(p.shapes) }

// Stats returns the plan's summary.
func (p *Plan) Stats() Stats { return p.stats }

// sortShapes orders shapes for the warm-up: longest first, then most rows.
func sortShapes(s []Shape) {
	slices.SortFunc(s, func(a, b Shape) int {
		if c := cmp.Compare(b.Length, a.Length); c != 0 {
			return c
		}
		return cmp.Compare(b.Rows, a.Rows)
	})
}

// finishStats fills the totals shared by every policy.
func (p *Plan) finishStats(lengths []uint32) {
	s := &p.stats
	s.Rows = len(lengths)
	s.Pieces = len(p.rows)
	s.Batches = p.nbatch
	s.Shapes = len(p.shapes)
	var all int64
	for _, l := range lengths {
		all += int64(l)
	}
	s.TruncatedTokens = all - s.RealTokens
	if s.PaddedTokens > 0 {
		s.PaddingShare = float64(s.PaddedTokens-s.RealTokens) / float64(s.PaddedTokens)
		s.PackingEfficiency = float64(s.RealTokens) / float64(s.PaddedTokens)
	}
}
