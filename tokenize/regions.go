package tokenize

import (
	"fmt"
	"sort"
	"strings"
	"unicode/utf8"
	"unsafe"

	"github.com/gload/gload/tokenize/normalize"
	"github.com/gload/gload/tokenize/pretok"
	"github.com/gload/gload/tokenize/tokjson"
)

// EncodeRegions encodes text like AppendEncode(dst, text, false) and tells, for every token, where its start offset
// (Hugging Face's encode offset, in bytes of text) lies relative to cuts: regions[t] is the number of cuts at or
// before the token's start. cuts are byte positions in text, sorted ascending. The SFT label rule ("trained iff the
// token starts inside [seg_start, seg_end)") is then "regions[t] is odd" for cuts = seg_start, seg_end, ... .
//
// It never approximates: a cut that falls where the normalizer does not keep text prefixes apart, a pre-tokenizer
// whose words are not pieces of its input (Metaspace) or a token whose spelling does not match the bytes it came from
// is an error.
func (t *Tokenizer) EncodeRegions(dst []int32, regions []int32, text string, cuts []int) ([]int32, []int32, error) {
	for i := 1; i < len(cuts); i++ {
		if cuts[i] < cuts[i-1] {
			return dst, regions, fmt.Errorf("tokenize: EncodeRegions: cuts not sorted (%d after %d)", cuts[i], cuts[i-1])
		}
	}
	if !utf8.ValidString(text) {
		return dst, regions, fmt.Errorf("tokenize: EncodeRegions: text is not valid UTF-8")
	}
	lens := t.tokenLengths()
	s := t.getSession()
	defer t.putSession(s)
	var err error
	if s.raw, err = t.added.split(s.raw[:0], text, false); err != nil {
		return dst, regions, err
	}
	defer func() { clear(s.raw); clear(s.norm); clear(s.words) }()
	budget := normalizeBudget(len(text))
	var inner []int // normalized byte offsets of the cuts inside the current piece
	for i, p := range s.raw {
		pos := offsetIn(text, p.text)
		if pos < 0 {
			return dst, regions, fmt.Errorf("tokenize: EncodeRegions: internal: piece not inside the text")
		}
		base := countAtOrBefore(cuts, pos)
		if p.id >= 0 {
			dst = append(dst, p.id)
			regions = append(regions, int32(base))
			continue
		}
		// Cuts strictly inside this piece, placed in normalized coordinates.
		normalized := p.text
		inner = inner[:0]
		if t.normalizer != nil {
			var err error
			if normalized, err = normalize.Apply(t.normalizer, p.text, budget); err != nil {
				return dst, regions, fmt.Errorf("tokenize: %w", err)
			}
		}
		for _, c := range cuts[base:] { // cuts[base:] are the ones after pos (sorted)
			if c >= pos+len(p.text) {
				break
			}
			head := p.text[:c-pos]
			if t.normalizer != nil {
				var err error
				if head, err = normalize.Apply(t.normalizer, head, budget); err != nil {
					return dst, regions, fmt.Errorf("tokenize: %w", err)
				}
			}
			if !strings.HasPrefix(normalized, head) {
				return dst, regions, fmt.Errorf("tokenize: EncodeRegions: the normalizer joins the text across byte %d (a segment edge): labels there would be a guess", c)
			}
			inner = append(inner, len(head))
		}
		budget -= len(normalized)
		region := func(ns int) int32 { return int32(base + countAtOrBefore(inner, ns)) }
		if s.norm, err = t.added.split(s.norm[:0], normalized, true); err != nil {
			return dst, regions, err
		}
		for j, q := range s.norm {
			qpos := offsetIn(normalized, q.text)
			if qpos < 0 {
				return dst, regions, fmt.Errorf("tokenize: EncodeRegions: internal: normalized piece not inside the normalized text")
			}
			if q.id >= 0 {
				dst = append(dst, q.id)
				regions = append(regions, region(qpos))
				continue
			}
			if t.pre != nil {
				s.words = pretok.SplitPiece(t.pre, q.text, i == 0 && j == 0, s.words[:0])
			} else {
				s.words = append(s.words[:0], q.text)
			}
			for _, w := range s.words {
				wpos := offsetIn(q.text, w)
				if wpos < 0 {
					return dst, regions, fmt.Errorf("tokenize: EncodeRegions: the pre-tokenizer rewrites its words (Metaspace?): token offsets are not supported for this tokenizer.json")
				}
				at := qpos + wpos
				n0 := len(dst)
				dst = s.enc.Encode(w, dst)
				off := 0
				for _, id := range dst[n0:] {
					regions = append(regions, region(at+off))
					if id < 0 || int(id) >= len(lens) || lens[id] < 0 {
						return dst, regions, fmt.Errorf("tokenize: EncodeRegions: id %d has no known spelling", id)
					}
					off += int(lens[id])
				}
				if off != len(w) {
					return dst, regions, fmt.Errorf("tokenize: EncodeRegions: tokens of %q spell %d of its %d bytes", w, off, len(w))
				}
			}
		}
	}
	return dst, regions, nil
}

// tokenLengths is, per model id, how many bytes of a word the token stands for (-1: no spelling), built once:
// byte-level vocabularies spell bytes (GPT-2 mapping), byte-fallback tokens <0xNN> one byte, others their string.
// EncodeRegions checks that a word's tokens add up to the word.
func (t *Tokenizer) tokenLengths() []int32 {
	t.lensOnce.Do(func() {
		n := t.model.VocabSize()
		lens := make([]int32, 0, n)
		for id := int32(0); ; id++ {
			tok, ok := t.model.IDToToken(id)
			if !ok {
				if int(id) >= n {
					break
				}
				lens = append(lens, -1)
				continue
			}
			l := int32(len(tok))
			switch {
			case t.byteLevel:
				if b, ok := tokjson.ByteLevelDecode(tok); ok {
					l = int32(len(b))
				} else {
					l = -1
				}
			case len(tok) == 6 && strings.HasPrefix(tok, "<0x") && tok[5] == '>':
				l = 1
			}
			lens = append(lens, l)
		}
		t.lens = lens
	})
	return t.lens
}

// offsetIn is the byte offset of sub inside s when sub is a substring of s's memory (as splitting returns), else -1.
func offsetIn(s, sub string) int {
	if sub == "" {
		return 0
	}
	if s == "" {
		return -1
	}
	b := uintptr(unsafe.Pointer(unsafe.StringData(s)))
	p := uintptr(unsafe.Pointer(unsafe.StringData(sub)))
	if p < b || p+uintptr(len(sub)) > b+uintptr(len(s)) {
		return -1
	}
	return int(p - b)
}

// countAtOrBefore is how many of the sorted xs are <= v.
func countAtOrBefore(xs []int, v int) int {
	if len(xs) < 8 {
		n := 0
		for n < len(xs) && xs[n] <= v {
			n++
		}
		return n
	}
	// Binary search: a conversation of many turns has as many cuts, and every piece asks.
	return sort.SearchInts(xs, v+1)
}

// PostProcessorIDs is what the post-processor (add_special_tokens=True) puts before and after one sequence.
func (t *Tokenizer) PostProcessorIDs() (before, after []int32) {
	if t.post == nil {
		return nil, nil
	}
	const sentinel = -7
	ids := t.post.apply([]int32{sentinel}, 0)
	for i, id := range ids {
		if id == sentinel {
			return append([]int32(nil), ids[:i]...), append([]int32(nil), ids[i+1:]...)
		}
	}
	return nil, nil
}
