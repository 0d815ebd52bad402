package pretok

import "unicode/utf8"

// Hand-written scanners for the split regexes of the common byte-level tokenizers. Go's regexp has no
// lookahead, and a backtracking engine is slow, so each scanner reproduces, for its one pattern, what
// Oniguruma's leftmost-first backtracking search returns: alternatives tried in order, greedy quantifiers
// giving back one character at a time.
//
// Every character of the input starts a match of these patterns (each character is a letter, a number,
// whitespace or something else, and each kind has an alternative), so a scanner is a function next(s, i)
// returning the end of the match that starts at i; the matches tile the input.

// The exact pattern strings, as they appear in tokenizer.json files.
const (
	patternGPT2   = `'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+`
	patternCL100K = `(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+`
	patternQwen2  = `(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+`
	patternO200K  = `[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+(?i:'s|'t|'re|'ve|'m|'ll|'d)?|[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*(?i:'s|'t|'re|'ve|'m|'ll|'d)?|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+`
)

// scanKind names a hand-written scanner.
type scanKind uint8

const (
	scanGPT2 scanKind = iota + 1
	scanCL100K
	scanQwen2
	scanO200K
)

// scannerFor returns the scanner that implements pattern exactly, or 0.
func scannerFor(pattern string) scanKind {
	switch pattern {
	case patternGPT2:
		return scanGPT2
	case patternCL100K:
		return scanCL100K
	case patternQwen2:
		return scanQwen2
	case patternO200K:
		return scanO200K
	}
	return 0
}

// feed passes the matches of the scanner's pattern in s to k (they cover s, so there are no gaps).
func (sk scanKind) feed(s string, k *sink) {
	switch sk {
	case scanGPT2:
		for i := 0; i < len(s); {
			e := nextGPT2(s, i)
			k.piece(i, e, true)
			i = e
		}
	case scanCL100K:
		for i := 0; i < len(s); {
			e := nextCL100K(s, i, 3)
			k.piece(i, e, true)
			i = e
		}
	case scanQwen2:
		for i := 0; i < len(s); {
			e := nextCL100K(s, i, 1)
			k.piece(i, e, true)
			i = e
		}
	case scanO200K:
		for i := 0; i < len(s); {
			e := nextO200K(s, i)
			k.piece(i, e, true)
			i = e
		}
	}
}

// appendMatches appends the matches of the scanner's pattern in s (non-empty, covering s) to dst.
func (sk scanKind) appendMatches(s string, dst []string) []string {
	switch sk {
	case scanGPT2:
		for i := 0; i < len(s); {
			e := nextGPT2(s, i)
			dst = append(dst, s[i:e])
			i = e
		}
	case scanCL100K:
		for i := 0; i < len(s); {
			e := nextCL100K(s, i, 3)
			dst = append(dst, s[i:e])
			i = e
		}
	case scanQwen2:
		for i := 0; i < len(s); {
			e := nextCL100K(s, i, 1)
			dst = append(dst, s[i:e])
			i = e
		}
	case scanO200K:
		for i := 0; i < len(s); {
			e := nextO200K(s, i)
			dst = append(dst, s[i:e])
			i = e
		}
	}
	return dst
}

// appendMatchesFrom is appendMatches a batch at a time: it appends the matches that start at byte i of s and
// after it, stopping after limit of them, and returns where the next batch starts (len(s) when none is left).
// The matches of one scan do not depend on where it paused: next(s, i) reads s only from i on, so batches
// from 0 until len(s) append exactly what appendMatches(s, dst) does.
func (sk scanKind) appendMatchesFrom(s string, i, limit int, dst []string) ([]string, int) {
	for n := 0; i < len(s) && n < limit; n++ {
		var e int
		switch sk {
		case scanGPT2:
			e = nextGPT2(s, i)
		case scanCL100K:
			e = nextCL100K(s, i, 3)
		case scanQwen2:
			e = nextCL100K(s, i, 1)
		case scanO200K:
			e = nextO200K(s, i)
		default:
			return dst, len(s)
		}
		dst = append(dst, s[i:e])
		i = e
	}
	return dst, i
}

