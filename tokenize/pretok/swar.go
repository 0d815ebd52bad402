package pretok

import (
	"encoding/binary"
	"math/bits"
	"unicode/utf8"
	"unsafe"
)

// Runs of ASCII letters and of ASCII "other" characters (not a letter, number or whitespace), eight bytes at a
// time. On source code and English text most words are short ASCII runs, and a byte-at-a-time loop pays a
// mispredicted branch where each run ends; these find the end of a run inside eight bytes with a few integer
// operations and one trailing-zero count (issue 18: the cl100k scanner was 44% of the engine's time on Go source).
// Where a run reaches a byte of 0x80 or more they hand over to the rune-decoding loops of classes.go, so non-ASCII
// text is scanned as before. The masks are checked against asciiClass for every byte in every lane by
// TestSWARMasksMatchClassTable.

const (
	lanes01 = 0x0101010101010101
	lanes80 = 0x8080808080808080
	lanes7F = 0x7F7F7F7F7F7F7F7F
)

// load8 returns s[i:i+8] as a little-endian word (i+8 <= len(s)).
func load8(s string, i int) uint64 {
	return binary.LittleEndian.Uint64(unsafe.Slice(unsafe.StringData(s[i:]), 8))
}

// inRange returns, in each byte's high bit, whether that byte of y (all below 0x80) lies in [lo, hi].
func inRange(y uint64, lo, hi byte) uint64 {
	return (y + lanes01*uint64(0x80-lo)) &^ (y + lanes01*uint64(0x7F-hi))
}

// asciiLetterLanes returns the high bit of each byte of x that is an ASCII letter.
func asciiLetterLanes(x uint64) uint64 {
	y := (x | 0x2020202020202020) & lanes7F // A-Z onto a-z; nothing else lands in a-z
	return inRange(y, 'a', 'z') &^ x & lanes80
}

// asciiOtherLanes returns the high bit of each byte of x that is ASCII and neither a letter, a digit nor
// whitespace (\t \n \v \f \r and space: the ASCII White_Space characters).
func asciiOtherLanes(x uint64) uint64 {
	y := x & lanes7F
	l := (x | 0x2020202020202020) & lanes7F
	notOther := inRange(l, 'a', 'z') | inRange(y, '0', '9') | inRange(y, '\t', '\r') | inRange(y, ' ', ' ')
	return ^(notOther | x) & lanes80
}

// letterRun returns the end of the run of \p{L} characters from i, as runWhile(s, i, cL) does.
func letterRun(s string, i int) int {
	for {
		for i+8 <= len(s) {
			if m := ^asciiLetterLanes(load8(s, i)) & lanes80; m != 0 {
				i += bits.TrailingZeros64(m) >> 3
				goto end
			}
			i += 8
		}
		for i < len(s) && s[i] < utf8.RuneSelf && asciiClass[s[i]]&cL != 0 {
			i++
		}
	end:
		if i == len(s) || s[i] < utf8.RuneSelf {
			return i
		}
		r, n := utf8.DecodeRuneInString(s[i:])
		if classOf(r)&cL == 0 {
			return i
		}
		i += n
	}
}

// otherRun returns the end of the run of characters from i that are not \p{L}, \p{N} or whitespace, as
// runUntil(s, i, cS|cL|cN) does.
func otherRun(s string, i int) int {
	for {
		for i+8 <= len(s) {
			if m := ^asciiOtherLanes(load8(s, i)) & lanes80; m != 0 {
				i += bits.TrailingZeros64(m) >> 3
				goto end
			}
			i += 8
		}
		for i < len(s) && s[i] < utf8.RuneSelf && asciiClass[s[i]]&(cS|cL|cN) == 0 {
			i++
		}
	end:
		if i == len(s) || s[i] < utf8.RuneSelf {
			return i
		}
		r, n := utf8.DecodeRuneInString(s[i:])
		if classOf(r)&(cS|cL|cN) != 0 {
			return i
		}
		i += n
	}
}
