package model

import (
	"encoding/json"
	"unicode/utf8"

	"github.com/gload/gload/tokenize/tokjson"
)

// wordPieceModel: greedy longest-match-first from the left; a word with any unmatched position, or longer than
// maxChars characters, becomes the single unknown token.
type wordPieceModel struct {
	words sharedWords // the word cache every encoder of the model reads and fills

	vocab    map[string]int32
	reverse  reverseVocab
	prefix   string
	maxChars uint64
	unkID    int32
	maxKey   int // longest vocabulary key in bytes
	opts     Options
}

func loadWordPiece(f map[string]json.RawMessage, path string, opts Options) (*wordPieceModel, error) {
	var (
		typ, unkToken, prefix *string
		maxChars              *uint64
	)
	for _, d := range []struct {
		name string
		v    any
	}{{"type", &typ}, {"unk_token", &unkToken}, {"continuing_subword_prefix", &prefix},
		{"max_input_chars_per_word", &maxChars}} {
		if err := decodeField(f, d.name, path, d.v); err != nil {
			return nil, err
		}
	}
	if typ != nil && *typ != "WordPiece" {
		return nil, tokjson.Invalid(path+".type", "%q is not WordPiece", *typ)
	}
	switch {
	case unkToken == nil:
		return nil, tokjson.Invalid(path+".unk_token", "%w", ErrMissingField)
	case prefix == nil:
		return nil, tokjson.Invalid(path+".continuing_subword_prefix", "%w", ErrMissingField)
	case maxChars == nil:
		return nil, tokjson.Invalid(path+".max_input_chars_per_word", "%w", ErrMissingField)
	}
	vocab, err := decodeVocabMap(f["vocab"], path+".vocab")
	if err != nil {
		return nil, err
	}
	unk, ok := vocab[*unkToken]
	if !ok {
		return nil, tokjson.Unsupported(path+".unk_token", "unk_token %q missing from the vocabulary (Hugging Face fails at encode time)", *unkToken)
	}
	m := &wordPieceModel{
		vocab:    vocab,
		prefix:   *prefix,
		maxChars: *maxChars,
		unkID:    unk,
		opts:     opts,
	}
	m.reverse, _ = newReverseVocab(vocab)
	for tok := range vocab {
		m.maxKey = max(m.maxKey, len(tok))
	}
	return m, nil
}

func (m *wordPieceModel) NewEncoder() Encoder {
	return &cachedEncoder{cache: newWordCache(&m.words), byteLevel: m.opts.ByteLevel, enc: &wordPieceEncoder{m: m}}
}

func (m *wordPieceModel) TokenToID(token string) (int32, bool) {
	id, ok := m.vocab[token]
	return id, ok
}

func (m *wordPieceModel) IDToToken(id int32) (string, bool) { return m.reverse.lookup(id) }

func (m *wordPieceModel) VocabSize() int { return len(m.vocab) }

type wordPieceEncoder struct {
	m   *wordPieceModel
	key []byte
	out []int32
}

// encode follows Hugging Face's WordPiece::tokenize. The search for the longest match starts at the longest
// end a vocabulary key could reach instead of the word's end; shorter ends are tried in the same order.
func (e *wordPieceEncoder) encode(word string) []int32 {
	m := e.m
	e.out = e.out[:0]
	if uint64(utf8.RuneCountInString(word)) > m.maxChars {
		return append(e.out, m.unkID)
	}
	for start := 0; start < len(word); {
		end := len(word)
		budget := m.maxKey
		if start > 0 {
			budget -= len(m.prefix)
		}
		if end-start > budget {
			end = max(start, start+budget)
			for end > start && !utf8.RuneStart(word[end]) {
				end--
			}
		}
		found := false
		for start < end {
			e.key = e.key[:0]
			if start > 0 {
				e.key = append(e.key, m.prefix...)
			}
			e.key = append(e.key, word[start:end]...)
			if id, ok := m.vocab[string(e.key)]; ok {
				e.out = append(e.out, id)
				found = true
				break
			}
			_, n := utf8.DecodeLastRuneInString(word[start:end])
			end -= n
		}
		if !found {
			return append(e.out[:0], m.unkID)
		}
		start = end
	}
	return e.out
}

// wordLevelModel maps a whole word to its id, or to the unknown token.
type wordLevelModel struct {
	vocab   map[string]int32
	reverse reverseVocab
	unkID   int32
	opts    Options
}

func loadWordLevel(f map[string]json.RawMessage, path string, opts Options) (*wordLevelModel, error) {
	var typ, unkToken *string
	if err := decodeField(f, "type", path, &typ); err != nil {
		return nil, err
	}
	if err := decodeField(f, "unk_token", path, &unkToken); err != nil {
		return nil, err
	}
	if typ != nil && *typ != "WordLevel" {
		return nil, tokjson.Invalid(path+".type", "%q is not WordLevel", *typ)
	}
	if unkToken == nil {
		return nil, tokjson.Invalid(path+".unk_token", "%w", ErrMissingField)
	}
	vocab, err := decodeVocabMap(f["vocab"], path+".vocab")
	if err != nil {
		return nil, err
	}
	unk, ok := vocab[*unkToken]
	if !ok {
		return nil, tokjson.Unsupported(path+".unk_token", "unk_token %q missing from the vocabulary (Hugging Face fails at encode time)", *unkToken)
	}
	m := &wordLevelModel{vocab: vocab, unkID: unk, opts: opts}
	m.reverse, _ = newReverseVocab(vocab)
	return m, nil
}

func (m *wordLevelModel) NewEncoder() Encoder { return &wordLevelEncoder{m: m} }

func (m *wordLevelModel) TokenToID(token string) (int32, bool) {
	id, ok := m.vocab[token]
	return id, ok
}

func (m *wordLevelModel) IDToToken(id int32) (string, bool) { return m.reverse.lookup(id) }

func (m *wordLevelModel) VocabSize() int { return len(m.vocab) }

type wordLevelEncoder struct {
	m       *wordLevelModel
	scratch []byte
}

// Encode looks the whole word up. Unlike the other models it maps the empty word too (to the "" token or the
// unknown token), as Hugging Face's WordLevel::tokenize does.
func (e *wordLevelEncoder) Encode(word string, dst []int32) []int32 {
	if e.m.opts.ByteLevel {
		e.scratch = appendByteLevel(e.scratch[:0], word)
		word = unsafeString(e.scratch)
	}
	if id, ok := e.m.vocab[word]; ok {
		return append(dst, id)
	}
	return append(dst, e.m.unkID)
}
