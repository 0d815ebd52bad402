package decode

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/gload/gload/tokenize/tokjson"
)

func build(t testing.TB, raw string) Decoder {
	t.Helper()
	d, err := FromJSON(json.RawMessage(raw), "decoder")
	if err != nil {
		t.Fatalf("FromJSON(%s): %v", raw, err)
	}
	if d == nil {
		t.Fatalf("FromJSON(%s) = nil", raw)
	}
	return d
}

// TestGolden checks every decoder against what HF's decoder.decode returns (testdata/gen_golden.py).
func TestGolden(t *testing.T) {
	data, err := os.ReadFile(filepath.Join("testdata", "cases.json"))
	if err != nil {
		t.Fatal(err)
	}
	var cases []struct {
		Decoder json.RawMessage `json:"decoder"`
		IO      []struct {
			Tokens []string `json:"tokens"`
			Text   string   `json:"text"`
		} `json:"io"`
	}
	if err := json.Unmarshal(data, &cases); err != nil {
		t.Fatal(err)
	}
	for _, c := range cases {
		t.Run(string(c.Decoder), func(t *testing.T) {
			d := build(t, string(c.Decoder))
			for _, io := range c.IO {
				in := append([]string(nil), io.Tokens...)
				got := strings.Join(d.Decode(in), "")
				if got != io.Text {
					t.Errorf("Decode(%+q) = %+q, want %+q", io.Tokens, got, io.Text)
				}
				for i := range in {
					if in[i] != io.Tokens[i] {
						t.Fatalf("Decode modified its input: %+q", in)
					}
				}
			}
		})
	}
}

// TestChain checks the token lists of decoders whose output feeds another decoder.
func TestChain(t *testing.T) {
	for _, tc := range []struct {
		name, json string
		in, want   []string
	}{
		{"bytefallback keeps other tokens", `{"type":"ByteFallback"}`,
			[]string{"a", "<0xC3>", "<0xA9>", "b", "<0xFF>"}, []string{"a", "é", "b", "\uFFFD"}},
		{"bytefallback invalid run", `{"type":"ByteFallback"}`,
			[]string{"<0xC3>", "<0x41>"}, []string{"\uFFFD", "\uFFFD"}},
		{"fuse", `{"type":"Fuse"}`, []string{"a", "b"}, []string{"ab"}},
		{"fuse empty", `{"type":"Fuse"}`, nil, []string{""}},
		{"bytelevel is one string", `{"type":"ByteLevel","add_prefix_space":true,"trim_offsets":true}`,
			[]string{"a", "Ġb"}, []string{"a b"}},
		{"ctc drops empties", `{"type":"CTC","pad_token":"<pad>","word_delimiter_token":"|","cleanup":true}`,
			[]string{"<pad>", "a", "a", "|"}, []string{"a", " "}},
		{"strip where HF panics: stop beyond token", `{"type":"Strip","content":" ","start":0,"stop":3}`,
			[]string{"  ", "", "a "}, []string{"", "", "a"}},
		{"strip where HF panics: cuts cross", `{"type":"Strip","content":" ","start":1,"stop":1}`,
			[]string{" ", "  ", " a "}, []string{"", "", "a"}},
		{"bpe empty", `{"type":"BPEDecoder","suffix":"</w>"}`, nil, []string{}},
		{"metaspace first token", `{"type":"Metaspace","replacement":"▁","prepend_scheme":"always"}`,
			[]string{"▁a▁b", "▁c"}, []string{"ab", " c"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := build(t, tc.json).Decode(tc.in)
			if len(got) != len(tc.want) {
				t.Fatalf("Decode(%+q) = %+q, want %+q", tc.in, got, tc.want)
			}
			for i := range got {
				if got[i] != tc.want[i] {
					t.Fatalf("Decode(%+q) = %+q, want %+q", tc.in, got, tc.want)
				}
			}
		})
	}
}

func TestLossyUTF8(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"", ""},
		{"abc", "abc"},
		{"\xe2\x82", "\uFFFD"},
		{"\xe2\x82\xac\xe2", "€\uFFFD"},
		{"\xf0\x9f\x98", "\uFFFD"},
		{"\xf0\x9f\x98A", "\uFFFDA"},
		{"\xed\xa0\x80", "\uFFFD\uFFFD\uFFFD"},
		{"\xe0\x80\x80", "\uFFFD\uFFFD\uFFFD"},
		{"\xf4\x90\x80\x80", "\uFFFD\uFFFD\uFFFD\uFFFD"},
		{"\xc0\xaf", "\uFFFD\uFFFD"},
		{"\xf1\x80\x80\xff", "\uFFFD\uFFFD"},
		{"\x80\xbf", "\uFFFD\uFFFD"},
	} {
		if got := lossyUTF8([]byte(tc.in)); got != tc.want {
			t.Errorf("lossyUTF8(%+q) = %+q, want %+q", tc.in, got, tc.want)
		}
	}
}

