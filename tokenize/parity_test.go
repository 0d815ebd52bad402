package tokenize_test

import (
	"fmt"
	"testing"

	"github.com/gload/gload/internal/fixtures"
	"github.com/gload/gload/tokenize"
)

// encoder is what the parity suite checks: the pure-Go engine, and the Rust-core backend under its build tag.
// parityEngines lists the engines the suite runs; the hftokenizers build tag adds the Rust core
// (parity_hf_test.go).
var parityEngines = []string{"go"}

// TestParity encodes every fixture text with every fixture tokenizer and demands exactly Hugging Face's ids,
// without special tokens for all texts and with them for the texts that have references.
func TestParity(t *testing.T) {
	texts := fixtures.Texts(t)
	for _, engineName := range parityEngines {
		for _, name := range fixtures.Tokenizers {
			t.Run(engineName+"/"+name, func(t *testing.T) {
				tok, err := tokenize.LoadEngine(engineName, fixtures.TokenizerPath(t, name), tokenize.Options{})
				if err != nil {
					t.Fatal(err)
				}
				refs := fixtures.References(t, name)
				if len(refs) != len(texts) {
					t.Fatalf("%d references for %d texts", len(refs), len(texts))
				}
				failed := 0
				for i, ref := range refs {
					if ref.Src != texts[i].Src {
						t.Fatalf("reference %d is for %q, text is %q", i, ref.Src, texts[i].Src)
					}
					got, err := tok.EncodeTo(nil, texts[i].Text, false)
					if err != nil {
						t.Errorf("text %d (%s): %v", i, ref.Src, err)
						continue
					}
					if msg := diffIDs(got, ref.IDs); msg != "" {
						failed++
						if failed <= 5 {
							t.Errorf("text %d (%s), no special tokens: %s\ntext: %q", i, ref.Src, msg, clip(texts[i].Text, 300))
						}
					}
					if ref.IDsWithSpecial != nil {
						got, err := tok.EncodeTo(nil, texts[i].Text, true)
						if err != nil {
							t.Errorf("text %d (%s): %v", i, ref.Src, err)
							continue
						}
						if msg := diffIDs(got, ref.IDsWithSpecial); msg != "" {
							failed++
							if failed <= 5 {
								t.Errorf("text %d (%s), with special tokens: %s", i, ref.Src, msg)
							}
						}
					}
				}
				if failed > 0 {
					t.Errorf("%s: %d mismatches over %d texts", name, failed, len(texts))
				}
			})
		}
	}
}

// diffIDs describes the first difference between got and want, with a few tokens of context.
func diffIDs(got, want []int32) string {
	n := min(len(got), len(want))
	i := 0
	for i < n && got[i] == want[i] {
		i++
	}
	if i == n && len(got) == len(want) {
		return ""
	}
	lo := max(0, i-3)
	return fmt.Sprintf("first difference at token %d (got %d tokens, want %d): got …%v…, want …%v…",
		i, len(got), len(want), got[lo:min(len(got), i+5)], want[lo:min(len(want), i+5)])
}

func clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "…(" + fmt.Sprint(len(s)) + " bytes)"
}
