package pretok

import (
	"errors"
	"strings"
	"testing"
	"unicode/utf8"
)

func TestTranslate(t *testing.T) {
	tests := []struct {
		in, want string
		err      error
	}{
		{`a|b+`, `a|b+`, nil},
		{`(?m)a.b`, `(?s)a.b`, nil},
		{`(?mi:a)`, `(?si:a)`, nil},
		{`(?i-m)x`, `(?i-s)x`, nil},
		{`(?s)a`, "", errInvalidSyntax},
		{`(?u)a`, "", errUnsupportedSyntax},
		{`a{,3}`, `a{0,3}`, nil},
		{`a{2,}b{3}`, `a{2,}b{3}`, nil},
		{`a{x}`, `a{x}`, nil},
		{`a{2}+`, "", errUnsupportedSyntax},
		{`\h\H`, `(?-i:[\x{30}-\x{39}\x{41}-\x{46}\x{61}-\x{66}])(?-i:[^\x{30}-\x{39}\x{41}-\x{46}\x{61}-\x{66}])`, nil},
		{`[\h_]`, `[\x{30}-\x{39}\x{41}-\x{46}\x{61}-\x{66}_]`, nil},
		{`[a[bc]d]`, `[abcd]`, nil},
		{`[^(\s|[.,])]`, `[^(\s|.,)]`, nil},
		{`[a[^b]]`, "", errUnsupportedSyntax},
		{`[[:alpha:]]`, "", errUnsupportedSyntax},
		{`[a-[b]]`, "", errUnsupportedSyntax},
		{`[[b]-z]`, "", errUnsupportedSyntax},
		{`[a-z&&b]`, "", errUnsupportedSyntax},
		{`[]a]`, `[]a]`, nil},
		{`\p{Han}\P{Greek}`, `\p{Han}\P{Greek}`, nil},
		{`\p{^Han}`, `\P{Han}`, nil},
		{`a\Kb`, "", errUnsupportedSyntax},
		{`\X`, "", errUnsupportedSyntax},
		{`\Qa.b\E`, "", errUnsupportedSyntax},
		{`(?~abc)`, "", errUnsupportedSyntax},
		{`(?(1)a|b)`, "", errUnsupportedSyntax},
		{`(?#note)a`, `a`, nil},
		{`(?<name>a)\k<name>(?<=a)(?<!b)(?>c)(?:d)(?=e)(?!f)`, `(?<name>a)\k<name>(?<=a)(?<!b)(?>c)(?:d)(?=e)(?!f)`, nil},
		{`\t\n\r\x41\u0041\x{41}\.\-\é`, `\t\n\r\x41\u0041\x{41}\.\-\é`, nil},
		{`[\b]`, `[\b]`, nil},
		{"\xff", "", errInvalidSyntax},
		{`a\`, "", errInvalidSyntax},
		{`(?`, "", errInvalidSyntax},
		{`(?i`, "", errInvalidSyntax},
		{`\p{`, "", errInvalidSyntax},
	}
	for _, tc := range tests {
		got, err := translate(tc.in)
		if tc.err != nil {
			if !errors.Is(err, tc.err) {
				t.Errorf("translate(%q) error = %v, want %v", tc.in, err, tc.err)
			}
			continue
		}
		if err != nil || got != tc.want {
			t.Errorf("translate(%q) = %q, %v; want %q", tc.in, got, err, tc.want)
		}
	}
}

// TestTranslatedClasses checks, on every code point, that the general engine's classes are the measured ones.
func TestTranslatedClasses(t *testing.T) {
	var all strings.Builder
	var cps []rune
	for r := rune(0); r <= utf8.MaxRune; r++ {
		if r < 0xD800 || r > 0xDFFF {
			all.WriteRune(r)
			cps = append(cps, r)
		}
	}
	text := all.String()
	inRanges := func(rs [][2]rune) func(rune) bool {
		return func(r rune) bool {
			for _, x := range rs {
				if r >= x[0] && r <= x[1] {
					return true
				}
			}
			return false
		}
	}
	nd, _ := categoryRanges("Nd")
	tests := []struct {
		pattern string
		want    func(rune) bool
	}{
		{`\s+`, func(r rune) bool { return classOf(r)&cS != 0 }},
		{`\p{L}+`, func(r rune) bool { return classOf(r)&cL != 0 }},
		{`\p{N}+`, func(r rune) bool { return classOf(r)&cN != 0 }},
		{`[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+`, func(r rune) bool { return classOf(r)&cUp != 0 }},
		{`\w+`, inRanges(onigWordRanges[:])},
		{`[\w]+`, inRanges(onigWordInClassRanges[:])},
		{`\d+`, inRanges(nd)},
		{`[^\W]+`, inRanges(onigWordInClassRanges[:])},
	}
	for _, tc := range tests {
		t.Run(tc.pattern, func(t *testing.T) {
			matches, _ := pieces(reference(t, tc.pattern), text)
			got := make(map[rune]bool)
			for _, m := range matches {
				for _, r := range m {
					got[r] = true
				}
			}
			bad := 0
			for _, r := range cps {
				if got[r] != tc.want(r) {
					if bad++; bad <= 5 {
						t.Errorf("%U: matched %v, want %v", r, got[r], !got[r])
					}
				}
			}
		})
	}
}

// TestEmptyMatchIteration pins the onig crate's find_iter: an empty match where the previous match ended is
// skipped, any other empty match is kept.
func TestEmptyMatchIteration(t *testing.T) {
	tests := []struct {
		pattern, s string
		beh        behavior
		want       string
	}{
		{`a|(?=b)`, "ab", mergedWithNext, "ab"},
		{`a|(?=c)`, "a bc", isolated, "a| b|c"},
		{`(?=b)`, "abb", isolated, "a|b|b"},
		{`x*`, "abxxc", mergedWithPrevious, "a|bxx|c"},
		{``, "héllo", isolated, "h|é|l|l|o"},
	}
	for _, tc := range tests {
		p := &patternSplit{pat: reference(t, tc.pattern), beh: tc.beh}
		if got := strings.Join(p.Split(tc.s, nil), "|"); got != tc.want {
			t.Errorf("%q on %q: got %q, want %q", tc.pattern, tc.s, got, tc.want)
		}
	}
}
