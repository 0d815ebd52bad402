package normalize

import (
	"encoding/base64"
	"encoding/binary"
	"errors"
	"fmt"
	"strings"
	"sync"
	"unicode/utf8"

	"github.com/dlclark/regexp2/v2/syntax"
)

// precompiled is SentencePiece's precompiled_charsmap normalizer as HF's spm_precompiled crate runs it: the text is
// cut into extended grapheme clusters; a cluster shorter than 6 bytes is looked up whole, and if some prefix of it
// is a key of the trie the whole cluster becomes the replacement of the shortest such prefix; otherwise each code
// point is looked up on its own and replaced when it is a key.
type precompiled struct {
	trie       []uint32 // darts-clone double array units
	normalized string   // NUL-separated replacement strings
	ascii      [128]string
	asciiHit   [128]bool
	identity   bool // no ASCII byte is rewritten: ASCII runs are copied as they are
}

// ErrCharsmap is matched (errors.Is) by the error of a precompiled_charsmap that cannot be read.
var ErrCharsmap = errors.New("normalize: corrupt precompiled_charsmap")

// newPrecompiled parses a decoded precompiled_charsmap: a little-endian u32 trie size in bytes, the trie (u32
// units), then the replacement strings.
func newPrecompiled(charsmap []byte) (*precompiled, error) {
	if len(charsmap) < 4 {
		return nil, fmt.Errorf("%w: %d bytes, no trie size", ErrCharsmap, len(charsmap))
	}
	size := binary.LittleEndian.Uint32(charsmap)
	units := int(size / 4)
	rest := charsmap[4:]
	if units > len(rest)/4 {
		return nil, fmt.Errorf("%w: trie of %d bytes, %d bytes left", ErrCharsmap, size, len(rest))
	}
	p := &precompiled{trie: make([]uint32, units)}
	for i := range p.trie {
		p.trie[i] = binary.LittleEndian.Uint32(rest[4*i:])
	}
	blob := rest[4*units:]
	if !utf8.Valid(blob) {
		return nil, fmt.Errorf("%w: replacement strings are not UTF-8", ErrCharsmap)
	}
	p.normalized = string(blob)
	p.identity = true
	for c := 0; c < 128; c++ {
		p.ascii[c], p.asciiHit[c] = p.transform(string(rune(c)))
		if p.asciiHit[c] && p.ascii[c] != string(rune(c)) {
			p.identity = false
		}
	}
	return p, nil
}

// Unit fields of the darts-clone double array (as spm_precompiled reads them, on 64-bit words).
func unitHasLeaf(u uint64) bool  { return (u>>8)&1 == 1 }
func unitValue(u uint64) uint64  { return u & (1<<31 - 1) }
func unitLabel(u uint64) uint64  { return u & (1<<31 | 0xFF) }
func unitOffset(u uint64) uint64 { return (u >> 10) << ((u & (1 << 9)) >> 6) }

// transform returns the replacement of the shortest prefix of key that is in the trie. A key stops at a NUL byte.
// An index out of range (a corrupt charsmap, where HF would panic) is no match.
func (p *precompiled) transform(key string) (string, bool) {
	if len(p.trie) == 0 {
		return "", false
	}
	pos := uint64(0)
	unit := uint64(p.trie[0])
	pos ^= unitOffset(unit)
	for i := 0; i < len(key); i++ {
		c := uint64(key[i])
		if c == 0 {
			break
		}
		pos ^= c
		if pos >= uint64(len(p.trie)) {
			return "", false
		}
		unit = uint64(p.trie[pos])
		if unitLabel(unit) != c {
			return "", false
		}
		pos ^= unitOffset(unit)
		if unitHasLeaf(unit) {
			if pos >= uint64(len(p.trie)) {
				return "", false
			}
			start := unitValue(uint64(p.trie[pos]))
			if start > uint64(len(p.normalized)) {
				return "", false
			}
			s := p.normalized[start:]
			if n := strings.IndexByte(s, 0); n >= 0 {
				s = s[:n]
			}
			if !utf8.ValidString(s) { // starts inside a character
				return "", false
			}
			return s, true
		}
	}
	return "", false
}

func (p *precompiled) Normalize(s string) string {
	out, _ := p.normalizeMax(s, -1)
	return out
}

