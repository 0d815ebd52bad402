package bucket

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"fmt"
)

// Lazy sequential plans: the evaluation pass ([Config.Sequential]) of a bucketed plan past [LazyThreshold] rows.
// Batch g is rows [g·BatchSize, min((g+1)·BatchSize, rows)) in dataset order, padded to its own longest row —
// the batches an exact sequential plan has — computed when asked for, in O(1) memory.

const lazySeqAlgorithm = "gload/plan/lazy-sequential/v1"

// SeqPlan is a bucketed sequential plan computed on demand. It is safe for concurrent use.
type SeqPlan struct {
	cfg         Config
	fingerprint string
	lengths     Lengths
	pd          padder
	n           int64
	nbatch      int
	bound       Bound
}

var _ EpochPlan = (*SeqPlan)(nil)

// NewSeqPlan plans a bucketed sequential pass over lengths (BatchSize, MaxLength, PadMultiple, Boundaries and
// Remainder apply; the seed and epoch do not: a sequential plan has no randomness). Tokens sequential plans need
// every length to place their cuts and are refused.
func NewSeqPlan(lengths Lengths, fingerprint string, cfg Config) (*SeqPlan, error) {
	c, err := cfg.normalize()
	if err != nil {
		return nil, err
	}
	if !c.Sequential {
		return nil, cfgErr("sequential", "NewSeqPlan plans sequential passes only")
	}
	if c.Policy != Bucketed {
		return nil, cfgErr("policy", "a sequential %s plan of more than %d rows is not supported (bucketed is)", c.Policy, LazyThreshold)
	}
	n := lengths.Len()
	if n < 0 || n > MaxPlanRows {
		return nil, fmt.Errorf("plan %d rows: %w (at most %d rows)", n, ErrTooLarge, int64(MaxPlanRows))
	}
	p := &SeqPlan{cfg: c, fingerprint: fingerprint, lengths: lengths, n: n}
	limit := lengthLimit(c.MaxLength)
	if len(c.Boundaries) > 0 {
		p.pd = newBoundsPadder(limit, c.Boundaries)
	} else {
		p.pd = newMultiplePadder(limit, c.PadMultiple)
	}
	p.nbatch = int((n + int64(c.BatchSize) - 1) / int64(c.BatchSize))
	rows := int(min(int64(c.BatchSize), n))
	length := int(p.pd.pad(p.pd.eff(MaxLengthOf(lengths))))
	p.bound = Bound{Rows: rows, Length: length, Cells: int64(rows) * int64(length)}
	return p, nil
}

// Len returns the number of global batches.
func (p *SeqPlan) Len() int { return p.nbatch }

// Algorithm names the planner ("gload/plan/lazy-sequential/v1"; see [LazyPlan.Algorithm]).
func (p *SeqPlan) Algorithm() string { return lazySeqAlgorithm }

// Batch returns global batch g (g in [0, Len()); it panics otherwise, like a slice index).
func (p *SeqPlan) Batch(g int) Batch {
	if g < 0 || g >= p.nbatch {
		panic(fmt.Sprintf("bucket: batch index %d out of range [0:%d)", g, p.nbatch))
	}
	lo := int64(g) * int64(p.cfg.BatchSize)
	hi := min(lo+int64(p.cfg.BatchSize), p.n)
	b := Batch{Rows: int(hi - lo), Pieces: make([]Piece, hi-lo)}
	var l int64
	for r := lo; r < hi; r++ {
		e := p.pd.eff(p.lengths.Length(r))
		l = max(l, p.pd.pad(e))
		b.Pieces[r-lo] = Piece{Index: int(r), Len: int(e)}
	}
	b.Length = int(l)
	return b
}

// Assign deals the plan's batches exactly as [Plan.Assign] does.
func (p *SeqPlan) Assign(start, rank, world, worker, workers int) ([]int, error) {
	return assign(p.nbatch, p.cfg.Remainder, start, rank, world, worker, workers)
}

// Shapes returns the first batch's shape (a sequential plan has no warm-up; every batch is within Bound).
func (p *SeqPlan) Shapes() []Shape {
	if p.nbatch == 0 {
		return nil
	}
	b := p.Batch(0)
	return []Shape{{Rows: b.Rows, Length: b.Length}}
}

// Stats returns Rows, Pieces and Batches (token totals would need every length).
func (p *SeqPlan) Stats() Stats {
	return Stats{Rows: int(p.n), Pieces: int(p.n), Batches: p.nbatch, Shapes: len(p.Shapes())}
}

// Bound returns the largest batch: BatchSize rows of the longest row's padded length.
func (p *SeqPlan) Bound() Bound { return p.bound }

// Hash is 32 hex digits of SHA-256 over "gload/plan/lazy-sequential/v1" 0x00 ‖ u64le(rows) ‖ u64le(len(fingerprint))
// ‖ fingerprint ‖ the policy (see appendPolicy).
func (p *SeqPlan) Hash() string {
	b := append([]byte(lazySeqAlgorithm), 0)
	b = binary.LittleEndian.AppendUint64(b, uint64(p.n))
	b = binary.LittleEndian.AppendUint64(b, uint64(len(p.fingerprint)))
	b = append(b, p.fingerprint...)
	b = p.cfg.appendPolicy(b)
	h := sha256.Sum256(b)
	return hex.EncodeToString(h[:16])
}
