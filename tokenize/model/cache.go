package model

import (
	"encoding/binary"
	"unsafe"
)

// Word cache bounds. Words longer than cacheMaxWordLen bytes are never cached (Hugging Face uses the same 256
// byte limit). A generation holds at most cacheGenEntries words; when the current one is full it becomes the old
// one and the old one is emptied (keeping its storage) to take new words, so the words in use survive a turn.
const (
	cacheGenEntries = 1 << 15
	cacheMaxWordLen = 256
	keyChunkSize    = 64 << 10
)

// The hot table: a direct-mapped array in front of the maps for words of at most hotMaxWordLen bytes that give at
// most hotMaxIDs ids. 1<<hotBits entries of 32 bytes (256 KiB) stay in a core's L2 cache, where a Go map of tens
// of thousands of string keys does not: on the Go-source corpus most lookups end here after two compares.
const (
	hotBits       = 13
	hotMaxWordLen = 16
	hotMaxIDs     = 3
)

// hotEntry holds a word as packWord's (lo, hi, n) — which determine its bytes — and its ids. n == 0: empty.
type hotEntry struct {
	lo, hi uint64
	n, cnt uint8
	ids    [hotMaxIDs]int32
}

// packWord packs a word of 1..16 bytes into two words that, with its length, determine every byte: the first
// and the last 8 bytes (4 below 8 bytes; bytes 0, n/2 and n-1 below 4) cover the whole word.
func packWord(w string) (lo, hi uint64) {
	p := unsafe.Slice(unsafe.StringData(w), len(w))
	switch n := len(p); {
	case n >= 8:
		return binary.LittleEndian.Uint64(p), binary.LittleEndian.Uint64(p[n-8:])
	case n >= 4:
		return uint64(binary.LittleEndian.Uint32(p)) | uint64(binary.LittleEndian.Uint32(p[n-4:]))<<32, 0
	default:
		return uint64(p[0]) | uint64(p[n/2])<<8 | uint64(p[n-1])<<16, 0
	}
}

func hotIndex(lo, hi uint64, n int) uint64 {
	return ((lo ^ hi*0xff51afd7ed558ccd ^ uint64(n)) * 0x9E3779B97F4A7C15) >> (64 - hotBits)
}

type cacheSpan struct{ off, n uint32 }

// wordGen is one generation of the cache: words and their ids in arenas that are reused after a reset, so a warm
// cache allocates nothing, not even on a miss.
type wordGen struct {
	m      map[string]cacheSpan
	ids    []int32
	chunks [][]byte // key storage; chunks[:chunk+1] in use
	chunk  int
}

// wordCache maps words to their ids: the hot table, then the model's shared cache (when there is one), then the
// current generation, then the old one (a hit there is copied into the current one). The generations take only
// what the shared cache refused. What get returns is valid until the next call of get or put.
type wordCache struct {
	hot      []hotEntry
	shared   *sharedWords // nil: none
	writer   sharedWriter // this encoder's claim on the shared arena
	local    bool         // some word went to the generations
	cur, old *wordGen
}

// newWordCache makes an encoder's cache in front of shared (nil for none).
func newWordCache(shared *sharedWords) *wordCache {
	return &wordCache{
		hot:    make([]hotEntry, 1<<hotBits),
		shared: shared,
		cur:    &wordGen{m: make(map[string]cacheSpan, 1024)},
		old:    &wordGen{m: make(map[string]cacheSpan)},
	}
}

func (c *wordCache) get(word string) ([]int32, bool) {
	var e *hotEntry
	var lo, hi uint64
	n := len(word)
	if n <= hotMaxWordLen && n > 0 {
		lo, hi = packWord(word)
		e = &c.hot[hotIndex(lo, hi, n)&(1<<hotBits-1)]
		if e.lo == lo && e.hi == hi && int(e.n) == n {
			return e.ids[:e.cnt:e.cnt], true
		}
	}
	ids, ok := c.getShared(word)
	if !ok {
		if !c.local {
			return nil, false
		}
		if ids, ok = c.cur.get(word); !ok {
			if ids, ok = c.old.get(word); !ok {
				return nil, false
			}
			if len(c.cur.m) < cacheGenEntries { // a full current generation would turn and empty the old one under ids
				ids = c.cur.put(word, ids)
			}
		}
	}
	if e != nil {
		setHot(e, lo, hi, n, ids)
	}
	return ids, true
}

func (c *wordCache) put(word string, ids []int32) {
	n := len(word)
	if n > cacheMaxWordLen || n == 0 {
		return
	}
	if n <= hotMaxWordLen {
		lo, hi := packWord(word)
		setHot(&c.hot[hotIndex(lo, hi, n)&(1<<hotBits-1)], lo, hi, n, ids)
	}
	if c.shared != nil && c.shared.put(&c.writer, word, ids) {
		return
	}
	c.local = true
	if len(c.cur.m) >= cacheGenEntries || len(c.cur.ids)+len(ids) > 1<<31 {
		c.old.reset()
		c.cur, c.old = c.old, c.cur
	}
	c.cur.put(word, ids)
}

func (c *wordCache) getShared(word string) ([]int32, bool) {
	if c.shared == nil || len(word) > cacheMaxWordLen || len(word) == 0 {
		return nil, false
	}
	return c.shared.get(word)
}

// setHot stores the ids of the word that packs to (lo, hi) with n bytes (n <= hotMaxWordLen) in e if they fit, else
// empties e.
func setHot(e *hotEntry, lo, hi uint64, n int, ids []int32) {
	if len(ids) > hotMaxIDs {
		e.n = 0
		return
	}
	e.lo, e.hi = lo, hi
	e.n, e.cnt = uint8(n), uint8(len(ids))
	copy(e.ids[:], ids)
}

func (g *wordGen) get(word string) ([]int32, bool) {
	sp, ok := g.m[word]
	if !ok {
		return nil, false
	}
	return g.ids[sp.off : sp.off+sp.n : sp.off+sp.n], true
}

// put stores word's ids and returns the stored copy.
func (g *wordGen) put(word string, ids []int32) []int32 {
	key := g.storeKey(word)
	off := len(g.ids)
	g.ids = append(g.ids, ids...)
	g.m[key] = cacheSpan{off: uint32(off), n: uint32(len(ids))}
	return g.ids[off:len(g.ids):len(g.ids)]
}

// storeKey copies word into the key arena and returns a string backed by it. The bytes are never written again
// until reset has removed every map entry that refers to them.
func (g *wordGen) storeKey(word string) string {
	if len(g.chunks) == 0 {
		g.chunks = append(g.chunks, make([]byte, 0, keyChunkSize))
	}
	cur := g.chunks[g.chunk]
	if cap(cur)-len(cur) < len(word) {
		g.chunk++
		if g.chunk == len(g.chunks) {
			g.chunks = append(g.chunks, make([]byte, 0, keyChunkSize))
		}
		cur = g.chunks[g.chunk][:0]
	}
	start := len(cur)
	cur = append(cur, word...)
	g.chunks[g.chunk] = cur
	return unsafe.String(&cur[start], len(word))
}

func (g *wordGen) reset() {
	clear(g.m)
	g.ids = g.ids[:0]
	for i := range g.chunks {
		g.chunks[i] = g.chunks[i][:0]
	}
	g.chunk = 0
}
