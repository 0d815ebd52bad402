// Package decode holds the tokenizer.json decoders (ByteLevel, Metaspace, WordPiece, BPEDecoder, ByteFallback,
// Fuse, Strip, Replace, CTC, Sequence) that turn token strings back into text, as Hugging Face tokenizers 0.23.2
// does (checked against its decode output in testdata).
//
// It must not know about models, normalizers or the dataset format.
//
// # Caveats
//
// Decode never modifies its argument; its result may share strings with it. Where HF panics (BPEDecoder on no
// tokens, a Strip decoder that cuts more than the token holds) Decode returns the empty result instead. Invalid
// UTF-8 from byte-level or byte-fallback tokens becomes U+FFFD the way Rust's String::from_utf8_lossy does it
// (one per maximal subpart), not the way Go's strings.ToValidUTF8 does.
package decode

import "encoding/json"

// Decoder rewrites the list of token strings of a sequence; joining the result gives the decoded text.
type Decoder interface {
	Decode(tokens []string) []string
}

// FromJSON builds the decoder described by raw (the `decoder` field of tokenizer.json). Null gives (nil, nil).
func FromJSON(raw json.RawMessage, path string) (Decoder, error) {
	return fromJSON(raw, path)
}
