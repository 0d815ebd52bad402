// Package tokenize holds gload's tokenizer engine and the `gload tokenize` pipeline.
//
// The engine (this package and its subpackages tokjson, normalize, pretok, model, decode) reads a Hugging Face
// tokenizer.json as it is and encodes text token-for-token as Hugging Face tokenizers 0.23.2 does, in pure Go.
// The pipeline (subpackages corpus and build) turns corpora into gload dataset directories.
//
// The engine must not know about corpora, Arrow or the dataset format; it is a library other parts call.
//
// # Text that is not valid UTF-8
//
// Encode replaces every ill-formed byte sequence with U+FFFD, one replacement per maximal ill-formed subpart, exactly
// as Python's bytes.decode("utf-8", errors="replace") does, and then encodes the result.
//
// # Caveats
//
// A Tokenizer is immutable after Load and safe for concurrent use. Slices returned by Encode belong to the caller.
package tokenize

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/gload/gload/internal/readcap"
	"github.com/gload/gload/tokenize/decode"
	"github.com/gload/gload/tokenize/model"
	"github.com/gload/gload/tokenize/normalize"
	"github.com/gload/gload/tokenize/pretok"
	"github.com/gload/gload/tokenize/tokjson"
	"github.com/gload/gload/tokenize/utf8fix"
)

// Errors returned by Load.
var (
	ErrUnsupported = tokjson.ErrUnsupported
	ErrInvalid     = errors.New("tokenizer: invalid tokenizer.json")
)

// Options change how a tokenizer.json is applied.
type Options struct {
	// SplitSpecialTokens treats the text of special tokens (e.g. "<|endoftext|>", "[MASK]") found in the input as
	// plain text instead of mapping it to the special token's id — what pre-training pipelines usually want. Off by
	// default, as in Hugging Face (`split_special_tokens=False`), so the default gives HF's ids.
	SplitSpecialTokens bool
}

// Tokenizer is a loaded tokenizer.json. Safe for concurrent use.
type Tokenizer struct {
	normalizer normalize.Normalizer
	pre        pretok.PreTokenizer
	model      model.Model
	post       postProcessor
	decoder    decode.Decoder
	added      *addedVocab
	byteLevel  bool // the pre-tokenizer is ByteLevel: vocabulary strings spell bytes (EncodeRegions needs it)
	lensOnce   sync.Once
	lens       []int32 // bytes spelled per model id (tokenLengths)
	hash       string
	sessions   chan *session // idle sessions, kept warm (a sync.Pool would drop their word caches at every GC)
	warnings   []string
}

// session is the per-goroutine scratch state of Encode.
type session struct {
	enc   model.Encoder
	words []string
	raw   []piece
	norm  []piece
}

// Load reads a tokenizer.json (plain or gzip-compressed, by content) with default options.
func Load(path string) (*Tokenizer, error) { return LoadWith(path, Options{}) }

// LoadWith reads a tokenizer.json (plain or gzip-compressed) with opts.
func LoadWith(path string, opts Options) (*Tokenizer, error) {
	data, err := ReadFile(path)
	if err != nil {
		return nil, err
	}
	tok, err := FromBytes(data, opts)
	if err != nil {
		return nil, fmt.Errorf("load %s: %w", path, err)
	}
	return tok, nil
}

// Size caps of the files a tokenizer is read from (after gunzip too): the
// largest real tokenizer.json files are about 35 MB, tokenizer_config.json
// files and chat templates a few MB at most.
const (
	MaxTokenizerFileBytes = 128 << 20
	MaxConfigFileBytes    = 16 << 20
)

// ReadFile returns the bytes of a tokenizer.json file, gunzipping it when it
// is gzip-compressed; a file (or a pipe, or a device) of more than
// MaxTokenizerFileBytes is an error naming it and the cap.
func ReadFile(path string) ([]byte, error) {
	data, err := readCapped(path, readcap.Limit{Bytes: MaxTokenizerFileBytes, Name: "tokenize.MaxTokenizerFileBytes"})
	if err != nil {
		return nil, fmt.Errorf("read tokenizer: %w", err)
	}
	return data, nil
}

// ReadConfigFile is ReadFile for a tokenizer_config.json or a chat template,
// capped at MaxConfigFileBytes.
func ReadConfigFile(path string) ([]byte, error) {
	return readCapped(path, readcap.Limit{Bytes: MaxConfigFileBytes, Name: "tokenize.MaxConfigFileBytes"})
}

func readCapped(path string, l readcap.Limit) ([]byte, error) {
	data, err := readcap.File(path, l)
	if err == nil && readcap.IsGzip(data) {
		data, err = readcap.Gunzip(data, path, l)
	}
	return data, err
}

type fileJSON struct {
	Version       string           `json:"version"`
	Truncation    json.RawMessage  `json:"truncation"`
	Padding       json.RawMessage  `json:"padding"`
	AddedTokens   []addedTokenJSON `json:"added_tokens"`
	Normalizer    json.RawMessage  `json:"normalizer"`
	PreTokenizer  json.RawMessage  `json:"pre_tokenizer"`
	Model         json.RawMessage  `json:"model"`
	PostProcessor json.RawMessage  `json:"post_processor"`
	Decoder       json.RawMessage  `json:"decoder"`
}

