package tokenize

import (
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
	"time"
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
		tr.build()
		for _, s := range texts {
			for from := 0; from <= len(s); from++ {
				budget := 1 << 30
				gs, ge, gt, gok := tr.leftmostLongest(s, from, &budget)
				ws, we, wt, wok := brute(keys, s, from)
				if gs != ws || ge != we || gt != wt || gok != wok {
					t.Fatalf("keys %q, %q from %d: got (%d, %d, %d, %v), want (%d, %d, %d, %v)",
						keys, s, from, gs, ge, gt, gok, ws, we, wt, wok)
				}
			}
		}
	}
}

// TestTrieRandom compares the search with brute force over random key sets
// from a small alphabet: keys that extend others, keys defined twice (the
// first definition wins) and many first bytes.
func TestTrieRandom(t *testing.T) {
	r := rand.New(rand.NewPCG(7, 34))
	word := func(alpha string, max int) string {
		b := make([]byte, 1+r.IntN(max))
		for i := range b {
			b[i] = alpha[r.IntN(len(alpha))]
		}
		return string(b)
	}
	for round := range 300 {
		alpha := "ab<>"[:2+round%3]
		keys := make([]string, 1+r.IntN(20))
		for k := range keys {
			if k > 0 && r.IntN(4) == 0 {
				keys[k] = keys[r.IntN(k)] // defined twice
			} else {
				keys[k] = word(alpha, 6)
			}
		}
		tr := newTrie()
		for k, key := range keys {
			tr.insert(key, k)
		}
		tr.build()
		for range 20 {
			s := word(alpha+"x", 40)
			for from := 0; from <= len(s); from++ {
				ws, we, wt, wok := 0, 0, 0, false
			scan:
				for i := from; i < len(s); i++ {
					for k, key := range keys {
						if strings.HasPrefix(s[i:], key) && (!wok || i+len(key) > we) {
							ws, we, wt, wok = i, i+len(key), k, true
						}
					}
					if wok {
						break scan
					}
				}
				budget := 1 << 30
				gs, ge, gt, gok := tr.leftmostLongest(s, from, &budget)
				if gs != ws || ge != we || gt != wt || gok != wok {
					t.Fatalf("keys %q, %q from %d: got (%d, %d, %d, %v), want (%d, %d, %d, %v)", keys, s, from, gs, ge, gt, gok, ws, we, wt, wok)
				}
			}
		}
	}
}

// TestAddedTokenLimits: an added token beyond MaxAddedTokenBytes (raw or
// after normalization), or added tokens beyond MaxAddedTokensBytes in all,
// are refused by name when the tokenizer loads; tokens at the limits load
// and match.
func TestAddedTokenLimits(t *testing.T) {
	tokJSON := func(normalizer string, contents ...string) []byte {
		var added []string
		for i, c := range contents {
			js, _ := json.Marshal(c)
			added = append(added, fmt.Sprintf(`{"id": %d, "content": %s, "special": false, "normalized": %v}`, i+1, js, normalizer != ""))
		}
		if normalizer == "" {
			normalizer = "null"
		}
		return []byte(fmt.Sprintf(`{"added_tokens": [%s], "normalizer": %s, "model": {"type": "WordLevel", "vocab": {"a": 0}, "unk_token": "a"}}`,
			strings.Join(added, ","), normalizer))
	}
	many := func(n, size int) []string {
		out := make([]string, n)
		for i := range out {
			out[i] = fmt.Sprintf("%0*d", size, i)
		}
		return out
	}
	for _, tc := range []struct {
		name string
		js   []byte
		want string // "" loads
	}{
		{"10 MB token", tokJSON("", strings.Repeat("x", 10<<20)), `added_tokens[0]: "content" of 10485760 bytes, more than the limit of 4096 bytes per added token (MaxAddedTokenBytes)`},
		{"token at the limit", tokJSON("", strings.Repeat("x", MaxAddedTokenBytes)), ""},
		{"tokens over the total", tokJSON("", many(MaxAddedTokensBytes/MaxAddedTokenBytes+1, MaxAddedTokenBytes)...),
			"added_tokens[4096]: added tokens of more than 16777216 bytes together (MaxAddedTokensBytes)"},
		{"tokens at the total", tokJSON("", many(MaxAddedTokensBytes/MaxAddedTokenBytes, MaxAddedTokenBytes)...), ""},
		{"normalization amplifies", tokJSON(`{"type": "Replace", "pattern": {"String": "y"}, "content": "`+strings.Repeat("z", 100)+`"}`, strings.Repeat("y", 100)),
			`added_tokens[0]: "content" normalizes to more than the limit of 4096 bytes per added token (MaxAddedTokenBytes): normalizer: normalized text of more than 4096 bytes from 100 bytes`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tok, err := FromBytes(tc.js, Options{})
			if tc.want == "" {
				if err != nil {
					t.Fatal(err)
				}
				if tok.added.raw.n+tok.added.norm.n == 0 {
					t.Fatal("no added tokens")
				}
				return
			}
			if err == nil || !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %v, want ErrInvalid containing %q", err, tc.want)
			}
		})
	}
	// A token at the size limit is found in text.
	big := strings.Repeat("q", MaxAddedTokenBytes)
	tok, err := FromBytes(tokJSON("", big), Options{})
	if err != nil {
		t.Fatal(err)
	}
	if got := tok.Encode("a" + big + big[1:]); fmt.Sprint(got) != "[0 1 0]" {
		t.Fatalf("Encode: %v, want [0 1 0]", got)
	}
}

// TestAddedTokenScanBudget: an added token that shares a long prefix with
// the text (a key of 4095 a's and a b, in a text of a's) made matching look
// at 4 KiB at every byte; it now stops at its step budget with
// ErrAddedTokenScan, and EncodeTo reports it.
func TestAddedTokenScanBudget(t *testing.T) {
	key := strings.Repeat("a", MaxAddedTokenBytes-1) + "b"
	js := fmt.Sprintf(`{"added_tokens": [{"id": 1, "content": %q, "special": true, "normalized": false}],
		"model": {"type": "WordLevel", "vocab": {"a": 0}, "unk_token": "a"}}`, key)
	tok, err := FromBytes([]byte(js), Options{})
	if err != nil {
		t.Fatal(err)
	}
	text := strings.Repeat("a", 1<<20)
	done := make(chan error, 1)
	go func() {
		_, err := tok.EncodeTo(nil, text, false)
		done <- err
	}()
	select {
	case err := <-done:
		if !errors.Is(err, ErrAddedTokenScan) {
			t.Fatalf("EncodeTo: %v, want ErrAddedTokenScan", err)
		}
	case <-time.After(2 * time.Minute):
		t.Fatal("matching 1 MB of text still running after two minutes")
	}
	// Text that matches, or misses at once, is within budget.
	ids, err := tok.EncodeTo(nil, "x"+key+strings.Repeat("a", 1000), false)
	if err != nil || len(ids) != 3 || ids[1] != 1 {
		t.Fatalf("EncodeTo: %v, %v", ids, err)
	}
}
