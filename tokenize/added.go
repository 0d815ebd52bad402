package tokenize

import (
	"fmt"
	"slices"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/gload/gload/tokenize/normalize"
)

// addedTokenJSON is one entry of tokenizer.json's added_tokens.
type addedTokenJSON struct {
	ID         *int32 `json:"id"`
	Content    string `json:"content"`
	SingleWord bool   `json:"single_word"`
	LStrip     bool   `json:"lstrip"`
	RStrip     bool   `json:"rstrip"`
	Normalized *bool  `json:"normalized"`
	Special    bool   `json:"special"`
}

type addedToken struct {
	id         int32
	content    string
	special    bool
	singleWord bool
	lstrip     bool
	rstrip     bool
	normalized bool
}

// piece is a part of the input: either an added token (id >= 0) or text still to tokenize (id < 0).
type piece struct {
	text string
	id   int32
}

// addedVocab finds added tokens in text the way Hugging Face's AddedVocabulary does: leftmost-longest,
// non-overlapping matches, tokens with normalized=false on the raw text and the others on normalized text,
// then single_word, lstrip and rstrip applied to each match.
type addedVocab struct {
	tokens    []addedToken
	byContent map[string]int32
	byID      map[int32]*addedToken
	raw       *trie // tokens with normalized=false, matched on raw text
	norm      *trie // tokens with normalized=true, matched on normalized text (content normalized first)
}

// addedPath is the JSON path of added token i, for errors.
type addedPath int

func (i addedPath) String() string { return fmt.Sprintf("added_tokens[%d]", int(i)) }

func newAddedVocab(list []addedTokenJSON, n normalize.Normalizer, splitSpecial bool) (*addedVocab, error) {
	v := &addedVocab{
		byContent: make(map[string]int32, len(list)),
		byID:      make(map[int32]*addedToken, len(list)),
		raw:       newTrie(),
		norm:      newTrie(),
	}
	v.tokens = make([]addedToken, 0, len(list))
	total := 0
	for i, a := range list {
		path := addedPath(i)
		if a.ID == nil || *a.ID < 0 {
			return nil, fmt.Errorf("%w: %s: missing or negative \"id\"", ErrInvalid, path)
		}
		if a.Content == "" {
			return nil, fmt.Errorf("%w: %s: empty \"content\"", ErrInvalid, path)
		}
		if len(a.Content) > MaxAddedTokenBytes {
			return nil, fmt.Errorf("%w: %s: \"content\" of %d bytes, more than the limit of %d bytes per added token (MaxAddedTokenBytes)",
				ErrInvalid, path, len(a.Content), MaxAddedTokenBytes)
		}
		if total += len(a.Content); total > MaxAddedTokensBytes {
			return nil, fmt.Errorf("%w: %s: added tokens of more than %d bytes together (MaxAddedTokensBytes)", ErrInvalid, path, MaxAddedTokensBytes)
		}
		normalized := !a.Special // Hugging Face's default when the field is absent
		if a.Normalized != nil {
			normalized = *a.Normalized
		}
		v.tokens = append(v.tokens, addedToken{id: *a.ID, content: a.Content, special: a.Special,
			singleWord: a.SingleWord, lstrip: a.LStrip, rstrip: a.RStrip, normalized: normalized})
	}
	for i := range v.tokens {
		a := &v.tokens[i]
		v.byContent[a.content] = a.id
		v.byID[a.id] = a
		if splitSpecial && a.special {
			continue // matched as plain text
		}
		if a.normalized {
			key, err := normalize.Apply(n, a.content, MaxAddedTokenBytes)
			if err != nil {
				return nil, fmt.Errorf("%w: added_tokens[%d]: \"content\" normalizes to more than the limit of %d bytes per added token (MaxAddedTokenBytes): %w",
					ErrInvalid, i, MaxAddedTokenBytes, err)
			}
			if key != "" {
				v.norm.insert(key, i)
			}
		} else {
			v.raw.insert(a.content, i)
		}
	}
	v.raw.build()
	v.norm.build()
	return v, nil
}

// Matching added tokens looks, at each candidate start, at as many bytes as
// the text shares with the closest key: a few for real tokenizers, but up to
// MaxAddedTokenBytes for a hostile one (a key "aaa…ab" in a text of a's).
// split counts those steps: past AddedScanSteps per byte of text (plus
// AddedScanSlack) it stops with ErrAddedTokenScan instead of running for
// hours.
const (
	AddedScanSteps = 64
	AddedScanSlack = 1 << 24
)

