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
