package pretok

import (
	"strings"
	"sync"
	"unicode/utf8"
)

// splitter is what every pre-tokenizer of this package implements.
type splitter interface {
	PreTokenizer
	// splitAt is Split for one piece of the text; atStart tells whether the piece begins the original text
	// (Hugging Face: its original offset is 0), which Metaspace's "first" prepend scheme reads. first
	// reports whether the first word appended begins at offset 0 of s (false when nothing was appended).
	splitAt(s string, atStart bool, dst []string) (out []string, first bool, err error)
}

// SplitPiece is Split for a piece of a larger text, such as the text between two added tokens: atStart tells
// whether the piece begins the original text. Only Metaspace with prepend_scheme "first" (alone or inside a
// Sequence) cares: it prepends its replacement only to the word at the start of the original text. Split(s,
// dst) is SplitPiece(p, s, true, dst).
//
// A general regex that exceeds its match bound (see regex.go) ends the matching there, leaving the rest of s as
// one unmatched gap; SplitPieceErr reports that instead.
func SplitPiece(p PreTokenizer, s string, atStart bool, dst []string) []string {
	out, _ := SplitPieceErr(p, s, atStart, dst)
	return out
}

// SplitPieceErr is SplitPiece that fails, with a *MatchError, when a general regex exceeds its match bound (a
// catastrophically backtracking pattern such as (a+)+$ on a long run of a's); the words appended so far are
// returned with it.
func SplitPieceErr(p PreTokenizer, s string, atStart bool, dst []string) ([]string, error) {
	if sp, ok := p.(splitter); ok {
		out, _, err := sp.splitAt(s, atStart, dst)
		return out, err
	}
	return p.Split(s, dst), nil
}

// SplitPieceBatch is SplitPieceErr a batch of words at a time, so that a long text never needs its whole word
// list at once: it appends the words of s from byte offset from on and returns the offset the next batch starts
// at, len(s) after the last batch. The pre-tokenizers whose words tile the text and come from a hand-written
// scanner (Split with the GPT-2, cl100k/Llama-3, Qwen2 or o200k pattern and behavior Isolated, or Removed
// inverted; ByteLevel with its regex) stop after limit words (ByteLevel's first batch may hold one more: the
// word with the added space); any other appends every word of s at the first call (from must then be 0).
// Batches from 0 until len(s) append exactly the words of SplitPieceErr(p, s, atStart, dst); a text of "" gives
// one empty batch.
func SplitPieceBatch(p PreTokenizer, s string, atStart bool, from, limit int, dst []string) (out []string, next int, err error) {
	if b, ok := p.(batcher); ok && limit > 0 {
		if out, next, ok := b.splitBatch(s, from, limit, dst); ok {
			return out, next, nil
		}
	}
	if from != 0 {
		return dst, len(s), nil // everything went out with the first batch
	}
	out, err = SplitPieceErr(p, s, atStart, dst)
	return out, len(s), err
}

// batcher is implemented by the splitters that can hand their words out a batch at a time (SplitPieceBatch).
type batcher interface {
	// splitBatch appends at most limit words of s from byte from on and returns where the next batch starts;
	// ok is false when this splitter cannot batch (it then appended nothing).
	splitBatch(s string, from, limit int, dst []string) (out []string, next int, ok bool)
}

func (p *patternSplit) splitBatch(s string, from, limit int, dst []string) ([]string, int, bool) {
	m, ok := p.pat.(scanKind)
	if !ok || !(p.beh == isolated || p.beh == removed && p.inv) {
		return dst, 0, false
	}
	out, next := m.appendMatchesFrom(s, from, limit, dst)
	return out, next, true
}

func (b *byteLevel) splitBatch(s string, from, limit int, dst []string) ([]string, int, bool) {
	if !b.useRegex {
		return dst, 0, false
	}
	x := 0 // splitAt scans s[x:]: after the first word when that word gets the added space
	if b.prefixSpace && s != "" && s[0] != ' ' {
		x = gpt2AfterSpace(s)
		if from == 0 {
			// The word with the added space, and at least one match after it: x may be 0 (the space alone
			// is a word before a whitespace run), and only a next batch from > 0 says it went out.
			dst = append(dst, " "+s[:x])
			limit = max(limit-1, 1)
			from = x
		}
	}
	out, next := scanGPT2.appendMatchesFrom(s[x:], from-x, limit, dst)
	return out, x + next, true
}

// matcher finds the matches of a split pattern.
type matcher interface {
	// feed passes, in order, the matches in s and the non-empty gaps between them to k.
	feed(s string, k *sink)
}

// patternSplit splits on a pattern with a behavior: Split, Punctuation, Digits, CharDelimiterSplit,
// WhitespaceSplit, Whitespace.
type patternSplit struct {
	pat matcher
	beh behavior
	inv bool
}