// contraction matches `'s|'t|'re|'ve|'m|'ll|'d` at i, case-insensitively when fold is set (Oniguruma's
// (?i) also lets U+017F LATIN SMALL LETTER LONG S match 's'; no other non-ASCII character folds onto these
// letters). It returns the end of the match or -1.
func contraction(s string, i int, fold bool) int {
	if i+1 >= len(s) || s[i] != '\'' {
		return -1
	}
	c := s[i+1]
	if fold {
		if c == 0xC5 && i+2 < len(s) && s[i+2] == 0xBF { // ſ
			return i + 3
		}
		if c >= 'A' && c <= 'Z' {
			c += 'a' - 'A'
		}
	}
	switch c {
	case 's', 't', 'm', 'd':
		return i + 2
	case 'r', 'v', 'l':
		if i+2 >= len(s) {
			return -1
		}
		want := byte('e')
		if c == 'l' {
			want = 'l'
		}
		d := s[i+2]
		if d == want || fold && d == want-0x20 {
			return i + 3
		}
	}
	return -1
}

// spaceTail matches, at a whitespace character i, what is left of the patterns once the letter, number and
// punctuation alternatives have failed: `\s*[\r\n]+|\s+(?!\S)|\s+` when nl is set, `\s+(?!\S)|\s+`
// otherwise.
func spaceTail(s string, i int, nl bool) int {
	j := runWhile(s, i, cS)
	if nl {
		// \s*[\r\n]+: the whitespace run up to and including its last \r or \n.
		for k := j - 1; k >= i; k-- {
			if s[k] == '\n' || s[k] == '\r' {
				return k + 1
			}
		}
	}
	if j == len(s) {
		return j
	}
	// \s+(?!\S): all but the last whitespace character, when that leaves at least one.
	_, n := utf8.DecodeLastRuneInString(s[i:j])
	if j-n > i {
		return j - n
	}
	return j // \s+
}

// nextGPT2 scans `'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+` at i.
func nextGPT2(s string, i int) int {
	b := s[i]
	if b == '\'' {
		if e := contraction(s, i, false); e > 0 {
			return e
		}
	}
	if b == ' ' && i+1 < len(s) {
		c1 := classByte(s, i+1)
		switch {
		case c1&cL != 0:
			return letterRun(s, i+1)
		case c1&cN != 0:
			return runWhile(s, i+1, cN)
		case c1&cS == 0:
			return otherRun(s, i+1)
		}
	}
	c0 := classByte(s, i)
	switch {
	case c0&cL != 0:
		return letterRun(s, i)
	case c0&cN != 0:
		return runWhile(s, i, cN)
	case c0&cS == 0:
		return otherRun(s, i)
	}
	return spaceTail(s, i, false)
}

// gpt2AfterSpace returns x such that the first GPT-2 match in " "+s is " "+s[:x] (s non-empty). The pattern
// has no lookbehind, so the matches after it are those of s[x:].
func gpt2AfterSpace(s string) int {
	c := classByte(s, 0)
	switch {
	case c&cL != 0:
		return letterRun(s, 0)
	case c&cN != 0:
		return runWhile(s, 0, cN)
	case c&cS == 0:
		return otherRun(s, 0)
	}
	// The added space starts a whitespace run: \s+(?!\S) leaves out the run's last character unless the run
	// ends the text.
	j := runWhile(s, 0, cS)
	if j == len(s) {
		return j
	}
	_, n := utf8.DecodeLastRuneInString(s[:j])
	return j - n
}

