// Package utf8fix replaces ill-formed UTF-8 the way Python's
// bytes.decode("utf-8", errors="replace") does, so that text read by gload
// and text decoded by Hugging Face tooling agree byte for byte.
//
// The rule is the Unicode "substitution of maximal subparts" (Unicode 15,
// chapter 3, U+FFFD substitution): every maximal subpart of an ill-formed
// sequence becomes one U+FFFD. A maximal subpart is the longest prefix of a
// well-formed sequence that the input holds, or a single byte when no
// well-formed sequence starts there. So "\xe2\x82" (a truncated euro sign)
// becomes one U+FFFD and "\xff\xfe" becomes two. This differs from
// [strings.ToValidUTF8], which collapses a whole run of invalid bytes into one
// replacement, and from a loop over [utf8.DecodeRune], which replaces byte by
// byte.
//
// The package holds only these pure functions; it must not import anything of
// gload's, so that both the corpus readers and the tokenizer engine can use it.
//
// # Caveats
//
// [ToValidUTF8] returns its argument unchanged (same backing memory) when it is
// already valid. [AppendValid] appends to dst and never retains src.
package utf8fix

import "unicode/utf8"

// replacement is U+FFFD REPLACEMENT CHARACTER encoded as UTF-8.
const replacement = "\uFFFD"

// ToValidUTF8 returns s with each maximal subpart of every ill-formed UTF-8
// sequence replaced by U+FFFD, and whether any replacement was made. Valid
// input is returned as is, without allocating.
func ToValidUTF8(s string) (string, bool) {
	if utf8.ValidString(s) {
		return s, false
	}
	out := make([]byte, 0, len(s)+len(s)/2+3)
	out = appendFixed(out, s)
	return string(out), true
}

// AppendValid appends src to dst with each maximal subpart of every
// ill-formed UTF-8 sequence replaced by U+FFFD. It reports whether any
// replacement was made.
func AppendValid(dst, src []byte) ([]byte, bool) {
	if utf8.Valid(src) {
		return append(dst, src...), false
	}
	return appendFixed(dst, string(src)), true
}

// appendFixed appends s to dst, replacing maximal subparts.
func appendFixed[S ~string | ~[]byte](dst []byte, s S) []byte {
	i := 0
	for i < len(s) {
		c := s[i]
		if c < utf8.RuneSelf {
			// Copy the ASCII run in one append.
			j := i + 1
			for j < len(s) && s[j] < utf8.RuneSelf {
				j++
			}
			dst = append(dst, s[i:j]...)
			i = j
			continue
		}
		n := wellFormedLen(s[i:])
		if n > 0 {
			dst = append(dst, s[i:i+n]...)
			i += n
			continue
		}
		dst = append(dst, replacement...)
		i += -n
	}
	return dst
}

// wellFormedLen inspects the sequence starting at s[0] (a non-ASCII byte).
// It returns the length of the well-formed sequence there (> 0), or minus the
// length of the maximal subpart to replace (< 0).
func wellFormedLen[S ~string | ~[]byte](s S) int {
	c := s[0]
	var need int                     // continuation bytes after the lead
	lo, hi := byte(0x80), byte(0xBF) // accepted range of the second byte
	switch {
	case c >= 0xC2 && c <= 0xDF:
		need = 1
	case c == 0xE0:
		need, lo = 2, 0xA0
	case c >= 0xE1 && c <= 0xEC, c == 0xEE, c == 0xEF:
		need = 2
	case c == 0xED:
		need, hi = 2, 0x9F
	case c == 0xF0:
		need, lo = 3, 0x90
	case c >= 0xF1 && c <= 0xF3:
		need = 3
	case c == 0xF4:
		need, hi = 3, 0x8F
	default:
		// 0x80..0xC1 and 0xF5..0xFF never start a well-formed sequence.
		return -1
	}
	for k := 1; k <= need; k++ {
		if k >= len(s) {
			return -k // truncated: the whole prefix is one maximal subpart
		}
		b := s[k]
		if k == 1 {
			if b < lo || b > hi {
				return -1
			}
		} else if b < 0x80 || b > 0xBF {
			return -k
		}
	}
	return need + 1
}
