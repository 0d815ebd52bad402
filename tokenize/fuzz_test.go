package tokenize_test

import (
	"sync"
	"testing"
	"unicode/utf8"

	"github.com/gload/gload/internal/fixtures"
	"github.com/gload/gload/tokenize"
)

var (
	fuzzOnce sync.Once
	fuzzToks map[string]*tokenize.Tokenizer
)

func fuzzTokenizers(t testing.TB) map[string]*tokenize.Tokenizer {
	fuzzOnce.Do(func() {
		fuzzToks = map[string]*tokenize.Tokenizer{}
		for _, name := range fixtures.Tokenizers {
			tok, err := tokenize.Load(fixtures.TokenizerPath(t, name))
			if err != nil {
				t.Fatal(err)
			}
			fuzzToks[name] = tok
		}
	})
	return fuzzToks
}

// FuzzEncode: arbitrary bytes never panic in any fixture tokenizer, and for the byte-level ones without a
// normalizer Decode(Encode(s)) == s for valid UTF-8.
func FuzzEncode(f *testing.F) {
	for _, s := range []string{"", " ", "hello world", "  \n\n\t x", "'s 's 'S", "日本語のテキスト", "<|endoftext|>", "[MASK]",
		"\xff\xfe", "a\u0301\u0302", "123456789", "\r\n\r\n", "emoji 👩‍👩‍👧 ok", "<s> </s>", "\x00"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		for name, tok := range fuzzTokenizers(t) {
			ids := tok.Encode(s)
			_ = tok.EncodeSpecial(s)
			_ = tok.Decode(ids, true)
			if (name == "llama3" || name == "gpt4o") && utf8.ValidString(s) {
				if got := tok.Decode(ids, false); got != s {
					t.Fatalf("%s: Decode(Encode(%q)) = %q", name, s, got)
				}
			}
		}
	})
}
