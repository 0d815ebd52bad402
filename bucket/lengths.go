package bucket

// Lengths gives the token length of every row of a dataset by row number, without requiring them in one slice: a
// memory-mapped index, a synthetic distribution ([Synthetic]) or a slice ([SliceLengths]). Row numbers are int64.
// Implementations must be safe for concurrent use and return the same length for a row every time.
type Lengths interface {
	Len() int64
	Length(i int64) uint32
}

// SliceLengths is a [Lengths] over a slice: row i has s[i] tokens.
type SliceLengths []uint32

// Len returns len(s).
func (s SliceLengths) Len() int64 { return int64(len(s)) }

// Length returns s[i].
func (s SliceLengths) Length(i int64) uint32 { return s[i] }

// LongestRow returns the first row of the greatest length, or −1 for no rows ([LongestRower]): a lazy plan over a
// slice then leads with the batch the server's plan over the same lengths in a dataset index leads with.
func (s SliceLengths) LongestRow() int64 {
	best := int64(-1)
	for i, l := range s {
		if best < 0 || l > s[best] {
			best = int64(i)
		}
	}
	return best
}

// Viewer is a [Lengths] that can give every length as one slice without copying (a memory-mapped index):
// exact plans, which need a slice, read it instead of copying the lengths out one by one.
type Viewer interface {
	View() []uint32
}

// lengthsSlice returns lengths as a slice: itself, its view, or a copy.
func lengthsSlice(lengths Lengths) []uint32 {
	switch l := lengths.(type) {
	case SliceLengths:
		return l
	case Viewer:
		return l.View()
	}
	s := make([]uint32, lengths.Len())
	for i := range s {
		s[i] = lengths.Length(int64(i))
	}
	return s
}
