package tokenize

import (
	"fmt"
	"sort"
	"sync"
)

// Engine is what the tokenize pipeline and `gload encode` need from a tokenizer implementation: the pure-Go
// Tokenizer of this package, or the Rust-core backend of package hfengine (build tag hftokenizers).
type Engine interface {
	// EncodeTo appends the ids of text to dst; addSpecial applies the post-processor. Safe for concurrent use.
	// The Go engine never fails; a backend may refuse text it cannot pass on (the Rust core's C boundary, NUL).
	EncodeTo(dst []int32, text string, addSpecial bool) ([]int32, error)
	// Decode turns ids back into text.
	Decode(ids []int32, skipSpecial bool) string
	// Hash identifies the tokenizer file and the options that change ids.
	Hash() string
	// TokenToID looks up a token string (for --append-eos and friends).
	TokenToID(token string) (int32, bool)
}

var _ Engine = (*Tokenizer)(nil)

// EncodeTo is AppendEncode as the Engine interface spells it; it never fails.
func (t *Tokenizer) EncodeTo(dst []int32, text string, addSpecial bool) ([]int32, error) {
	return t.appendEncode(dst, text, addSpecial)
}

// EngineLoader opens a tokenizer.json with one engine.
type EngineLoader func(path string, opts Options) (Engine, error)

var (
	enginesMu sync.Mutex
	engines   = map[string]EngineLoader{
		"go": func(path string, opts Options) (Engine, error) { return LoadWith(path, opts) },
	}
)

// RegisterEngine makes an engine available to LoadEngine under name. Backends behind build tags call it from init.
func RegisterEngine(name string, load EngineLoader) {
	enginesMu.Lock()
	defer enginesMu.Unlock()
	engines[name] = load
}

// Engines lists the engine names compiled into this binary.
func Engines() []string {
	enginesMu.Lock()
	defer enginesMu.Unlock()
	names := make([]string, 0, len(engines))
	for n := range engines {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

// LoadEngine opens path with the named engine ("go", or "hf" in binaries built with -tags hftokenizers).
func LoadEngine(name, path string, opts Options) (Engine, error) {
	enginesMu.Lock()
	load, ok := engines[name]
	enginesMu.Unlock()
	if !ok {
		if name == "hf" {
			return nil, fmt.Errorf("engine \"hf\" is not in this binary: run scripts/build-libtokenizers.sh and build with -tags hftokenizers")
		}
		return nil, fmt.Errorf("unknown engine %q (have %v)", name, Engines())
	}
	return load(path, opts)
}
