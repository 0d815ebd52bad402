package model

import (
	"math"
	"math/bits"
)

// mergeTable maps a pair of adjacent token ids to the merge's rank and the merged id: open addressing with
// linear probing, keyed by left<<32|right, Fibonacci hashing. One probe touches one 16-byte slot.
type mergeTable struct {
	slots []mergeSlot
	shift uint8
	mask  uint64
}

type mergeSlot struct {
	key  uint64
	rank uint32
	id   int32
}

const emptyPair = math.MaxUint64 // ids are below 2^31, so no real pair has this key

func newMergeTable(n int) mergeTable {
	size := 16
	for size < n+n/2 {
		size <<= 1
	}
	t := mergeTable{
		slots: make([]mergeSlot, size),
		shift: uint8(64 - bits.TrailingZeros(uint(size))),
		mask:  uint64(size - 1),
	}
	for i := range t.slots {
		t.slots[i].key = emptyPair
	}
	return t
}

func pairKey(a, b int32) uint64 { return uint64(uint32(a))<<32 | uint64(uint32(b)) }

func (t *mergeTable) put(a, b int32, rank uint32, id int32) {
	k := pairKey(a, b)
	i := (k * 0x9E3779B97F4A7C15) >> t.shift
	for {
		s := &t.slots[i]
		if s.key == emptyPair || s.key == k {
			*s = mergeSlot{key: k, rank: rank, id: id}
			return
		}
		i = (i + 1) & t.mask
	}
}

// get returns the merge of (a, b) packed as rank<<32|uint32(id), or noMerge.
func (t *mergeTable) get(a, b int32) uint64 {
	k := pairKey(a, b)
	i := (k * 0x9E3779B97F4A7C15) >> t.shift
	for {
		s := &t.slots[i]
		if s.key == k {
			return uint64(s.rank)<<32 | uint64(uint32(s.id))
		}
		if s.key == emptyPair {
			return noMerge
		}
		i = (i + 1) & t.mask
	}
}

const noMerge = math.MaxUint64

// mergeSmall applies the merges to e.word by repeated scans: each round merges the adjacent pair of lowest
// rank, the leftmost one on ties. For a regular model (see bpeModel.regular) this equals Hugging Face's
// Word::merge_all: its heap entries that survive the staleness check are exactly the current adjacent pairs
// with their true ranks, because the span covered by the pair at a position only grows and, with ids unique
// per string and no empty right parts, a longer span never yields the same merged id.
func (e *bpeEncoder) mergeSmall() {
	w := e.word
	n := len(w)
	pr := e.rankScratch(n - 1)
	t := &e.m.merges
	for i := 0; i+1 < n; i++ {
		pr[i] = t.get(w[i], w[i+1])
	}
	for n > 1 {
		best, bi := uint64(noMerge), -1
		for i, v := range pr[:n-1] {
			if v < best {
				best, bi = v, i
			}
		}
		if bi < 0 {
			break
		}
		w[bi] = int32(uint32(best))
		copy(w[bi+1:n], w[bi+2:n])
		copy(pr[bi:n-1], pr[bi+1:n-1])
		n--
		if bi > 0 {
			pr[bi-1] = t.get(w[bi-1], w[bi])
		}
		if bi+1 < n {
			pr[bi] = t.get(w[bi], w[bi+1])
		}
	}
	e.word = w[:n]
}

func (e *bpeEncoder) rankScratch(n int) []uint64 {
	if cap(e.ranks) < n {
		e.ranks = make([]uint64, n, 2*n)
	}
	return e.ranks[:n]
}

// symbol is a node of the doubly linked list of a long word's symbols.
type symbol struct {
	id         int32
	prev, next int32
	alive      bool
}

// heapItem is a candidate merge: key = rank<<32 | position of the left symbol.
type heapItem struct {
	key uint64
	id  int32
}

// mergeHeap is a 4-ary min-heap of candidate merges (shallower than a binary heap, so fewer cache misses on
// long words). Items with equal keys are identical (same rank means same pair, so same merged id), so the pop
// order is fully determined by the keys.
type mergeHeap struct {
	items []heapItem
	syms  []symbol
}

func (h *mergeHeap) push(it heapItem) {
	h.items = append(h.items, it)
	i := len(h.items) - 1
	for i > 0 {
		p := (i - 1) / 4
		if h.items[p].key <= it.key {
			break
		}
		h.items[i] = h.items[p]
		i = p
	}
	h.items[i] = it
}

