package shm

import (
	"fmt"
	"math"
)

// Alignment of buffers inside a slot and of slot sizes.
const (
	// BufferAlign is the byte alignment of every buffer inside a slot (a
	// cache line; enough for any element type and for vectorised copies).
	BufferAlign = 64
	// SlotAlign is the granularity of slot sizes (a page), so that every
	// slot starts on a page boundary.
	SlotAlign = 4096
	// MaxSlotBytes bounds one slot.
	MaxSlotBytes = 1 << 32
)

// Need is the largest size of each buffer over the batches a slot must hold,
// in elements. The maxima may come from different batches.
type Need struct {
	Cells  int64 // rows × length: entries of input_ids (and of position_ids when Positions)
	Rows   int64 // entries of lengths
	Pieces int64 // entries of index
	CuLen  int64 // entries of cu_seqlens (0 unless packed)
	// Positions says that batches carry position_ids (packed).
	Positions bool
	// Labels says that batches carry labels (SFT datasets): Cells entries, placed last.
	Labels bool
}

// Layout is where each buffer of a batch sits inside a slot, in bytes from
// the slot's start, and the size of a slot. Element types are those of the
// wire protocol: input_ids, lengths, position_ids and cu_seqlens int32,
// index int64, all little-endian. A buffer a batch does not carry still has
// an offset (its size is zero).
type Layout struct {
	InputIDs, Lengths, Index, PositionIDs, CuSeqlens int64
	Labels                                           int64 // int32, after every other buffer
	SlotBytes                                        int64
}

// NewLayout places the buffers for n one after another, each aligned to
// BufferAlign, and rounds the slot up to SlotAlign.
func NewLayout(n Need) (Layout, error) {
	if n.Cells < 0 || n.Rows < 0 || n.Pieces < 0 || n.CuLen < 0 {
		return Layout{}, fmt.Errorf("%w: negative size in %+v", ErrLayout, n)
	}
	var l Layout
	off := int64(0)
	place := func(count, elem int64) (int64, error) {
		if count > (math.MaxInt64-off)/elem/2 {
			return 0, fmt.Errorf("%w: %d elements of %d bytes overflow", ErrLayout, count, elem)
		}
		at := off
		off = alignUp(off+count*elem, BufferAlign)
		return at, nil
	}
	var err error
	steps := []struct {
		dst         *int64
		count, elem int64
	}{
		{&l.InputIDs, n.Cells, 4},
		{&l.PositionIDs, positions(n), 4},
		{&l.Lengths, n.Rows, 4},
		{&l.Index, n.Pieces, 8},
		{&l.CuSeqlens, n.CuLen, 4},
		{&l.Labels, labelCells(n), 4},
	}
	for _, s := range steps {
		if *s.dst, err = place(s.count, s.elem); err != nil {
			return Layout{}, err
		}
	}
	l.SlotBytes = max(alignUp(off, SlotAlign), SlotAlign)
	if l.SlotBytes > MaxSlotBytes {
		return Layout{}, fmt.Errorf("%w: a slot of %d bytes is more than the limit of %d", ErrLayout, l.SlotBytes, int64(MaxSlotBytes))
	}
	return l, nil
}

func labelCells(n Need) int64 {
	if n.Labels {
		return n.Cells
	}
	return 0
}

func positions(n Need) int64 {
	if n.Positions {
		return n.Cells
	}
	return 0
}

func alignUp(v, a int64) int64 { return (v + a - 1) / a * a }
