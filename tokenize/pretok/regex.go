package pretok

import (
	"cmp"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/dlclark/regexp2/v2"
)

// The general regex engine: patterns without a hand-written scanner run on regexp2 (a backtracking engine with
// .NET syntax), after translate has rewritten what Oniguruma's Ruby syntax (the one Hugging Face tokenizers
// compiles with) means differently:
//
//   - \p{X} and \P{X} for the Unicode general categories and their one-letter groups, \w, \W, \d, \D, \b and
//     \B become explicit code point classes measured from Oniguruma (Unicode 16; Go's tables are 15.0; and
//     Oniguruma's [\w] is six characters narrower than its \w). Property classes are not case-folded under
//     (?i), as in Oniguruma.
//   - Nested classes that are plain unions ([a[bc]]) are flattened.
//   - \h and \H (hex digits), \p{^X}, and {,n} (= {0,n}).
//   - (?m) is Ruby's dot-matches-newline, .NET's (?s); ^ and $ always match at line boundaries (Multiline).
//
// Constructs whose meaning differs and that are not rewritten are refused (errUnsupportedSyntax): POSIX
// brackets, negated nested classes and && inside classes, \K, \X, \O, \N, \y, \Y, \g, \Q, \E, absent operators (?~...),
// conditionals, and interval quantifiers followed by '+' (possessive in .NET, a repetition in Ruby).
//
// Known remaining differences: case-insensitive matching uses simple case folding (Oniguruma also applies
// multi-character folds: (?i)ss matches ß); \p{...} names other than the general categories (scripts,
// binary properties) use Go's Unicode 15.0 tables and are case-sensitive; a regexp2 match error (none is
// expected but the match bound below) ends the matching, leaving the rest of the text unmatched.
//
// The match bound: regexp2 backtracks, so a pattern such as (a+)+$ takes time exponential in the input (57 s for
// 28 a's). Oniguruma, which Hugging Face uses, stops such a search with "retry-limit-in-match over" (its
// retry limit, 10^7 by default) and tokenizers fails the encode. regexp2 has no step counter, so each search
// runs under MatchTimeout (regexMatchTimeout) instead, and SplitPieceErr reports a *MatchError naming the
// pattern's JSON path. Real tokenizer patterns need microseconds per search, so the bound only trips on
// catastrophic backtracking; where it trips depends on machine speed, which is why it is generous.

// errUnsupportedSyntax marks a pattern construct that translate refuses.
var errUnsupportedSyntax = errors.New("pretok: regex construct not supported")

// errInvalidSyntax marks a pattern that Oniguruma itself rejects.
var errInvalidSyntax = errors.New("pretok: invalid regex")

// regexMatchTimeout bounds one search of the general regex engine (see the match bound above).
var regexMatchTimeout = 2 * time.Second

// MatchError is a general regex that exceeded its match bound on some text.
type MatchError struct {
	Path    string // the pattern's JSON path in tokenizer.json, e.g. pre_tokenizer.pretokenizers[0].pattern
	Pattern string // the pattern as written
	Err     error  // regexp2's error
}

func (e *MatchError) Error() string {
	return fmt.Sprintf("%s: regex %q exceeded its match bound (%v per search; catastrophic backtracking, which "+
		"Hugging Face tokenizers refuses with Oniguruma's retry-limit-in-match): %v", e.Path, e.Pattern, regexMatchTimeout, e.Err)
}

func (e *MatchError) Unwrap() error { return e.Err }

// regexPattern matches a compiled general regex with the iteration of the onig crate's find_iter.
type regexPattern struct {
	re      *regexp2.Regexp
	path    string // JSON path of the pattern, for MatchError
	pattern string
}

func compileRegex(pattern string) (*regexPattern, error) {
	t, err := translate(pattern)
	if err != nil {
		return nil, err
	}
	re, err := regexp2.Compile(t, regexp2.Multiline, regexp2.OptionMaxBacktrackingStackSize(-1))
	if err != nil {
		return nil, fmt.Errorf("%w: compile %q: %v", errUnsupportedSyntax, pattern, err)
	}
	re.MatchTimeout = regexMatchTimeout
	return &regexPattern{re: re, pattern: pattern}, nil
}

