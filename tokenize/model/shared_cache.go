package model

import (
	"cmp"
	"hash/maphash"
	"sync"
	"sync/atomic"
	"unsafe"
)

// The shared word cache: one per model, read and filled by every encoder of that model without locks, so N workers
// warm one cache instead of N. Per-worker caches each pay the compulsory miss of every distinct word they meet — on
// the Go-source corpus 1.4% of words are distinct, yet each of 16 workers missed ~5% — and on a busy host the misses
// (a full BPE merge each) are what stops the engine from scaling.
//
// Layout: an open-addressing table of sharedSlots uint64 slots (8 MiB), each 0 (empty) or the word's hash tag
// (high 32 bits) and 1 + the entry's offset in the arena (low 32 bits). An entry is one int32 header (ids<<16 |
// word bytes), the ids, then the word's bytes packed four to an int32. Entries never change and are never
// freed, so what get returns stays valid while the model lives. Everything is pointer-free but the chunk list:
// the garbage collector does not scan it.
//
// Writing takes no lock either: each encoder claims whole arena chunks (an atomic counter) and a quota of entries
// (another, sharedQuota at a time), writes an entry into its own chunk, then publishes it with a compare-and-swap
// of an empty slot; a reader's atomic load of the slot orders the entry's bytes before its reads. Slots never
// empty again, so two encoders storing one word probe the same run and the second finds the first's entry. Once
// full (entries or arena), put refuses and the encoder keeps the word in its own cache. (A first version took a
// mutex per store: at 16 workers on a cold corpus the stores contended and one pass ran at half the speed of
// per-worker caches.)
const (
	sharedSlotBits   = 20
	sharedSlots      = 1 << sharedSlotBits
	sharedMaxEntries = sharedSlots / 2 // load factor 1/2: short probe runs
	sharedMaxProbes  = 32
	sharedQuota      = 64 // entries an encoder reserves at a time
	arenaChunkBits   = 16 // int32s per chunk: 256 KiB, claimed by one encoder
	arenaChunkInts   = 1 << arenaChunkBits
	arenaMaxChunks   = 256 // 64 MiB of entries at most
	cacheLine        = 64
)

// sharedWords is the handle a model holds: the table is made on the first store, so a model that never encodes
// (or a test that loads dozens) costs nothing.
type sharedWords struct {
	table atomic.Pointer[sharedTable]
	once  sync.Once

	// Smaller bounds for tests; 0: sharedMaxEntries, arenaMaxChunks.
	maxEntries, maxChunks int
}

type sharedTable struct {
	seed                  maphash.Seed
	slots                 []atomic.Uint64
	chunks                [arenaMaxChunks]atomic.Pointer[[arenaChunkInts]int32]
	maxEntries, maxChunks int64

	_         [cacheLine]byte // what lookups read stays off the lines stores count on
	nextChunk atomic.Int64
	_         [cacheLine - 8]byte
	reserved  atomic.Int64 // entries handed out in quotas
	_         [cacheLine - 8]byte
	full      atomic.Bool
	_         [cacheLine - 1]byte
}

// sharedWriter is one encoder's claim on the shared arena: the chunk it fills and the entries it may still add.
type sharedWriter struct {
	chunk *[arenaChunkInts]int32
	base  uint32 // global offset of chunk[0]
	used  int
	quota int
}

func (s *sharedWords) load() *sharedTable {
	s.once.Do(func() {
		s.table.Store(&sharedTable{
			seed:       maphash.MakeSeed(),
			slots:      make([]atomic.Uint64, sharedSlots),
			maxEntries: int64(cmp.Or(s.maxEntries, sharedMaxEntries)),
			maxChunks:  int64(cmp.Or(s.maxChunks, arenaMaxChunks)),
		})
	})
	return s.table.Load()
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
	ch := t.chunks[g>>arenaChunkBits].Load()
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

// put stores word's ids for every encoder of the model and reports whether the cache took them (false: full, or
// a long probe run). w is the calling encoder's claim. word must be 1..cacheMaxWordLen bytes.
func (s *sharedWords) put(w *sharedWriter, word string, ids []int32) bool {
	t := s.load()
	if t.full.Load() || len(ids) >= 1<<16 {
		return false
	}
	if w.quota == 0 {
		if t.reserved.Add(sharedQuota) > t.maxEntries {
			t.full.Store(true)
			return false
		}
		w.quota = sharedQuota
	}
	n := 1 + len(ids) + (len(word)+3)/4
	if w.chunk == nil || w.used+n > arenaChunkInts {
		c := t.nextChunk.Add(1) - 1
		if c >= t.maxChunks {
			t.full.Store(true)
			return false
		}
		w.chunk, w.base, w.used = new([arenaChunkInts]int32), uint32(c)<<arenaChunkBits, 0
		t.chunks[c].Store(w.chunk)
	}
	off := w.used
	ch := w.chunk
	ch[off] = int32(uint32(len(ids))<<16 | uint32(len(word)))
	copy(ch[off+1:], ids)
	wordInts := ch[off+1+len(ids) : off+n]
	copy(unsafe.Slice((*byte)(unsafe.Pointer(&wordInts[0])), len(wordInts)*4), word)
	h := maphash.String(t.seed, word)
	v := h>>32<<32 | uint64(w.base+uint32(off)+1)
	for i, p := h&(sharedSlots-1), 0; p < sharedMaxProbes; i, p = (i+1)&(sharedSlots-1), p+1 {
		cur := t.slots[i].Load()
		if cur == 0 {
			if t.slots[i].CompareAndSwap(0, v) {
				w.used += n
				w.quota--
				return true
			}
			cur = t.slots[i].Load() // another encoder took the slot first: perhaps for this very word
		}
		if cur>>32 == v>>32 {
			if _, ok := t.match(uint32(cur)-1, word); ok {
				return true // stored already; the entry written above stays unused and is overwritten next
			}
		}
	}
	return false // a long run here; the word stays in the encoder's own cache
}
