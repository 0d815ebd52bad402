package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gload/gload/loader/dataset"
	"github.com/gload/gload/tokenize"
)

func TestPadToken(t *testing.T) {
	tok, err := tokenize.Load("../../examples/udhr/tokenizer.json")
	if err != nil {
		t.Fatal(err)
	}
	id := func(s string) int32 {
		v, ok := tok.TokenToID(s)
		if !ok {
			t.Fatalf("%q not in the example vocabulary", s)
		}
		return v
	}
	for _, tc := range []struct {
		name, config, flag string // config "": no tokenizer_config.json
		want               dataset.SpecialTokens
		found              bool
		err                string
	}{
		{"pad", `{"eos_token": "<|eos|>", "pad_token": "<|pad|>"}`, "", dataset.SpecialTokens{PadID: id("<|pad|>"), PadToken: "<|pad|>", PadFrom: dataset.PadFromPadToken}, true, ""},
		{"pad-null-eos", `{"eos_token": {"content": "<|eos|>", "lstrip": false}, "pad_token": null}`, "", dataset.SpecialTokens{PadID: id("<|eos|>"), PadToken: "<|eos|>", PadFrom: dataset.PadFromEOSToken}, true, ""},
		{"flag-wins", `{"pad_token": "<|pad|>"}`, "<|bos|>", dataset.SpecialTokens{PadID: id("<|bos|>"), PadToken: "<|bos|>", PadFrom: dataset.PadFromFlag}, true, ""},
		{"none", `{"bos_token": "<|bos|>"}`, "", dataset.SpecialTokens{}, false, ""},
		{"no-config", "", "", dataset.SpecialTokens{}, false, ""},
		{"unknown-token", `{"pad_token": "<nope>"}`, "", dataset.SpecialTokens{}, false, `tokenizer_config.json: pad_token: pad token "<nope>" is not in the tokenizer's vocabulary`},
		{"unknown-flag", ``, "<nope>", dataset.SpecialTokens{}, false, `--pad-token: pad token "<nope>" is not in the tokenizer's vocabulary`},
		{"bad-type", `{"pad_token": 5}`, "", dataset.SpecialTokens{}, false, `pad_token: want a string or {"content": ...}, got 5`},
		{"bad-json", `{"pad_token": `, "", dataset.SpecialTokens{}, false, "tokenizer_config.json: unexpected end of JSON input"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			if tc.config != "" {
				if err := os.WriteFile(filepath.Join(dir, "tokenizer_config.json"), []byte(tc.config), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			cfg, err := readTokenizerConfig(filepath.Join(dir, "tokenizer.json"))
			var got dataset.SpecialTokens
			var found bool
			if err == nil {
				got, found, err = padToken(tok, cfg, tc.flag)
			}
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("err = %v, want one containing %q", err, tc.err)
				}
				return
			}
			if err != nil || got != tc.want || found != tc.found {
				t.Fatalf("padToken = %+v, %v, %v; want %+v, %v", got, found, err, tc.want, tc.found)
			}
		})
	}
}
