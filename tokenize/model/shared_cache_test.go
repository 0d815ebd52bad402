package model

import (
	"fmt"
	"math/rand/v2"
	"runtime"
	"slices"
	"strings"
	"sync"
	"testing"
)

// sharedTestWord is word k of a skewed vocabulary: short words (hot-table size), long ones (maps only) and a few
// of the 256-byte limit; sharedTestIDs gives it 0..6 ids that depend on k alone.
func sharedTestWord(k int) string {
	switch k % 5 {
	case 0:
		return fmt.Sprintf("w%d", k)
	case 1:
		return fmt.Sprintf("a-rather-long-word-%d", k)
	case 2:
		return strings.Repeat("x", k%40+1) + fmt.Sprint(k)
	case 3:
		return fmt.Sprint(k) + strings.Repeat("y", cacheMaxWordLen-len(fmt.Sprint(k)))
	default:
		return fmt.Sprintf("%x", k*7919)
	}
}

// sharedTestVocab words: more than one arena chunk holds.
const sharedTestVocab = 20_000

func sharedTestIDs(k int) []int32 {
	ids := make([]int32, k%7)
	for i := range ids {
		ids[i] = int32(k*10 + i)
	}
	return ids
}

// TestSharedWordsUnderLoad: many more goroutines than cores, each with its own wordCache in front of one shared
// cache that fills up mid-run (by entries in one case, by arena in the other), look words up and store the
// misses; every hit — shared, hot table or generations — must give the ids of that word. Run it under -race: the
// stores publish entries that other goroutines read without a lock.
func TestSharedWordsUnderLoad(t *testing.T) {
	cases := []struct {
		name                  string
		maxEntries, maxChunks int
	}{
		{"entries run out", 3000, 0},
		{"arena runs out", 0, 1},
		{"room for all", 0, 0},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			s := &sharedWords{maxEntries: tc.maxEntries, maxChunks: tc.maxChunks}
			goroutines := 4 * runtime.GOMAXPROCS(0)
			steps := 20_000
			if testing.Short() {
				steps = 5_000
			}
			var wg sync.WaitGroup
			errs := make(chan error, goroutines)
			for g := range goroutines {
				wg.Go(func() {
					c := newWordCache(s)
					rng := rand.New(rand.NewPCG(uint64(g), 7))
					for step := range steps {
						k := rng.IntN(64)
						if rng.IntN(2) == 0 {
							k = rng.IntN(sharedTestVocab)
						}
						w := sharedTestWord(k)
						if got, ok := c.get(w); ok {
							if want := sharedTestIDs(k); !slices.Equal(got, want) {
								errs <- fmt.Errorf("goroutine %d step %d: %q gave %v, want %v", g, step, w, got, want)
								return
							}
							continue
						}
						c.put(w, sharedTestIDs(k))
					}
				})
			}
			wg.Wait()
			close(errs)
			for err := range errs {
				t.Fatal(err)
			}
			tab := s.table.Load()
			entries := 0
			if tab != nil {
				entries = tab.count()
			}
			if entries == 0 {
				t.Fatal("nothing reached the shared cache")
			}
			full := tc.maxEntries != 0 || tc.maxChunks != 0
			if tab.full.Load() != full {
				t.Errorf("full = %v after %d entries, want %v", tab.full.Load(), entries, full)
			}
			if tc.maxEntries != 0 && entries > tc.maxEntries {
				t.Errorf("%d entries over the bound %d", entries, tc.maxEntries)
			}
			// Whatever the shared cache holds is exact, and a fresh encoder cache sees it.
			c := newWordCache(s)
			found := 0
			for k := range sharedTestVocab {
				if got, ok := c.shared.get(sharedTestWord(k)); ok {
					found++
					if !slices.Equal(got, sharedTestIDs(k)) {
						t.Fatalf("shared %q gave %v", sharedTestWord(k), got)
					}
				}
			}
			if found != entries {
				t.Errorf("found %d words, the table holds %d entries", found, entries)
			}
		})
	}
}

// TestSharedWordsRefuseWhatTheyCannotHold: words over the length limit and the empty word never reach the
// shared cache, and a word stored twice is stored once.
func TestSharedWordsRefuseWhatTheyCannotHold(t *testing.T) {
	s := &sharedWords{}
	c := newWordCache(s)
	c.put("", []int32{1})
	c.put(strings.Repeat("z", cacheMaxWordLen+1), []int32{2})
	if tab := s.table.Load(); tab != nil && tab.count() != 0 {
		t.Fatal("a word outside the limits reached the table")
	}
	c.put("twice", []int32{3, 4})
	c2 := newWordCache(s)
	c2.put("twice", []int32{3, 4})
	if n := s.table.Load().count(); n != 1 {
		t.Errorf("%d entries after storing one word twice", n)
	}
	if c.local || c2.local {
		t.Error("a word the shared cache took went to an encoder's own cache")
	}
}

// TestSharedEncodersMatchUnsharedOnes: goroutines (more than cores) encode the Go-source words with encoders of
// one model — so they fill and read one shared cache — each in its own order; every word's ids must equal what
// an encoder of a separately loaded model gives.
func TestSharedEncodersMatchUnsharedOnes(t *testing.T) {
	for _, name := range []string{"llama3", "llama2", "bert-base-uncased", "unigram-spm8k"} {
		t.Run(name, func(t *testing.T) {
			raw, err := fixtureModelJSON(fixturesDir(t), name)
			if err != nil {
				t.Fatal(err)
			}
			load := func() Model {
				m, err := FromJSON(raw, "model", Options{ByteLevel: byteLevelFixtures[name]})
				if err != nil {
					t.Fatal(err)
				}
				return m
			}
			words, _ := goSourceWords(t)
			if max := 40_000; len(words) > max {
				words = words[:max]
			}
			ref := load().NewEncoder()
			want := make([][]int32, len(words))
			for i, w := range words {
				want[i] = ref.Encode(w, nil)
			}
			shared := load()
			goroutines := 2 * runtime.GOMAXPROCS(0)
			var wg sync.WaitGroup
			errs := make(chan error, goroutines)
			for g := range goroutines {
				wg.Go(func() {
					enc := shared.NewEncoder()
					var ids []int32
					for j := range words {
						i := (j + g*len(words)/goroutines) % len(words)
						ids = enc.Encode(words[i], ids[:0])
						if !slices.Equal(ids, want[i]) {
							errs <- fmt.Errorf("goroutine %d: %q gave %v, want %v", g, words[i], ids, want[i])
							return
						}
					}
				})
			}
			wg.Wait()
			close(errs)
			for err := range errs {
				t.Fatal(err)
			}
		})
	}
}

// count is the number of entries in the table (its non-empty slots).
func (t *sharedTable) count() int {
	n := 0
	for i := range t.slots {
		if t.slots[i].Load() != 0 {
			n++
		}
	}
	return n
}
