package utf8fix

import (
	"strings"
	"testing"
	"unicode/utf8"
)

// pythonCases were checked with
// python3 -c "print(ascii(b'...'.decode('utf-8','replace')))" (CPython 3.11).
var pythonCases = []struct {
	name string
	in   string
	want string
}{
	{"empty", "", ""},
	{"ascii", "hello", "hello"},
	{"valid multibyte", "h\u00e9llo \u20ac \U0001F600", "h\u00e9llo \u20ac \U0001F600"},
	{"truncated euro", "\xe2\x82", "\ufffd"},
	{"two invalid leads", "\xff\xfe", "\ufffd\ufffd"},
	{"truncated then ascii", "\xe2\x82A", "\ufffdA"},
	{"surrogate", "\xed\xa0\x80", "\ufffd\ufffd\ufffd"},
	{"above max", "\xf4\x90\x80\x80", "\ufffd\ufffd\ufffd\ufffd"},
	{"overlong 4-byte", "\xf0\x80\x80", "\ufffd\ufffd\ufffd"},
	{"overlong 2-byte", "\xc0\xaf", "\ufffd\ufffd"},
	{"truncated emoji", "\xf0\x9f\x98", "\ufffd"},
	{"emoji", "\xf0\x9f\x98\x80", "\U0001F600"},
	{"lone continuation", "a\x80b", "a\ufffdb"},
	{"overlong 3-byte", "\xe0\x80\x80", "\ufffd\ufffd\ufffd"},
	{"truncated e0", "\xe0\xa0", "\ufffd"},
	{"f5 lead", "\xf5\x80", "\ufffd\ufffd"},
	{"bad fourth byte", "\xf1\x80\x80\xc0", "\ufffd\ufffd"},
	{"lone c2", "\xc2", "\ufffd"},
	{"c2 then valid", "\xc2\xc2\xa9", "\ufffd\u00a9"},
	{"last before surrogates", "\xed\x9f\xbf", "\ud7ff"},
	{"truncated ee", "\xee\x80", "\ufffd"},
	{"max code point", "\xf4\x8f\xbf\xbf", "\U0010FFFF"},
	{"truncated max", "\xf4\x8f\xbf", "\ufffd"},
	{"five-byte form", "\xf8\x88\x80\x80\x80", "\ufffd\ufffd\ufffd\ufffd\ufffd"},
	{"unicode table 3-8", "\xe1\x80\xe2\xf0\x91\x92\xf1\xbf\x41", "\ufffd\ufffd\ufffd\ufffdA"},
}

func TestToValidUTF8(t *testing.T) {
	for _, tc := range pythonCases {
		t.Run(tc.name, func(t *testing.T) {
			got, changed := ToValidUTF8(tc.in)
			if got != tc.want {
				t.Errorf("ToValidUTF8(%+q) = %+q, want %+q", tc.in, got, tc.want)
			}
			if changed != (tc.in != tc.want) {
				t.Errorf("ToValidUTF8(%+q) changed = %v", tc.in, changed)
			}
			b, changedB := AppendValid([]byte("x"), []byte(tc.in))
			if string(b) != "x"+tc.want || changedB != changed {
				t.Errorf("AppendValid(%+q) = %+q, %v", tc.in, b, changedB)
			}
		})
	}
}

func TestToValidUTF8NoAllocOnValid(t *testing.T) {
	s := strings.Repeat("valid \u00e9 text ", 100)
	allocs := testing.AllocsPerRun(10, func() {
		out, _ := ToValidUTF8(s)
		if len(out) != len(s) {
			t.Fatal("length changed")
		}
	})
	if allocs != 0 {
		t.Errorf("allocs on valid input = %v, want 0", allocs)
	}
}

// collapse replaces every run of U+FFFD by one U+FFFD.
func collapse(s string) string {
	var b strings.Builder
	prev := false
	for _, r := range s {
		if r == utf8.RuneError {
			if prev {
				continue
			}
			prev = true
		} else {
			prev = false
		}
		b.WriteRune(r)
	}
	return b.String()
}

func FuzzToValidUTF8(f *testing.F) {
	for _, tc := range pythonCases {
		f.Add([]byte(tc.in))
	}
	f.Add([]byte("\xef\xbf\xbd\xff"))
	f.Fuzz(func(t *testing.T, in []byte) {
		got, changed := ToValidUTF8(string(in))
		if !utf8.ValidString(got) {
			t.Fatalf("result %+q is not valid UTF-8", got)
		}
		if utf8.Valid(in) {
			if changed || got != string(in) {
				t.Fatalf("valid input %+q changed to %+q", in, got)
			}
			return
		}
		if !changed {
			t.Fatalf("invalid input %+q reported unchanged", in)
		}
		// strings.ToValidUTF8 replaces each run of invalid bytes with one
		// U+FFFD; ours replaces each maximal subpart. Once runs of U+FFFD are
		// collapsed the two must agree.
		if a, b := collapse(got), collapse(strings.ToValidUTF8(string(in), "\uFFFD")); a != b {
			t.Fatalf("input %+q: collapsed %+q, strings.ToValidUTF8 collapsed %+q", in, a, b)
		}
		// Every U+FFFD we add stands for at least one input byte.
		if n := strings.Count(got, "\uFFFD") - strings.Count(string(in), "\uFFFD"); n > len(in) {
			t.Fatalf("input %+q: %d replacements for %d bytes", in, n, len(in))
		}
	})
}

func BenchmarkToValidUTF8(b *testing.B) {
	cases := []struct {
		name string
		in   string
	}{
		{"valid_ascii", strings.Repeat("The quick brown fox jumps over the lazy dog. ", 100)},
		{"valid_mixed", strings.Repeat("Grüße, 世界! ", 200)},
		{"invalid", strings.Repeat("Grüße \xe2\x82 world \xff ", 100)},
	}
	for _, tc := range cases {
		b.Run(tc.name, func(b *testing.B) {
			b.ReportAllocs()
			b.SetBytes(int64(len(tc.in)))
			for b.Loop() {
				ToValidUTF8(tc.in)
			}
		})
	}
}
