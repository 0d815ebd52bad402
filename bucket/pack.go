package bucket

import (
	"cmp"
	"errors"
	"fmt"
	"math"
	"slices"
)

// item is a run of one document's tokens waiting to be placed.
type item struct {
	row   int32
	start uint32
	len   uint32
}

// binTree is a max segment tree over the rooms left in the packed rows
// opened so far (unopened leaves hold −1), answering "leftmost row with room
// ≥ x" in O(log rows).
type binTree struct {
	size int     // leaves, a power of two
	t    []int64 // t[1] is the root; leaves at t[size:]
	open int     // rows opened
}

func newBinTree() *binTree {
	b := &binTree{size: 1024}
	b.t = make([]int64, 2*b.size)
	for i := range b.t {
		b.t[i] = -1
	}
	return b
}

// add opens a row with room capacity and returns its number.
func (b *binTree) add(capacity int64) int {
	if b.open == b.size {
		old := b.t[b.size:]
		b.size *= 2
		b.t = make([]int64, 2*b.size)
		for i := range b.t {
			b.t[i] = -1
		}
		copy(b.t[b.size:], old)
		for i := b.size - 1; i >= 1; i-- {
			b.t[i] = max(b.t[2*i], b.t[2*i+1])
		}
	}
	r := b.open
	b.open++
	b.set(r, capacity)
	return r
}

func (b *binTree) set(r int, room int64) {
	i := b.size + r
	b.t[i] = room
	for i >>= 1; i >= 1; i >>= 1 {
		v := max(b.t[2*i], b.t[2*i+1])
		if b.t[i] == v {
			return // and so are the nodes above
		}
		b.t[i] = v
	}
}

func (b *binTree) room(r int) int64 { return b.t[b.size+r] }

// maxRoom is the most room any open row has (−1 when none is open).
func (b *binTree) maxRoom() int64 { return b.t[1] }

// first returns the leftmost open row with room ≥ x, or −1.
func (b *binTree) first(x int64) int {
	if b.t[1] < x {
		return -1
	}
	i := 1
	for i < b.size {
		if b.t[2*i] >= x {
			i = 2 * i
		} else {
			i = 2*i + 1
		}
	}
	return i - b.size
}

// buildPacked plans the packed policy:
//
//  1. rows are shuffled (Fisher–Yates, stream 1); this order only breaks
//     ties between equal lengths, so which documents share a row varies with
//     the seed and epoch;
//  2. documents become items (truncated to MaxLength; then to SeqLen, or
//     with SplitDocs cut into SeqLen pieces plus a tail) sorted by length
//     descending, ties in shuffled order (counting sort; a total order);
//  3. items are placed first-fit-decreasing into rows of SeqLen tokens: the
//     lowest-numbered open row with room, a new row when none has room (with
//     SplitDocs: a too-long item first fills the open row with the most room,
//     the lowest-numbered among equals, while any open row has room);
//  4. the packed rows are shuffled (Fisher–Yates, stream 3) and grouped
//     BatchSize at a time; the last batch may have fewer rows.
func (p *Plan) buildPacked(lengths []uint32) error {
	c := p.cfg
	s := int64(c.SeqLen)
	perm, blockEnds := p.rowOrder(len(lengths))
	if p.mixSrc != nil {
		// A mixture packs consecutive runs of about
		// MegaBatchMult×BatchSize×SeqLen tokens of its slots on their own, in
		// mixture order, so that every run of packed rows holds its share of
		// sources (mixorder.go).
		for i := range perm {
			perm[i] = int32(i)
		}
		blockEnds = p.packWindows(lengths, s)[1:]
	}

	// First-fit-decreasing, recording each placement in order; a windowed plan packs each block on its own,
	// its rows numbered after the previous blocks' (rowEnds).
	var plBin []int32
	var plItem []item
	var rowEnds []int
	var parts []part
	rows := 0
	lo := 0
	for _, hi := range blockEnds {
		items, err := packItems(&p.pd, c.SplitDocs, lengths, perm[lo:hi], s)
		if err != nil {
			return err
		}
		lo = hi
		pk := packer{tree: newBinTree(), s: s, split: c.SplitDocs, maxRows: math.MaxInt32 - 1 - rows}
		for _, it := range items {
			if parts, err = pk.place(int64(it.len), parts[:0]); err != nil {
				return fmt.Errorf("pack %d rows: %w (more than %d packed rows)", len(lengths), ErrTooLarge, math.MaxInt32-1)
			}
			for _, pt := range parts {
				plBin = append(plBin, int32(rows)+pt.row)
				plItem = append(plItem, item{row: it.row, start: it.start + pt.off, len: pt.n})
			}
		}
		rows += pk.tree.open
		rowEnds = append(rowEnds, rows)
	}
	perm = nil
	for _, it := range plItem {
		p.stats.RealTokens += int64(it.len)
	}
	if len(plItem) > math.MaxInt32 {
		return fmt.Errorf("pack %d rows: %w (more than %d pieces)", len(lengths), ErrTooLarge, math.MaxInt32)
	}

	// Shuffle packed rows; pos[bin] is the row's final place.
	nr := rows
	order := make([]int32, nr)
	for i := range order {
		order[i] = int32(i)
	}
	// Without a shuffle window rowEnds is [nr]: one global shuffle.
	shuffleWithin(order, rowEnds, newRNG(streamKey(p.fingerprint, p.seed, p.epoch, streamPacked)))
	pos := make([]int32, nr)
	for r, bin := range order {
		pos[bin] = int32(r)
	}
	p.roff, p.rows, p.pstart, p.plen = gatherPieces(nr, plBin, plItem, pos)

	p.lengths = nil
	b := c.BatchSize
	p.nbatch = (nr + b - 1) / b
	p.stats.PackedRows = nr
	p.stats.PaddedTokens = int64(nr) * s
	if nr > 0 {
		p.shapes = append(p.shapes, Shape{Rows: min(b, nr), Length: c.SeqLen})
		if last := nr % b; last != 0 && nr > b {
			p.shapes = append(p.shapes, Shape{Rows: last, Length: c.SeqLen})
		}
	}
	return nil
}

