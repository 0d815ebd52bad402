package pretok

import (
	"encoding/json"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
)

// splitInBatches collects the words of every batch of SplitPieceBatch(p, s, atStart, ..., max).
func splitInBatches(t *testing.T, p PreTokenizer, s string, atStart bool, max int) (words []string, batches int) {
	t.Helper()
	var buf []string
	for from := 0; ; {
		var err error
		prev := from
		buf, from, err = SplitPieceBatch(p, s, atStart, from, max, buf[:0])
		if err != nil {
			t.Fatalf("SplitPieceBatch(%q, from %d): %v", s, prev, err)
		}
		batches++
		words = append(words, buf...)
		if from >= len(s) {
			return words, batches
		}
		if from <= prev && batches > 1 {
			t.Fatalf("SplitPieceBatch(%q): no progress at %d", s, from)
		}
	}
}

// TestSplitPieceBatch checks that batches of any size give exactly SplitPieceErr's words, and that the
// pre-tokenizers that can batch do stop after max words.
func TestSplitPieceBatch(t *testing.T) {
	configs := []struct {
		name   string
		raw    string
		batchs bool // hands out at most max words a batch
	}{
		{"split gpt2 isolated", `{"type":"Split","pattern":{"Regex":` + jsonString(patternGPT2) + `},"behavior":"Isolated","invert":false}`, true},
		{"split cl100k isolated", `{"type":"Split","pattern":{"Regex":` + jsonString(patternCL100K) + `},"behavior":"Isolated","invert":false}`, true},
		{"split qwen2 isolated", `{"type":"Split","pattern":{"Regex":` + jsonString(patternQwen2) + `},"behavior":"Isolated","invert":false}`, true},
		{"split o200k removed inverted", `{"type":"Split","pattern":{"Regex":` + jsonString(patternO200K) + `},"behavior":"Removed","invert":true}`, true},
		{"split cl100k merged with previous", `{"type":"Split","pattern":{"Regex":` + jsonString(patternCL100K) + `},"behavior":"MergedWithPrevious","invert":false}`, false},
		{"bytelevel regex", `{"type":"ByteLevel","add_prefix_space":false,"trim_offsets":true}`, true},
		{"bytelevel regex prefix space", `{"type":"ByteLevel","add_prefix_space":true,"trim_offsets":true}`, true},
		{"bytelevel prefix space no regex", `{"type":"ByteLevel","add_prefix_space":true,"trim_offsets":true,"use_regex":false}`, false},
		{"llama3 sequence", `{"type":"Sequence","pretokenizers":[{"type":"Split","pattern":{"Regex":` + jsonString(patternCL100K) +
			`},"behavior":"Isolated","invert":false},{"type":"ByteLevel","add_prefix_space":false,"trim_offsets":true,"use_regex":false}]}`, true},
		{"whitespace split", `{"type":"WhitespaceSplit"}`, false},
		{"metaspace first", `{"type":"Metaspace","replacement":"▁","prepend_scheme":"first","split":true}`, false},
		{"general regex", `{"type":"Split","pattern":{"Regex":"\\d+|[a-z]+"},"behavior":"Isolated","invert":false}`, false},
	}
	texts := []string{"", "a", " ", "Hello, world! 123 it's  \n\n\tx", "  leading spaces", "\xff\xfe a\xc3 bad",
		strings.Repeat("func f(x int) { return x*2 }\n", 200)}
	r := rand.New(rand.NewPCG(1, 2))
	for range 50 {
		texts = append(texts, randomText(r))
	}
	for _, c := range configs {
		p, _ := mustLoad(t, json.RawMessage(c.raw))
		for _, s := range texts {
			for _, atStart := range []bool{true, false} {
				want, err := SplitPieceErr(p, s, atStart, nil)
				if err != nil {
					t.Fatalf("%s: %v", c.name, err)
				}
				for _, max := range []int{1, 2, 3, 7, 4096} {
					got, batches := splitInBatches(t, p, s, atStart, max)
					if !slices.Equal(got, want) {
						t.Errorf("%s, max %d, %q: batches give %q, SplitPieceErr %q", c.name, max, s, got, want)
					}
					if c.batchs && len(want) > max+1 && batches < (len(want)-1+max-1)/max {
						t.Errorf("%s, max %d: %d words in %d batches", c.name, max, len(want), batches)
					}
					if !c.batchs && batches != 1 {
						t.Errorf("%s: %d batches, want the whole text in one", c.name, batches)
					}
				}
			}
		}
	}
}
