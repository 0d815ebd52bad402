package pretok

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/gload/gload/tokenize/tokjson"
)

func TestFromJSONNull(t *testing.T) {
	for _, raw := range []string{"", "null", " null "} {
		p, info, err := FromJSON(json.RawMessage(raw), "pre_tokenizer")
		if p != nil || info != (Info{}) || err != nil {
			t.Errorf("FromJSON(%q) = %v, %v, %v; want nil, {}, nil", raw, p, info, err)
		}
	}
}

func TestFromJSONErrors(t *testing.T) {
	const bl = `{"type":"ByteLevel","add_prefix_space":false,"trim_offsets":true}`
	tests := []struct {
		name        string
		raw         string
		unsupported bool   // tokjson.ErrUnsupported, else tokjson.InvalidError
		path        string // JSON path the message must name
		mention     string // and a word it must hold
	}{
		{"unknown type", `{"type":"Foo"}`, true, "pre_tokenizer", `"Foo"`},
		{"unknown type in sequence", `{"type":"Sequence","pretokenizers":[{"type":"Whitespace"},{"type":"Foo"}]}`,
			true, "pre_tokenizer.pretokenizers[1]", `"Foo"`},
		{"bad behavior", `{"type":"Split","pattern":{"String":"a"},"behavior":"Sideways","invert":false}`, true,
			"pre_tokenizer", "Sideways"},
		{"bad punctuation behavior", `{"type":"Punctuation","behavior":"isolated"}`, true, "pre_tokenizer",
			"isolated"},
		{"bytelevel first", `{"type":"Sequence","pretokenizers":[` + bl + `,{"type":"Digits","individual_digits":true}]}`,
			true, "pre_tokenizer.pretokenizers[0]", "last"},
		{"bytelevel nested first", `{"type":"Sequence","pretokenizers":[{"type":"Sequence","pretokenizers":[` + bl +
			`]},{"type":"Whitespace"}]}`, true, "pre_tokenizer.pretokenizers[0].pretokenizers[0]", "ByteLevel"},
		{"regex \\K", `{"type":"Split","pattern":{"Regex":"a\\Kb"},"behavior":"Isolated","invert":false}`, true,
			"pre_tokenizer.pattern", `\K`},
		{"regex posix", `{"type":"Split","pattern":{"Regex":"[[:alpha:]]"},"behavior":"Isolated","invert":false}`,
			true, "pre_tokenizer.pattern", "nested"},
		{"regex intersection", `{"type":"Split","pattern":{"Regex":"[a-z&&b]"},"behavior":"Isolated","invert":false}`,
			true, "pre_tokenizer.pattern", "&&"},
		{"regex (?s)", `{"type":"Split","pattern":{"Regex":"(?s)."},"behavior":"Isolated","invert":false}`, false,
			"pre_tokenizer.pattern", "option"},
		{"regex possessive interval", `{"type":"Split","pattern":{"Regex":"a{2}+"},"behavior":"Isolated","invert":false}`,
			true, "pre_tokenizer.pattern", "interval"},
		{"two patterns", `{"type":"Split","pattern":{"String":"a","Regex":"a"},"behavior":"Isolated","invert":false}`,
			false, "pre_tokenizer.pattern", "exactly one"},
		{"missing invert", `{"type":"Split","pattern":{"String":"a"},"behavior":"Isolated"}`, false, "pre_tokenizer",
			"invert"},
		{"metaspace scheme", `{"type":"Metaspace","replacement":"_","prepend_scheme":"sometimes"}`, true,
			"pre_tokenizer", "sometimes"},
		{"metaspace prefix mismatch", `{"type":"Metaspace","replacement":"_","add_prefix_space":false}`, false,
			"pre_tokenizer", "prepend_scheme"},
		{"metaspace replacement", `{"type":"Metaspace","replacement":"__"}`, false, "pre_tokenizer", "replacement"},
		{"fixed length zero", `{"type":"FixedLength","length":0}`, false, "pre_tokenizer", "length"},
		{"missing type", `{"individual_digits":true}`, false, "pre_tokenizer", "type"},
		{"null member", `{"type":"Sequence","pretokenizers":[null]}`, false, "pre_tokenizer.pretokenizers[0]", "null"},
		{"not an object", `[1,2]`, false, "pre_tokenizer", "component"},
		{"wrong field type", `{"type":"Digits","individual_digits":"yes"}`, false, "pre_tokenizer", "bool"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, _, err := FromJSON(json.RawMessage(tc.raw), "pre_tokenizer")
			if err == nil {
				t.Fatal("no error")
			}
			if got := errors.Is(err, tokjson.ErrUnsupported); got != tc.unsupported {
				t.Errorf("errors.Is(err, tokjson.ErrUnsupported) = %v, want %v: %v", got, tc.unsupported, err)
			}
			var inv *tokjson.InvalidError
			if !tc.unsupported && !errors.As(err, &inv) {
				t.Errorf("want a tokjson.InvalidError, got %T: %v", err, err)
			}
			msg := err.Error()
			if !strings.Contains(msg, tc.path+":") || !strings.Contains(msg, tc.mention) {
				t.Errorf("error %q should name %q and mention %q", msg, tc.path, tc.mention)
			}
		})
	}
}