// packItems turns the documents lengths[perm[0]], lengths[perm[1]], … into
// items sorted by length descending, ties in perm order.
func packItems(pd *padder, split bool, lengths []uint32, perm []int32, s int64) ([]item, error) {
	var total int64
	for _, r := range perm {
		e := pd.eff(lengths[r])
		if split && e > s {
			total += e / s
			if e%s != 0 {
				total++
			}
		} else {
			total++
		}
	}
	if total > math.MaxInt32 {
		return nil, fmt.Errorf("pack %d rows: %w (more than %d pieces)", len(lengths), ErrTooLarge, math.MaxInt32)
	}
	items := make([]item, 0, total)
	// Items in perm order: a document's SeqLen pieces first, then its tail.
	for _, r := range perm {
		e := pd.eff(lengths[r])
		if !split || e <= s {
			items = append(items, item{row: r, len: uint32(min(e, s))})
			continue
		}
		var at int64
		for ; at+s <= e; at += s {
			items = append(items, item{row: r, start: uint32(at), len: uint32(s)})
		}
		if at < e {
			items = append(items, item{row: r, start: uint32(at), len: uint32(e - at)})
		}
	}
	if s+1 <= 1<<24 {
		// Counting sort by length descending, stable.
		cnt := make([]int, s+2)
		for _, it := range items {
			cnt[s-int64(it.len)+1]++
		}
		for i := 1; i < len(cnt); i++ {
			cnt[i] += cnt[i-1]
		}
		out := make([]item, len(items))
		for _, it := range items {
			k := s - int64(it.len)
			out[cnt[k]] = it
			cnt[k]++
		}
		return out, nil
	}
	slices.SortStableFunc(items, func(a, b item) int { return cmp.Compare(b.len, a.len) })
	return items, nil
}

// part is one run of an item placed in a packed row: tokens [off, off+n) of
// the item in row row.
type part struct {
	row int32
	off uint32
	n   uint32
}

// packer places items first-fit-decreasing into rows of s tokens (step 3 of
// buildPacked), rows numbered in the order they are opened. The placements
// depend only on the sequence of item lengths.
type packer struct {
	tree    *binTree
	s       int64
	split   bool
	maxRows int    // rows it may open
	parts   []part // placeRun's scratch
}

// errPackRows: placing an item needs more than maxRows rows.
var errPackRows = errors.New("too many packed rows")

// place places one item of x tokens (x ≤ s) and appends its parts to parts
// in placement order: one part, or with split several (each filling the
// open row with the most room, the lowest-numbered among equals, while no
// open row has room for the rest).
func (k *packer) place(x int64, parts []part) ([]part, error) {
	var off int64
	for {
		r := k.tree.first(x)
		if r < 0 && k.split && x > 0 {
			if room := k.tree.maxRoom(); room > 0 {
				r = k.tree.first(room)
				parts = append(parts, part{row: int32(r), off: uint32(off), n: uint32(room)})
				k.tree.set(r, 0)
				off += room
				x -= room
				continue
			}
		}
		if r < 0 {
			if k.tree.open >= k.maxRows {
				return parts, errPackRows
			}
			r = k.tree.add(k.s)
		}
		parts = append(parts, part{row: int32(r), off: uint32(off), n: uint32(x)})
		k.tree.set(r, k.tree.room(r)-x)
		return parts, nil
	}
}

// gatherPieces orders the placements (item plItem[k] in packed row plBin[k])
// by final row, packed row bin going to place pos[bin] of nr (a counting
// sort, stable: placement order within a row): the pieces of place r are
// [roff[r], roff[r+1]) of rows, pstart and plen.
func gatherPieces(nr int, plBin []int32, plItem []item, pos []int32) (roff, rows []int32, pstart, plen []uint32) {
	roff = make([]int32, nr+1)
	for _, bin := range plBin {
		roff[pos[bin]+1]++
	}
	for r := 0; r < nr; r++ {
		roff[r+1] += roff[r]
	}
	next := slices.Clone(roff[:nr])
	np := len(plItem)
	rows = make([]int32, np)
	pstart = make([]uint32, np)
	plen = make([]uint32, np)
	for k, bin := range plBin {
		r := pos[bin]
		at := next[r]
		next[r]++
		it := plItem[k]
		rows[at], pstart[at], plen[at] = it.row, it.start, it.len
	}
	return roff, rows, pstart, plen
}
