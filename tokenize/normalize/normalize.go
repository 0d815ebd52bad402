// Package normalize holds the tokenizer.json normalizers (NFC, NFKC, NFD, NFKD, Lowercase, Strip, StripAccents,
// Replace, Prepend, BertNormalizer, Precompiled, Nmt, ByteLevel, Sequence), each with Hugging Face tokenizers'
// exact semantics (0.23.2, output checked code point by code point and on the fixture corpus).
//
// Exactness comes from HF's own data, not Go's: the Unicode tables (tables_gen.go) are measured from HF by
// gen/gen_tables.py, because HF normalizes with an old unicode-normalization fork (Unicode 9.0, while
// golang.org/x/text is 15) that also never inserts U+034F after 30 combining marks as x/text does; its lowercase is
// Rust's char::to_lowercase; its categories come from older crates. Precompiled cuts grapheme clusters with
// Unicode 17 rules, as HF's unicode-segmentation crate does (rivo/uniseg is Unicode 15.0 and differs).
//
// It must not know about pre-tokenizers, models or the dataset format.
//
// # Caveats
//
// Normalize may return its argument unchanged (no copy) when nothing changes, and normalizers are safe for
// concurrent use. The Unicode tables are built on first use (about 10 ms, under 1 MB). A Replace regex that fails at
// match time (regexp2's backtracking limit) leaves the text unchanged, since Normalize has no error result. Where
// HF would panic (a charsmap whose trie points outside itself) the lookup is a miss instead. Invalid UTF-8 input
// is read as U+FFFD.
package normalize

import "encoding/json"

// Normalizer rewrites a piece of text before pre-tokenization. Implementations are safe for concurrent use.
type Normalizer interface {
	Normalize(s string) string
}

// FromJSON builds the normalizer described by raw (the `normalizer` field of tokenizer.json, or an element of a
// Sequence); path is its JSON path for error messages. A null or absent raw gives (nil, nil).
// An unknown type or option is a *tokjson.UnsupportedError naming path.
func FromJSON(raw json.RawMessage, path string) (Normalizer, error) {
	n, err := fromJSON(raw, path)
	if err != nil || n == nil {
		return nil, err
	}
	return withPath(n, path), nil
}