func TestFromJSONInfoAndShape(t *testing.T) {
	tests := []struct {
		name      string
		raw       string
		byteLevel bool
		want      string // %T of the pre-tokenizer
	}{
		{"llama3 shape", `{"type":"Sequence","pretokenizers":[{"type":"Split","pattern":{"Regex":` +
			jsonString(patternCL100K) + `},"behavior":"Isolated","invert":false},{"type":"ByteLevel",` +
			`"add_prefix_space":false,"trim_offsets":true,"use_regex":false}]}`, true, "*pretok.patternSplit"},
		{"bytelevel alone", `{"type":"ByteLevel","add_prefix_space":true,"trim_offsets":true}`, true,
			"*pretok.byteLevel"},
		{"bytelevel identity", `{"type":"ByteLevel","add_prefix_space":false,"trim_offsets":true,"use_regex":false}`,
			true, "pretok.identity"},
		{"empty sequence", `{"type":"Sequence","pretokenizers":[]}`, false, "pretok.identity"},
		{"two steps", `{"type":"Sequence","pretokenizers":[{"type":"WhitespaceSplit"},{"type":"Digits",` +
			`"individual_digits":true}]}`, false, "*pretok.sequence"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			p, info, err := FromJSON(json.RawMessage(tc.raw), "pre_tokenizer")
			if err != nil {
				t.Fatal(err)
			}
			if info.ByteLevel != tc.byteLevel {
				t.Errorf("ByteLevel = %v, want %v", info.ByteLevel, tc.byteLevel)
			}
			if got := fmt.Sprintf("%T", p); got != tc.want {
				t.Errorf("type %s, want %s", got, tc.want)
			}
		})
	}
}

func TestSplitPiece(t *testing.T) {
	p, _ := mustLoad(t, json.RawMessage(`{"type":"Sequence","pretokenizers":[{"type":"WhitespaceSplit"},`+
		`{"type":"Metaspace","replacement":"▁","prepend_scheme":"first","split":true}]}`))
	tests := []struct {
		s       string
		atStart bool
		want    []string
	}{
		{"a b", true, []string{"▁a", "b"}},
		{"a b", false, []string{"a", "b"}},
		{" a b", true, []string{"a", "b"}},
	}
	for _, tc := range tests {
		got := SplitPiece(p, tc.s, tc.atStart, nil)
		if strings.Join(got, "|") != strings.Join(tc.want, "|") {
			t.Errorf("SplitPiece(%q, %v) = %q, want %q", tc.s, tc.atStart, got, tc.want)
		}
	}
}

func jsonString(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}

// FuzzFromJSON checks that no tokenizer.json fragment makes FromJSON or the resulting Split panic.
func FuzzFromJSON(f *testing.F) {
	for _, s := range []string{`{"type":"Whitespace"}`, `{"type":"Sequence","pretokenizers":[{"type":"Digits",` +
		`"individual_digits":true},{"type":"ByteLevel","add_prefix_space":true,"trim_offsets":true}]}`,
		`{"type":"Split","pattern":{"Regex":"a|(?=c)"},"behavior":"MergedWithNext","invert":true}`,
		`{"type":"Metaspace","replacement":"▁","prepend_scheme":"first"}`, `{"type":"FixedLength","length":2}`,
		`{"type":"Split","pattern":{"Regex":" ?[^(\\s|[.,!?])]+"},"behavior":"Removed","invert":true}`} {
		f.Add(s, "Hello,  world 123! ▁x")
	}
	f.Fuzz(func(t *testing.T, raw, text string) {
		p, _, err := FromJSON(json.RawMessage(raw), "pre_tokenizer")
		if err != nil || p == nil {
			return
		}
		for _, w := range p.Split(text, nil) {
			if w == "" {
				t.Fatalf("empty word from %s on %q", raw, text)
			}
		}
	})
}
