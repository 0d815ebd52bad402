// Package model holds the tokenizer.json models — BPE, WordPiece, WordLevel and Unigram — which turn one word into
// token ids with Hugging Face tokenizers' exact semantics.
//
// It must not know about normalizers, pre-tokenizers or the dataset format.
//
// # Caveats
//
// A Model is safe for concurrent use; apart from its shared word cache (shared_cache.go: every encoder of a model
// reads it without locks and adds the words it had to encode, up to a fixed bound) it is immutable. An Encoder
// (from NewEncoder) holds per-goroutine caches and scratch space and must not be shared between goroutines.
package model

import "encoding/json"

// Model is a loaded vocabulary and its word-tokenization algorithm.
type Model interface {
	// NewEncoder returns per-goroutine encoding state.
	NewEncoder() Encoder
	// TokenToID looks a token string up in the vocabulary (in tokenizer.json's own string form).
	TokenToID(token string) (int32, bool)
	// IDToToken returns the vocabulary string of id (in tokenizer.json's own string form).
	IDToToken(id int32) (string, bool)
	// VocabSize is the number of entries in the model's vocabulary.
	VocabSize() int
}

// Encoder tokenizes words. Not safe for concurrent use.
type Encoder interface {
	// Encode appends the ids of word to dst and returns the extended slice.
	Encode(word string, dst []int32) []int32
}

// WordsEncoder is implemented by the encoders that take a pre-tokenizer's batch of words in one call:
// EncodeWords(words, dst) appends exactly what Encode of each word in turn appends, with one dynamic call per
// batch instead of one per word.
type WordsEncoder interface {
	EncodeWords(words []string, dst []int32) []int32
}

// Options tells the model how words reach it.
type Options struct {
	// ByteLevel: words are raw UTF-8 bytes of text whose ByteLevel mapping (GPT-2 bytes_to_unicode) the model
	// applies itself; see pretok.Info.
	ByteLevel bool
}

// FromJSON builds the model described by raw (the `model` field of tokenizer.json); path is its JSON path.
func FromJSON(raw json.RawMessage, path string, opts Options) (Model, error) {
	return fromJSON(raw, path, opts)
}
