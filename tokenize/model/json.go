package model

import (
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"unicode/utf16"
	"unicode/utf8"

	"github.com/gload/gload/tokenize/tokjson"
)

// A small strict JSON reader for the large parts of a model (vocabularies of 10⁵–10⁶ entries, merge lists):
// encoding/json scans such a document several times and allocates per element, which made loading llama3 take
// seconds. Like serde_json (and unlike encoding/json) it matches keys case-sensitively, rejects invalid UTF-8
// and lone surrogate escapes, and keeps the last of duplicate keys.

var errSyntax = errors.New("model: JSON syntax error")

type scanner struct {
	data []byte
	pos  int
	buf  []byte // unescape scratch
}

func (s *scanner) fail(what string) error {
	if s.pos >= len(s.data) {
		return fmt.Errorf("%w: %s at end of input", errSyntax, what)
	}
	return fmt.Errorf("%w: %s at offset %d", errSyntax, what, s.pos)
}

func (s *scanner) ws() {
	for s.pos < len(s.data) {
		switch s.data[s.pos] {
		case ' ', '\t', '\n', '\r':
			s.pos++
		default:
			return
		}
	}
}

// peek skips white space and returns the next byte (0 at the end).
func (s *scanner) peek() byte {
	s.ws()
	if s.pos >= len(s.data) {
		return 0
	}
	return s.data[s.pos]
}

func (s *scanner) expect(c byte) error {
	if s.peek() != c {
		return s.fail("expected " + strconv.QuoteRune(rune(c)))
	}
	s.pos++
	return nil
}

// list iterates over the elements of an array: each calls elem with the scanner at the element.
func (s *scanner) list(elem func(i int) error) error {
	if err := s.expect('['); err != nil {
		return err
	}
	if s.peek() == ']' {
		s.pos++
		return nil
	}
	for i := 0; ; i++ {
		if err := elem(i); err != nil {
			return err
		}
		switch s.peek() {
		case ',':
			s.pos++
		case ']':
			s.pos++
			return nil
		default:
			return s.fail("expected ',' or ']'")
		}
	}
}

// object iterates over the members of an object. The key passed to member is only valid during the call.
func (s *scanner) object(member func(key []byte) error) error {
	if err := s.expect('{'); err != nil {
		return err
	}
	if s.peek() == '}' {
		s.pos++
		return nil
	}
	for {
		if s.peek() != '"' {
			return s.fail("expected object key")
		}
		key, err := s.stringBytes()
		if err != nil {
			return err
		}
		if err := s.expect(':'); err != nil {
			return err
		}
		if err := member(key); err != nil {
			return err
		}
		switch s.peek() {
		case ',':
			s.pos++
		case '}':
			s.pos++
			return nil
		default:
			return s.fail("expected ',' or '}'")
		}
	}
}

// stringBytes reads a string; the result aliases the input or the scratch buffer until the next call.
func (s *scanner) stringBytes() ([]byte, error) {
	if s.peek() != '"' {
		return nil, s.fail("expected string")
	}
	s.pos++
	start := s.pos
	ascii := true
	for s.pos < len(s.data) {
		c := s.data[s.pos]
		switch {
		case c == '"':
			b := s.data[start:s.pos]
			s.pos++
			if !ascii && !utf8.Valid(b) {
				return nil, s.fail("invalid UTF-8 in string")
			}
			return b, nil
		case c == '\\':
			return s.escapedString(start)
		case c < 0x20:
			return nil, s.fail("control character in string")
		case c >= 0x80:
			ascii = false
		}
		s.pos++
	}
	return nil, s.fail("unterminated string")
}

func (s *scanner) escapedString(start int) ([]byte, error) {
	b := append(s.buf[:0], s.data[start:s.pos]...)
	for s.pos < len(s.data) {
		c := s.data[s.pos]
		switch {
		case c == '"':
			s.pos++
			s.buf = b
			if !utf8.Valid(b) {
				return nil, s.fail("invalid UTF-8 in string")
			}
			return b, nil
		case c < 0x20:
			return nil, s.fail("control character in string")
		case c != '\\':
			b = append(b, c)
			s.pos++
			continue
		}
		s.pos++
		if s.pos >= len(s.data) {
			break
		}
		e := s.data[s.pos]
		s.pos++
		switch e {
		case '"', '\\', '/':
			b = append(b, e)
		case 'b':
			b = append(b, '\b')
		case 'f':
			b = append(b, '\f')
		case 'n':
			b = append(b, '\n')
		case 'r':
			b = append(b, '\r')
		case 't':
			b = append(b, '\t')
		case 'u':
			r, ok := s.hex4()
			if !ok {
				return nil, s.fail("bad \\u escape")
			}
			if utf16.IsSurrogate(r) {
				// serde_json accepts only a high surrogate followed by an escaped low one.
				if r >= 0xDC00 || s.pos+1 >= len(s.data) || s.data[s.pos] != '\\' || s.data[s.pos+1] != 'u' {
					return nil, s.fail("lone surrogate escape")
				}
				s.pos += 2
				r2, ok := s.hex4()
				if !ok || r2 < 0xDC00 || r2 > 0xDFFF {
					return nil, s.fail("lone surrogate escape")
				}
				r = utf16.DecodeRune(r, r2)
			}
			b = utf8.AppendRune(b, r)
		default:
			return nil, s.fail("bad escape")
		}
	}
	return nil, s.fail("unterminated string")
}

