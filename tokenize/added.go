package tokenize

import (
	"fmt"
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

func newAddedVocab(list []addedTokenJSON, n normalize.Normalizer, splitSpecial bool) (*addedVocab, error) {
	v := &addedVocab{
		byContent: make(map[string]int32, len(list)),
		byID:      make(map[int32]*addedToken, len(list)),
		raw:       newTrie(),
		norm:      newTrie(),
	}
	v.tokens = make([]addedToken, 0, len(list))
	for i, a := range list {
		path := fmt.Sprintf("added_tokens[%d]", i)
		if a.ID == nil || *a.ID < 0 {
			return nil, fmt.Errorf("%w: %s: missing or negative \"id\"", ErrInvalid, path)
		}
		if a.Content == "" {
			return nil, fmt.Errorf("%w: %s: empty \"content\"", ErrInvalid, path)
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
			key := a.content
			if n != nil {
				key = n.Normalize(key)
			}
			if key != "" {
				v.norm.insert(key, i)
			}
		} else {
			v.raw.insert(a.content, i)
		}
	}
	return v, nil
}

// split appends the pieces of text to dst: added-token matches (from the raw or the normalized set) and the text
// between them. Empty text pieces are not emitted.
func (v *addedVocab) split(dst []piece, text string, normalized bool) []piece {
	t := v.raw
	if normalized {
		t = v.norm
	}
	if t.empty() {
		if text != "" {
			dst = append(dst, piece{text: text, id: -1})
		}
		return dst
	}
	startOffset := 0
	for pos := 0; pos < len(text); {
		mStart, mEnd, idx, ok := t.leftmostLongest(text, pos)
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
	return dst
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

// trie is a byte trie over added-token contents, with a first-byte filter so text without any candidate start
// byte is skipped quickly. Matching at each candidate position walks the trie once (leftmost-longest).
type trie struct {
	nodes  []trieNode
	first  [256]bool
	firsts int  // distinct first bytes of the keys
	only   byte // the first byte when firsts == 1 (special tokens mostly all start with '<' or '['): found by IndexByte
	n      int
}

type trieNode struct {
	next  map[byte]int32
	token int32 // index into addedVocab.tokens, -1 if no token ends here
}

func newTrie() *trie { return &trie{nodes: []trieNode{{token: -1}}} }

func (t *trie) empty() bool { return t.n == 0 }

func (t *trie) insert(key string, token int) {
	cur := int32(0)
	for i := 0; i < len(key); i++ {
		n := &t.nodes[cur]
		if n.next == nil {
			n.next = make(map[byte]int32)
		}
		nx, ok := n.next[key[i]]
		if !ok {
			nx = int32(len(t.nodes))
			t.nodes[cur].next[key[i]] = nx
			t.nodes = append(t.nodes, trieNode{token: -1})
		}
		cur = nx
	}
	if t.nodes[cur].token < 0 { // first definition wins, as in a map built in list order
		t.nodes[cur].token = int32(token)
	}
	if !t.first[key[0]] {
		t.first[key[0]] = true
		t.firsts++
		t.only = key[0]
	}
	t.n++
}

// leftmostLongest finds, at or after from, the leftmost position where some key matches and the longest key there.
func (t *trie) leftmostLongest(s string, from int) (start, end, token int, ok bool) {
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
		cur := int32(0)
		best, bestEnd := int32(-1), 0
		for j := i; j < len(s); j++ {
			nx, found := t.nodes[cur].next[s[j]]
			if !found {
				break
			}
			cur = nx
			if tok := t.nodes[cur].token; tok >= 0 {
				best, bestEnd = tok, j+1
			}
		}
		if best >= 0 {
			return i, bestEnd, int(best), true
		}
	}
	return 0, 0, 0, false
}