const maxPooledRunes = 1 << 20

type runeBuf struct {
	runes []rune
	offs  []int
}

var runeBufPool = sync.Pool{New: func() any { return new(runeBuf) }}

// feed passes the matches of the regex in s, and the gaps between them, to k. Like the onig crate's
// find_iter, it searches again from the end of each match, and drops an empty match found where the previous
// match ended (then searches again one character further).
func (p *regexPattern) feed(s string, k *sink) {
	buf := runeBufPool.Get().(*runeBuf)
	runes, offs := buf.runes[:0], buf.offs[:0]
	for i, r := range s { // an invalid byte is one U+FFFD rune
		runes = append(runes, r)
		offs = append(offs, i)
	}
	offs = append(offs, len(s))
	prev, last, lastMatchEnd := 0, 0, -1
	for last <= len(runes) {
		m, err := p.re.FindRunesMatchStartingAt(runes, last)
		if err != nil {
			k.err = &MatchError{Path: p.path, Pattern: p.pattern, Err: err}
			break
		}
		if m == nil {
			break
		}
		st, en := m.RuneIndex, m.RuneIndex+m.RuneLength
		if st == en && en == lastMatchEnd {
			last++
			continue
		}
		last, lastMatchEnd = en, en
		bs, be := offs[st], offs[en]
		if prev != bs {
			k.piece(prev, bs, false)
		}
		k.piece(bs, be, true)
		prev = be
	}
	if prev != len(s) {
		k.piece(prev, len(s), false)
	}
	if cap(runes) <= maxPooledRunes { // do not let one huge text pin its buffers
		buf.runes, buf.offs = runes, offs
		runeBufPool.Put(buf)
	}
}

// translate rewrites an Oniguruma (Ruby syntax) pattern for regexp2; see the comment at the top of the file.
func translate(p string) (string, error) {
	var b strings.Builder
	b.Grow(len(p))
	inClass := false
	depth := 0          // nested classes inside the class (flattened: a union)
	classStart := false // just after [ or [^
	for i := 0; i < len(p); {
		r, n := utf8.DecodeRuneInString(p[i:])
		if r == utf8.RuneError && n <= 1 {
			return "", fmt.Errorf("%w: pattern is not valid UTF-8", errInvalidSyntax)
		}
		wasStart := classStart
		classStart = false
		switch {
		case r == '\\':
			adv, err := translateEscape(&b, p, i, inClass)
			if err != nil {
				return "", err
			}
			i += adv
			continue
		case inClass && r == '[':
			// A nested class is a union: flatten it, unless it is negated, a POSIX bracket, or starts with '-'
			// (which flattening would turn into a range).
			if strings.HasPrefix(p[i:], "[^") || strings.HasPrefix(p[i:], "[:") || strings.HasPrefix(p[i:], "[-") ||
				strings.HasPrefix(p[i:], "[]") || p[i-1] == '-' {
				return "", fmt.Errorf("%w: nested class at offset %d", errUnsupportedSyntax, i)
			}
			depth++
			i++
			continue
		case inClass && r == '&' && strings.HasPrefix(p[i:], "&&"):
			return "", fmt.Errorf("%w: class intersection && at offset %d", errUnsupportedSyntax, i)
		case inClass && r == ']' && depth > 0:
			depth--
			i++
			if i < len(p) && p[i] == '-' {
				return "", fmt.Errorf("%w: '-' after a nested class at offset %d", errUnsupportedSyntax, i)
			}
			continue
		case inClass && r == ']' && !wasStart:
			inClass = false
		case !inClass && r == '[':
			inClass, classStart = true, true
			b.WriteByte('[')
			i++
			if i < len(p) && p[i] == '^' {
				b.WriteByte('^')
				i++
			}
			continue
		case !inClass && r == '(' && strings.HasPrefix(p[i:], "(?"):
			adv, err := translateGroup(&b, p, i)
			if err != nil {
				return "", err
			}
			i += adv
			continue
		case !inClass && r == '{':
			if adv, ok := translateInterval(&b, p, i); ok {
				i += adv
				if i < len(p) && p[i] == '+' {
					return "", fmt.Errorf("%w: interval followed by + at offset %d", errUnsupportedSyntax, i)
				}
				continue
			}
		}
		b.WriteString(p[i : i+n])
		i += n
	}
	return b.String(), nil
}

