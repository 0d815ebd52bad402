package tokenize_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gload/gload/internal/fixtures"
	"github.com/gload/gload/tokenize"
)

func load(t testing.TB, name string, opts tokenize.Options) *tokenize.Tokenizer {
	t.Helper()
	tok, err := tokenize.LoadWith(fixtures.TokenizerPath(t, name), opts)
	if err != nil {
		t.Fatal(err)
	}
	return tok
}

// TestInvalidUTF8 pins the documented rule: ill-formed UTF-8 is replaced with U+FFFD per maximal subpart, as
// Python's decode(errors="replace") does, then encoded.
func TestInvalidUTF8(t *testing.T) {
	tok := load(t, "llama3", tokenize.Options{})
	for _, tc := range []struct{ raw, python string }{
		{"a\xffb", "a\ufffdb"},
		{"\xff\xfe", "\ufffd\ufffd"},
		{"x\xe2\x82", "x\ufffd"},               // truncated 3-byte sequence: one replacement
		{"\xe2\x82\xe2\x82\xac", "\ufffd€"},    // truncated sequence, then a valid one
		{"\xed\xa0\x80", "\ufffd\ufffd\ufffd"}, // encoded surrogate: every byte replaced
		{"\xf0\x9f\x98", "\ufffd"},
	} {
		got, want := tok.Encode(tc.raw), tok.Encode(tc.python)
		if fmt.Sprint(got) != fmt.Sprint(want) {
			t.Errorf("Encode(%q) = %v, want Encode(%q) = %v", tc.raw, got, tc.python, want)
		}
	}
}

func TestUnsupportedComponentsNamePath(t *testing.T) {
	raw, err := tokenize.ReadFile(fixtures.TokenizerPath(t, "llama3"))
	if err != nil {
		t.Fatal(err)
	}
	type doc = map[string]any
	obj := func(v any) doc { return v.(doc) }
	for _, tc := range []struct {
		name     string
		edit     func(d doc)
		wantPath string
	}{
		{"pre-tokenizer", func(d doc) { obj(obj(d["pre_tokenizer"])["pretokenizers"].([]any)[1])["type"] = "Nope" }, "pre_tokenizer.pretokenizers[1]"},
		{"normalizer", func(d doc) { d["normalizer"] = doc{"type": "Nope"} }, "normalizer"},
		{"model", func(d doc) { obj(d["model"])["type"] = "Mystery" }, "model"},
		{"post-processor", func(d doc) { obj(d["post_processor"])["type"] = "Mystery" }, "post_processor"},
		{"decoder", func(d doc) { obj(d["decoder"])["type"] = "Mystery" }, "decoder"},
		{"split behavior", func(d doc) { obj(obj(d["pre_tokenizer"])["pretokenizers"].([]any)[0])["behavior"] = "Sideways" }, "pre_tokenizer.pretokenizers[0]"},
		{"bpe dropout", func(d doc) { obj(d["model"])["dropout"] = 0.1 }, "model"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var d doc
			if err := json.Unmarshal(raw, &d); err != nil {
				t.Fatal(err)
			}
			tc.edit(d)
			mod, err := json.Marshal(d)
			if err != nil {
				t.Fatal(err)
			}
			_, err = tokenize.FromBytes(mod, tokenize.Options{})
			if err == nil {
				t.Fatal("loaded a tokenizer.json with an unknown component")
			}
			if !strings.Contains(err.Error(), tc.wantPath) {
				t.Errorf("error %q does not name %s", err, tc.wantPath)
			}
			if tc.name != "split behavior" && !errors.Is(err, tokenize.ErrUnsupported) {
				t.Errorf("error %q is not ErrUnsupported", err)
			}
		})
	}
}

