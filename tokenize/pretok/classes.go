package pretok

import "unicode/utf8"

// Character classes, one bit each, as Hugging Face tokenizers 0.23.2 sees them (Unicode 16 for Oniguruma and
// Rust; an older table for punctuation). The data is in tables_gen.go, measured by testdata/gen_tables.py.
const (
	cL     uint8 = 1 << iota // Oniguruma \p{L}
	cN                       // Oniguruma \p{N}
	cS                       // White_Space: Oniguruma \s, Rust char::is_whitespace, regex \s
	cUp                      // Oniguruma [\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}] (o200k)
	cLow                     // Oniguruma [\p{Ll}\p{Lm}\p{Lo}\p{M}] (o200k)
	cNum                     // Rust char::is_numeric (Digits)
	cPunct                   // ASCII punctuation or unicode_categories is_punctuation (BertPreTokenizer, Punctuation)
	cWord                    // Rust regex \w (Whitespace)
)

type classRange struct {
	lo, hi rune
	bits   uint8
}

// asciiClass holds the class bits of the ASCII bytes; classBlocks/classIndex form a two-level table for the
// rest: classBlocks[classIndex[r>>8]][r&0xff].
var (
	asciiClass  [256]uint8 // entries from 0x80 up are unused
	classIndex  [(utf8.MaxRune + 1) >> 8]uint16
	classBlocks [][256]uint8
)

func init() {
	var flat [utf8.MaxRune + 1]uint8
	for _, r := range classRanges {
		for c := r.lo; c <= r.hi; c++ {
			flat[c] = r.bits
		}
	}
	copy(asciiClass[:], flat[:utf8.RuneSelf])
	seen := make(map[[256]uint8]uint16)
	for hi := range classIndex {
		var blk [256]uint8
		copy(blk[:], flat[hi<<8:(hi+1)<<8])
		id, ok := seen[blk]
		if !ok {
			id = uint16(len(classBlocks))
			classBlocks = append(classBlocks, blk)
			seen[blk] = id
		}
		classIndex[hi] = id
	}
}

// classOf returns the class bits of r; invalid runes (utf8.RuneError included) are U+FFFD's.
func classOf(r rune) uint8 {
	if uint32(r) > utf8.MaxRune {
		r = utf8.RuneError
	}
	return classBlocks[classIndex[r>>8]][r&0xff]
}

// classAt returns the class bits and the byte length of the character at s[i] (i < len(s)). An invalid
// UTF-8 byte counts as one U+FFFD character of length 1, as the regex engine sees it.
func classAt(s string, i int) (uint8, int) {
	b := s[i]
	if b < utf8.RuneSelf {
		return asciiClass[b], 1
	}
	return classAtRune(s, i)
}

func classAtRune(s string, i int) (uint8, int) {
	r, n := utf8.DecodeRuneInString(s[i:])
	return classOf(r), n
}

// runWhile returns the end of the run of characters from i whose class shares a bit with want.
func runWhile(s string, i int, want uint8) int {
	for i < len(s) {
		b := s[i]
		if b < utf8.RuneSelf {
			if asciiClass[b]&want == 0 {
				return i
			}
			i++
			continue
		}
		r, n := utf8.DecodeRuneInString(s[i:])
		if classOf(r)&want == 0 {
			return i
		}
		i += n
	}
	return i
}

// runUntil returns the end of the run of characters from i whose class shares no bit with stop.
func runUntil(s string, i int, stop uint8) int {
	for i < len(s) {
		b := s[i]
		if b < utf8.RuneSelf {
			if asciiClass[b]&stop != 0 {
				return i
			}
			i++
			continue
		}
		r, n := utf8.DecodeRuneInString(s[i:])
		if classOf(r)&stop != 0 {
			return i
		}
		i += n
	}
	return i
}

// Unicode general categories (Cs and Cn have no entries in gcRanges).
type gc uint8

const (
	gcLu gc = iota
	gcLl
	gcLt
	gcLm
	gcLo
	gcMn
	gcMc
	gcMe
	gcNd
	gcNl
	gcNo
	gcPc
	gcPd
	gcPs
	gcPe
	gcPi
	gcPf
	gcPo
	gcSm
	gcSc
	gcSk
	gcSo
	gcZs
	gcZl
	gcZp
	gcCc
	gcCf
	gcCo
	gcCount
)

var gcNames = [gcCount]string{"Lu", "Ll", "Lt", "Lm", "Lo", "Mn", "Mc", "Me", "Nd", "Nl", "No", "Pc", "Pd", "Ps",
	"Pe", "Pi", "Pf", "Po", "Sm", "Sc", "Sk", "So", "Zs", "Zl", "Zp", "Cc", "Cf", "Co"}

type gcRange struct {
	lo, hi rune
	cat    gc
}

// classByte returns the class bits of the character at s[i] (i < len(s)); see classAt.
func classByte(s string, i int) uint8 {
	if b := s[i]; b < utf8.RuneSelf {
		return asciiClass[b]
	}
	return classRuneAt(s, i)
}

func classRuneAt(s string, i int) uint8 {
	r, _ := utf8.DecodeRuneInString(s[i:])
	return classOf(r)
}
