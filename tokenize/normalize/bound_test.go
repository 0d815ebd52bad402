package normalize

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"
)

// mustJSON builds the normalizer of a tokenizer.json "normalizer" value.
func mustJSON(t testing.TB, js string) Normalizer {
	t.Helper()
	n, err := FromJSON(json.RawMessage(js), "normalizer")
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// boundCases are normalizers that amplify text, for TestApply and FuzzApply.
var boundCases = []struct {
	name, js string
	path     string // the step that passes a small cap
}{
	{"replace literal", `{"type": "Replace", "pattern": {"String": "a"}, "content": "` + strings.Repeat("x", 100) + `"}`, "normalizer"},
	{"replace empty literal", `{"type": "Replace", "pattern": {"String": ""}, "content": "` + strings.Repeat("-", 200) + `"}`, "normalizer"},
	{"replace regex", `{"type": "Replace", "pattern": {"Regex": "[ab]"}, "content": "` + strings.Repeat("y", 200) + `"}`, "normalizer"},
	{"replace run", `{"type": "Replace", "pattern": {"Regex": "a+"}, "content": "` + strings.Repeat("z", 2000) + `"}`, "normalizer"},
	{"prepend", `{"type": "Prepend", "prepend": "` + strings.Repeat("p", 5000) + `"}`, "normalizer"},
	{"chained replaces", `{"type": "Sequence", "normalizers": [{"type": "NFC"},
		{"type": "Replace", "pattern": {"String": "a"}, "content": "aaaaaaaa"},
		{"type": "Replace", "pattern": {"String": "a"}, "content": "aaaaaaaa"},
		{"type": "Replace", "pattern": {"String": "a"}, "content": "aaaaaaaa"}]}`, "normalizer.normalizers[3]"},
	{"nested sequence", `{"type": "Sequence", "normalizers": [{"type": "Lowercase"}, {"type": "Sequence", "normalizers": [
		{"type": "NFKC"}, {"type": "Prepend", "prepend": "` + strings.Repeat("q", 5000) + `"}]}]}`, "normalizer.normalizers[1].normalizers[1]"},
}

// TestApply: Apply gives Normalize's output while it fits the cap, and a
// *LimitError naming the step that passed it otherwise.
func TestApply(t *testing.T) {
	text := "aAb a\u00c5ab " + strings.Repeat("a", 40)
	for _, tc := range boundCases {
		t.Run(tc.name, func(t *testing.T) {
			n := mustJSON(t, tc.js)
			want := n.Normalize(text)
			got, err := Apply(n, text, len(want))
			if err != nil || got != want {
				t.Fatalf("at the cap: %q, %v; want %q", got, err, want)
			}
			_, err = Apply(n, text, 4096)
			var le *LimitError
			if !errors.As(err, &le) || le.Path != tc.path || le.Max != 4096 {
				t.Fatalf("over the cap: %v, want a LimitError at %s", err, tc.path)
			}
			if !strings.Contains(err.Error(), tc.path+": normalized text of more than 4096 bytes") {
				t.Fatalf("message %q", err)
			}
		})
	}
	// A huge amplification stops before it allocates: 10^6 × 10^6 bytes.
	n := mustJSON(t, `{"type": "Replace", "pattern": {"String": "a"}, "content": "`+strings.Repeat("x", 1_000_000)+`"}`)
	if _, err := Apply(n, strings.Repeat("a", 1_000_000), 1<<20); err == nil {
		t.Fatal("a terabyte of output was not refused")
	}
	if got, err := Apply(nil, "x", 0); err != nil || got != "x" {
		t.Fatalf("nil normalizer: %q, %v", got, err)
	}
}

// FuzzApply: for any text and cap, Apply either returns exactly Normalize's
// output, within the cap, or refuses output that passes it (the fuzzed
// normalizers never shrink text, so a step over the cap means the end is).
func FuzzApply(f *testing.F) {
	f.Add("aaaa", 100, uint8(0))
	f.Add("b a\u00c5 a", 10, uint8(5))
	f.Add("", 0, uint8(1))
	ns := make([]Normalizer, len(boundCases))
	for i, tc := range boundCases {
		ns[i] = mustJSON(f, tc.js)
	}
	f.Fuzz(func(t *testing.T, s string, max int, which uint8) {
		if max < 0 || max > 1<<20 || len(s) > 1<<12 {
			return
		}
		n := ns[int(which)%len(ns)]
		got, err := Apply(n, s, max)
		want := n.Normalize(s)
		if err != nil {
			var le *LimitError
			if !errors.As(err, &le) || len(want) <= max {
				t.Fatalf("%q cap %d: %v, but the output is %d bytes", s, max, err, len(want))
			}
			return
		}
		if got != want || len(got) > max {
			t.Fatalf("%q cap %d: %q, want %q", s, max, got, want)
		}
	})
}