// ErrAddedTokenScan is a text whose added-token matching passed its step budget.
var ErrAddedTokenScan = fmt.Errorf("tokenizer: added-token matching passed %d steps per byte of text (added tokens that share long prefixes with the text)", AddedScanSteps)

// split appends the pieces of text to dst: added-token matches (from the raw or the normalized set) and the text
// between them. Empty text pieces are not emitted. It fails with ErrAddedTokenScan past its step budget.
func (v *addedVocab) split(dst []piece, text string, normalized bool) ([]piece, error) {
	t := v.raw
	if normalized {
		t = v.norm
	}
	if t.empty() {
		if text != "" {
			dst = append(dst, piece{text: text, id: -1})
		}
		return dst, nil
	}
	budget := AddedScanSteps*len(text) + AddedScanSlack
	startOffset := 0
	for pos := 0; pos < len(text); {
		mStart, mEnd, idx, ok := t.leftmostLongest(text, pos, &budget)
		if budget < 0 {
			return dst, ErrAddedTokenScan
		}
		if !ok {
			break
		}
		pos = mEnd
		a := &v.tokens[idx]
		start, stop := mStart, mEnd
		if a.singleWord {
			startOK := start == 0 || !endsWithWordChar(text[:start])
			stopOK := stop == len(text) || !startsWithWordChar(text[stop:])
			if !startOK || !stopOK {
				continue
			}
		}
		if a.lstrip {
			ns := leftmostSpaceAtEnd(text[:start])
			start = max(ns, startOffset)
		}
		if a.rstrip {
			stop += spaceRunAtStart(text[stop:])
		}
		if startOffset < start {
			dst = append(dst, piece{text: text[startOffset:start], id: -1})
		}
		dst = append(dst, piece{text: text[start:stop], id: a.id})
		startOffset = stop
	}
	if startOffset < len(text) {
		dst = append(dst, piece{text: text[startOffset:], id: -1})
	}
	return dst, nil
}

func isWordChar(r rune) bool { return unicode.IsLetter(r) || unicode.IsNumber(r) || r == '_' }

func endsWithWordChar(s string) bool {
	r, _ := utf8.DecodeLastRuneInString(s)
	return r != utf8.RuneError && isWordChar(r)
}

func startsWithWordChar(s string) bool {
	r, _ := utf8.DecodeRuneInString(s)
	return r != utf8.RuneError && isWordChar(r)
}

// leftmostSpaceAtEnd returns the byte offset where the run of whitespace ending s begins (len(s) if none).
func leftmostSpaceAtEnd(s string) int {
	i := len(s)
	for i > 0 {
		r, size := utf8.DecodeLastRuneInString(s[:i])
		if !unicode.IsSpace(r) {
			break
		}
		i -= size
	}
	return i
}

// spaceRunAtStart returns the byte length of the whitespace run that starts s.
func spaceRunAtStart(s string) int {
	i := 0
	for i < len(s) {
		r, size := utf8.DecodeRuneInString(s[i:])
		if !unicode.IsSpace(r) {
			break
		}
		i += size
	}
	return i
}

// Limits of added tokens, checked when a tokenizer is loaded (the error
// names the token and the limit): real tokenizers have added tokens of at
// most a few dozen bytes and a few hundred KB of them in all.
const (
	// MaxAddedTokenBytes bounds one added token's content, and its content
	// after normalization.
	MaxAddedTokenBytes = 4 << 10
	// MaxAddedTokensBytes bounds the contents of all added tokens together.
	MaxAddedTokensBytes = 16 << 20
)

// trie finds added-token contents in text, leftmost-longest. It is a sorted
// array of the distinct keys (sharing the tokens' content strings: about 20
// bytes a key beyond the contents) searched like a trie: at a candidate
// start, the range of keys that share the text's first d bytes narrows by
// binary search on byte d, and a key of length d, which sorts first in its
// range, is a match. A first-byte table skips text without any candidate
// start byte quickly (IndexByte when every key starts with one byte).
type trie struct {
	keys   []string // sorted, distinct
	tokens []int32  // index into addedVocab.tokens of keys[i]: the first token defining it
	// pending holds the keys inserted since the last build, in insertion
	// order.
	pending []trieKey
	// byFirst[b]..byFirst[b+1] is the range of keys starting with byte b.
	byFirst [257]int32
	first   [256]bool
	firsts  int  // distinct first bytes of the keys
	only    byte // the first byte when firsts == 1 (special tokens mostly all start with '<' or '['): found by IndexByte
	n       int
}

