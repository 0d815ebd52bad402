package tokjson

import (
	"errors"
	"testing"
)

func TestCompileOniguruma(t *testing.T) {
	for _, tc := range []struct {
		pattern, in string
		want        [][2]int // byte ranges of the matches
	}{
		{` {2,}`, "a  b   c", [][2]int{{1, 3}, {4, 7}}},
		{`^a`, "a\na\r\na", [][2]int{{0, 1}, {2, 3}, {5, 6}}},
		{`a$`, "a\na\r\na", [][2]int{{0, 1}, {5, 6}}},
		{`\w+`, "ab\u0903c d", [][2]int{{0, 6}, {7, 8}}},
		{`\W+`, "a\u20dd, b", [][2]int{{4, 6}}},
		{`[\w-]+`, "a-\u0903 +", [][2]int{{0, 5}}},
		{`\bx`, "x \u0903x ax", [][2]int{{0, 1}}},
		{`x\B`, "xa x\u0903 x", [][2]int{{0, 1}, {3, 4}}},
		{`[\b]`, "a\bb", [][2]int{{1, 2}}},
		{`[]a]`, "]a[", [][2]int{{0, 1}, {1, 2}}},
		{`b*`, "ab  c", [][2]int{{0, 0}, {1, 2}, {3, 3}, {4, 4}, {5, 5}}},
	} {
		re, err := CompileOniguruma(tc.pattern, "p")
		if err != nil {
			t.Fatalf("CompileOniguruma(%q): %v", tc.pattern, err)
		}
		got, err := re.FindAllStringIndex(tc.in, -1)
		if err != nil {
			t.Fatal(err)
		}
		ok := len(got) == len(tc.want)
		for i := 0; ok && i < len(got); i++ {
			ok = got[i][0] == tc.want[i][0] && got[i][1] == tc.want[i][1]
		}
		if !ok {
			t.Errorf("%q on %q: matches %v, want %v", tc.pattern, tc.in, got, tc.want)
		}
	}
}

func TestCompileOnigurumaRefuses(t *testing.T) {
	for _, p := range []string{`[[:alpha:]]`, `[a-z&&[^b]]`, `\h`, `\K`, `(?~ab)`, `a{,3}`, `[\W]`, `(a`} {
		_, err := CompileOniguruma(p, "x.pattern")
		var ue *UnsupportedError
		if !errors.As(err, &ue) || ue.Path != "x.pattern" {
			t.Errorf("CompileOniguruma(%q) = %v, want an UnsupportedError at x.pattern", p, err)
		}
	}
	for _, p := range []string{`\\h`, `[:]`, `a\{,3}`} { // escaped or harmless look-alikes
		if _, err := CompileOniguruma(p, "x"); err != nil {
			t.Errorf("CompileOniguruma(%q): %v", p, err)
		}
	}
}