// FromBytes builds a Tokenizer from the bytes of a tokenizer.json.
func FromBytes(data []byte, opts Options) (*Tokenizer, error) {
	var f fileJSON
	if err := json.Unmarshal(data, &f); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrInvalid, err)
	}
	if tokjson.IsNull(f.Model) {
		return nil, fmt.Errorf("%w: no \"model\"", ErrInvalid)
	}
	t := &Tokenizer{}
	sum := sha256.Sum256(data)
	t.hash = hex.EncodeToString(sum[:])
	if opts.SplitSpecialTokens {
		t.hash += "+split-special"
	}
	var err error
	if t.normalizer, err = normalize.FromJSON(f.Normalizer, "normalizer"); err != nil {
		return nil, err
	}
	var info pretok.Info
	if t.pre, info, err = pretok.FromJSON(f.PreTokenizer, "pre_tokenizer"); err != nil {
		return nil, err
	}
	t.byteLevel = info.ByteLevel
	if t.model, err = model.FromJSON(f.Model, "model", model.Options{ByteLevel: info.ByteLevel}); err != nil {
		return nil, err
	}
	if t.post, err = postFromJSON(f.PostProcessor, "post_processor", t); err != nil {
		return nil, err
	}
	if t.decoder, err = decode.FromJSON(f.Decoder, "decoder"); err != nil {
		return nil, err
	}
	if t.added, err = newAddedVocab(f.AddedTokens, t.normalizer, opts.SplitSpecialTokens); err != nil {
		return nil, err
	}
	if !tokjson.IsNull(f.Truncation) {
		t.warnings = append(t.warnings, "tokenizer.json sets \"truncation\": gload does not apply it (use --max-length)")
	}
	if !tokjson.IsNull(f.Padding) {
		t.warnings = append(t.warnings, "tokenizer.json sets \"padding\": gload does not apply it (batches are padded by the server)")
	}
	t.sessions = make(chan *session, runtime.GOMAXPROCS(0))
	return t, nil
}

// Hash identifies the tokenizer: the SHA-256 of its tokenizer.json bytes (after gunzip), plus options that change ids.
func (t *Tokenizer) Hash() string { return t.hash }

// Warnings lists parts of the tokenizer.json that gload deliberately does not apply.
func (t *Tokenizer) Warnings() []string { return t.warnings }

// VocabSize is the size of the vocabulary including added tokens.
func (t *Tokenizer) VocabSize() int {
	n := t.model.VocabSize()
	for _, a := range t.added.tokens {
		if int(a.id) >= n {
			n = int(a.id) + 1
		}
	}
	return n
}

// TokenToID looks a token up among added tokens, then in the model vocabulary.
func (t *Tokenizer) TokenToID(token string) (int32, bool) {
	if id, ok := t.added.byContent[token]; ok {
		return id, true
	}
	return t.model.TokenToID(token)
}

// IDToToken returns the string of a token id.
func (t *Tokenizer) IDToToken(id int32) (string, bool) {
	if a, ok := t.added.byID[id]; ok {
		return a.content, true
	}
	return t.model.IDToToken(id)
}

// Encode tokenizes text without special tokens, like HF `encode(text, add_special_tokens=False).ids`.
func (t *Tokenizer) Encode(text string) []int32 { return t.AppendEncode(nil, text, false) }

// EncodeSpecial tokenizes text and applies the post-processor (BOS, [CLS] ... [SEP]), like HF `encode(text).ids`.
func (t *Tokenizer) EncodeSpecial(text string) []int32 { return t.AppendEncode(nil, text, true) }

// AppendEncode appends the ids of text to dst. addSpecial applies the post-processor. A split regex that
// exceeds its match bound leaves the rest of its piece unsplit; EncodeTo reports that instead.
func (t *Tokenizer) AppendEncode(dst []int32, text string, addSpecial bool) []int32 {
	dst, _ = t.appendEncode(dst, text, addSpecial)
	return dst
}

// appendEncode is AppendEncode that stops with the error of a split regex that exceeded its match bound
// (*pretok.MatchError); dst is then returned unchanged.
func (t *Tokenizer) appendEncode(dst []int32, text string, addSpecial bool) ([]int32, error) {
	text, _ = utf8fix.ToValidUTF8(text)
	s := t.getSession()
	start := len(dst)
	dst, err := t.encodeSequence(s, dst, text)
	t.putSession(s)
	if err != nil {
		return dst[:start], err
	}
	if addSpecial && t.post != nil {
		dst = t.post.apply(dst, start)
	}
	return dst, nil
}

// getSession takes an idle session (with its warm word cache) or makes one.
func (t *Tokenizer) getSession() *session {
	select {
	case s := <-t.sessions:
		return s
	default:
		return &session{enc: t.model.NewEncoder()}
	}
}

// putSession keeps s for reuse unless enough sessions are idle already.
func (t *Tokenizer) putSession(s *session) {
	select {
	case t.sessions <- s:
	default:
	}
}

