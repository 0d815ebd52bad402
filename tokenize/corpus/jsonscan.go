package corpus

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"math/bits"
	"unicode/utf16"
	"unicode/utf8"
)

// This file holds a validating, single-pass JSON scanner that records where
// the wanted fields' values are without building any map or value tree. It
// accepts exactly what encoding/json accepts (RFC 8259, nesting depth at most
// 10000, any bytes >= 0x80 inside strings), which the fuzz target checks.

// maxDepth is encoding/json's nesting limit.
const maxDepth = 10000

// Value kinds recorded in a span.
const (
	kAbsent byte = iota
	kString
	kNumber
	kObject
	kArray
	kBool
	kNull
)

var kindNames = [...]string{kAbsent: "absent", kString: "a string", kNumber: "a number", kObject: "an object", kArray: "an array", kBool: "a boolean", kNull: "null"}

// span locates one value in the line: for strings the bytes between the
// quotes, for other values the whole value.
type span struct {
	start, end int
	kind       byte
	esc        bool // string holds backslash escapes
	bad        bool // string holds ill-formed UTF-8
}

// node is a trie of wanted dotted paths.
type node struct {
	name     string
	children []*node
	targets  []int // wanted paths ending here
	desc     []int // targets at or below this node
}

func (n *node) child(name string) *node {
	for _, c := range n.children {
		if c.name == name {
			return c
		}
	}
	c := &node{name: name}
	n.children = append(n.children, c)
	return c
}

// find returns the child named by the raw key bytes (escapes undone when esc).
func (n *node) find(key []byte, esc bool, tmp []byte) *node {
	if esc {
		key, _ = appendUnescaped(tmp[:0], key)
	}
	for _, c := range n.children {
		if c.name == string(key) {
			return c
		}
	}
	return nil
}

// scanner validates one JSON text and records the spans of wanted paths.
type scanner struct {
	d      []byte
	i      int
	depth  int
	spans  []span
	errMsg string
	errAt  int
	keyBuf [64]byte
}

func (s *scanner) fail(at int, format string, args ...any) bool {
	if s.errMsg == "" {
		s.errMsg = fmt.Sprintf(format, args...)
		s.errAt = at
	}
	return false
}

func (s *scanner) eofFail() bool { return s.fail(len(s.d), "unexpected end of JSON input") }

func (s *scanner) ws() {
	for s.i < len(s.d) {
		switch s.d[s.i] {
		case ' ', '\t', '\n', '\r':
			s.i++
		default:
			return
		}
	}
}

// document scans a whole line that must hold one JSON object.
func (s *scanner) document(root *node) bool {
	s.ws()
	if s.i >= len(s.d) {
		return s.eofFail()
	}
	c := s.d[s.i]
	if c != '{' {
		start := s.i
		if !s.value() {
			return false
		}
		return s.fail(start, "top-level value is %s, not an object", kindNames[kindOf(c)])
	}
	if !s.object(root) {
		return false
	}
	s.ws()
	if s.i < len(s.d) {
		return s.fail(s.i, "invalid character %s after top-level value", quoteChar(s.d[s.i]))
	}
	return true
}

func kindOf(c byte) byte {
	switch c {
	case '"':
		return kString
	case '{':
		return kObject
	case '[':
		return kArray
	case 't', 'f':
		return kBool
	case 'n':
		return kNull
	}
	return kNumber
}

// value scans any value, after optional whitespace.
func (s *scanner) value() bool {
	s.ws()
	if s.i >= len(s.d) {
		return s.eofFail()
	}
	switch c := s.d[s.i]; c {
	case '{':
		return s.object(nil)
	case '[':
		return s.array()
	case '"':
		_, _, ok := s.str()
		return ok
	case 't':
		return s.literal("true")
	case 'f':
		return s.literal("false")
	case 'n':
		return s.literal("null")
	default:
		if c == '-' || (c >= '0' && c <= '9') {
			return s.number()
		}
		return s.fail(s.i, "invalid character %s looking for beginning of value", quoteChar(c))
	}
}

// object scans an object at s.d[s.i] == '{'. With n non-nil it records the
// spans of n's wanted children; with n nil it only validates.
func (s *scanner) object(n *node) bool {
	s.depth++
	if s.depth > maxDepth {
		return s.fail(s.i, "exceeded max depth %d", maxDepth)
	}
	s.i++
	s.ws()
	if s.i < len(s.d) && s.d[s.i] == '}' {
		s.i++
		s.depth--
		return true
	}
	for {
		if s.i >= len(s.d) {
			return s.eofFail()
		}
		if s.d[s.i] != '"' {
			return s.fail(s.i, "invalid character %s looking for beginning of object key string", quoteChar(s.d[s.i]))
		}
		kstart := s.i + 1
		esc, _, ok := s.str()
		if !ok {
			return false
		}
		var child *node
		if n != nil {
			child = n.find(s.d[kstart:s.i-1], esc, s.keyBuf[:])
		}
		s.ws()
		if s.i >= len(s.d) {
			return s.eofFail()
		}
		if s.d[s.i] != ':' {
			return s.fail(s.i, "invalid character %s after object key", quoteChar(s.d[s.i]))
		}
		s.i++
		s.ws()
		if child == nil {
			if !s.value() {
				return false
			}
		} else if !s.wanted(child) {
			return false
		}
		s.ws()
		if s.i >= len(s.d) {
			return s.eofFail()
		}
		switch s.d[s.i] {
		case ',':
			s.i++
			s.ws()
		case '}':
			s.i++
			s.depth--
			return true
		default:
			return s.fail(s.i, "invalid character %s after object key:value pair", quoteChar(s.d[s.i]))
		}
	}
}

