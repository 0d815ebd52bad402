package model

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"
	"unicode/utf8"

	"github.com/gload/gload/tokenize/tokjson"
)

// runeTableSize: single-rune tokens below this code point are found by array index, the rest through a map.
const runeTableSize = 0x10000

// bpeModel is an immutable BPE vocabulary with its merge table.
type bpeModel struct {
	words sharedWords // the word cache every encoder of the model reads and fills

	vocab   map[string]int32 // tokenizer.json's own strings
	reverse reverseVocab
	merges  mergeTable

	prefix, suffix string
	affixes        bool // prefix or suffix non-empty
	byteLevel      bool
	fuseUnk        bool
	byteFallback   bool
	ignoreMerges   bool
	unkID          int32 // -1: no unk_token, unknown chars are dropped
	fallback       [256]int32

	// idsFollowRanks: every merge's result id is larger than the previous merge's (true for the qwen3 and gpt4o
	// fixtures, false for llama3 and llama2). It is only recorded, not exploited: the merge table stores the
	// rank beside the id in the same 16-byte slot, so comparing ranks costs exactly what comparing ids would,
	// and the encoder stays exact for every file.
	idsFollowRanks bool

	// regular: no two vocabulary strings share an id and no merge's right token is as short as the prefix;
	// then the short-word merge loop is provably identical to Hugging Face's heap (see mergeSmall).
	regular bool

	// Character lookup without affixes (byteLevel: by raw byte; otherwise by rune).
	byteID  [256]int32
	runeID  []int32 // runeTableSize entries, -1 = absent
	runeMap map[rune]int32
	byteVar [4][256]int32 // byteLevel with affixes: [first?0:1 | last?2:0][byte]

	// splitChar, when set, cuts words into independent chunks (see findSplitChar).
	splitChar string
	// joins holds every pair of adjacent characters inside some token; with splitChar's conditions a long chunk
	// can be cut between two known characters that never occur together in a token (see encodeLong).
	joins *pairSet
}

// maxSmallWord: words of at most this many symbols are merged by the quadratic scan, longer ones by the heap.
const maxSmallWord = 48

func loadBPE(f map[string]json.RawMessage, path string, opts Options) (*bpeModel, error) {
	var (
		typ                                 *string
		dropout                             *float64
		unkToken, prefix, suffix            *string
		fuseUnk, byteFallback, ignoreMerges *bool
	)
	for _, d := range []struct {
		name string
		v    any
	}{
		{"type", &typ}, {"dropout", &dropout}, {"unk_token", &unkToken},
		{"continuing_subword_prefix", &prefix}, {"end_of_word_suffix", &suffix}, {"fuse_unk", &fuseUnk},
		{"byte_fallback", &byteFallback}, {"ignore_merges", &ignoreMerges},
	} {
		if err := decodeField(f, d.name, path, d.v); err != nil {
			return nil, err
		}
	}
	if typ != nil && *typ != "BPE" {
		return nil, tokjson.Invalid(path+".type", "%q is not BPE", *typ)
	}
	if dropout != nil && float32(*dropout) != 0 { // Hugging Face keeps dropout as f32
		return nil, tokjson.Unsupported(path+".dropout", "dropout %v (only null or 0)", *dropout)
	}
	if isNull(f["vocab"]) || isNull(f["merges"]) {
		return nil, tokjson.Invalid(path, "vocab and merges: %w", ErrMissingField)
	}
	vocab, err := decodeVocabMap(f["vocab"], path+".vocab")
	if err != nil {
		return nil, err
	}
	m := &bpeModel{
		vocab:        vocab,
		byteLevel:    opts.ByteLevel,
		fuseUnk:      fuseUnk != nil && *fuseUnk,
		byteFallback: byteFallback != nil && *byteFallback,
		ignoreMerges: ignoreMerges != nil && *ignoreMerges,
		unkID:        -1,
	}
	if prefix != nil {
		m.prefix = *prefix
	}
	if suffix != nil {
		m.suffix = *suffix
	}
	m.affixes = m.prefix != "" || m.suffix != ""
	pairs, err := decodeMerges(f["merges"], path+".merges")
	if err != nil {
		return nil, err
	}
	irregularMerge, err := m.buildMerges(pairs, path+".merges")
	if err != nil {
		return nil, err
	}
	var shared bool
	m.reverse, shared = newReverseVocab(vocab)
	m.regular = !irregularMerge && !shared
	m.fallback, _ = byteFallbackIDs(m.TokenToID)
	m.buildCharTables()
	if unkToken != nil {
		id, ok := vocab[*unkToken]
		switch {
		case ok:
			m.unkID = id
		case m.unkReachable():
			// Hugging Face loads this file but fails every encode that needs the unknown token.
			return nil, tokjson.Unsupported(path+".unk_token", "unk_token %q missing from the vocabulary (Hugging Face fails at encode time)", *unkToken)
		}
	}
	if m.chunkable() {
		m.splitChar = m.findSplitChar()
		m.joins = m.buildJoins()
	}
	return m, nil
}

