// Package pretok holds the tokenizer.json pre-tokenizers (ByteLevel, Split, Metaspace, Whitespace,
// WhitespaceSplit, BertPreTokenizer, Digits, Punctuation, CharDelimiterSplit, FixedLength, UnicodeScripts,
// Sequence) with Hugging Face tokenizers' exact semantics, including hand-written scanners for the GPT-2, Llama-3,
// Qwen and o200k split regexes (Go's regexp has no lookahead) and a general regex engine for any other pattern.
//
// It must not know about models or the dataset format.
//
// Character classes (letters, numbers, whitespace, punctuation ...) are those of tokenizers 0.23.2 — Unicode 16
// for Oniguruma and Rust, an older table for BERT punctuation — measured by testdata/gen_tables.py into
// tables_gen.go, not Go's Unicode 15 tables. Other regexes run on regexp2 after a translation from Oniguruma's
// syntax; regex.go lists what it rewrites, what it refuses and the differences left. A ByteLevel that is not the
// last pre-tokenizer is refused with tokjson.ErrUnsupported.
//
// # Caveats
//
// Words returned by Split are substrings of the input (no copy) and stay valid as long as the input does, except
// the words that hold a character the pre-tokenizer adds (Metaspace's replacement, ByteLevel's prefix space): those
// are new strings. Split allocates nothing else once dst has room, for the scanners and single-pass
// pre-tokenizers.
//
// Metaspace with prepend_scheme "first" prepends only at the start of the original text: split the text between
// added tokens with SplitPiece, telling it which piece starts the text.
package pretok

import "encoding/json"

// PreTokenizer cuts normalized text into words. Implementations are safe for concurrent use.
type PreTokenizer interface {
	// Split appends the words of s, in order, to dst and returns the extended slice. Empty words are never emitted.
	Split(s string, dst []string) []string
}

// Info tells the caller what the pre-tokenizer does to the representation of words.
type Info struct {
	// ByteLevel is true when the pipeline ends with a ByteLevel pre-tokenizer: the words handed out are raw UTF-8
	// bytes, and the model must map them through the GPT-2 byte-to-unicode table itself (it does so by converting
	// its vocabulary to raw bytes once, at load time).
	ByteLevel bool
}

// FromJSON builds the pre-tokenizer described by raw (the `pre_tokenizer` field of tokenizer.json); path is its
// JSON path for error messages. A null or absent raw gives (nil, Info{}, nil).
func FromJSON(raw json.RawMessage, path string) (PreTokenizer, Info, error) {
	return fromJSON(raw, path)
}