// Bounds of normalization: the normalized text of one document may be at
// most NormalizeGrowth times its length plus NormalizeSlack bytes, and never
// more than MaxNormalizedBytes; a document past them fails to encode with a
// *normalize.LimitError naming the normalizer (tokenize skips it). Real
// normalizers grow text by a small factor (NFKC of the worst code point:
// about 11×; SentencePiece's "▁": 3×).
const (
	NormalizeGrowth    = 32
	NormalizeSlack     = 64 << 10
	MaxNormalizedBytes = 256 << 20
)

// normalizeBudget is the most normalized bytes a document of n bytes may
// become.
func normalizeBudget(n int) int { return min(MaxNormalizedBytes, NormalizeGrowth*n+NormalizeSlack) }

func (t *Tokenizer) encodeSequence(s *session, dst []int32, text string) (_ []int32, err error) {
	if s.raw, err = t.added.split(s.raw[:0], text, false); err != nil {
		s.raw = s.raw[:0] // nothing to encode: the error is returned below
	}
	budget := normalizeBudget(len(text))
pieces:
	for i, p := range s.raw {
		if p.id >= 0 {
			dst = append(dst, p.id)
			continue
		}
		normalized := p.text
		if t.normalizer != nil {
			if normalized, err = normalize.Apply(t.normalizer, normalized, budget); err != nil {
				break pieces
			}
			budget -= len(normalized)
		}
		if s.norm, err = t.added.split(s.norm[:0], normalized, true); err != nil {
			break pieces
		}
		for j, q := range s.norm {
			if q.id >= 0 {
				dst = append(dst, q.id)
				continue
			}
			if t.pre == nil {
				dst = s.enc.Encode(q.text, dst)
				continue
			}
			// Only the piece that begins the original text counts as its start (Metaspace prepend_scheme "first").
			atStart := i == 0 && j == 0
			// A batch of words at a time: the word list stays small (and in cache) however long the text is.
			for from := 0; ; {
				s.words, from, err = pretok.SplitPieceBatch(t.pre, q.text, atStart, from, batchWords, s.words[:0])
				if err != nil {
					break pieces
				}
				if we, ok := s.enc.(model.WordsEncoder); ok {
					dst = we.EncodeWords(s.words, dst)
				} else {
					for _, w := range s.words {
						dst = s.enc.Encode(w, dst)
					}
				}
				if from >= len(q.text) {
					break
				}
			}
		}
	}
	clear(s.words)
	clear(s.raw)
	clear(s.norm)
	if cap(s.words) > maxKeptWords {
		s.words = nil // a huge document's word list is not kept for the next one: idle sessions stay small
	}
	if err != nil {
		return dst, fmt.Errorf("tokenize: %w", err)
	}
	return dst, nil
}

// maxKeptWords bounds the word-list capacity a session keeps between documents (16 bytes a word): it matters for
// the pre-tokenizers that cannot hand out their words in batches (SplitPieceBatch).
const maxKeptWords = 1 << 17 // 2 MiB: at 1<<14, every long document regrew the list (issue 18: growslice was 17% of a 16-core run)

// batchWords is how many words the pre-tokenizers that can (SplitPieceBatch) hand out at a time: 64 KiB of word
// list. Before, the list of a document over maxKeptWords words was regrown for each such document: for 40 MB of Go
// source with llama3 that was 11 bytes allocated per byte of text and 12% of the CPU time in growslice (issue 18).
const batchWords = 4096

// EncodeBatch tokenizes every text on all cores; out[i] holds the ids of texts[i].
func (t *Tokenizer) EncodeBatch(texts []string, addSpecial bool) [][]int32 {
	return t.EncodeBatchWorkers(texts, addSpecial, runtime.GOMAXPROCS(0))
}

// EncodeBatchWorkers is EncodeBatch with an explicit number of goroutines.
func (t *Tokenizer) EncodeBatchWorkers(texts []string, addSpecial bool, workers int) [][]int32 {
	out := make([][]int32, len(texts))
	if workers < 1 {
		workers = 1
	}
	if workers > len(texts) {
		workers = len(texts)
	}
	var wg sync.WaitGroup
	var next atomic.Int64
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := int(next.Add(1) - 1)
				if i >= len(texts) {
					return
				}
				out[i] = t.AppendEncode(nil, texts[i], addSpecial)
			}
		}()
	}
	wg.Wait()
	return out
}

// Decode turns ids back into text through the tokenizer's decoder. skipSpecial drops special tokens.
// Unknown ids are skipped.
func (t *Tokenizer) Decode(ids []int32, skipSpecial bool) string {
	tokens := make([]string, 0, len(ids))
	for _, id := range ids {
		if a, ok := t.added.byID[id]; ok {
			if skipSpecial && a.special {
				continue
			}
			tokens = append(tokens, a.content)
			continue
		}
		if s, ok := t.model.IDToToken(id); ok {
			tokens = append(tokens, s)
		}
	}
	if t.decoder == nil {
		return strings.Join(tokens, " ")
	}
	return strings.Join(t.decoder.Decode(tokens), "")
}
