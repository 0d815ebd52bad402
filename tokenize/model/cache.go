package model

import "unsafe"

// Word cache bounds. Words longer than cacheMaxWordLen bytes are never cached (Hugging Face uses the same 256
// byte limit); when the cache holds cacheMaxEntries words it is emptied and refilled, keeping its storage.
const (
	cacheMaxEntries = 1 << 15
	cacheMaxWordLen = 256
	keyChunkSize    = 64 << 10
)

type cacheSpan struct{ off, n uint32 }

// wordCache maps words to their ids. Keys and ids live in arenas that are reused after a reset, so a warm
// cache allocates nothing, not even on a miss.
type wordCache struct {
	m      map[string]cacheSpan
	ids    []int32
	chunks [][]byte // key storage; chunks[:chunk+1] in use
	chunk  int
}

func newWordCache() *wordCache {
	return &wordCache{m: make(map[string]cacheSpan, 1024)}
}

func (c *wordCache) get(word string) ([]int32, bool) {
	sp, ok := c.m[word]
	if !ok {
		return nil, false
	}
	return c.ids[sp.off : sp.off+sp.n : sp.off+sp.n], true
}

func (c *wordCache) put(word string, ids []int32) {
	if len(word) > cacheMaxWordLen || len(word) == 0 {
		return
	}
	if len(c.m) >= cacheMaxEntries || len(c.ids)+len(ids) > 1<<31 {
		c.reset()
	}
	key := c.storeKey(word)
	off := len(c.ids)
	c.ids = append(c.ids, ids...)
	c.m[key] = cacheSpan{off: uint32(off), n: uint32(len(ids))}
}

// storeKey copies word into the key arena and returns a string backed by it. The bytes are never written again
// until reset has removed every map entry that refers to them.
func (c *wordCache) storeKey(word string) string {
	if len(c.chunks) == 0 {
		c.chunks = append(c.chunks, make([]byte, 0, keyChunkSize))
	}
	cur := c.chunks[c.chunk]
	if cap(cur)-len(cur) < len(word) {
		c.chunk++
		if c.chunk == len(c.chunks) {
			c.chunks = append(c.chunks, make([]byte, 0, keyChunkSize))
		}
		cur = c.chunks[c.chunk][:0]
	}
	start := len(cur)
	cur = append(cur, word...)
	c.chunks[c.chunk] = cur
	return unsafe.String(&cur[start], len(word))
}

func (c *wordCache) reset() {
	clear(c.m)
	c.ids = c.ids[:0]
	for i := range c.chunks {
		c.chunks[i] = c.chunks[i][:0]
	}
	c.chunk = 0
}
