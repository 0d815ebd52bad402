package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/gload/gload/loader/dataset"
	"github.com/gload/gload/tokenize"
)

// tokenizerConfig is what gload reads of the tokenizer_config.json beside a tokenizer.json: special tokens, each
// either a string or an AddedToken object ({"content": ...}), or null.
type tokenizerConfig struct {
	path   string
	tokens map[string]json.RawMessage
}

// readTokenizerConfig reads tokenizer_config.json (or .json.gz) beside tokenizerPath; a missing file gives an empty
// config and no error.
func readTokenizerConfig(tokenizerPath string) (tokenizerConfig, error) {
	cfg := tokenizerConfig{path: filepath.Join(filepath.Dir(tokenizerPath), "tokenizer_config.json")}
	data, err := tokenize.ReadConfigFile(cfg.path)
	if errors.Is(err, os.ErrNotExist) {
		data, err = tokenize.ReadConfigFile(cfg.path + ".gz")
		if errors.Is(err, os.ErrNotExist) {
			return cfg, nil
		}
	}
	if err != nil {
		return cfg, err // names the file
	}
	if err := json.Unmarshal(data, &cfg.tokens); err != nil {
		return cfg, fmt.Errorf("%s: %w", cfg.path, err)
	}
	return cfg, nil
}

// token returns the text of the special token under key ("pad_token", "eos_token"), or "" when absent or null.
func (c tokenizerConfig) token(key string) (string, error) {
	raw, ok := c.tokens[key]
	if !ok || string(raw) == "null" {
		return "", nil
	}
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s, nil
	}
	var obj struct {
		Content string `json:"content"`
	}
	if err := json.Unmarshal(raw, &obj); err != nil {
		return "", fmt.Errorf("%s: %s: want a string or {\"content\": ...}, got %s", c.path, key, raw)
	}
	return obj.Content, nil
}

// padToken resolves the pad token recorded in the dataset: --pad-token when given, else the tokenizer_config.json
// pad_token, else its eos_token (what transformers users set pad to when a tokenizer has none). found is false when
// none is known (the server then pads with 0 unless the client names a pad_id).
func padToken(eng tokenize.Engine, cfg tokenizerConfig, flag string) (dataset.SpecialTokens, bool, error) {
	lookup := func(tok, from, where string) (dataset.SpecialTokens, bool, error) {
		id, ok := eng.TokenToID(tok)
		if !ok {
			return dataset.SpecialTokens{}, false, fmt.Errorf("%s: pad token %q is not in the tokenizer's vocabulary", where, tok)
		}
		return dataset.SpecialTokens{PadID: id, PadToken: tok, PadFrom: from}, true, nil
	}
	if flag != "" {
		return lookup(flag, dataset.PadFromFlag, "--pad-token")
	}
	for _, k := range []struct{ key, from string }{
		{"pad_token", dataset.PadFromPadToken}, {"eos_token", dataset.PadFromEOSToken},
	} {
		tok, err := cfg.token(k.key)
		if err != nil {
			return dataset.SpecialTokens{}, false, err
		}
		if tok != "" {
			return lookup(tok, k.from, cfg.path+": "+k.key)
		}
	}
	return dataset.SpecialTokens{}, false, nil
}