// wanted scans the value of a wanted key and records its span. A repeated
// key replaces what an earlier one recorded (last one wins, as in Python's
// json and encoding/json), nested paths included.
func (s *scanner) wanted(child *node) bool {
	for _, t := range child.desc {
		s.spans[t] = span{}
	}
	if s.i >= len(s.d) {
		return s.eofFail()
	}
	start := s.i
	c := s.d[start]
	sp := span{start: start, kind: kindOf(c)}
	var ok bool
	switch {
	case c == '"':
		sp.esc, sp.bad, ok = s.str()
		sp.start, sp.end = start+1, s.i-1
	case c == '{' && len(child.children) > 0:
		ok = s.object(child)
		sp.end = s.i
	default:
		ok = s.value()
		sp.end = s.i
	}
	if !ok {
		return false
	}
	for _, t := range child.targets {
		s.spans[t] = sp
	}
	return true
}

func (s *scanner) array() bool {
	s.depth++
	if s.depth > maxDepth {
		return s.fail(s.i, "exceeded max depth %d", maxDepth)
	}
	s.i++
	s.ws()
	if s.i < len(s.d) && s.d[s.i] == ']' {
		s.i++
		s.depth--
		return true
	}
	for {
		if !s.value() {
			return false
		}
		s.ws()
		if s.i >= len(s.d) {
			return s.eofFail()
		}
		switch s.d[s.i] {
		case ',':
			s.i++
		case ']':
			s.i++
			s.depth--
			return true
		default:
			return s.fail(s.i, "invalid character %s after array element", quoteChar(s.d[s.i]))
		}
	}
}

func (s *scanner) literal(lit string) bool {
	for k := 0; k < len(lit); k++ {
		if s.i+k >= len(s.d) {
			return s.eofFail()
		}
		if s.d[s.i+k] != lit[k] {
			return s.fail(s.i+k, "invalid character %s in literal %s (expecting %s)", quoteChar(s.d[s.i+k]), lit, quoteChar(lit[k]))
		}
	}
	s.i += len(lit)
	return true
}

func isDigit(c byte) bool { return c >= '0' && c <= '9' }

func (s *scanner) number() bool {
	d := s.d
	i := s.i
	if d[i] == '-' {
		i++
	}
	if i >= len(d) {
		return s.eofFail()
	}
	switch {
	case d[i] == '0':
		i++
	case d[i] >= '1' && d[i] <= '9':
		for i++; i < len(d) && isDigit(d[i]); i++ {
		}
	default:
		return s.fail(i, "invalid character %s in numeric literal", quoteChar(d[i]))
	}
	if i < len(d) && d[i] == '.' {
		i++
		if i >= len(d) {
			return s.eofFail()
		}
		if !isDigit(d[i]) {
			return s.fail(i, "invalid character %s after decimal point in numeric literal", quoteChar(d[i]))
		}
		for i++; i < len(d) && isDigit(d[i]); i++ {
		}
	}
	if i < len(d) && (d[i] == 'e' || d[i] == 'E') {
		i++
		if i < len(d) && (d[i] == '+' || d[i] == '-') {
			i++
		}
		if i >= len(d) {
			return s.eofFail()
		}
		if !isDigit(d[i]) {
			return s.fail(i, "invalid character %s in exponent of numeric literal", quoteChar(d[i]))
		}
		for i++; i < len(d) && isDigit(d[i]); i++ {
		}
	}
	s.i = i
	return true
}

const (
	lsb = 0x0101010101010101
	msb = 0x8080808080808080
)

// special returns a word with the high bit set in (at least) the lowest
// byte of x that is '"', '\\', a control character or >= 0x80; zero when
// there is none. Bytes above the lowest flagged one may be flagged falsely
// (borrows), so only the lowest set bit is meaningful.
func special(x uint64) uint64 {
	q := x ^ (lsb * '"')
	b := x ^ (lsb * '\\')
	return ((x - lsb*0x20) | (q-lsb)&^q | (b-lsb)&^b | x) & msb
}

