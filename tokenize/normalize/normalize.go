// Package normalize holds the tokenizer.json normalizers (NFC, NFKC, NFD, NFKD, Lowercase, Strip, StripAccents,
// Replace, Prepend, BertNormalizer, Precompiled, Sequence ...), each with Hugging Face tokenizers' exact semantics.
//
// It must not know about pre-tokenizers, models or the dataset format.
//
// # Caveats
//
// Normalize may return its argument unchanged (no copy) when nothing changes.
package normalize

import "encoding/json"

// Normalizer rewrites a piece of text before pre-tokenization. Implementations are safe for concurrent use.
type Normalizer interface {
	Normalize(s string) string
}

// FromJSON builds the normalizer described by raw (the `normalizer` field of tokenizer.json, or an element of a
// Sequence); path is its JSON path for error messages. A null or absent raw gives (nil, nil).
// An unknown type or option is a *spec.UnsupportedError naming path.
func FromJSON(raw json.RawMessage, path string) (Normalizer, error) {
	return fromJSON(raw, path)
}
