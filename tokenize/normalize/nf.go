package normalize

import (
	"slices"
	"sync"
	"unicode/utf8"
)

// unicodeForm is one of NFD, NFKD, NFC, NFKC with the exact tables and algorithm of Hugging Face tokenizers (its
// unicode-normalization fork): full decomposition, stable canonical ordering, canonical composition. Unlike
// golang.org/x/text/unicode/norm it does not insert U+034F after 30 non-starters (Stream-Safe Text Format), and its
// data is the (older) Unicode version HF was built with.
type unicodeForm struct {
	compat  bool   // K forms: use compatibility decompositions
	compose bool   // C forms: recompose
	qc      uint16 // quick-check flag of the form
}

var (
	nfd  = &unicodeForm{qc: fQCD}
	nfkd = &unicodeForm{compat: true, qc: fQCKD}
	nfc  = &unicodeForm{compose: true, qc: fQCC}
	nfkc = &unicodeForm{compat: true, compose: true, qc: fQCKC}
)

// Normalize implements Normalizer.
//
// It runs a quick check over the text and only normalizes the segments around code points the form could change:
// a segment starts at the last starter before such a code point and ends at the next code point that is a stable
// boundary (a starter that passes the check: nothing before it can compose with it or reorder across it).
func (f *unicodeForm) Normalize(s string) string {
	t := tables()
	var out []byte // nil until the first change
	done := 0      // s[:done] is in out (or unchanged while out is nil)
	var work *normWork
	lastStarter, lastCCC := 0, uint8(0)
	for i := 0; i < len(s); {
		if s[i] < utf8.RuneSelf {
			lastStarter, lastCCC = i, 0
			i++
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		p := t.get(r)
		if !(r == utf8.RuneError && size == 1) && p.flags&f.qc != 0 && (p.ccc == 0 || lastCCC <= p.ccc) {
			if p.ccc == 0 {
				lastStarter = i
			}
			lastCCC = p.ccc
			i += size
			continue
		}
		end := f.boundaryAfter(t, s, i+size)
		if work == nil {
			work = normWorks.Get().(*normWork)
		}
		seg := f.segment(t, work, s[lastStarter:end])
		if out != nil || string(seg) != s[lastStarter:end] {
			if out == nil {
				out = make([]byte, 0, len(s)+len(s)/8+8)
			}
			out = append(out, s[done:lastStarter]...)
			out = append(out, seg...)
			done = end
		}
		i, lastStarter, lastCCC = end, end, 0
	}
	if work != nil {
		work.release()
	}
	if out == nil {
		return s
	}
	out = append(out, s[done:]...)
	return string(out)
}

// boundaryAfter returns the first stable boundary at or after i (or len(s)).
func (f *unicodeForm) boundaryAfter(t *unicodeTables, s string, i int) int {
	for i < len(s) {
		if s[i] < utf8.RuneSelf {
			return i
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if p := t.get(r); p.ccc == 0 && p.flags&f.qc != 0 && !(r == utf8.RuneError && size == 1) {
			return i
		}
		i += size
	}
	return len(s)
}

// normRune is a code point with its canonical combining class.
type normRune struct {
	r   rune
	ccc uint8
}

// normWork holds the scratch buffers of one Normalize call.
type normWork struct {
	runes []normRune
	bytes []byte
}

var normWorks = sync.Pool{New: func() any {
	return &normWork{runes: make([]normRune, 0, 64), bytes: make([]byte, 0, 256)}
}}

func (w *normWork) release() {
	if cap(w.runes) <= 1<<14 && cap(w.bytes) <= 1<<16 {
		normWorks.Put(w)
	}
}

// segment normalizes seg in full; the result is valid until the next use of w.
func (f *unicodeForm) segment(t *unicodeTables, w *normWork, seg string) []byte {
	w.runes = f.decompose(t, w.runes[:0], seg)
	if f.compose {
		w.runes = compose(t, w.runes)
	}
	w.bytes = w.bytes[:0]
	for _, e := range w.runes {
		w.bytes = utf8.AppendRune(w.bytes, e.r)
	}
	return w.bytes
}

// decompose appends the full decomposition of s to buf, each run of non-starters stably sorted by class.
func (f *unicodeForm) decompose(t *unicodeTables, buf []normRune, s string) []normRune {
	pending := 0 // start of the run of non-starters not yet sorted
	push := func(r rune) {
		c := t.ccc(r)
		if c == 0 {
			sortRun(buf[pending:])
			pending = len(buf) + 1
		}
		buf = append(buf, normRune{r: r, ccc: c})
	}
	for _, r := range s { // invalid UTF-8 reads as U+FFFD
		if r < 0x80 {
			push(r)
			continue
		}
		p := t.get(r)
		switch {
		case p.flags&fHangul != 0:
			si := r - hangulSBase
			push(hangulLBase + si/hangulNCount)
			push(hangulVBase + (si%hangulNCount)/hangulTCount)
			if ti := si % hangulTCount; ti > 0 {
				push(hangulTBase + ti)
			}
		case f.compat && p.flags&fCompat != 0:
			for _, d := range p.compat {
				push(d)
			}
		case p.flags&fCanon != 0:
			for _, d := range p.canon {
				push(d)
			}
		default:
			push(r)
		}
	}
	if pending < len(buf) {
		sortRun(buf[pending:])
	}
	return buf
}

// sortRun sorts a run of non-starters by combining class, keeping the text order of equal classes.
func sortRun(run []normRune) {
	if len(run) < 2 {
		return
	}
	if len(run) > 24 {
		slices.SortStableFunc(run, func(a, b normRune) int { return int(a.ccc) - int(b.ccc) })
		return
	}
	for i := 1; i < len(run); i++ {
		for j := i; j > 0 && run[j-1].ccc > run[j].ccc; j-- {
			run[j-1], run[j] = run[j], run[j-1]
		}
	}
}

// compose applies canonical composition in place to a decomposed, ordered buffer.
func compose(t *unicodeTables, buf []normRune) []normRune {
	w := 0
	starter := -1 // index in buf[:w] of the last starter that may still compose
	lastCCC := -1 // class of the last code point kept after the starter; -1: none
	for _, e := range buf {
		if starter < 0 {
			if e.ccc == 0 {
				starter, lastCCC = w, -1
			}
			buf[w] = e
			w++
			continue
		}
		blocked := lastCCC >= 0 && lastCCC >= int(e.ccc)
		if !blocked {
			if c, ok := t.composeRunes(buf[starter].r, e.r); ok {
				buf[starter].r = c
				continue
			}
		}
		if e.ccc == 0 {
			starter, lastCCC = w, -1
		} else {
			lastCCC = int(e.ccc)
		}
		buf[w] = e
		w++
	}
	return buf[:w]
}
