//go:build hftokenizers

// Package hfengine is the second tokenizer backend: Hugging Face's Rust core through github.com/daulet/tokenizers
// (cgo, libtokenizers.a built by scripts/build-libtokenizers.sh). It exists for tokenizer.json features the Go
// engine does not cover and as an in-process oracle in tests. Only binaries built with -tags hftokenizers have it.
//
// It must not be imported by code that builds without the tag.
//
// # Caveats
//
// The pinned module (v1.22.1) wraps tokenizers 0.20.2, which can differ from the 0.23.2 references on rare inputs.
// Text is handed over as a C string, which a NUL byte would end: EncodeTo refuses text holding NUL (ErrNUL) rather
// than return ids for a truncated document.
package hfengine

/*
#cgo LDFLAGS: -L${SRCDIR}/../../build/libtokenizers
*/
import "C"

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"

	hf "github.com/daulet/tokenizers"

	"github.com/gload/gload/tokenize"
	"github.com/gload/gload/tokenize/utf8fix"
)

func init() {
	tokenize.RegisterEngine("hf", func(path string, opts tokenize.Options) (tokenize.Engine, error) {
		return Load(path, opts)
	})
}

// Engine is a tokenizer.json loaded into Hugging Face's Rust core.
type Engine struct {
	tok  *hf.Tokenizer
	hash string
}

var _ tokenize.Engine = (*Engine)(nil)

// Load opens a tokenizer.json (plain or gzip) in the Rust core.
func Load(path string, opts tokenize.Options) (*Engine, error) {
	data, err := tokenize.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var hopts []hf.TokenizerOption
	if opts.SplitSpecialTokens {
		hopts = append(hopts, hf.WithEncodeSpecialTokens())
	}
	tok, err := hf.FromBytes(data, hopts...)
	if err != nil {
		return nil, fmt.Errorf("hf engine: load %s: %w", path, err)
	}
	sum := sha256.Sum256(data)
	h := hex.EncodeToString(sum[:])
	if opts.SplitSpecialTokens {
		h += "+split-special"
	}
	return &Engine{tok: tok, hash: h}, nil
}

// ErrNUL is returned for text holding a NUL byte, which cannot cross the C boundary.
var ErrNUL = errors.New("hf engine: text contains a NUL byte, which the Rust-core binding cannot pass (use --engine go)")

// EncodeTo appends the ids of text. Invalid UTF-8 is replaced as in the Go engine.
func (e *Engine) EncodeTo(dst []int32, text string, addSpecial bool) ([]int32, error) {
	text, _ = utf8fix.ToValidUTF8(text)
	if strings.IndexByte(text, 0) >= 0 {
		return dst, ErrNUL
	}
	ids, _ := e.tok.Encode(text, addSpecial)
	for _, id := range ids {
		dst = append(dst, int32(id))
	}
	return dst, nil
}

// Decode turns ids back into text.
func (e *Engine) Decode(ids []int32, skipSpecial bool) string {
	u := make([]uint32, len(ids))
	for i, id := range ids {
		u[i] = uint32(id)
	}
	return e.tok.Decode(u, skipSpecial)
}

// Hash is the SHA-256 of the tokenizer.json bytes plus id-changing options, as in the Go engine.
func (e *Engine) Hash() string { return e.hash }

// TokenToID is not offered by the pinned binding: it encodes the token text alone and accepts a single id.
func (e *Engine) TokenToID(token string) (int32, bool) {
	ids, _ := e.tok.Encode(token, false)
	if len(ids) != 1 {
		return 0, false
	}
	return int32(ids[0]), true
}

// Close frees the Rust tokenizer.
func (e *Engine) Close() error { return e.tok.Close() }
