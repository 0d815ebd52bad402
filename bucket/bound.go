package bucket

// Bounds of a plan's batches: what a server sizes buffers and checks limits by when a plan (a lazy one) cannot list
// every shape it holds without building every batch.

// Bound is the largest batch a plan may hold: at most Rows rows, rows of at most Length (padded) tokens, and at
// most Cells padded tokens (Rows×Length, or less where the policy caps the product, as a token budget does), and
// at most Pieces pieces when Pieces > 0 (a lazy packed plan's bound; 0 where the plan does not say: one piece per
// row for bucketed and tokens plans, a scan of the batches for exact packed plans).
type Bound struct {
	Rows   int
	Length int
	Cells  int64
	Pieces int64
}

// BoundOf is the bound of a plan whose shapes are all known.
func BoundOf(shapes []Shape) Bound {
	var b Bound
	for _, sh := range shapes {
		b.Rows = max(b.Rows, sh.Rows)
		b.Length = max(b.Length, sh.Length)
		b.Cells = max(b.Cells, int64(sh.Rows)*int64(sh.Length))
	}
	return b
}

// MaxLengther is a [Lengths] that knows its longest row without a pass over every length (a dataset's per-block
// summaries, a synthetic distribution's cap).
type MaxLengther interface {
	MaxLength() uint32
}

// MaxLengthOf returns the longest row of lengths: from [MaxLengther] when it is one, else by a pass over them.
func MaxLengthOf(lengths Lengths) uint32 {
	if m, ok := lengths.(MaxLengther); ok {
		return m.MaxLength()
	}
	var longest uint32
	for i := range lengths.Len() {
		longest = max(longest, lengths.Length(i))
	}
	return longest
}

// MaxLength is [SyntheticMaxLength]: every synthetic row is at most that long.
func (s Synthetic) MaxLength() uint32 { return SyntheticMaxLength }

// LongestRower is a [Lengths] that can name its longest row (a dataset's per-block summaries; a slice by a scan): a
// lazy plan's warm-up then starts with the batch holding it (see [LazyPlan]). A lazy plan's batches therefore depend
// on whether its Lengths is one: the server's (a dataset index) and [SliceLengths] are, [Synthetic] (benchmarks) is
// not.
type LongestRower interface {
	LongestRow() int64 // the first row of the greatest length, or −1 when there is no row
}