// normalizeMax is Normalize that gives up (ok false) once the output passes
// max bytes (max < 0: no cap): a charsmap may map a character to a long
// string.
func (p *precompiled) normalizeMax(s string, max int) (string, bool) {
	var b []byte // nil until the first change
	done := 0    // s[:done] is accounted for in b (or unchanged when b is nil)
	over := false
	emit := func(at, end int, repl string) {
		if b == nil {
			if s[at:end] == repl {
				return
			}
			b = make([]byte, 0, len(s)+len(s)/8+8)
			b = append(b, s[:at]...)
		} else {
			b = append(b, s[done:at]...)
		}
		b = append(b, repl...)
		done = end
		over = over || (max >= 0 && len(b) > max)
	}
	var win *graphemeWindow
	t := tables()
	for i := 0; i < len(s) && !over; {
		c := s[i]
		// An ASCII byte other than CR followed by ASCII (or the end) is a grapheme of its own.
		if c < utf8.RuneSelf && c != '\r' && (i+1 == len(s) || s[i+1] < utf8.RuneSelf) {
			if !p.identity && p.asciiHit[c] {
				emit(i, i+1, p.ascii[c])
			}
			i++
			continue
		}
		// A code point that joins neither way, before one that cannot join it, is a cluster of its own.
		r, size := utf8.DecodeRuneInString(s[i:])
		end := i + size
		if t.get(r).flags&fJoinNext != 0 || (end < len(s) && t.get(nextRune(s, end)).flags&fJoinPrev != 0) {
			if win == nil {
				win = graphemeWindows.Get().(*graphemeWindow)
			}
			end = win.clusterEnd(s, i)
		}
		g := s[i:end]
		if len(g) < 6 {
			if repl, ok := p.transform(g); ok {
				emit(i, end, repl)
				i = end
				continue
			}
		}
		for j := 0; j < len(g); {
			_, size := utf8.DecodeRuneInString(g[j:])
			if repl, ok := p.transform(g[j : j+size]); ok {
				emit(i+j, i+j+size, repl)
			} else if size == 1 && g[j] >= utf8.RuneSelf { // invalid UTF-8
				emit(i+j, i+j+1, "\uFFFD")
			}
			j += size
		}
		i = end
	}
	if win != nil && cap(win.runes) <= 1<<12 {
		graphemeWindows.Put(win)
	}
	if over {
		return "", false
	}
	if b == nil {
		return s, max < 0 || len(s) <= max
	}
	b = append(b, s[done:]...)
	return string(b), max < 0 || len(b) <= max
}

func nextRune(s string, i int) rune {
	if c := s[i]; c < utf8.RuneSelf {
		return rune(c)
	}
	r, _ := utf8.DecodeRuneInString(s[i:])
	return r
}

// graphemeWindow finds extended grapheme cluster boundaries with regexp2's Unicode 17 segmentation, the version
// of the unicode-segmentation crate HF uses (rivo/uniseg is Unicode 15.0: no Indic conjunct rule, older Extend
// set, and both change what a cluster shorter than 6 bytes is).
type graphemeWindow struct {
	runes []rune
	offs  []int // byte offset of each rune, relative to the window start
}

var graphemeWindows = sync.Pool{New: func() any { return &graphemeWindow{} }}

// clusterEnd returns the end of the grapheme cluster that starts at s[i] (a cluster boundary). The segmentation
// needs no context before a boundary, and the first boundary found inside a window is final.
func (w *graphemeWindow) clusterEnd(s string, i int) int {
	for size := 4; ; size *= 2 {
		w.runes, w.offs = w.runes[:0], w.offs[:0]
		j := i
		for len(w.runes) < size && j < len(s) {
			r, n := utf8.DecodeRuneInString(s[j:])
			w.runes = append(w.runes, r)
			w.offs = append(w.offs, j-i)
			j += n
		}
		k := syntax.NextGraphemeClusterBoundary(w.runes, 0)
		if k < 0 {
			return len(s)
		}
		if k < len(w.runes) {
			return i + w.offs[k]
		}
		if j == len(s) {
			return len(s)
		}
	}
}

// decodeCharsmap reads the base64 precompiled_charsmap as HF does (standard alphabet, canonical padding).
func decodeCharsmap(s string) ([]byte, error) {
	return base64.StdEncoding.Strict().DecodeString(s)
}
