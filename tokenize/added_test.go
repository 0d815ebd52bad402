package tokenize

import (
	"strings"
	"testing"
)

// TestTrieLeftmostLongest compares the trie's search (IndexByte when every key starts with one byte, the first-byte
// table otherwise) with a brute-force search over every start and every key.
func TestTrieLeftmostLongest(t *testing.T) {
	keySets := [][]string{
		{"<|a|>", "<|ab|>", "<s>", "</s>", "<"},       // one first byte
		{"<|eot|>", "[CLS]", "[SEP]", "x"},            // several
		{"[PAD]", "[UNK]", "[MASK]"},                  // one, not '<'
		{"<|begin_of_text|>", "<|begin_of_text|>xyz"}, // a key that extends another
	}
	texts := []string{"", "<", "<<", "a<|a|>b", "<|ab|><|a|", "x < y && a <s> b", "no match at all", "[CLS]hi[SEP]",
		"<|begin_of_text|>xy<|begin_of_text|>xyz", strings.Repeat("<", 40) + "<|a|>", "日本<s>語", "[MASK"}
	brute := func(keys []string, s string, from int) (int, int, int, bool) {
		for i := from; i < len(s); i++ {
			best, end := -1, 0
			for k, key := range keys {
				if strings.HasPrefix(s[i:], key) && i+len(key) > end {
					best, end = k, i+len(key)
				}
			}
			if best >= 0 {
				return i, end, best, true
			}
		}
		return 0, 0, 0, false
	}
	for _, keys := range keySets {
		tr := newTrie()
		for k, key := range keys {
			tr.insert(key, k)
		}
		for _, s := range texts {
			for from := 0; from <= len(s); from++ {
				gs, ge, gt, gok := tr.leftmostLongest(s, from)
				ws, we, wt, wok := brute(keys, s, from)
				if gs != ws || ge != we || gt != wt || gok != wok {
					t.Fatalf("keys %q, %q from %d: got (%d, %d, %d, %v), want (%d, %d, %d, %v)",
						keys, s, from, gs, ge, gt, gok, ws, we, wt, wok)
				}
			}
		}
	}
}