// buildMerges fills the merge table as Hugging Face's BpeBuilder does: the merged token is a + b without b's
// first len(prefix) bytes, every token must be in the vocabulary, and a repeated pair keeps its last rank.
// It reports whether some merge's right token is no longer than the prefix (an irregular model).
func (m *bpeModel) buildMerges(pairs [][2]string, path string) (irregular bool, err error) {
	m.merges = newMergeTable(len(pairs))
	m.idsFollowRanks = true
	prevID := int32(-1)
	var buf []byte
	for rank, p := range pairs {
		a, b := p[0], p[1]
		aID, ok := m.vocab[a]
		if !ok {
			return false, tokjson.Invalid(fmt.Sprintf("%s[%d]", path, rank), "%q: %w", a, ErrTokenNotInVocab)
		}
		bID, ok := m.vocab[b]
		if !ok {
			return false, tokjson.Invalid(fmt.Sprintf("%s[%d]", path, rank), "%q: %w", b, ErrTokenNotInVocab)
		}
		if len(b) < len(m.prefix) {
			return false, tokjson.Invalid(fmt.Sprintf("%s[%d]", path, rank), "%q shorter than continuing_subword_prefix: %w", b, ErrBadMerge)
		}
		if len(b) == len(m.prefix) {
			irregular = true
		}
		buf = append(append(buf[:0], a...), b[len(m.prefix):]...)
		newID, ok := m.vocab[string(buf)]
		if !ok {
			return false, tokjson.Invalid(fmt.Sprintf("%s[%d]", path, rank), "merged %q: %w", buf, ErrTokenNotInVocab)
		}
		m.merges.put(aID, bID, uint32(rank), newID)
		if newID <= prevID {
			m.idsFollowRanks = false
		}
		prevID = newID
	}
	return irregular, nil
}

// decodeMerges reads `merges` in either form: ["a b", ...] (lines starting with `#version` are skipped and do
// not count as ranks) or [["a","b"], ...]. A list mixing the forms is an error, as in Hugging Face.
func decodeMerges(raw json.RawMessage, path string) ([][2]string, error) {
	sc := &scanner{data: raw}
	var out [][2]string
	tuples := false
	err := sc.list(func(i int) error {
		if i == 0 {
			tuples = sc.peek() == '['
			out = make([][2]string, 0, len(raw)/12)
		}
		if tuples {
			var pair [2]string
			n := 0
			err := sc.list(func(k int) error {
				if k >= 2 {
					return fmt.Errorf("merge %d has more than 2 tokens: %w", i, ErrBadMerge)
				}
				var err error
				pair[k], err = sc.str()
				n++
				return err
			})
			if err != nil {
				return err
			}
			if n != 2 {
				return fmt.Errorf("merge %d has %d tokens: %w", i, n, ErrBadMerge)
			}
			out = append(out, pair)
			return nil
		}
		line, err := sc.stringBytes()
		if err != nil {
			return err
		}
		if bytes.HasPrefix(line, []byte("#version")) {
			return nil
		}
		a, b, ok := bytes.Cut(line, []byte{' '})
		if !ok || bytes.IndexByte(b, ' ') >= 0 {
			return fmt.Errorf("merge %d %q is not two space-separated tokens: %w", i, line, ErrBadMerge)
		}
		out = append(out, [2]string{string(a), string(b)})
		return nil
	})
	if err == nil {
		err = sc.end()
	}
	if err != nil {
		return nil, tokjson.Invalid(path, "%w", err)
	}
	return out, nil
}