func TestSplitSpecialTokens(t *testing.T) {
	text := "hello <|begin_of_text|> world"
	plain := load(t, "llama3", tokenize.Options{})
	split := load(t, "llama3", tokenize.Options{SplitSpecialTokens: true})
	ids := plain.Encode(text)
	found := false
	for _, id := range ids {
		found = found || id == 128000
	}
	if !found {
		t.Fatalf("default options: %v lacks the <|begin_of_text|> id", ids)
	}
	for _, id := range split.Encode(text) {
		if id >= 128000 {
			t.Fatalf("SplitSpecialTokens: special id %d in %v", id, split.Encode(text))
		}
	}
	if plain.Hash() == split.Hash() {
		t.Error("options that change ids must change the hash")
	}
}

func TestEncodeBatchMatchesEncode(t *testing.T) {
	tok := load(t, "qwen3", tokenize.Options{})
	texts := fixtures.Texts(t)[:200]
	in := make([]string, len(texts))
	for i, x := range texts {
		in[i] = x.Text
	}
	batch := tok.EncodeBatchWorkers(in, true, 4)
	for i, text := range in {
		if fmt.Sprint(batch[i]) != fmt.Sprint(tok.EncodeSpecial(text)) {
			t.Fatalf("text %d: batch and single encodings differ", i)
		}
	}
}

func TestDecodeRoundTrip(t *testing.T) {
	for _, name := range []string{"llama3", "qwen3", "gpt4o"} {
		tok := load(t, name, tokenize.Options{})
		for i, x := range fixtures.Texts(t) {
			want := x.Text
			if name == "qwen3" {
				continue // NFC changes some texts; the byte-level round trip holds for the normalized text
			}
			if got := tok.Decode(tok.Encode(want), false); got != want && !strings.ContainsRune(want, '\ufffd') {
				t.Fatalf("%s text %d: decode(encode(s)) != s", name, i)
			}
		}
	}
}

func TestLoadErrors(t *testing.T) {
	dir := t.TempDir()
	for _, tc := range []struct{ name, body, want string }{
		{"not json", "{", "invalid tokenizer.json"},
		{"no model", `{"added_tokens": []}`, "no \"model\""},
		{"bad added token", `{"added_tokens": [{"content": ""}], "model": {"type": "WordLevel", "vocab": {"a": 0}, "unk_token": "a"}}`, "added_tokens[0]"},
	} {
		p := filepath.Join(dir, strings.ReplaceAll(tc.name, " ", "_")+".json")
		os.WriteFile(p, []byte(tc.body), 0o644)
		_, err := tokenize.Load(p)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: err = %v, want it to mention %q", tc.name, err, tc.want)
		}
	}
	if _, err := tokenize.Load(filepath.Join(dir, "absent.json")); err == nil {
		t.Error("missing file loaded")
	}
}

// TestMetaspaceFirstAfterAddedToken: with prepend_scheme "first", only the piece that begins the original text gets
// the ▁ prefix (Hugging Face: "<s>hello world" → <s>, hello, ▁world).
func TestMetaspaceFirstAfterAddedToken(t *testing.T) {
	js := `{"added_tokens": [{"id": 0, "content": "<s>", "special": true, "normalized": false}],
	  "pre_tokenizer": {"type": "Metaspace", "replacement": "▁", "prepend_scheme": "first", "split": true},
	  "model": {"type": "WordLevel", "unk_token": "<unk>",
	    "vocab": {"<s>": 0, "hello": 1, "▁hello": 2, "▁world": 3, "world": 4, "<unk>": 5}}}`
	tok, err := tokenize.FromBytes([]byte(js), tokenize.Options{})
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		text string
		want []int32
	}{{"<s>hello world", []int32{0, 1, 3}}, {"hello world", []int32{2, 3}}, {"hello<s>world", []int32{2, 0, 4}}} {
		if got := tok.Encode(tc.text); fmt.Sprint(got) != fmt.Sprint(tc.want) {
			t.Errorf("Encode(%q) = %v, want %v", tc.text, got, tc.want)
		}
	}
}