type trieKey struct {
	key   string
	token int32
}

func newTrie() *trie { return &trie{} }

func (t *trie) empty() bool { return t.n == 0 }

// insert adds key (not empty) for token; the first definition of a key
// wins, as in a map built in list order.
func (t *trie) insert(key string, token int) {
	t.pending = append(t.pending, trieKey{key, int32(token)})
	if !t.first[key[0]] {
		t.first[key[0]] = true
		t.firsts++
		t.only = key[0]
	}
	t.n++
}

// build sorts the pending keys into the array.
func (t *trie) build() {
	if len(t.pending) == 0 {
		return
	}
	all := make([]trieKey, 0, len(t.keys)+len(t.pending))
	for i, k := range t.keys {
		all = append(all, trieKey{k, t.tokens[i]})
	}
	all = append(all, t.pending...)
	t.pending = nil
	// Among equal keys the lower token index (the earlier definition, since
	// tokens are inserted in list order) comes first and is kept.
	slices.SortFunc(all, func(a, b trieKey) int {
		if c := strings.Compare(a.key, b.key); c != 0 {
			return c
		}
		return int(a.token) - int(b.token)
	})
	t.keys, t.tokens = t.keys[:0], t.tokens[:0]
	for _, k := range all {
		if n := len(t.keys); n > 0 && t.keys[n-1] == k.key {
			continue
		}
		t.keys = append(t.keys, k.key)
		t.tokens = append(t.tokens, k.token)
	}
	t.keys, t.tokens = slices.Clip(t.keys), slices.Clip(t.tokens)
	i := 0
	for b := range 256 {
		t.byFirst[b] = int32(i)
		for i < len(t.keys) && int(t.keys[i][0]) == b {
			i++
		}
	}
	t.byFirst[256] = int32(i)
}

// leftmostLongest finds, at or after from, the leftmost position where some key matches and the longest key there.
// The keys inserted since the last build are not searched. Every byte
// compared is taken from *budget; it stops (ok false) once *budget is below 0.
func (t *trie) leftmostLongest(s string, from int, budget *int) (start, end, token int, ok bool) {
	for i := from; i < len(s); i++ {
		if t.firsts == 1 {
			k := strings.IndexByte(s[i:], t.only)
			if k < 0 {
				break
			}
			i += k
		} else if !t.first[s[i]] {
			continue
		}
		e, tok := t.longestAt(s, i, budget)
		if *budget < 0 {
			return 0, 0, 0, false
		}
		if tok >= 0 {
			return i, e, int(tok), true
		}
	}
	return 0, 0, 0, false
}

// longestAt returns the end and token of the longest key that s[i:] starts
// with (token -1 when none).
func (t *trie) longestAt(s string, i int, budget *int) (int, int32) {
	lo, hi := int(t.byFirst[s[i]]), int(t.byFirst[int(s[i])+1])
	best, bestEnd := int32(-1), 0
	*budget--
	for d := 1; lo < hi; d++ {
		if *budget--; *budget < 0 {
			break
		}
		// keys[lo:hi] all start with s[i:i+d].
		if len(t.keys[lo]) == d {
			best, bestEnd = t.tokens[lo], i+d
			lo++
		}
		if i+d >= len(s) || lo >= hi {
			break
		}
		// keys[lo:hi] are longer than d and sorted by byte d.
		c := s[i+d]
		a, b := lo, hi
		for a < b { // first key with byte d >= c
			m := int(uint(a+b) >> 1)
			if t.keys[m][d] < c {
				a = m + 1
			} else {
				b = m
			}
		}
		lo = a
		b = hi
		for a < b { // first key with byte d > c
			m := int(uint(a+b) >> 1)
			if t.keys[m][d] <= c {
				a = m + 1
			} else {
				b = m
			}
		}
		hi = a
	}
	return bestEnd, best
}
