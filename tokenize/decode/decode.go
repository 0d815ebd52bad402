// Package decode holds the tokenizer.json decoders (ByteLevel, Metaspace, WordPiece, BPEDecoder, ByteFallback,
// Fuse, Strip, Replace, CTC, Sequence) that turn token strings back into text, as Hugging Face tokenizers does.
//
// It must not know about models, normalizers or the dataset format.
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
