package model

import (
	"cmp"
	"hash/maphash"
	"sync"
	"sync/atomic"
	"unsafe"
)

// The shared word cache: one per model, read by every encoder of that model without locks, so N workers warm one
// cache instead of N. Per-worker caches each pay the compulsory miss of every distinct word they meet — on the
// Go-source corpus 1.4% of words are distinct, yet each of 16 workers missed ~5% — and on a busy host the misses
// (a full BPE merge each) are what stops the engine from scaling.
//
// Layout: an open-addressing table of sharedSlots uint64 slots (8 MiB), each 0 (empty) or the word's hash tag
// (high 32 bits) and 1 + the entry's offset in the arena (low 32 bits). An entry is one int32 header (ids<<16 |
// word bytes), the ids, then the word's bytes packed four to an int32. Entries never change and are never
// freed, so what get returns stays valid while the model lives. Everything is pointer-free: the garbage
// collector never scans it.
//
// Writers (misses, at most sharedMaxEntries in the cache's life) serialise on a mutex and publish an entry with
// an atomic store of its slot after writing it; readers load slots atomically, which orders the entry's bytes
// before the read. Once full (entries or arena), put refuses and the encoder keeps the word in its own cache.
const (
	sharedSlotBits   = 20
	sharedSlots      = 1 << sharedSlotBits
	sharedMaxEntries = sharedSlots / 2 // load factor 1/2: short probe runs
	sharedMaxProbes  = 32
	arenaChunkBits   = 18 // int32s per chunk: 1 MiB
	arenaChunkInts   = 1 << arenaChunkBits
	arenaMaxChunks   = 64 // 64 MiB of entries at most
	cacheLine        = 64
)

// sharedWords is the handle a model holds: the table is made on the first store, so a model that never encodes
// (or a test that loads dozens) costs nothing.
type sharedWords struct {
	table atomic.Pointer[sharedTable] // read by every lookup: kept off the cache line put writes
	_     [cacheLine - 8]byte
	mu    sync.Mutex // held by put while it writes
	_     [cacheLine - 8]byte

	// Smaller bounds for tests; 0: sharedMaxEntries, arenaMaxChunks.
	maxEntries, maxChunks int
}

type sharedTable struct {
	seed   maphash.Seed
	slots  []atomic.Uint64
	chunks [arenaMaxChunks]*[arenaChunkInts]int32 // written under mu before any slot refers to them

	maxEntries, maxChunks int

	_ [cacheLine]byte // what lookups read stays off the line stores write
	// Under sharedWords.mu:
	entries int
	chunk   int // index of the chunk being filled
	used    int // int32s used in chunks[chunk]
	full    atomic.Bool
}

// get returns the ids of word if some encoder of the model stored them. word must be 1..cacheMaxWordLen bytes.
func (s *sharedWords) get(word string) ([]int32, bool) {
	t := s.table.Load()
	if t == nil {
		return nil, false
	}
	h := maphash.String(t.seed, word)
	tag := h >> 32
	for i, p := h&(sharedSlots-1), 0; p < sharedMaxProbes; i, p = (i+1)&(sharedSlots-1), p+1 {
		v := t.slots[i].Load()
		if v == 0 {
			return nil, false
		}
		if v>>32 != tag {
			continue
		}
		if ids, ok := t.match(uint32(v)-1, word); ok {
			return ids, true
		}
	}
	return nil, false
}

// match returns the ids of the entry at arena offset g if its word is word.
func (t *sharedTable) match(g uint32, word string) ([]int32, bool) {
	ch := t.chunks[g>>arenaChunkBits]
	off := g & (arenaChunkInts - 1)
	hdr := uint32(ch[off])
	if int(hdr&0xffff) != len(word) {
		return nil, false
	}
	k := hdr >> 16
	ids := ch[off+1 : off+1+k : off+1+k]
	if unsafe.String((*byte)(unsafe.Pointer(&ch[off+1+k])), len(word)) != word {
		return nil, false
	}
	return ids, true
}

// put stores word's ids for every encoder of the model and reports whether the cache took them (false: full).
// word must be 1..cacheMaxWordLen bytes.
func (s *sharedWords) put(word string, ids []int32) bool {
	t := s.table.Load()
	if t != nil && t.full.Load() {
		return false
	}
	if len(ids) >= 1<<16 {
		return false
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if t == nil {
		if t = s.table.Load(); t == nil {
			t = &sharedTable{seed: maphash.MakeSeed(), slots: make([]atomic.Uint64, sharedSlots),
				maxEntries: cmp.Or(s.maxEntries, sharedMaxEntries), maxChunks: cmp.Or(s.maxChunks, arenaMaxChunks)}
			s.table.Store(t)
		}
	}
	if t.full.Load() {
		return false
	}
	h := maphash.String(t.seed, word)
	tag := h >> 32
	i := h & (sharedSlots - 1)
	for p := 0; ; i, p = (i+1)&(sharedSlots-1), p+1 {
		if p == sharedMaxProbes {
			return false // a long run here; the word stays in the encoder's own cache
		}
		v := t.slots[i].Load()
		if v == 0 {
			break
		}
		if v>>32 == tag {
			if _, ok := t.match(uint32(v)-1, word); ok {
				return true // another encoder stored it first
			}
		}
	}
	g, ok := t.alloc(1 + len(ids) + (len(word)+3)/4)
	if !ok {
		t.full.Store(true)
		return false
	}
	ch := t.chunks[g>>arenaChunkBits]
	off := g & (arenaChunkInts - 1)
	ch[off] = int32(uint32(len(ids))<<16 | uint32(len(word)))
	copy(ch[off+1:], ids)
	wordInts := ch[off+1+uint32(len(ids)) : off+1+uint32(len(ids))+uint32((len(word)+3)/4)]
	copy(unsafe.Slice((*byte)(unsafe.Pointer(&wordInts[0])), len(wordInts)*4), word)
	t.slots[i].Store(tag<<32 | uint64(g+1))
	t.entries++
	if t.entries >= t.maxEntries {
		t.full.Store(true)
	}
	return true
}

// alloc reserves n int32s in the arena (never across a chunk boundary) and returns their global offset.
func (t *sharedTable) alloc(n int) (uint32, bool) {
	if t.chunks[t.chunk] == nil {
		t.chunks[t.chunk] = new([arenaChunkInts]int32)
	}
	if t.used+n > arenaChunkInts {
		if t.chunk+1 == t.maxChunks {
			return 0, false
		}
		t.chunk++
		t.chunks[t.chunk] = new([arenaChunkInts]int32)
		t.used = 0
	}
	g := uint32(t.chunk<<arenaChunkBits + t.used)
	t.used += n
	return g, true
}
