package normalize

import (
	"unicode/utf8"
)

// bert is BertNormalizer: clean_text, handle_chinese_chars, strip_accents (NFD then drop Mn), lowercase, in that
// order.
type bert struct {
	clean, chinese, stripAccents, lower bool
}

// isChinese is BERT's "CJK character" test (the ranges of HF's is_chinese_char).
func isChinese(r rune) bool {
	switch {
	case r >= 0x4E00 && r <= 0x9FFF, r >= 0x3400 && r <= 0x4DBF, r >= 0x20000 && r <= 0x2A6DF,
		r >= 0x2A700 && r <= 0x2B73F, r >= 0x2B740 && r <= 0x2B81F, r >= 0x2B920 && r <= 0x2CEAF,
		r >= 0xF900 && r <= 0xFAFF, r >= 0x2F800 && r <= 0x2FA1F:
		return true
	}
	return false
}

func (n *bert) Normalize(s string) string {
	if out, ok := n.ascii(s); ok {
		return out
	}
	t := tables()
	if n.clean || n.chinese {
		s = n.cleanAndPad(t, s)
	}
	if n.stripAccents {
		s = nfd.Normalize(s)
		return lowerFilter(t, s, fMn, n.lower)
	}
	if n.lower {
		return lowercase{}.Normalize(s)
	}
	return s
}

// ascii handles pure-ASCII text (no CJK, NFD is the identity, no marks); ok is false for other text.
func (n *bert) ascii(s string) (string, bool) {
	change := false
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c >= utf8.RuneSelf:
			return "", false
		case n.clean && (c < ' ' || c == 0x7F):
			change = true
		case n.lower && 'A' <= c && c <= 'Z':
			change = true
		}
	}
	if !change {
		return s, true
	}
	b := make([]byte, 0, len(s))
	for i := 0; i < len(s); i++ {
		c := s[i]
		if n.clean && (c < ' ' || c == 0x7F) {
			if c == '\t' || c == '\n' || c == '\r' {
				b = append(b, ' ')
			}
			continue
		}
		if n.lower && 'A' <= c && c <= 'Z' {
			c += 'a' - 'A'
		}
		b = append(b, c)
	}
	return string(b), true
}

func (n *bert) cleanAndPad(t *unicodeTables, s string) string {
	var b []byte // nil until the first change
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			if !n.clean || (c >= ' ' && c != 0x7F) {
				if b != nil {
					b = append(b, c)
				}
				i++
				continue
			}
			if b == nil {
				b = append(make([]byte, 0, len(s)+len(s)/4+16), s[:i]...)
			}
			if c == '\t' || c == '\n' || c == '\r' {
				b = append(b, ' ')
			}
			i++
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		drop, space := false, false
		if n.clean {
			p := t.get(r)
			drop = p.flags&fBertDrop != 0 // includes U+FFFD, so invalid UTF-8
			space = p.flags&fBertSpace != 0
		}
		pad := n.chinese && !drop && isChinese(r)
		if !drop && !space && !pad && !(r == utf8.RuneError && size == 1) {
			if b != nil {
				b = append(b, s[i:i+size]...)
			}
			i += size
			continue
		}
		if b == nil {
			b = append(make([]byte, 0, len(s)+len(s)/4+16), s[:i]...)
		}
		switch {
		case drop:
		case space:
			b = append(b, ' ')
		case pad:
			b = append(b, ' ')
			b = append(b, s[i:i+size]...)
			b = append(b, ' ')
		default:
			b = utf8.AppendRune(b, r)
		}
		i += size
	}
	if b == nil {
		return s
	}
	return string(b)
}

// lowerFilter drops the code points with flag drop and, when lower is set, lowercases the others.
func lowerFilter(t *unicodeTables, s string, drop uint16, lower bool) string {
	var b []byte // nil until the first change
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			if lower && 'A' <= c && c <= 'Z' {
				if b == nil {
					b = append(make([]byte, 0, len(s)+8), s[:i]...)
				}
				c += 'a' - 'A'
			}
			if b != nil {
				b = append(b, c)
			}
			i++
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		p := t.get(r)
		keep := p.flags&drop == 0
		low := lower && p.flags&fLower != 0
		if keep && !low && !(r == utf8.RuneError && size == 1) {
			if b != nil {
				b = append(b, s[i:i+size]...)
			}
			i += size
			continue
		}
		if b == nil {
			b = append(make([]byte, 0, len(s)+8), s[:i]...)
		}
		switch {
		case !keep:
		case low:
			b = append(b, p.lower...)
		default:
			b = utf8.AppendRune(b, r)
		}
		i += size
	}
	if b == nil {
		return s
	}
	return string(b)
}