func TestFromJSONErrors(t *testing.T) {
	for _, tc := range []struct {
		name, json, path string
		unsupported      bool
	}{
		{"unknown type", `{"type":"Foo"}`, "decoder", true},
		{"unknown in sequence", `{"type":"Sequence","decoders":[{"type":"Fuse"},{"type":"Bar"}]}`, "decoder.decoders[1]", true},
		{"null in sequence", `{"type":"Sequence","decoders":[null]}`, "decoder.decoders[0]", false},
		{"no type", `{"prefix":"##"}`, "decoder", false},
		{"short", `[]`, "decoder", false},
		{"sequence without list", `{"type":"Sequence"}`, "decoder", false},
		{"bytelevel missing", `{"type":"ByteLevel"}`, "decoder", false},
		{"wordpiece missing", `{"type":"WordPiece","prefix":"##"}`, "decoder", false},
		{"bpe missing", `{"type":"BPEDecoder"}`, "decoder", false},
		{"metaspace two chars", `{"type":"Metaspace","replacement":"__"}`, "decoder", false},
		{"metaspace empty", `{"type":"Metaspace","replacement":""}`, "decoder", false},
		{"metaspace scheme", `{"type":"Metaspace","replacement":"_","prepend_scheme":"sometimes"}`, "decoder", false},
		{"metaspace add_prefix_space", `{"type":"Metaspace","replacement":"_","add_prefix_space":false}`, "decoder", false},
		{"strip missing", `{"type":"Strip","content":" ","start":1}`, "decoder", false},
		{"strip negative", `{"type":"Strip","content":" ","start":-1,"stop":0}`, "decoder", false},
		{"ctc missing", `{"type":"CTC","pad_token":"<pad>"}`, "decoder", false},
		{"replace both", `{"type":"Replace","pattern":{"String":"a","Regex":"b"},"content":""}`, "decoder.pattern", false},
		{"replace regex", `{"type":"Replace","pattern":{"Regex":"[[:alpha:]]"},"content":""}`, "decoder.pattern", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d, err := FromJSON(json.RawMessage(tc.json), "decoder")
			if err == nil {
				t.Fatalf("FromJSON(%s) = %T, want an error", tc.json, d)
			}
			var ue *tokjson.UnsupportedError
			var ie *tokjson.InvalidError
			switch {
			case tc.unsupported && errors.As(err, &ue):
				if ue.Path != tc.path {
					t.Errorf("path %q, want %q (%v)", ue.Path, tc.path, err)
				}
			case !tc.unsupported && errors.As(err, &ie):
				if ie.Path != tc.path {
					t.Errorf("path %q, want %q (%v)", ie.Path, tc.path, err)
				}
			default:
				t.Errorf("error %T %v, want unsupported=%v", err, err, tc.unsupported)
			}
		})
	}
	for _, raw := range []string{"", "null", "  null\n"} {
		if d, err := FromJSON(json.RawMessage(raw), "decoder"); d != nil || err != nil {
			t.Errorf("FromJSON(%q) = %v, %v; want nil, nil", raw, d, err)
		}
	}
}

var fuzzDecoders = []string{
	`{"type":"ByteLevel","add_prefix_space":true,"trim_offsets":true}`,
	`{"type":"Metaspace","replacement":"▁","prepend_scheme":"first"}`,
	`{"type":"WordPiece","prefix":"##","cleanup":true}`,
	`{"type":"BPEDecoder","suffix":"</w>"}`,
	`{"type":"ByteFallback"}`,
	`{"type":"Fuse"}`,
	`{"type":"Strip","content":" ","start":2,"stop":3}`,
	`{"type":"Replace","pattern":{"Regex":"\\s*"},"content":"_"}`,
	`{"type":"CTC","pad_token":"<pad>","word_delimiter_token":"|","cleanup":true}`,
}

// FuzzDecoders checks that no decoder panics and that valid UTF-8 tokens decode to valid UTF-8.
func FuzzDecoders(f *testing.F) {
	for _, s := range []string{"", "a b", "<0xC3>\x00<0xA9>", "Ġa\x00âĤ", " \x00 \x00", "▁a\x00##b"} {
		f.Add(s)
	}
	var ds []Decoder
	for _, j := range fuzzDecoders {
		ds = append(ds, build(f, j))
	}
	f.Fuzz(func(t *testing.T, joined string) {
		tokens := strings.Split(joined, "\x00")
		for i, d := range ds {
			out := strings.Join(d.Decode(tokens), "")
			if utf8.ValidString(joined) && !utf8.ValidString(out) {
				t.Errorf("%s: invalid UTF-8 %+q from %+q", fuzzDecoders[i], out, tokens)
			}
		}
	})
}

func BenchmarkDecode(b *testing.B) {
	var tokens []string
	for i := 0; i < 1000; i++ {
		tokens = append(tokens, "Ġhello", "Ġwor", "ld", "âĤ¬", "!")
	}
	n := 0
	for _, t := range tokens {
		n += len(t)
	}
	llama2 := `{"type":"Sequence","decoders":[{"type":"Replace","pattern":{"String":"▁"},"content":" "},` +
		`{"type":"ByteFallback"},{"type":"Fuse"},{"type":"Strip","content":" ","start":1,"stop":0}]}`
	for name, j := range map[string]string{"ByteLevel": fuzzDecoders[0], "WordPiece": fuzzDecoders[2], "Llama2": llama2} {
		d := build(b, j)
		b.Run(name, func(b *testing.B) {
			b.ReportAllocs()
			b.SetBytes(int64(n))
			for b.Loop() {
				d.Decode(tokens)
			}
		})
	}
}