// str scans a string at s.d[s.i] == '"' and leaves s.i after its closing
// quote. It reports whether the string holds escapes and ill-formed UTF-8.
func (s *scanner) str() (esc, bad, ok bool) {
	d := s.d
	i := s.i + 1
	for {
		for i+8 <= len(d) {
			if m := special(binary.LittleEndian.Uint64(d[i:])); m != 0 {
				i += bits.TrailingZeros64(m) >> 3
				break
			}
			i += 8
		}
		if i >= len(d) {
			return esc, bad, s.eofFail()
		}
		c := d[i]
		switch {
		case c == '"':
			s.i = i + 1
			return esc, bad, true
		case c == '\\':
			esc = true
			if i+1 >= len(d) {
				return esc, bad, s.eofFail()
			}
			switch d[i+1] {
			case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
				i += 2
			case 'u':
				for k := 2; k < 6; k++ {
					if i+k >= len(d) {
						return esc, bad, s.eofFail()
					}
					if unhex(d[i+k]) < 0 {
						return esc, bad, s.fail(i+k, "invalid character %s in \\u hexadecimal character escape", quoteChar(d[i+k]))
					}
				}
				i += 6
			default:
				return esc, bad, s.fail(i+1, "invalid character %s in string escape code", quoteChar(d[i+1]))
			}
		case c < 0x20:
			return esc, bad, s.fail(i, "invalid character %s in string literal", quoteChar(c))
		case c >= utf8.RuneSelf:
			// Walk a run of non-ASCII runes here rather than going back to
			// the word loop after each one.
			for i < len(d) && d[i] >= utf8.RuneSelf {
				r, size := utf8.DecodeRune(d[i:])
				if r == utf8.RuneError && size == 1 {
					bad = true
				}
				i += size
			}
		default:
			i++ // an ordinary byte in the tail shorter than a word
		}
	}
}

func unhex(c byte) int {
	switch {
	case c >= '0' && c <= '9':
		return int(c - '0')
	case c >= 'a' && c <= 'f':
		return int(c-'a') + 10
	case c >= 'A' && c <= 'F':
		return int(c-'A') + 10
	}
	return -1
}

// quoteChar formats c the way encoding/json's errors do.
func quoteChar(c byte) string {
	if c == '\'' {
		return `'\''`
	}
	if c == '"' {
		return `'"'`
	}
	if c >= 0x20 && c < 0x7f {
		return "'" + string(rune(c)) + "'"
	}
	return fmt.Sprintf("byte 0x%02x", c)
}

// read4 decodes the 4 hex digits at s[0:4]; -1 if s is short or not hex.
func read4(s []byte) rune {
	if len(s) < 4 {
		return -1
	}
	var r rune
	for _, c := range s[:4] {
		h := unhex(c)
		if h < 0 {
			return -1
		}
		r = r<<4 | rune(h)
	}
	return r
}

// appendUnescaped appends the string content s (between the quotes, already
// validated) with escapes undone. Unpaired UTF-16 surrogates become U+FFFD,
// as in encoding/json; replaced reports whether that happened. Raw bytes are
// copied as they are (ill-formed UTF-8 included).
func appendUnescaped(dst, s []byte) (out []byte, replaced bool) {
	for i := 0; i < len(s); {
		c := s[i]
		if c != '\\' {
			j := len(s)
			if k := bytes.IndexByte(s[i+1:], '\\'); k >= 0 {
				j = i + 1 + k
			}
			dst = append(dst, s[i:j]...)
			i = j
			continue
		}
		if i+1 >= len(s) {
			return dst, replaced // cannot happen on validated input
		}
		switch s[i+1] {
		case 'b':
			dst = append(dst, '\b')
		case 'f':
			dst = append(dst, '\f')
		case 'n':
			dst = append(dst, '\n')
		case 'r':
			dst = append(dst, '\r')
		case 't':
			dst = append(dst, '\t')
		case 'u':
			r := read4(s[i+2:])
			if r < 0 {
				return dst, replaced
			}
			i += 6
			if utf16.IsSurrogate(r) {
				if r < 0xDC00 && i+1 < len(s) && s[i] == '\\' && s[i+1] == 'u' {
					if r2 := read4(s[i+2:]); r2 >= 0xDC00 && r2 <= 0xDFFF {
						dst = utf8.AppendRune(dst, utf16.DecodeRune(r, r2))
						i += 6
						continue
					}
				}
				dst = utf8.AppendRune(dst, utf8.RuneError)
				replaced = true
				continue
			}
			dst = utf8.AppendRune(dst, r)
			continue
		default: // '"', '\\', '/'
			dst = append(dst, s[i+1])
		}
		i += 2
	}
	return dst, replaced
}

// appendCompact appends the JSON value v without insignificant whitespace.
func appendCompact(dst, v []byte) []byte {
	inStr, escaped := false, false
	for _, c := range v {
		if inStr {
			switch {
			case escaped:
				escaped = false
			case c == '\\':
				escaped = true
			case c == '"':
				inStr = false
			}
			dst = append(dst, c)
			continue
		}
		switch c {
		case ' ', '\t', '\n', '\r':
			continue
		case '"':
			inStr = true
		}
		dst = append(dst, c)
	}
	return dst
}
