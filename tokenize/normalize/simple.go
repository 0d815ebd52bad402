package normalize

import (
	"strings"
	"unicode/utf8"

	"github.com/gload/gload/tokenize/tokjson"
)

// sequence applies its normalizers in order.
type sequence []Normalizer

func (q sequence) Normalize(s string) string {
	for _, n := range q {
		s = n.Normalize(s)
	}
	return s
}

// lowercase maps every code point through Rust's char::to_lowercase (so 'İ' gives "i̇", and there is no final
// sigma rule).
type lowercase struct{}

func (lowercase) Normalize(s string) string {
	i := 0
	for i < len(s) {
		c := s[i]
		if c >= utf8.RuneSelf {
			break
		}
		if 'A' <= c && c <= 'Z' {
			break
		}
		i++
	}
	if i == len(s) {
		return s
	}
	t := tables()
	j := i
	for j < len(s) {
		if c := s[j]; c < utf8.RuneSelf {
			if 'A' <= c && c <= 'Z' {
				break
			}
			j++
			continue
		}
		r, size := utf8.DecodeRuneInString(s[j:])
		if t.get(r).flags&fLower != 0 || (r == utf8.RuneError && size == 1) {
			break
		}
		j += size
	}
	if j == len(s) {
		return s
	}
	var b strings.Builder
	b.Grow(len(s) + 8)
	b.WriteString(s[:j])
	for _, r := range s[j:] {
		if r < utf8.RuneSelf {
			if 'A' <= r && r <= 'Z' {
				r += 'a' - 'A'
			}
			b.WriteByte(byte(r))
			continue
		}
		if p := t.get(r); p.flags&fLower != 0 {
			b.WriteString(p.lower)
			continue
		}
		b.WriteRune(r)
	}
	return b.String()
}

// strip removes leading and/or trailing white space (Rust's char::is_whitespace).
type strip struct{ left, right bool }

func isWhite(t *unicodeTables, r rune) bool {
	if r < utf8.RuneSelf {
		return r == ' ' || ('\t' <= r && r <= '\r')
	}
	return t.get(r).flags&fWhite != 0
}

func (n strip) Normalize(s string) string {
	t := tables()
	start, end := 0, len(s)
	if n.left {
		for start < end {
			r, size := utf8.DecodeRuneInString(s[start:])
			if !isWhite(t, r) {
				break
			}
			start += size
		}
	}
	if n.right {
		for end > start {
			r, size := utf8.DecodeLastRuneInString(s[start:end])
			if !isWhite(t, r) {
				break
			}
			end -= size
		}
	}
	return s[start:end]
}

// filterRunes drops the code points for which drop is true; it returns s itself when none is dropped.
func filterRunes(s string, drop func(r rune) bool) string {
	for i := 0; i < len(s); {
		r, size := rune(s[i]), 1
		if r >= utf8.RuneSelf {
			r, size = utf8.DecodeRuneInString(s[i:])
		}
		if drop(r) || (r == utf8.RuneError && size == 1) { // invalid UTF-8 is written as U+FFFD
			var b strings.Builder
			b.Grow(len(s))
			b.WriteString(s[:i])
			for _, r := range s[i:] {
				if !drop(r) {
					b.WriteRune(r)
				}
			}
			return b.String()
		}
		i += size
	}
	return s
}

// stripAccents removes the combining marks (General_Category=M in HF's tables); it does not decompose first.
type stripAccents struct{}

func (stripAccents) Normalize(s string) string {
	t := tables()
	return filterRunes(s, func(r rune) bool { return r >= 0x300 && t.get(r).flags&fCombining != 0 })
}

// prepend adds a prefix to non-empty text.
type prepend struct{ prefix string }

func (n prepend) Normalize(s string) string {
	if s == "" {
		return s
	}
	return n.prefix + s
}

// nmt is SentencePiece's NMT normalization: drop some control characters, map some spaces to ' '.
type nmt struct{}

func nmtMap(r rune) (rune, bool) {
	switch {
	case r >= 0x01 && r <= 0x08, r == 0x0B, r >= 0x0E && r <= 0x1F, r == 0x7F, r == 0x8F, r == 0x9F:
		return 0, false
	case r == 0x09, r == 0x0A, r == 0x0C, r == 0x0D, r == 0x1680, r >= 0x200B && r <= 0x200F,
		r == 0x2028, r == 0x2029, r == 0x2581, r == 0xFEFF, r == 0xFFFD:
		return ' ', true
	}
	return r, true
}

func (nmt) Normalize(s string) string {
	changed := !utf8.ValidString(s)
	if !changed {
		for _, r := range s {
			if m, keep := nmtMap(r); !keep || m != r {
				changed = true
				break
			}
		}
	}
	if !changed {
		return s
	}
	var b strings.Builder
	b.Grow(len(s))
	for _, r := range s {
		if m, keep := nmtMap(r); keep {
			b.WriteRune(m)
		}
	}
	return b.String()
}

// byteLevel maps every byte of the UTF-8 text to its GPT-2 byte-level code point.
type byteLevel struct{}

func (byteLevel) Normalize(s string) string {
	if s == "" {
		return s
	}
	var b strings.Builder
	b.Grow(len(s) * 2)
	for i := 0; i < len(s); i++ {
		b.WriteRune(tokjson.ByteToRune[s[i]])
	}
	return b.String()
}