func (p *patternSplit) Split(s string, dst []string) []string {
	out, _, _ := p.splitAt(s, true, dst)
	return out
}

func (p *patternSplit) splitAt(s string, _ bool, dst []string) ([]string, bool, error) {
	if s == "" {
		return dst, false, nil
	}
	// Calls on concrete types keep the sink on the stack; only the general engine, which allocates anyway,
	// goes through the interface.
	k := newSink(s, p.beh, p.inv, dst)
	switch m := p.pat.(type) {
	case scanKind:
		if p.beh == isolated || p.beh == removed && p.inv {
			// The matches tile s, so every match is a word: skip the sink.
			return m.appendMatches(s, dst), true, nil
		}
		m.feed(s, &k)
	case charClass:
		m.feed(s, &k)
	case literal:
		m.feed(s, &k)
	case oneRune:
		m.feed(s, &k)
	case wordRuns:
		m.feed(s, &k)
	default:
		kp := sinkPool.Get().(*sink)
		*kp = k
		m.feed(s, kp)
		out, first, err := kp.result()
		*kp = sink{}
		sinkPool.Put(kp)
		return out, first, err
	}
	return k.result()
}

var sinkPool = sync.Pool{New: func() any { return new(sink) }}

// literal matches a fixed, non-empty string (leftmost, non-overlapping).
type literal string

func (l literal) feed(s string, k *sink) {
	prev := 0
	for prev < len(s) {
		j := strings.Index(s[prev:], string(l))
		if j < 0 {
			break
		}
		if j > 0 {
			k.piece(prev, prev+j, false)
		}
		k.piece(prev+j, prev+j+len(l), true)
		prev += j + len(l)
	}
	if prev < len(s) {
		k.piece(prev, len(s), false)
	}
}

// charClass matches, one character at a time, the characters whose class shares a bit with it.
type charClass uint8

func (c charClass) feed(s string, k *sink) {
	prev := 0
	for i := 0; i < len(s); {
		cl, n := classAt(s, i)
		if cl&uint8(c) != 0 {
			if prev < i {
				k.piece(prev, i, false)
			}
			k.piece(i, i+n, true)
			prev = i + n
		}
		i += n
	}
	if prev < len(s) {
		k.piece(prev, len(s), false)
	}
}

// oneRune matches, one at a time, the occurrences of a character.
type oneRune string

func (r oneRune) feed(s string, k *sink) { literal(r).feed(s, k) }

// wordRuns matches Rust regex `\w+|[^\w\s]+` (the Whitespace pre-tokenizer's pattern).
type wordRuns struct{}

func (wordRuns) feed(s string, k *sink) {
	for i := 0; i < len(s); {
		c, _ := classAt(s, i)
		var e int
		switch {
		case c&cS != 0:
			e = runWhile(s, i, cS)
			k.piece(i, e, false)
			i = e
			continue
		case c&cWord != 0:
			e = runWhile(s, i, cWord)
		default:
			e = runUntil(s, i, cWord|cS)
		}
		k.piece(i, e, true)
		i = e
	}
}

// bert is BertPreTokenizer: split on whitespace (removed), then isolate each punctuation character.
type bert struct{}

func (bert) Split(s string, dst []string) []string {
	out, _, _ := bert{}.splitAt(s, true, dst)
	return out
}

func (bert) splitAt(s string, _ bool, dst []string) ([]string, bool, error) {
	n0 := len(dst)
	first := false
	emit := func(a, b int) {
		if len(dst) == n0 {
			first = a == 0
		}
		dst = append(dst, s[a:b])
	}
	start := 0
	for i := 0; i < len(s); {
		c, n := classAt(s, i)
		switch {
		case c&cS != 0:
			if start < i {
				emit(start, i)
			}
			start = i + n
		case c&cPunct != 0:
			if start < i {
				emit(start, i)
			}
			emit(i, i+n)
			start = i + n
		}
		i += n
	}
	if start < len(s) {
		emit(start, len(s))
	}
	return dst, first, nil
}

// byteLevel is ByteLevel in the raw-bytes representation (see Info): an optional leading space, then the
// GPT-2 split regex.
type byteLevel struct {
	prefixSpace bool
	useRegex    bool
}

func (b *byteLevel) Split(s string, dst []string) []string {
	out, _, _ := b.splitAt(s, true, dst)
	return out
}

func (b *byteLevel) splitAt(s string, _ bool, dst []string) ([]string, bool, error) {
	if s == "" {
		return dst, false, nil
	}
	if b.prefixSpace && s[0] != ' ' {
		if !b.useRegex {
			return append(dst, " "+s), true, nil
		}
		// Only the first word holds the added space: copy that word, not the text.
		x := gpt2AfterSpace(s)
		dst = append(dst, " "+s[:x])
		return scanGPT2.appendMatches(s[x:], dst), true, nil
	}
	if !b.useRegex {
		return append(dst, s), true, nil
	}
	return scanGPT2.appendMatches(s, dst), true, nil
}

