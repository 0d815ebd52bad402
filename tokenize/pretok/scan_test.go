package pretok

import (
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"unicode/utf8"
)

var scannerPatterns = []struct {
	name    string
	pattern string
	kind    scanKind
}{
	{"gpt2", patternGPT2, scanGPT2},
	{"cl100k", patternCL100K, scanCL100K},
	{"qwen2", patternQwen2, scanQwen2},
	{"o200k", patternO200K, scanO200K},
}

// reference compiles pattern with the general engine (regexp2), bypassing the scanner.
func reference(t testing.TB, pattern string) *regexPattern {
	t.Helper()
	re, err := compileRegex(pattern)
	if err != nil {
		t.Fatalf("compile %q: %v", pattern, err)
	}
	return re
}

// pieces returns the matches and the gaps that m finds in s.
func pieces(m matcher, s string) (matches, gaps []string) {
	k := newSink(s, removed, true, nil)
	m.feed(s, &k)
	matches, _ = k.done()
	k = newSink(s, removed, false, nil)
	m.feed(s, &k)
	gaps, _ = k.done()
	return matches, gaps
}

func checkSame(t *testing.T, name string, scan scanKind, ref *regexPattern, s string) bool {
	t.Helper()
	gm, gg := pieces(scan, s)
	wm, wg := pieces(ref, s)
	if !slices.Equal(gm, wm) || !slices.Equal(gg, wg) {
		t.Errorf("%s on %q:\nscanner matches %q gaps %q\nregexp2 matches %q gaps %q", name, s, gm, gg, wm, wg)
		return false
	}
	return true
}

// TestScannersMatchRegexp2OnFixtures runs each scanner and the general engine on the 833 fixture texts.
func TestScannersMatchRegexp2OnFixtures(t *testing.T) {
	texts := fixtureTexts(t)
	if testing.Short() {
		texts = texts[:100]
	}
	for _, sp := range scannerPatterns {
		t.Run(sp.name, func(t *testing.T) {
			ref := reference(t, sp.pattern)
			bad := 0
			for _, text := range texts {
				if !checkSame(t, sp.name, sp.kind, ref, text) {
					if bad++; bad == 3 {
						t.Fatal("giving up")
					}
				}
			}
		})
	}
}

// alphabet holds characters of every class the scanners tell apart, Unicode 16 additions included.
var alphabet = []rune("aZ09 \t\n\r\v\f'\"/.,!?-_sStTrReEvVmMlLdDxX" +
	"\u00a0\u0085\u1680\u2000\u2028\u2029\u202f\u3000\u200b" + // whitespace, and a zero-width space that is not
	"ſKéßÀǅǈʰªºαΩжЖ中日あアーガ한" + // letters of every case kind
	"\u0301\u0300\u0903\u20dd" + // marks
	"٣²½Ⅷ①𝟘" + // numbers
	"…。，«»—$+<=>^`|~€©😀👍🏽\u200d" +
	"\U00010D40\u1C89\u1C8A\U000105C0\u0897\U00016D40") // Unicode 16

func randomText(r *rand.Rand) string {
	n := r.IntN(24)
	var b strings.Builder
	for range n {
		b.WriteRune(alphabet[r.IntN(len(alphabet))])
	}
	return b.String()
}

// TestScannersMatchRegexp2Random compares the scanners and the general engine on random strings.
func TestScannersMatchRegexp2Random(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	n := 3000
	if testing.Short() {
		n = 300
	}
	texts := make([]string, n)
	for i := range texts {
		texts[i] = randomText(r)
	}
	for _, sp := range scannerPatterns {
		t.Run(sp.name, func(t *testing.T) {
			ref := reference(t, sp.pattern)
			bad := 0
			for _, text := range texts {
				if !checkSame(t, sp.name, sp.kind, ref, text) {
					if bad++; bad == 5 {
						t.Fatal("giving up")
					}
				}
			}
		})
	}
}

// TestRegexp2MatchesGoldens checks the general engine itself, on the scanner patterns, against the Python
// goldens.
func TestRegexp2MatchesGoldens(t *testing.T) {
	var g goldenFile
	readGzipJSON(t, "testdata/golden.json.gz", &g)
	for _, sp := range scannerPatterns {
		t.Run(sp.name, func(t *testing.T) {
			name := "split_" + sp.name + "_isolated"
			i := slices.IndexFunc(g.Cases, func(c goldenCase) bool { return c.Name == name })
			if i < 0 {
				t.Fatalf("no golden case %s", name)
			}
			p := &patternSplit{pat: reference(t, sp.pattern), beh: isolated}
			for j, in := range g.Inputs {
				if got := p.Split(in, nil); !slices.Equal(got, g.Cases[i].Words[j]) {
					t.Errorf("input %q:\n got %q\nwant %q", in, got, g.Cases[i].Words[j])
				}
			}
		})
	}
}

func TestContraction(t *testing.T) {
	tests := []struct {
		s    string
		fold bool
		want int
	}{
		{"'s", false, 2}, {"'S", false, -1}, {"'S", true, 2}, {"'ſ", true, 3}, {"'ſ", false, -1},
		{"'re", false, 3}, {"'rE", true, 3}, {"'rE", false, -1}, {"'r", true, -1}, {"'ll", false, 3},
		{"'lL", true, 3}, {"'l", false, -1}, {"'ve", false, 3}, {"'VE", true, 3}, {"'m", false, 2}, {"'D", true, 2},
		{"'K", true, -1}, {"'x", true, -1}, {"'", true, -1}, {"x's", true, -1}, {"'\xc5", true, -1},
	}
	for _, tc := range tests {
		if got := contraction(tc.s, 0, tc.fold); got != tc.want {
			t.Errorf("contraction(%q, fold=%v) = %d, want %d", tc.s, tc.fold, got, tc.want)
		}
	}
}

// FuzzScanners checks that each scanner finds exactly what the general engine finds on valid UTF-8.
func FuzzScanners(f *testing.F) {
	for _, s := range []string{"", "Hello world's 123", "  \n\n x", "HTTPServer's ǅǈ", "e\u0301!\u0301 a/\n/",
		"'ſ ²³ ⅧⅨ \u00a0x\u3000", "\U00010D40\u1C89 \r\n\t "} {
		f.Add(s)
	}
	refs := make([]*regexPattern, len(scannerPatterns))
	for i, sp := range scannerPatterns {
		refs[i] = reference(f, sp.pattern)
	}
	f.Fuzz(func(t *testing.T, s string) {
		if !utf8.ValidString(s) {
			t.Skip()
		}
		for i, sp := range scannerPatterns {
			checkSame(t, sp.name, sp.kind, refs[i], s)
		}
	})
}
