package model

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
)

// TestPackWordDeterminesTheWord: packWord's pair with the length is a key only if two different words of one
// length never share it — every length 1..16, words that differ in each single byte position.
func TestPackWordDeterminesTheWord(t *testing.T) {
	for n := 1; n <= hotMaxWordLen; n++ {
		base := strings.Repeat("a", n)
		lo0, hi0 := packWord(base)
		for pos := range n {
			w := []byte(base)
			w[pos] = 'b'
			lo, hi := packWord(string(w))
			if lo == lo0 && hi == hi0 {
				t.Errorf("len %d: %q and %q pack alike", n, base, w)
			}
		}
	}
}

// FuzzPackWord: two words of the same length (at most 16 bytes) pack alike only if they are equal.
func FuzzPackWord(f *testing.F) {
	f.Add("ab", "ba")
	f.Add("abcdefgh", "abcdefgi")
	f.Add("abcdefghijklmnop", "abcdefghXjklmnop")
	f.Add("abc", "aXc")
	f.Fuzz(func(t *testing.T, a, b string) {
		if len(a) == 0 || len(a) > hotMaxWordLen || len(a) != len(b) {
			return
		}
		la, ha := packWord(a)
		lb, hb := packWord(b)
		if (la == lb && ha == hb) != (a == b) {
			t.Fatalf("%q and %q: packed equal %v", a, b, la == lb && ha == hb)
		}
	})
}

// TestWordCacheAgreesWithAMap drives the cache with far more distinct words than one generation holds, in a
// skewed order (hot words recur, most words are rare), and checks every hit against a plain map: the hot table,
// both generations, the copy of an old generation's hit and the turn of generations never hand out wrong ids.
func TestWordCacheAgreesWithAMap(t *testing.T) {
	c := newWordCache(nil)
	want := map[string][]int32{}
	rng := rand.New(rand.NewPCG(1, 2))
	word := func(k int) string {
		switch k % 4 {
		case 0:
			return fmt.Sprintf("w%d", k) // short: the hot table
		case 1:
			return fmt.Sprintf("a-rather-long-word-%d", k) // over 16 bytes: maps only
		case 2:
			return strings.Repeat("x", k%40+1) + fmt.Sprint(k)
		default:
			return fmt.Sprintf("%x", k*7919)
		}
	}
	idsOf := func(k int) []int32 { // 1..6 ids: some fit a hot entry, some do not
		ids := make([]int32, k%6+1)
		for i := range ids {
			ids[i] = int32(k*10 + i)
		}
		return ids
	}
	hits := 0
	for step := range 400_000 {
		var k int
		if rng.IntN(2) == 0 {
			k = rng.IntN(64) // hot
		} else {
			k = rng.IntN(3 * cacheGenEntries) // more than a generation
		}
		w := word(k)
		got, ok := c.get(w)
		if ok {
			hits++
			if !slices.Equal(got, want[w]) {
				t.Fatalf("step %d: %q gave %v, want %v", step, w, got, want[w])
			}
			continue
		}
		ids := idsOf(k)
		want[w] = ids
		c.put(w, ids)
	}
	if hits < 100_000 {
		t.Errorf("only %d hits in 400k lookups", hits)
	}
	// The hot words survived the turns.
	for k := range 64 {
		if _, ok := c.get(word(k)); !ok {
			t.Errorf("hot word %q fell out", word(k))
		}
	}
}

// TestWordCacheLimits: the empty word and words over cacheMaxWordLen bytes are never stored.
func TestWordCacheLimits(t *testing.T) {
	c := newWordCache(nil)
	long := strings.Repeat("z", cacheMaxWordLen+1)
	c.put("", []int32{1})
	c.put(long, []int32{2})
	if _, ok := c.get(""); ok {
		t.Error("the empty word was cached")
	}
	if _, ok := c.get(long); ok {
		t.Error("a word over the limit was cached")
	}
	edge := strings.Repeat("z", cacheMaxWordLen)
	c.put(edge, []int32{3})
	if ids, ok := c.get(edge); !ok || !slices.Equal(ids, []int32{3}) {
		t.Errorf("a word of exactly %d bytes: %v %v", cacheMaxWordLen, ids, ok)
	}
}