// translateInterval copies the interval quantifier at p[i] ('{'), writing {,n} as {0,n}. ok is false when
// p[i:] is not an interval (then '{' is a literal, in both syntaxes).
func translateInterval(b *strings.Builder, p string, i int) (int, bool) {
	j := i + 1
	lo := j
	for j < len(p) && p[j] >= '0' && p[j] <= '9' {
		j++
	}
	hasLo := j > lo
	hasHi := false
	comma := j < len(p) && p[j] == ','
	if comma {
		j++
		hi := j
		for j < len(p) && p[j] >= '0' && p[j] <= '9' {
			j++
		}
		hasHi = j > hi
	}
	if j >= len(p) || p[j] != '}' || !hasLo && !hasHi {
		return 0, false
	}
	if !hasLo {
		b.WriteString("{0")
		b.WriteString(p[i+1 : j+1])
	} else {
		b.WriteString(p[i : j+1])
	}
	return j + 1 - i, true
}

// translateGroup handles "(?" at p[i].
func translateGroup(b *strings.Builder, p string, i int) (int, error) {
	rest := p[i+2:]
	switch {
	case rest == "":
		return 0, fmt.Errorf("%w: unterminated group at offset %d", errInvalidSyntax, i)
	case strings.HasPrefix(rest, "~"), strings.HasPrefix(rest, "("):
		return 0, fmt.Errorf("%w: group (?%c at offset %d", errUnsupportedSyntax, rest[0], i)
	case strings.HasPrefix(rest, "#"):
		end := strings.IndexByte(rest, ')')
		if end < 0 {
			return 0, fmt.Errorf("%w: unterminated comment at offset %d", errInvalidSyntax, i)
		}
		return 2 + end + 1, nil // comments dropped
	case strings.ContainsRune(":=!>", rune(rest[0])), strings.HasPrefix(rest, "<"), strings.HasPrefix(rest, "'"):
		b.WriteString("(?")
		return 2, nil
	}
	// Option group: (?imx-imx) or (?imx-imx:...).
	j := 0
	for j < len(rest) && rest[j] != ')' && rest[j] != ':' {
		j++
	}
	if j == len(rest) {
		return 0, fmt.Errorf("%w: unterminated group at offset %d", errInvalidSyntax, i)
	}
	b.WriteString("(?")
	for _, c := range []byte(rest[:j]) {
		switch c {
		case 'i', 'x', '-':
			b.WriteByte(c)
		case 'm':
			b.WriteByte('s')
		case 's':
			return 0, fmt.Errorf("%w: undefined group option s at offset %d", errInvalidSyntax, i)
		default:
			return 0, fmt.Errorf("%w: group option %q at offset %d", errUnsupportedSyntax, c, i)
		}
	}
	b.WriteByte(rest[j])
	return 2 + j + 1, nil
}

