package model

import (
	"encoding/json"
	"fmt"
	"math"
	"unicode/utf8"

	"github.com/gload/gload/tokenize/tokjson"
)

// unkPenalty is subtracted from the lowest piece score to score an unknown character (K_UNK_PENALTY).
const unkPenalty = 10.0

// unigramModel is a SentencePiece unigram model encoded as Hugging Face's Unigram::encode_optimized does: a
// Viterbi pass over the byte positions of the word with pieces found by common-prefix search in a trie.
type unigramModel struct {
	words sharedWords // the word cache every encoder of the model reads and fills

	pieces       []string
	scores       []float64
	tokenToID    map[string]int32 // a repeated piece maps to its last id, as in Hugging Face
	unkID        int32
	unkScore     float64
	byteFallback bool
	fallback     [256]int32
	allFallback  bool
	trie         pieceTrie
	opts         Options
}

func loadUnigram(f map[string]json.RawMessage, path string, opts Options) (*unigramModel, error) {
	var (
		typ          *string
		unkID        *int64
		byteFallback *bool
	)
	for _, d := range []struct {
		name string
		v    any
	}{{"type", &typ}, {"unk_id", &unkID}, {"byte_fallback", &byteFallback}} {
		if err := decodeField(f, d.name, path, d.v); err != nil {
			return nil, err
		}
	}
	if typ != nil && *typ != "Unigram" {
		return nil, tokjson.Invalid(path+".type", "%q is not Unigram", *typ)
	}
	if isNull(f["vocab"]) {
		return nil, tokjson.Invalid(path+".vocab", "%w", ErrMissingField)
	}
	m := &unigramModel{
		byteFallback: byteFallback != nil && *byteFallback,
		opts:         opts,
	}
	if err := m.decodeVocab(f["vocab"], path+".vocab"); err != nil {
		return nil, err
	}
	minScore := math.Inf(1)
	for _, sc := range m.scores {
		minScore = min(minScore, sc)
	}
	if unkID == nil {
		return nil, tokjson.Unsupported(path+".unk_id", "null unk_id (Hugging Face fails on any unknown character)")
	}
	if *unkID < 0 || *unkID >= int64(len(m.pieces)) {
		return nil, tokjson.Invalid(path+".unk_id", "%d outside the %d pieces: %w", *unkID, len(m.pieces), ErrBadID)
	}
	m.unkID = int32(*unkID)
	m.unkScore = minScore - unkPenalty
	m.fallback, m.allFallback = byteFallbackIDs(m.TokenToID)
	m.trie = buildPieceTrie(m.tokenToID)
	return m, nil
}

// decodeVocab reads [[piece, score], ...]; a repeated piece maps to its last id.
func (m *unigramModel) decodeVocab(raw json.RawMessage, path string) error {
	sc := &scanner{data: raw}
	m.tokenToID = make(map[string]int32, len(raw)/24)
	err := sc.list(func(i int) error {
		if i >= maxID {
			return fmt.Errorf("more than 2^31-1 pieces: %w", ErrBadID)
		}
		n := 0
		var piece string
		var score float64
		err := sc.list(func(k int) error {
			n++
			switch k {
			case 0:
				var err error
				piece, err = sc.str()
				return err
			case 1:
				num, err := sc.number()
				if err != nil {
					return err
				}
				score, err = serdeFloat(num)
				return err
			}
			return fmt.Errorf("piece %d: more than [piece, score]", i)
		})
		if err != nil {
			return err
		}
		if n != 2 {
			return fmt.Errorf("piece %d: want [piece, score], have %d elements", i, n)
		}
		m.pieces = append(m.pieces, piece)
		m.scores = append(m.scores, score)
		m.tokenToID[piece] = int32(i)
		return nil
	})
	if err == nil {
		err = sc.end()
	}
	if err != nil {
		return tokjson.Invalid(path, "%w", err)
	}
	return nil
}

func (m *unigramModel) NewEncoder() Encoder {
	return &cachedEncoder{cache: newWordCache(&m.words), byteLevel: m.opts.ByteLevel, enc: &unigramEncoder{m: m}}
}

func (m *unigramModel) TokenToID(token string) (int32, bool) {
	id, ok := m.tokenToID[token]
	return id, ok
}

func (m *unigramModel) IDToToken(id int32) (string, bool) {
	if id < 0 || int(id) >= len(m.pieces) {
		return "", false
	}
	return m.pieces[id], true
}

func (m *unigramModel) VocabSize() int { return len(m.pieces) }

// latticeNode is the best path ending at one byte position.
type latticeNode struct {
	score float64
	start int32 // -1: no path ends here yet
	id    int32
}

type unigramEncoder struct {
	m    *unigramModel
	best []latticeNode
	path []int32 // end positions of the best path, back to front
	out  []int32
}

