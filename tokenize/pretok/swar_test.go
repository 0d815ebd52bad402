package pretok

import (
	"strings"
	"testing"
)

// TestSWARMasksMatchClassTable checks the eight-byte masks against the class table for every byte value in every
// lane, next to every neighbour class (carries between lanes would show there).
func TestSWARMasksMatchClassTable(t *testing.T) {
	neighbours := []byte{0, 'a', 'Z', '0', ' ', '\n', '!', 0x7F, 0x80, 0xC3, 0xFF}
	for v := 0; v < 256; v++ {
		b := byte(v)
		wantLetter := b < 0x80 && asciiClass[b]&cL != 0
		wantOther := b < 0x80 && asciiClass[b]&(cS|cL|cN) == 0
		for _, nb := range neighbours {
			for lane := 0; lane < 8; lane++ {
				var x uint64
				for k := 0; k < 8; k++ {
					c := nb
					if k == lane {
						c = b
					}
					x |= uint64(c) << (8 * k)
				}
				bit := uint64(0x80) << (8 * lane)
				if got := asciiLetterLanes(x)&bit != 0; got != wantLetter {
					t.Fatalf("byte %#x in lane %d beside %#x: letter %v, want %v", b, lane, nb, got, wantLetter)
				}
				if got := asciiOtherLanes(x)&bit != 0; got != wantOther {
					t.Fatalf("byte %#x in lane %d beside %#x: other %v, want %v", b, lane, nb, got, wantOther)
				}
			}
		}
	}
}

// TestRunsMatchByteLoops compares letterRun and otherRun with runWhile and runUntil from every offset of texts
// that mix ASCII runs of every length around the eight-byte boundary with non-ASCII letters, symbols, digits,
// whitespace and invalid UTF-8.
func TestRunsMatchByteLoops(t *testing.T) {
	parts := []string{"a", "Zz", "abcdefg", "abcdefgh", "abcdefghijklmnopq", "é", "中文", "ǅ", "!", "();", "{}[]<>=+-*/",
		"€", "·", "0", "١٢٣", " ", "\n\t", "\u00a0", "\u3000", "\xff", "\xc3", "_", "'", "\x00\x01", "\x7f"}
	var texts []string
	for i := range parts {
		for j := range parts {
			for k := range 3 {
				texts = append(texts, strings.Repeat(parts[i], k+1)+parts[j]+parts[(i+j)%len(parts)])
			}
		}
	}
	texts = append(texts, fixtureTexts(t)[:50]...)
	for _, s := range texts {
		for i := 0; i < len(s); i++ {
			if got, want := letterRun(s, i), runWhile(s, i, cL); got != want {
				t.Fatalf("letterRun(%q, %d) = %d, runWhile = %d", s, i, got, want)
			}
			if got, want := otherRun(s, i), runUntil(s, i, cS|cL|cN); got != want {
				t.Fatalf("otherRun(%q, %d) = %d, runUntil = %d", s, i, got, want)
			}
		}
	}
}