// translateEscape handles the backslash at p[i] and returns how many bytes it consumed.
func translateEscape(b *strings.Builder, p string, i int, inClass bool) (int, error) {
	if i+1 >= len(p) {
		return 0, fmt.Errorf("%w: trailing backslash", errInvalidSyntax)
	}
	c := p[i+1]
	switch c {
	case 'p', 'P':
		name, adv, ok := propertyName(p, i)
		if !ok {
			return 0, fmt.Errorf("%w: bad \\%c at offset %d", errInvalidSyntax, c, i)
		}
		neg := c == 'P'
		if strings.HasPrefix(name, "^") {
			neg, name = !neg, name[1:]
		}
		if rs, ok := categoryRanges(name); ok {
			writeClass(b, rs, neg, inClass)
			return adv, nil
		}
		if neg {
			b.WriteString(`\P{`)
		} else {
			b.WriteString(`\p{`)
		}
		b.WriteString(name)
		b.WriteByte('}')
		return adv, nil
	case 'w', 'W':
		rs := onigWordRanges[:]
		if inClass { // Oniguruma's [\w] is narrower than its \w
			rs = onigWordInClassRanges[:]
		}
		writeClass(b, rs, c == 'W', inClass)
		return 2, nil
	case 'd', 'D':
		rs, _ := categoryRanges("Nd")
		writeClass(b, rs, c == 'D', inClass)
		return 2, nil
	case 'h', 'H':
		writeClass(b, [][2]rune{{'0', '9'}, {'A', 'F'}, {'a', 'f'}}, c == 'H', inClass)
		return 2, nil
	case 'b', 'B':
		if inClass { // backspace inside a class, in both syntaxes
			break
		}
		var w strings.Builder
		writeClass(&w, onigWordRanges[:], false, false)
		wc := w.String()
		if c == 'b' {
			b.WriteString("(?:(?<=" + wc + ")(?!" + wc + ")|(?<!" + wc + ")(?=" + wc + "))")
		} else {
			b.WriteString("(?:(?<=" + wc + ")(?=" + wc + ")|(?<!" + wc + ")(?!" + wc + "))")
		}
		return 2, nil
	case 'K', 'X', 'O', 'N', 'y', 'Y', 'g', 'Q', 'E':
		return 0, fmt.Errorf("%w: \\%c at offset %d", errUnsupportedSyntax, c, i)
	}
	if c >= utf8.RuneSelf {
		_, n := utf8.DecodeRuneInString(p[i+1:])
		b.WriteString(p[i : i+1+n])
		return 1 + n, nil
	}
	b.WriteString(p[i : i+2])
	return 2, nil
}

// propertyName parses \pX, \p{Name} or \p{^Name} at p[i].
func propertyName(p string, i int) (name string, adv int, ok bool) {
	if i+2 >= len(p) {
		return "", 0, false
	}
	if p[i+2] != '{' {
		r, n := utf8.DecodeRuneInString(p[i+2:])
		return string(r), 2 + n, r != utf8.RuneError
	}
	end := strings.IndexByte(p[i+3:], '}')
	if end <= 0 {
		return "", 0, false
	}
	return p[i+3 : i+3+end], 3 + end + 1, true
}

// categoryAliases maps Oniguruma's long general category names (normalized: lower case, no space, '_' or
// '-') to the short ones.
var categoryAliases = map[string]string{
	"letter": "l", "casedletter": "lc", "uppercaseletter": "lu", "lowercaseletter": "ll", "titlecaseletter": "lt",
	"modifierletter": "lm", "otherletter": "lo", "mark": "m", "combiningmark": "m", "nonspacingmark": "mn",
	"spacingmark": "mc", "enclosingmark": "me", "number": "n", "decimalnumber": "nd", "letternumber": "nl",
	"othernumber": "no", "punctuation": "p", "connectorpunctuation": "pc", "dashpunctuation": "pd",
	"openpunctuation": "ps", "closepunctuation": "pe", "initialpunctuation": "pi", "finalpunctuation": "pf",
	"otherpunctuation": "po", "symbol": "s", "mathsymbol": "sm", "currencysymbol": "sc", "modifiersymbol": "sk",
	"othersymbol": "so", "separator": "z", "spaceseparator": "zs", "lineseparator": "zl",
	"paragraphseparator": "zp", "other": "c", "control": "cc", "format": "cf", "privateuse": "co",
	"unassigned": "cn",
}