// nextCL100K scans the cl100k / Llama-3 pattern at i (maxDigits 3), or Qwen2's (maxDigits 1):
// `(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+`.
func nextCL100K(s string, i int, maxDigits int) int {
	b := s[i]
	if b == '\'' {
		if e := contraction(s, i, true); e > 0 {
			return e
		}
	}
	c0, n0 := asciiClass[b], 1
	if b >= utf8.RuneSelf {
		c0, n0 = classAtRune(s, i)
	}
	// [^\r\n\p{L}\p{N}]?\p{L}+
	if c0&(cL|cN) == 0 && b != '\r' && b != '\n' && i+n0 < len(s) {
		if classByte(s, i+n0)&cL != 0 {
			return letterRun(s, i+n0)
		}
	}
	if c0&cL != 0 {
		return letterRun(s, i)
	}
	// \p{N}{1,maxDigits}
	if c0&cN != 0 {
		j := i
		for d := 0; d < maxDigits && j < len(s); d++ {
			c, n := classAt(s, j)
			if c&cN == 0 {
				break
			}
			j += n
		}
		return j
	}
	// ' ?[^\s\p{L}\p{N}]+[\r\n]*'
	if b == ' ' && i+1 < len(s) {
		if c1 := classByte(s, i+1); c1&(cS|cL|cN) == 0 {
			return newlines(s, otherRun(s, i+1), false)
		}
	}
	if c0&cS == 0 {
		return newlines(s, otherRun(s, i), false)
	}
	return spaceTail(s, i, true)
}

// newlines extends j over [\r\n]*, or [\r\n/]* when slash is set.
func newlines(s string, j int, slash bool) int {
	for j < len(s) && (s[j] == '\r' || s[j] == '\n' || slash && s[j] == '/') {
		j++
	}
	return j
}

// nextO200K scans the o200k pattern (see patternO200K) at i. Its first two alternatives are
//
//	A1 [^\r\n\p{L}\p{N}]?U*W+C?   A2 [^\r\n\p{L}\p{N}]?U+W*C?
//
// with U = [\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}], W = [\p{Ll}\p{Lm}\p{Lo}\p{M}] and C the case-insensitive
// contractions. The regex tries A1 with the optional prefix, A1 without, then A2 likewise.
func nextO200K(s string, i int) int {
	b := s[i]
	c0, n0 := asciiClass[b], 1
	if b >= utf8.RuneSelf {
		c0, n0 = classAtRune(s, i)
	}
	prefix := c0&(cL|cN) == 0 && b != '\r' && b != '\n'
	if prefix {
		if e := o200kA1(s, i+n0); e > 0 {
			return e
		}
	}
	if c0&(cUp|cLow) != 0 {
		if e := o200kA1(s, i); e > 0 {
			return e
		}
	}
	if prefix {
		if e := o200kA2(s, i+n0); e > 0 {
			return e
		}
	}
	if c0&cUp != 0 {
		return o200kA2(s, i)
	}
	// \p{N}{1,3}
	if c0&cN != 0 {
		j := i
		for d := 0; d < 3 && j < len(s); d++ {
			c, n := classAt(s, j)
			if c&cN == 0 {
				break
			}
			j += n
		}
		return j
	}
	// ' ?[^\s\p{L}\p{N}]+[\r\n/]*'
	if b == ' ' && i+1 < len(s) {
		if c1 := classByte(s, i+1); c1&(cS|cL|cN) == 0 {
			return newlines(s, otherRun(s, i+1), true)
		}
	}
	if c0&cS == 0 {
		return newlines(s, otherRun(s, i), true)
	}
	return spaceTail(s, i, true)
}

// o200kA1 matches U*W+C? at k, or returns -1.
func o200kA1(s string, k int) int {
	u := runWhile(s, k, cUp)
	if u < len(s) {
		if classByte(s, u)&cLow != 0 {
			return o200kContraction(s, runWhile(s, u, cLow))
		}
	}
	// W+ cannot start at u: U* gives characters back until one of them is in W; W+ then holds just that
	// one (the characters after it, up to u, are not in W).
	for j := u; j > k; {
		r, n := utf8.DecodeLastRuneInString(s[k:j])
		if classOf(r)&cLow != 0 {
			return o200kContraction(s, j)
		}
		j -= n
	}
	return -1
}

// o200kA2 matches U+W*C? at k, or returns -1.
func o200kA2(s string, k int) int {
	u := runWhile(s, k, cUp)
	if u == k {
		return -1
	}
	return o200kContraction(s, runWhile(s, u, cLow))
}

// o200kContraction extends j over an optional case-insensitive contraction.
func o200kContraction(s string, j int) int {
	if j < len(s) && s[j] == '\'' {
		if e := contraction(s, j, true); e > 0 {
			return e
		}
	}
	return j
}
