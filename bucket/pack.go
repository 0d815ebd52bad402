package bucket

import (
	"cmp"
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
		b.t[i] = max(b.t[2*i], b.t[2*i+1])
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
	rows := 0
	lo := 0
	for _, hi := range blockEnds {
		items, err := p.packItems(lengths, perm[lo:hi], s)
		if err != nil {
			return err
		}
		lo = hi
		tree := newBinTree()
		for _, it := range items {
			x := int64(it.len)
			for {
				r := tree.first(x)
				if r < 0 && c.SplitDocs && x > 0 {
					if room := tree.maxRoom(); room > 0 {
						r = tree.first(room)
						plBin = append(plBin, int32(rows+r))
						plItem = append(plItem, item{row: it.row, start: it.start, len: uint32(room)})
						tree.set(r, 0)
						it.start += uint32(room)
						x -= room
						continue
					}
				}
				if r < 0 {
					if rows+tree.open >= math.MaxInt32-1 {
						return fmt.Errorf("pack %d rows: %w (more than %d packed rows)", len(lengths), ErrTooLarge, math.MaxInt32-1)
					}
					r = tree.add(s)
				}
				plBin = append(plBin, int32(rows+r))
				plItem = append(plItem, item{row: it.row, start: it.start, len: uint32(x)})
				tree.set(r, tree.room(r)-x)
				break
			}
		}
		rows += tree.open
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
	// Counting sort of placements by final row, stable (placement order
	// within a row).
	p.roff = make([]int32, nr+1)
	for _, bin := range plBin {
		p.roff[pos[bin]+1]++
	}
	for r := 0; r < nr; r++ {
		p.roff[r+1] += p.roff[r]
	}
	next := slices.Clone(p.roff[:nr])
	np := len(plItem)
	p.rows = make([]int32, np)
	p.pstart = make([]uint32, np)
	p.plen = make([]uint32, np)
	for k, bin := range plBin {
		r := pos[bin]
		at := next[r]
		next[r]++
		it := plItem[k]
		p.rows[at], p.pstart[at], p.plen[at] = it.row, it.start, it.len
	}

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

// packItems turns documents into items sorted by length descending, ties in
// perm order.
func (p *Plan) packItems(lengths []uint32, perm []int32, s int64) ([]item, error) {
	split := p.cfg.SplitDocs
	var total int64
	for _, r := range perm {
		e := p.pd.eff(lengths[r])
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
		e := p.pd.eff(lengths[r])
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