// categoryRanges returns the code points of a general category or category group name (matched loosely, as
// Oniguruma reads property names), or ok=false for other names.
func categoryRanges(name string) ([][2]rune, bool) {
	n := strings.ToLower(strings.NewReplacer(" ", "", "_", "", "-", "").Replace(name))
	if a, ok := categoryAliases[n]; ok {
		n = a
	}
	var set [gcCount]bool
	switch {
	case len(n) == 1 && strings.Contains("lmnpszc", n):
		for c := gc(0); c < gcCount; c++ {
			set[c] = strings.ToLower(gcNames[c][:1]) == n
		}
		if n == "c" { // C also holds the unassigned code points
			return mergeRanges(complementRanges(assignedRanges(nil)), assignedRanges(&set)), true
		}
	case n == "lc":
		set[gcLu], set[gcLl], set[gcLt] = true, true, true
	case n == "cn":
		return complementRanges(assignedRanges(nil)), true
	default:
		found := false
		for c := gc(0); c < gcCount; c++ {
			if strings.ToLower(gcNames[c]) == n {
				set[c], found = true, true
			}
		}
		if !found {
			return nil, false
		}
	}
	return assignedRanges(&set), true
}

// assignedRanges returns the gcRanges whose category is in set (all of them when set is nil), merged.
func assignedRanges(set *[gcCount]bool) [][2]rune {
	var out [][2]rune
	for _, g := range gcRanges {
		if set != nil && !set[g.cat] {
			continue
		}
		if len(out) > 0 && out[len(out)-1][1]+1 == g.lo {
			out[len(out)-1][1] = g.hi
		} else {
			out = append(out, [2]rune{g.lo, g.hi})
		}
	}
	return out
}

// complementRanges returns the code points outside rs (sorted, disjoint), surrogates excluded.
func complementRanges(rs [][2]rune) [][2]rune {
	var out [][2]rune
	next := rune(0)
	add := func(lo, hi rune) {
		for _, part := range [][2]rune{{lo, min(hi, 0xD7FF)}, {max(lo, 0xE000), hi}} {
			if part[0] <= part[1] {
				out = append(out, part)
			}
		}
	}
	for _, r := range rs {
		if r[0] > next {
			add(next, r[0]-1)
		}
		next = r[1] + 1
	}
	if next <= utf8.MaxRune {
		add(next, utf8.MaxRune)
	}
	return out
}

// mergeRanges merges two sorted range lists.
func mergeRanges(a, b [][2]rune) [][2]rune {
	all := append(append([][2]rune(nil), a...), b...)
	slices.SortFunc(all, func(x, y [2]rune) int { return cmp.Compare(x[0], y[0]) })
	var out [][2]rune
	for _, r := range all {
		if len(out) > 0 && out[len(out)-1][1]+1 >= r[0] {
			out[len(out)-1][1] = max(out[len(out)-1][1], r[1])
		} else {
			out = append(out, r)
		}
	}
	return out
}

// writeClass writes the code points rs (or their complement) as class items when inside a class, else as a
// bracketed class.
func writeClass(b *strings.Builder, rs [][2]rune, neg, inClass bool) {
	if inClass {
		if neg {
			rs = complementRanges(rs)
		}
		writeRanges(b, rs)
		return
	}
	// Oniguruma does not case-fold property classes ((?i)\p{Lu} matches only upper case); regexp2 would.
	b.WriteString("(?-i:[")
	if neg {
		b.WriteByte('^')
	}
	writeRanges(b, rs)
	b.WriteString("])")
}

func writeRanges(b *strings.Builder, rs [][2]rune) {
	for _, r := range rs {
		writeRune(b, r[0])
		if r[1] != r[0] {
			b.WriteByte('-')
			writeRune(b, r[1])
		}
	}
}

func writeRune(b *strings.Builder, r rune) {
	b.WriteString(`\x{`)
	b.WriteString(strconv.FormatInt(int64(r), 16))
	b.WriteByte('}')
}
