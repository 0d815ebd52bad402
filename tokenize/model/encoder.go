package model

import (
	"unicode/utf8"
	"unsafe"

	"github.com/gload/gload/tokenize/tokjson"
)

// wordEncoder tokenizes one non-empty word into a slice valid until its next call.
type wordEncoder interface {
	encode(word string) []int32
}

// cachedEncoder puts the word cache (and, for byte-level input, the GPT-2 byte mapping) in front of a
// wordEncoder. The empty word gives no ids.
type cachedEncoder struct {
	cache     *wordCache
	byteLevel bool
	scratch   []byte
	enc       wordEncoder
}

var _ Encoder = (*cachedEncoder)(nil)

func (c *cachedEncoder) Encode(word string, dst []int32) []int32 {
	if len(word) == 0 {
		return dst
	}
	if ids, ok := c.cache.get(word); ok {
		return append(dst, ids...)
	}
	w := word
	if c.byteLevel {
		c.scratch = appendByteLevel(c.scratch[:0], word)
		w = unsafeString(c.scratch)
	}
	ids := c.enc.encode(w)
	c.cache.put(word, ids)
	return append(dst, ids...)
}

// appendByteLevel appends the GPT-2 byte-level form of raw (each byte as its ByteToRune, UTF-8 encoded).
func appendByteLevel(dst []byte, raw string) []byte {
	for i := 0; i < len(raw); i++ {
		dst = utf8.AppendRune(dst, tokjson.ByteToRune[raw[i]])
	}
	return dst
}

// unsafeString views b as a string without copying; b must not change while the string is in use.
func unsafeString(b []byte) string {
	if len(b) == 0 {
		return ""
	}
	return unsafe.String(&b[0], len(b))
}
