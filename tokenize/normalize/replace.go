package normalize

import (
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/dlclark/regexp2/v2"
)

// replace substitutes content for every match of a literal or an Oniguruma regex, matches found left to right
// without overlap, an empty match right after the previous match skipped (as the onig crate iterates).
type replace struct {
	literal string
	re      *regexp2.Regexp // nil for a literal pattern
	content string
	run     *runPattern // set when the regex is one character repeated, matched without regexp2
}

// runPattern is a regex of the form c+, c{n,} or c{n,m} for a single literal character c (" {2,}" in
// SentencePiece conversions): greedy runs, left to right.
type runPattern struct {
	c        string
	min, max int // max < 0: unbounded
}

// parseRunPattern recognizes the patterns runPattern handles.
func parseRunPattern(p string) *runPattern {
	r, size := utf8.DecodeRuneInString(p)
	if size == 0 || r == utf8.RuneError || strings.ContainsRune(`\^$.|?*+()[]{}`, r) {
		return nil
	}
	q := p[size:]
	if q == "+" {
		return &runPattern{c: p[:size], min: 1, max: -1}
	}
	if len(q) < 3 || q[0] != '{' || q[len(q)-1] != '}' {
		return nil
	}
	lo, hi, comma := strings.Cut(q[1:len(q)-1], ",")
	n, err := strconv.Atoi(lo)
	if err != nil || n < 1 || lo != strconv.Itoa(n) {
		return nil
	}
	rp := &runPattern{c: p[:size], min: n, max: n}
	if comma {
		rp.max = -1
		if hi != "" {
			m, err := strconv.Atoi(hi)
			if err != nil || m < n || hi != strconv.Itoa(m) {
				return nil
			}
			rp.max = m
		}
	}
	return rp
}

// replaceRuns substitutes content for every match of the run pattern in s.
func (rp *runPattern) replace(s, content string) string {
	out, _ := rp.replaceMax(s, content, -1)
	return out
}

// replaceMax is replace that gives up (ok false) once the output passes max
// bytes (max < 0: no cap).
func (rp *runPattern) replaceMax(s, content string, max int) (string, bool) {
	var b []byte
	done := 0
	for i := 0; i < len(s); {
		k := strings.Index(s[i:], rp.c)
		if k < 0 {
			break
		}
		start := i + k
		end := start
		for strings.HasPrefix(s[end:], rp.c) {
			end += len(rp.c)
		}
		// A run of L characters gives matches of max characters while at least min remain.
		w := len(rp.c)
		for pos := start; (end-pos)/w >= rp.min; {
			n := (end - pos) / w
			if rp.max >= 0 && n > rp.max {
				n = rp.max
			}
			if b == nil {
				b = make([]byte, 0, len(s))
			}
			b = append(b, s[done:pos]...)
			b = append(b, content...)
			pos += n * w
			done = pos
			if max >= 0 && len(b) > max {
				return "", false
			}
		}
		i = end
	}
	if b == nil {
		return s, max < 0 || len(s) <= max
	}
	b = append(b, s[done:]...)
	return string(b), max < 0 || len(b) <= max
}

func (n *replace) Normalize(s string) string {
	if s == "" {
		return s
	}
	if n.re == nil {
		if n.literal != "" && !strings.Contains(s, n.literal) {
			return s
		}
		// An empty literal matches between every two characters, as the escaped empty regex does in HF.
		return strings.ReplaceAll(s, n.literal, n.content)
	}
	if n.run != nil {
		return n.run.replace(s, n.content)
	}
	matches, err := n.re.FindAllStringIndex(s, -1)
	if err != nil || len(matches) == 0 {
		// A match error (backtracking limit) leaves the text as it is: Normalize cannot report it.
		return s
	}
	return n.build(s, matches)
}

// build writes s with content for every match.
func (n *replace) build(s string, matches [][]int) string {
	var b strings.Builder
	b.Grow(len(s) + len(matches)*len(n.content))
	last := 0
	for _, m := range matches {
		b.WriteString(s[last:m[0]])
		b.WriteString(n.content)
		last = m[1]
	}
	b.WriteString(s[last:])
	return b.String()
}
