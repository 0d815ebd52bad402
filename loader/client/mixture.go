package client

import "sort"

// SourceRows returns, for each sequence of the batch ([Pieces]), the mixture
// source it comes from (an index into Opened().Sources) and its row within
// that source. For a stream of one dataset every source is 0 and rows equal
// Index(). The slices are fresh; the caller owns them.
func (b *Batch) SourceRows() (src []int32, rows []int64) {
	idx := b.Index()
	src = make([]int32, len(idx))
	rows = make([]int64, len(idx))
	var offs []uint64
	if b.stream != nil && b.stream.opened != nil {
		offs = b.stream.opened.SourceOffsets
	}
	for i, v := range idx {
		s := 0
		if len(offs) > 1 {
			s = sort.Search(len(offs), func(k int) bool { return offs[k] > uint64(v) }) - 1
			s = max(s, 0)
		}
		src[i] = int32(s)
		if len(offs) > 0 {
			rows[i] = v - int64(offs[s])
		} else {
			rows[i] = v
		}
	}
	return src, rows
}
