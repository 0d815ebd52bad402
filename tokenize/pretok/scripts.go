package pretok

import (
	"sort"
	"unicode/utf8"
)

// scriptRange is a run of code points of one UnicodeScripts script (see scriptRanges in tables_gen.go).
type scriptRange struct {
	lo, hi rune
	id     uint16
}

// asciiScript holds the script ids of the ASCII characters.
var asciiScript [utf8.RuneSelf]uint16

func init() {
	for c := range asciiScript {
		asciiScript[c] = scriptOf(rune(c))
	}
}

// scriptOf returns the UnicodeScripts script id of r, 0 for "Any".
func scriptOf(r rune) uint16 {
	i := sort.Search(len(scriptRanges), func(i int) bool { return scriptRanges[i].hi >= r })
	if i < len(scriptRanges) && scriptRanges[i].lo <= r {
		return scriptRanges[i].id
	}
	return 0
}

// unicodeScripts is UnicodeScripts: a word ends where the script changes. Characters of no script ("Any":
// spaces, unassigned code points ...) join the word they are in. Like tokenizers, words start at the first
// character that has a script: leading "Any" characters are dropped.
type unicodeScripts struct{}

func (unicodeScripts) Split(s string, dst []string) []string {
	out, _, _ := unicodeScripts{}.splitAt(s, true, dst)
	return out
}

func (unicodeScripts) splitAt(s string, _ bool, dst []string) ([]string, bool, error) {
	n0 := len(dst)
	start := -1 // start of the current word; none before the first character with a script
	first := false
	last := uint16(0)
	for i := 0; i < len(s); {
		var sc uint16
		n := 1
		if b := s[i]; b < utf8.RuneSelf {
			sc = asciiScript[b]
		} else {
			var r rune
			r, n = utf8.DecodeRuneInString(s[i:])
			sc = scriptOf(r)
		}
		if sc != 0 && sc != last {
			if start >= 0 && start < i {
				if len(dst) == n0 {
					first = start == 0
				}
				dst = append(dst, s[start:i])
			}
			start = i
			last = sc
		}
		i += n
	}
	if start >= 0 && start < len(s) {
		if len(dst) == n0 {
			first = start == 0
		}
		dst = append(dst, s[start:])
	}
	return dst, first, nil
}