// buildCharTables precomputes the id of every single character so that building a word's symbols rarely
// touches the vocabulary map.
func (m *bpeModel) buildCharTables() {
	if m.byteLevel {
		var key []byte
		for v := range 4 {
			first, last := v&1 == 0, v&2 != 0
			for b := range 256 {
				key = m.appendKey(key[:0], string(tokjson.ByteToRune[b]), first, last)
				id, ok := m.vocab[string(key)]
				if !ok {
					id = -1
				}
				m.byteVar[v][b] = id
			}
		}
		m.byteID = m.byteVar[1] // not first, not last: no affixes apply when there are none
		return
	}
	if m.affixes {
		return // characters are looked up with their affixes, through the map
	}
	m.runeID = make([]int32, runeTableSize)
	for i := range m.runeID {
		m.runeID[i] = -1
	}
	m.runeMap = make(map[rune]int32)
	for tok, id := range m.vocab {
		r, n := utf8.DecodeRuneInString(tok)
		if n != len(tok) || n == 0 || (r == utf8.RuneError && n == 1) {
			continue
		}
		if r < runeTableSize {
			m.runeID[r] = id
		} else {
			m.runeMap[r] = id
		}
	}
}

// splitCandidates are the word separators of vocabularies without a pre-tokenizer (SentencePiece's
// metaspace, a plain space).
var splitCandidates = []string{"▁", " "}

// findSplitChar looks for a character X at whose occurrences after another character a word can be cut into
// chunks that are tokenized independently, with exactly Hugging Face's result. That holds when X is a token
// and no token has X anywhere but in a leading run of X: then every token that a merge could build across
// "cX" (c ≠ X) would contain cX, so no merge exists there, the symbol boundary before X never disappears, and
// the heap's work on either side is independent (its order restricted to one side is unchanged). The
// character before X must not vanish, so unknown characters must become unk or byte-fallback tokens. It also
// needs no affixes (merged strings are plain concatenations), no ignore_merges (a chunk is not a whole word), a
// regular model, and an unknown token without X. Llama 2 qualifies: a document is one word, cut into its
// "▁word" chunks, each merged fast and cached.
func (m *bpeModel) findSplitChar() string {
	if _, all := byteFallbackIDs(m.TokenToID); m.unkID < 0 && !(m.byteFallback && all) {
		// An unknown character before X could be dropped, leaving X next to an X and free to merge with it.
		return ""
	}
	unk, _ := m.IDToToken(m.unkID)
	for _, x := range splitCandidates {
		if _, ok := m.vocab[x]; !ok || (m.unkID >= 0 && strings.Contains(unk, x)) {
			continue
		}
		ok := true
		for tok := range m.vocab {
			if strings.Contains(strings.TrimLeft(tok, x), x) {
				ok = false
				break
			}
		}
		if ok {
			return x
		}
	}
	return ""
}

// chunkable reports whether the model allows cutting words at permanent symbol boundaries at all: merged
// strings must be plain concatenations (no affixes), chunks are not whole words (no ignore_merges), ids are
// one-to-one with strings (regular), and words are characters, not bytes.
func (m *bpeModel) chunkable() bool {
	return !m.byteLevel && !m.affixes && !m.ignoreMerges && m.regular
}

// buildJoins collects the adjacent character pairs inside tokens. A merge across the boundary between known
// characters a and b builds a token whose string contains "ab" (the left symbol's string ends with a, the
// right one's starts with b: strings only concatenate), so where no token contains "ab" no merge ever joins
// the two sides, and each side is tokenized independently of the other — pending unknown tokens included,
// since the known b flushes them either way.
func (m *bpeModel) buildJoins() *pairSet {
	set := newPairSet(len(m.vocab) * 4)
	for tok := range m.vocab {
		prev := rune(-1)
		for _, r := range tok {
			if prev >= 0 {
				set.add(pairKey(prev, r))
			}
			prev = r
		}
	}
	return set
}

// appendKey appends the vocabulary key of one character: the continuing-subword prefix unless first, the
// character, the end-of-word suffix if last.
func (m *bpeModel) appendKey(dst []byte, char string, first, last bool) []byte {
	if !first {
		dst = append(dst, m.prefix...)
	}
	dst = append(dst, char...)
	if last {
		dst = append(dst, m.suffix...)
	}
	return dst
}

// unkReachable reports whether some word can need the unknown token: a character missing from the vocabulary
// whose bytes the byte fallback cannot cover.
func (m *bpeModel) unkReachable() bool {
	_, allFallback := byteFallbackIDs(m.TokenToID)
	if m.byteFallback && allFallback {
		return false
	}
	if !m.byteLevel {
		return true
	}
	for v := range 4 {
		for b := range 256 {
			if m.byteVar[v][b] < 0 {
				return true
			}
		}
	}
	return false
}