func (e *unigramEncoder) encode(s string) []int32 {
	m := e.m
	n := len(s)
	if cap(e.best) < n+1 {
		e.best = make([]latticeNode, n+1, 2*(n+1))
	}
	best := e.best[:n+1]
	for i := range best {
		best[i] = latticeNode{start: -1}
	}
	root := &m.trie
	for pos := 0; pos < n; {
		_, mblen := utf8.DecodeRuneInString(s[pos:])
		base := best[pos].score
		single := false
		node := int32(0)
		for k := pos; k < n; k++ {
			node = root.child(node, s[k])
			if node < 0 {
				break
			}
			id := root.leaf[node]
			if id < 0 {
				continue
			}
			cand := base + m.scores[id]
			t := &best[k+1]
			if t.start < 0 || cand > t.score {
				*t = latticeNode{score: cand, start: int32(pos), id: id}
			}
			if k+1-pos == mblen {
				single = true
			}
		}
		if !single {
			t := &best[pos+mblen]
			cand := base + m.unkScore
			if t.start < 0 || cand > t.score {
				*t = latticeNode{score: cand, start: int32(pos), id: m.unkID}
			}
		}
		pos += mblen
	}
	e.path = e.path[:0]
	for end := n; end > 0; end = int(best[end].start) {
		e.path = append(e.path, int32(end))
	}
	e.out = e.out[:0]
	groupStart := -1 // start of a run of unknown-token nodes, fused into one piece
	for i := len(e.path) - 1; i >= 0; i-- {
		end := int(e.path[i])
		nd := best[end]
		if nd.id == m.unkID {
			if groupStart < 0 {
				groupStart = int(nd.start)
			}
			continue
		}
		if groupStart >= 0 {
			e.appendPiece(s[groupStart:nd.start])
			groupStart = -1
		}
		e.out = append(e.out, nd.id)
	}
	if groupStart >= 0 {
		e.appendPiece(s[groupStart:])
	}
	return e.out
}

// appendPiece appends the id of a fused unknown piece as Unigram::tokenize resolves it: the piece itself if it
// happens to be in the vocabulary, else its bytes' <0xXX> tokens when byte_fallback has them all, else unk.
func (e *unigramEncoder) appendPiece(piece string) {
	m := e.m
	if id, ok := m.tokenToID[piece]; ok {
		e.out = append(e.out, id)
		return
	}
	if m.byteFallback {
		ok := true
		for i := 0; i < len(piece); i++ {
			if m.fallback[piece[i]] < 0 {
				ok = false
				break
			}
		}
		if ok {
			for i := 0; i < len(piece); i++ {
				e.out = append(e.out, m.fallback[piece[i]])
			}
			return
		}
	}
	e.out = append(e.out, m.unkID)
}

// pieceTrie is a byte trie over the pieces. Node 0 is the root; the root's children are a direct table, the
// others an open-addressing hash keyed by node<<8|byte.
type pieceTrie struct {
	rootKids [256]int32
	leaf     []int32 // piece id ending at the node, or -1
	keys     []uint64
	kids     []int32
	shift    uint8
	mask     uint64
}

const noTrieKey = math.MaxUint64

func buildPieceTrie(tokenToID map[string]int32) pieceTrie {
	var t pieceTrie
	for i := range t.rootKids {
		t.rootKids[i] = -1
	}
	t.leaf = []int32{-1}
	total := 0
	for p := range tokenToID {
		total += len(p)
	}
	size := 16
	for size < 2*total {
		size <<= 1
	}
	t.keys = make([]uint64, size)
	t.kids = make([]int32, size)
	for i := range t.keys {
		t.keys[i] = noTrieKey
	}
	t.mask = uint64(size - 1)
	t.shift = uint8(64 - log2(size))
	for p, id := range tokenToID {
		if p == "" {
			continue // Hugging Face's trie never reports the empty prefix
		}
		node := int32(0)
		for i := 0; i < len(p); i++ {
			next := t.child(node, p[i])
			if next < 0 {
				next = int32(len(t.leaf))
				t.leaf = append(t.leaf, -1)
				t.setChild(node, p[i], next)
			}
			node = next
		}
		t.leaf[node] = id
	}
	return t
}

func log2(n int) int {
	k := 0
	for 1<<k < n {
		k++
	}
	return k
}

func (t *pieceTrie) child(node int32, b byte) int32 {
	if node == 0 {
		return t.rootKids[b]
	}
	k := uint64(node)<<8 | uint64(b)
	i := (k * 0x9E3779B97F4A7C15) >> t.shift
	for {
		switch t.keys[i] {
		case k:
			return t.kids[i]
		case noTrieKey:
			return -1
		}
		i = (i + 1) & t.mask
	}
}

func (t *pieceTrie) setChild(node int32, b byte, kid int32) {
	if node == 0 {
		t.rootKids[b] = kid
		return
	}
	k := uint64(node)<<8 | uint64(b)
	i := (k * 0x9E3779B97F4A7C15) >> t.shift
	for t.keys[i] != noTrieKey {
		i = (i + 1) & t.mask
	}
	t.keys[i], t.kids[i] = k, kid
}
