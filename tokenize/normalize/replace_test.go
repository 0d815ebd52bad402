package normalize

import (
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/gload/gload/tokenize/tokjson"
)

// TestRunPattern checks the regexp2-free path for repeated-character regexes against regexp2 itself.
func TestRunPattern(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	alphabet := []string{" ", " ", "a", "x", "x", "é", "b", "\n"}
	for _, pattern := range []string{" {2,}", "a+", "x{2}", "x{2,3}", "é{1,}", " {3,5}", "\n+"} {
		rp := parseRunPattern(pattern)
		if rp == nil {
			t.Fatalf("parseRunPattern(%q) = nil", pattern)
		}
		re, err := tokjson.CompileOniguruma(pattern, "p")
		if err != nil {
			t.Fatal(err)
		}
		slow := &replace{re: re, content: "<>"}
		for range 300 {
			var b strings.Builder
			for range rng.IntN(20) {
				b.WriteString(alphabet[rng.IntN(len(alphabet))])
			}
			s := b.String()
			if got, want := rp.replace(s, "<>"), slow.Normalize(s); got != want {
				t.Fatalf("%q on %q: %q, regexp2 gives %q", pattern, s, got, want)
			}
		}
	}
	for _, p := range []string{"", "a", "ab+", "a*", "a{0,}", "a{,2}", "a{2,1}", "a{02,}", ".+", `\s+`, "a{2", "[a]+"} {
		if rp := parseRunPattern(p); rp != nil {
			t.Errorf("parseRunPattern(%q) = %+v, want nil", p, rp)
		}
	}
}
