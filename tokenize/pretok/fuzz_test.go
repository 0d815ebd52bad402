package pretok

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
)

// fuzzConfigs are pre-tokenizers whose words, joined, give back the input (nothing removed or added).
var fuzzConfigs = []string{
	`{"type":"Split","pattern":{"Regex":` + jsonString(patternCL100K) + `},"behavior":"Isolated","invert":false}`,
	`{"type":"Split","pattern":{"Regex":` + jsonString(patternQwen2) + `},"behavior":"Contiguous","invert":true}`,
	`{"type":"Split","pattern":{"Regex":` + jsonString(patternO200K) + `},"behavior":"Removed","invert":true}`,
	`{"type":"ByteLevel","add_prefix_space":false,"trim_offsets":true}`,
	`{"type":"Split","pattern":{"Regex":"x*|\\b"},"behavior":"MergedWithNext","invert":false}`,
	`{"type":"Split","pattern":{"Regex":"(?=c)|a"},"behavior":"MergedWithPrevious","invert":true}`,
	`{"type":"Split","pattern":{"String":"ab"},"behavior":"MergedWithNext","invert":false}`,
	`{"type":"Split","pattern":{"String":""},"behavior":"Isolated","invert":false}`,
	`{"type":"Punctuation","behavior":"MergedWithPrevious"}`,
	`{"type":"Digits","individual_digits":false}`,
	`{"type":"Metaspace","replacement":" ","prepend_scheme":"never","split":true}`,
	`{"type":"FixedLength","length":3}`,
}

// FuzzSplit checks that no input, valid UTF-8 or not, makes a pre-tokenizer panic or emit an empty word, and
// that pre-tokenizers that drop nothing give back the whole input.
func FuzzSplit(f *testing.F) {
	for _, s := range []string{"", "Hello, world! 123", "\xff\xfe a\xc3", "'S'ſ\xc5", "  \r\n\t x", "abxxc (?=c)"} {
		f.Add(s)
	}
	var lossless []PreTokenizer
	for _, raw := range fuzzConfigs {
		p, _ := mustLoad(f, json.RawMessage(raw))
		lossless = append(lossless, p)
	}
	var others []PreTokenizer
	for _, name := range []string{"gpt4o", "bert-base-uncased", "unigram-spm8k"} {
		p, _ := mustLoad(f, fixturePretok(f, name))
		others = append(others, p)
	}
	for _, raw := range []string{`{"type":"Whitespace"}`, `{"type":"WhitespaceSplit"}`,
		`{"type":"ByteLevel","add_prefix_space":true,"trim_offsets":true}`,
		`{"type":"Metaspace","replacement":"▁","prepend_scheme":"first","split":true}`,
		`{"type":"Sequence","pretokenizers":[{"type":"WhitespaceSplit"},{"type":"Punctuation"},` +
			`{"type":"Metaspace","replacement":"▁","prepend_scheme":"first","split":true}]}`} {
		p, _ := mustLoad(f, json.RawMessage(raw))
		others = append(others, p)
	}
	f.Fuzz(func(t *testing.T, s string) {
		for i, p := range lossless {
			words := p.Split(s, nil)
			if got := strings.Join(words, ""); got != s {
				t.Fatalf("%s: words %q do not join to %q", fuzzConfigs[i], words, s)
			}
			for _, w := range words {
				if w == "" {
					t.Fatalf("%s: empty word in %q", fuzzConfigs[i], words)
				}
			}
		}
		for _, p := range others {
			for _, w := range p.Split(s, nil) {
				if w == "" {
					t.Fatalf("%T: empty word on %q", p, s)
				}
			}
		}
	})
}

// FuzzRegex checks that the general engine neither panics on any pattern nor loses text: with Isolated, the
// words of any compiled pattern join to the input.
func FuzzRegex(f *testing.F) {
	for _, p := range []string{`\s+`, `x*`, ``, `a|(?=c)`, `(?i)\p{Lu}+`, ` ?[^(\s|[.,!?])]+`, `\b\w`, `[\w\W]`,
		`a{,2}`, `(?m).+`, `\h+\H`, `[\p{^L}\d]+`, `(?<=a)b`, `^.|$`} {
		f.Add(p, "Hello, world! ab cabc 12 x\nyz ²")
	}
	f.Fuzz(func(t *testing.T, pattern, s string) {
		re, err := compileRegex(pattern)
		if err != nil {
			return
		}
		if len(s) > 256 {
			s = s[:256]
		}
		p := &patternSplit{pat: re, beh: isolated}
		if got := strings.Join(p.Split(s, nil), ""); got != s {
			t.Fatalf("pattern %q on %q: words join to %q", pattern, s, got)
		}
	})
}

// TestConcurrentSplit runs pre-tokenizers that use pooled buffers from several goroutines (run with -race).
func TestConcurrentSplit(t *testing.T) {
	configs := []json.RawMessage{
		json.RawMessage(`{"type":"Sequence","pretokenizers":[{"type":"WhitespaceSplit"},{"type":"Punctuation"},` +
			`{"type":"Metaspace","replacement":"▁","prepend_scheme":"first","split":true}]}`),
		json.RawMessage(`{"type":"Split","pattern":{"Regex":"\\w+|[^\\w\\s]+"},"behavior":"MergedWithNext",` +
			`"invert":true}`),
		fixturePretok(t, "llama3"),
	}
	texts := []string{"Hello, world! It's 2024.", "naïve café 中文 ١٢٣\n\tx", "  a  b  ", "x"}
	for _, raw := range configs {
		p, _ := mustLoad(t, raw)
		want := make([]string, len(texts))
		for i, s := range texts {
			want[i] = strings.Join(p.Split(s, nil), "|")
		}
		done := make(chan error, 4)
		for g := range 4 {
			go func() {
				var dst []string
				for n := range 200 {
					i := (n + g) % len(texts)
					dst = p.Split(texts[i], dst[:0])
					if got := strings.Join(dst, "|"); got != want[i] {
						done <- fmt.Errorf("%s on %q: got %q, want %q", raw, texts[i], got, want[i])
						return
					}
				}
				done <- nil
			}()
		}
		for range 4 {
			if err := <-done; err != nil {
				t.Error(err)
			}
		}
	}
}