func (h *mergeHeap) pop() heapItem {
	top := h.items[0]
	last := h.items[len(h.items)-1]
	h.items = h.items[:len(h.items)-1]
	if len(h.items) > 0 {
		h.siftDown(0, last)
	}
	return top
}

// siftDown places it at i or below.
func (h *mergeHeap) siftDown(i int, it heapItem) {
	items := h.items
	n := len(items)
	for {
		c := 4*i + 1
		if c >= n {
			break
		}
		m := c
		end := min(c+4, n)
		for j := c + 1; j < end; j++ {
			if items[j].key < items[m].key {
				m = j
			}
		}
		if items[m].key >= it.key {
			break
		}
		items[i] = items[m]
		i = m
	}
	items[i] = it
}

func (h *mergeHeap) heapify() {
	if len(h.items) < 2 {
		return
	}
	for i := (len(h.items) - 2) / 4; i >= 0; i-- {
		h.siftDown(i, h.items[i])
	}
}

// mergeHeap mirrors Hugging Face's Word::merge_all step for step: a min-heap over (rank, position) with lazy
// invalidation — an entry is dropped when its left symbol is gone, has no right neighbour, or the current pair
// there no longer merges into the entry's id. O(n log n) for a word of n symbols.
func (e *bpeEncoder) mergeHeap() {
	w := e.word
	n := len(w)
	t := &e.m.merges
	h := &e.heap
	h.items = h.items[:0]
	if cap(h.syms) < n {
		h.syms = make([]symbol, n, n+n/2)
	}
	syms := h.syms[:n]
	for i, id := range w {
		next := int32(i + 1)
		if i == n-1 {
			next = -1
		}
		syms[i] = symbol{id: id, prev: int32(i - 1), next: next, alive: true}
	}
	for i := 0; i+1 < n; i++ {
		if v := t.get(w[i], w[i+1]); v != noMerge {
			h.items = append(h.items, heapItem{key: v&^0xFFFFFFFF | uint64(i), id: int32(uint32(v))})
		}
	}
	h.heapify()
	for len(h.items) > 0 {
		top := h.pop()
		pos := int32(uint32(top.key))
		s := &syms[pos]
		if !s.alive || s.next < 0 {
			continue
		}
		right := syms[s.next]
		if v := t.get(s.id, right.id); v == noMerge || int32(uint32(v)) != top.id {
			continue
		}
		syms[s.next].alive = false
		s.id = top.id
		s.next = right.next
		if right.next >= 0 {
			syms[right.next].prev = pos
		}
		if s.prev >= 0 {
			if v := t.get(syms[s.prev].id, s.id); v != noMerge {
				h.push(heapItem{key: v&^0xFFFFFFFF | uint64(uint32(s.prev)), id: int32(uint32(v))})
			}
		}
		if s.next >= 0 {
			if v := t.get(s.id, syms[s.next].id); v != noMerge {
				h.push(heapItem{key: v&^0xFFFFFFFF | uint64(uint32(pos)), id: int32(uint32(v))})
			}
		}
	}
	w = w[:0]
	for i := int32(0); i >= 0; i = syms[i].next {
		w = append(w, syms[i].id)
	}
	e.word = w
}

// pairSet is a set of pairKey values (open addressing, linear probing).
type pairSet struct {
	keys  []uint64
	shift uint8
	mask  uint64
	n     int
}

func newPairSet(capacity int) *pairSet {
	size := 16
	for size < 2*capacity {
		size <<= 1
	}
	s := &pairSet{keys: make([]uint64, size), shift: uint8(64 - bits.TrailingZeros(uint(size))), mask: uint64(size - 1)}
	for i := range s.keys {
		s.keys[i] = emptyPair
	}
	return s
}

func (s *pairSet) add(k uint64) {
	i := (k * 0x9E3779B97F4A7C15) >> s.shift
	for s.keys[i] != emptyPair {
		if s.keys[i] == k {
			return
		}
		i = (i + 1) & s.mask
	}
	s.keys[i] = k
	s.n++
}

func (s *pairSet) has(k uint64) bool {
	i := (k * 0x9E3779B97F4A7C15) >> s.shift
	for {
		switch s.keys[i] {
		case k:
			return true
		case emptyPair:
			return false
		}
		i = (i + 1) & s.mask
	}
}