// prependScheme is Metaspace's prepend_scheme.
type prependScheme uint8

const (
	prependAlways prependScheme = iota
	prependFirst
	prependNever
)

// metaspace is Metaspace: spaces become the replacement character, which is also prepended, then words are
// cut before each replacement character.
type metaspace struct {
	repl   string // one character
	scheme prependScheme
	split  bool
}

func (m *metaspace) Split(s string, dst []string) []string {
	out, _, _ := m.splitAt(s, true, dst)
	return out
}

func (m *metaspace) splitAt(s string, atStart bool, dst []string) ([]string, bool, error) {
	if s == "" {
		return dst, false, nil
	}
	prepend := false
	switch m.scheme {
	case prependAlways:
		prepend = s[0] != ' ' && !strings.HasPrefix(s, m.repl)
	case prependFirst:
		prepend = atStart && s[0] != ' ' && !strings.HasPrefix(s, m.repl)
	}
	if prepend || strings.IndexByte(s, ' ') >= 0 {
		var b strings.Builder
		b.Grow(len(s) + len(m.repl) + strings.Count(s, " ")*(len(m.repl)-1))
		if prepend {
			b.WriteString(m.repl)
		}
		for i := 0; i < len(s); {
			j := strings.IndexByte(s[i:], ' ')
			if j < 0 {
				b.WriteString(s[i:])
				break
			}
			b.WriteString(s[i : i+j])
			b.WriteString(m.repl)
			i += j + 1
		}
		s = b.String()
	}
	if !m.split {
		return append(dst, s), true, nil
	}
	k := newSink(s, mergedWithNext, false, dst)
	oneRune(m.repl).feed(s, &k)
	return k.result()
}

// fixedLength cuts words of n characters.
type fixedLength struct{ n int }

func (f *fixedLength) Split(s string, dst []string) []string {
	out, _, _ := f.splitAt(s, true, dst)
	return out
}

func (f *fixedLength) splitAt(s string, _ bool, dst []string) ([]string, bool, error) {
	start, count := 0, 0
	for i := 0; i < len(s); {
		_, n := utf8.DecodeRuneInString(s[i:])
		i += n
		if count++; count == f.n {
			dst = append(dst, s[start:i])
			start, count = i, 0
		}
	}
	if start < len(s) {
		dst = append(dst, s[start:])
	}
	return dst, s != "", nil
}

// identity returns the text as one word (an empty Sequence, or a ByteLevel that does nothing in the raw-bytes
// representation).
type identity struct{}

func (identity) Split(s string, dst []string) []string {
	if s == "" {
		return dst
	}
	return append(dst, s)
}

func (identity) splitAt(s string, _ bool, dst []string) ([]string, bool, error) {
	if s == "" {
		return dst, false, nil
	}
	return append(dst, s), true, nil
}

// sequence applies each step to every word of the step before.
type sequence struct {
	steps []splitter
}

type scratch struct{ a, b []string }

var scratchPool = sync.Pool{New: func() any { return new(scratch) }}

func (q *sequence) Split(s string, dst []string) []string {
	out, _, _ := q.splitAt(s, true, dst)
	return out
}

func (q *sequence) splitAt(s string, atStart bool, dst []string) ([]string, bool, error) {
	if len(q.steps) == 1 {
		return q.steps[0].splitAt(s, atStart, dst)
	}
	sc := scratchPool.Get().(*scratch)
	bufs := [2][]string{sc.a, sc.b}
	// first: the first word of cur begins at offset 0 of s.
	cur, first, err := q.steps[0].splitAt(s, atStart, bufs[0][:0])
	bufs[0] = cur
	for si := 1; si < len(q.steps) && err == nil; si++ {
		last := si == len(q.steps)-1
		out := dst
		if !last {
			out = bufs[si%2][:0]
		}
		nextFirst := false
		for j, w := range cur {
			before := len(out)
			var f bool
			var werr error
			out, f, werr = q.steps[si].splitAt(w, atStart && first && j == 0, out)
			if werr != nil {
				err = werr
				break
			}
			if j == 0 {
				nextFirst = first && f && len(out) > before
			}
		}
		clear(cur) // the pooled buffers must not keep the text alive
		if last {
			dst = out
		} else {
			bufs[si%2] = out
			cur = out
		}
		first = nextFirst
	}
	sc.a, sc.b = bufs[0][:0], bufs[1][:0]
	scratchPool.Put(sc)
	return dst, first, err
}