func (s *scanner) hex4() (rune, bool) {
	if s.pos+4 > len(s.data) {
		return 0, false
	}
	var r rune
	for _, c := range s.data[s.pos : s.pos+4] {
		switch {
		case c >= '0' && c <= '9':
			r = r<<4 | rune(c-'0')
		case c >= 'a' && c <= 'f':
			r = r<<4 | rune(c-'a'+10)
		case c >= 'A' && c <= 'F':
			r = r<<4 | rune(c-'A'+10)
		default:
			return 0, false
		}
	}
	s.pos += 4
	return r, true
}

func (s *scanner) str() (string, error) {
	b, err := s.stringBytes()
	return string(b), err
}

// number returns the bytes of a JSON number, validated.
func (s *scanner) number() ([]byte, error) {
	s.ws()
	start := s.pos
	d := s.data
	i := s.pos
	if i < len(d) && d[i] == '-' {
		i++
	}
	switch {
	case i < len(d) && d[i] == '0':
		i++
	case i < len(d) && d[i] >= '1' && d[i] <= '9':
		for i < len(d) && d[i] >= '0' && d[i] <= '9' {
			i++
		}
	default:
		return nil, s.fail("expected number")
	}
	if i < len(d) && d[i] == '.' {
		i++
		j := i
		for i < len(d) && d[i] >= '0' && d[i] <= '9' {
			i++
		}
		if i == j {
			s.pos = i
			return nil, s.fail("bad number")
		}
	}
	if i < len(d) && (d[i] == 'e' || d[i] == 'E') {
		i++
		if i < len(d) && (d[i] == '+' || d[i] == '-') {
			i++
		}
		j := i
		for i < len(d) && d[i] >= '0' && d[i] <= '9' {
			i++
		}
		if i == j {
			s.pos = i
			return nil, s.fail("bad number")
		}
	}
	s.pos = i
	return d[start:i], nil
}

// skip skips one value of any kind, validating it.
func (s *scanner) skip(depth int) error {
	if depth > 512 {
		return s.fail("nesting too deep")
	}
	switch c := s.peek(); c {
	case '{':
		return s.object(func([]byte) error { return s.skip(depth + 1) })
	case '[':
		return s.list(func(int) error { return s.skip(depth + 1) })
	case '"':
		_, err := s.stringBytes()
		return err
	case 't', 'f', 'n':
		for _, lit := range []string{"true", "false", "null"} {
			if len(s.data)-s.pos >= len(lit) && string(s.data[s.pos:s.pos+len(lit)]) == lit {
				s.pos += len(lit)
				return nil
			}
		}
		return s.fail("bad literal")
	default:
		_, err := s.number()
		return err
	}
}

// end checks that only white space follows.
func (s *scanner) end() error {
	if s.peek() != 0 || s.pos < len(s.data) {
		return s.fail("trailing data")
	}
	return nil
}

// objectFields splits a JSON object into its members' raw values (aliasing raw; the last duplicate wins).
func objectFields(raw []byte, path string) (map[string]json.RawMessage, error) {
	s := &scanner{data: raw}
	fields := make(map[string]json.RawMessage)
	err := s.object(func(key []byte) error {
		start := s.pos
		if err := s.skip(0); err != nil {
			return err
		}
		fields[string(key)] = raw[start:s.pos]
		return nil
	})
	if err == nil {
		err = s.end()
	}
	if err != nil {
		return nil, tokjson.Invalid(path, "%v", err)
	}
	return fields, nil
}

// decodeField unmarshals one small member with encoding/json; absent or null leaves v untouched.
func decodeField(fields map[string]json.RawMessage, name, path string, v any) error {
	raw, ok := fields[name]
	if !ok || isNull(raw) {
		return nil
	}
	if err := json.Unmarshal(raw, v); err != nil {
		return tokjson.Invalid(path+"."+name, "%v", err)
	}
	return nil
}

// parseID reads a non-negative integer id (serde's u32: no fraction, no exponent).
func parseID(num []byte) (int64, bool) {
	if len(num) == 0 || len(num) > 19 {
		return 0, false
	}
	var v int64
	for _, c := range num {
		if c < '0' || c > '9' {
			return 0, false
		}
		v = v*10 + int64(c-'0')
	}
	return v, true
}