func (m *bpeModel) NewEncoder() Encoder {
	return &bpeEncoder{m: m, cache: newWordCache(&m.words)}
}

func (m *bpeModel) TokenToID(token string) (int32, bool) {
	id, ok := m.vocab[token]
	return id, ok
}

func (m *bpeModel) IDToToken(id int32) (string, bool) { return m.reverse.lookup(id) }

func (m *bpeModel) VocabSize() int { return len(m.vocab) }

// bpeEncoder is the per-goroutine BPE state: the word cache and reusable scratch.
type bpeEncoder struct {
	m     *bpeModel
	cache *wordCache
	word  []int32 // symbols of the current word, then its result
	ranks []uint64
	key   []byte
	heap  mergeHeap
}

var (
	_ Encoder      = (*bpeEncoder)(nil)
	_ WordsEncoder = (*bpeEncoder)(nil)
)

func (e *bpeEncoder) Encode(word string, dst []int32) []int32 {
	if len(word) == 0 {
		return dst
	}
	m := e.m
	if m.byteLevel && len(word) == 1 && !m.affixes {
		// One byte is one character: with or without ignore_merges its token is the character's.
		if id := m.byteID[word[0]]; id >= 0 {
			return append(dst, id)
		}
	}
	if x := m.splitChar; x != "" && len(word) > len(x) {
		return e.encodeSplit(word, x, dst)
	}
	return e.encodeCached(word, dst)
}

// EncodeWords is Encode of each word in turn. A word of 2 to hotMaxWordLen bytes whose ids are in the hot table
// is appended here without a call: Encode would reach the same entry through encodeCached and encodeOne (one-byte
// words take Encode's byte-level path first, and a model with splitChar cuts words before its cache, so neither
// comes here).
func (e *bpeEncoder) EncodeWords(words []string, dst []int32) []int32 {
	if e.m.splitChar != "" {
		for _, w := range words {
			dst = e.Encode(w, dst)
		}
		return dst
	}
	hot := e.cache.hot[: 1<<hotBits : 1<<hotBits]
	for _, w := range words {
		if n := len(w); n >= 2 && n <= hotMaxWordLen {
			lo, hi := packWord(w)
			h := &hot[hotIndex(lo, hi, n)&(1<<hotBits-1)]
			if h.lo == lo && h.hi == hi && int(h.n) == n {
				switch h.cnt { // appends of one to three values, without append's call of memmove
				case 1:
					dst = append(dst, h.ids[0])
				case 2:
					dst = append(dst, h.ids[0], h.ids[1])
				case 3:
					dst = append(dst, h.ids[0], h.ids[1], h.ids[2])
				}
				continue
			}
		}
		dst = e.Encode(w, dst)
	}
	return dst
}

// longChunk: chunks longer than this many bytes are cut further at character pairs no token contains.
const longChunk = 256

func (e *bpeEncoder) encodeCached(word string, dst []int32) []int32 {
	if len(word) > longChunk && e.m.joins != nil {
		return e.encodeLong(word, dst)
	}
	return e.encodeOne(word, dst)
}

// encodeLong cuts word between known characters a and b wherever no token contains "ab" (see buildJoins).
func (e *bpeEncoder) encodeLong(word string, dst []int32) []int32 {
	m := e.m
	start := 0
	prev := rune(-1) // previous character if it is a known token, else -1
	for i := 0; i < len(word); {
		r, n := utf8.DecodeRuneInString(word[i:])
		known := !(r == utf8.RuneError && n == 1) && m.runeKnown(r)
		if known && prev >= 0 && !m.joins.has(pairKey(prev, r)) {
			dst = e.encodeOne(word[start:i], dst)
			start = i
		}
		prev = -1
		if known {
			prev = r
		}
		i += n
	}
	return e.encodeOne(word[start:], dst)
}

func (m *bpeModel) runeKnown(r rune) bool {
	if r < runeTableSize {
		return m.runeID[r] >= 0
	}
	_, ok := m.runeMap[r]
	return ok
}

func (e *bpeEncoder) encodeOne(word string, dst []int32) []int32 {
	if ids, ok := e.cache.get(word); ok {
		return append(dst, ids...)
	}
	ids := e.encodeWord(word)
	e.cache.put(word, ids)
	return append(dst, ids...)
}

// encodeSplit encodes word chunk by chunk, cutting before every x that follows another character.
func (e *bpeEncoder) encodeSplit(word, x string, dst []int32) []int32 {
	start := 0
	for from := 1; from < len(word); {
		i := strings.Index(word[from:], x)
		if i < 0 {
			break
		}
		p := from + i
		if !strings.HasSuffix(word[:p], x) {
			dst = e.encodeCached(word[start:p], dst)
			start = p
		}
		from = p + len(x)
	}
	return e.encodeCached(word[start:], dst)
}

// encodeWord tokenizes one word into e.word (valid until the next call).
func (e *bpeEncoder) encodeWord(word string) []int32 {
	m := e.m
	if ids, ok := e.ignoreMergesHit(word); ok {
		return ids
	}
	e.initSymbols(word)
	if len(e.word) > 1 {
		if len(e.word) <= maxSmallWord && m.regular {
			e.mergeSmall()
		} else {
			e.mergeHeap()
		}
	}
	return e.word
}

// ignoreMergesHit implements ignore_merges: a word that is itself a token is that token, unmerged.
func (e *bpeEncoder) ignoreMergesHit(word string) ([]int32, bool) {
	m := e.m
	if !m.ignoreMerges {
		return nil, false
	}
	var id int32
	var ok bool
	if m.byteLevel {
		e.key = appendByteLevel(e.key[:0], word)
		id, ok = m.vocab[string(e.key)]
	} else {
		id, ok = m.vocab[word]
	}
	if !ok {
		return nil, false
	}
	e.word = append(e.word[:0], id)
	return e.word, true
}

// initSymbols splits word into characters (bytes when byte-level) and maps each to its id, applying byte
// fallback and the unknown token exactly as Hugging Face's BPE::merge_word does — including its quirks: a
// pending unknown token is flushed only by the next known character or the end of the word, so byte-fallback
// tokens can precede it and fused unknowns span them.
func (e *bpeEncoder) initSymbols(word string) {
	m := e.m
	e.word = e.word[:0]
	pendingUnk := false
	for i := 0; i < len(word); {
		var id int32 = -1
		var n int
		if m.byteLevel {
			n = 1
			if !m.affixes {
				id = m.byteID[word[i]]
			} else {
				v := 0
				if i > 0 {
					v = 1
				}
				if i == len(word)-1 {
					v |= 2
				}
				id = m.byteVar[v][word[i]]
			}
		} else {
			r, size := utf8.DecodeRuneInString(word[i:])
			n = size
			switch {
			case m.affixes:
				e.key = m.appendKey(e.key[:0], word[i:i+n], i == 0, i+n == len(word))
				if v, ok := m.vocab[string(e.key)]; ok {
					id = v
				}
			case r == utf8.RuneError && size == 1:
				// an invalid byte is no vocabulary key
			case r < runeTableSize:
				id = m.runeID[r]
			default:
				if v, ok := m.runeMap[r]; ok {
					id = v
				}
			}
		}
		if id >= 0 {
			if pendingUnk {
				e.word = append(e.word, m.unkID)
				pendingUnk = false
			}
			e.word = append(e.word, id)
			i += n
			continue
		}
		if m.byteFallback && e.appendFallback(word[i:i+n], i == 0, i+n == len(word)) {
			i += n
			continue
		}
		if m.unkID >= 0 {
			if pendingUnk && !m.fuseUnk {
				e.word = append(e.word, m.unkID)
			}
			pendingUnk = true
		}
		i += n
	}
	if pendingUnk {
		e.word = append(e.word, m.unkID)
	}
}

// appendFallback appends the <0xXX> tokens of every byte of the character's vocabulary key (affixes
// included, in the vocabulary's own string form) if all exist, and reports whether it did.
func (e *bpeEncoder) appendFallback(char string, first, last bool) bool {
	m := e.m
	if m.byteLevel {
		e.key = m.appendKey(e.key[:0], string(tokjson.ByteToRune[char[0]]), first, last)
	} else {
		e.key = m.appendKey(e.key[:0], char, first, last)
	}
	for _, b := range e.key {
		if m.fallback[b] < 0 {
			return false
		}
	}
	for _, b := range e.key {
		e.word = append(e.word, m.fallback[b])
	}
	return true
}
