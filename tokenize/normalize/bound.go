package normalize

import (
	"fmt"
	"strings"
	"unicode/utf8"
)

// Bounded normalization: Apply runs a normalizer with a cap on its output,
// so that a tokenizer.json whose normalizers amplify text (a Replace of one
// byte by a long string, chained; a huge Prepend) cannot make one document
// take all memory. The normalizers that can amplify without bound (Replace,
// Prepend, Precompiled) stop as soon as their output passes the cap, before
// they allocate it; the others grow text by a bounded factor (NFKC at most
// about 11×) and are checked after each step.

// LimitError is a normalizer's output over the cap Apply was given.
type LimitError struct {
	Path string // JSON path of the normalizer that passed the cap (e.g. normalizer.normalizers[2])
	In   int    // bytes that normalizer was given
	Max  int    // the cap
}

func (e *LimitError) Error() string {
	return fmt.Sprintf("%s: normalized text of more than %d bytes from %d bytes", e.Path, e.Max, e.In)
}

// bounded is a normalizer that gives up (ok false) once its output would
// pass max bytes, before allocating it.
type bounded interface {
	normalizeMax(s string, max int) (out string, ok bool)
}

// pathed is a normalizer built from tokenizer.json with its JSON path.
type pathed struct {
	Normalizer
	path string
}

// withPath wraps n (not nil, not a sequence: a sequence's steps carry
// their own paths) with path.
func withPath(n Normalizer, path string) Normalizer {
	switch n.(type) {
	case nil, sequence, pathed:
		return n
	}
	return pathed{n, path}
}

// Apply normalizes s with n (nil: s unchanged), or returns a *LimitError
// once the output of n, or of any step of a Sequence, would pass max bytes.
func Apply(n Normalizer, s string, max int) (string, error) {
	switch v := n.(type) {
	case nil:
		return s, nil
	case sequence:
		for _, step := range v {
			var err error
			if s, err = Apply(step, s, max); err != nil {
				return "", err
			}
		}
		return s, nil
	}
	var out string
	ok := true
	inner, path := n, "normalizer"
	if p, isP := n.(pathed); isP {
		inner, path = p.Normalizer, p.path
	}
	if b, isB := inner.(bounded); isB {
		out, ok = b.normalizeMax(s, max)
	} else {
		out = inner.Normalize(s)
		ok = len(out) <= max
	}
	if !ok {
		return "", &LimitError{Path: path, In: len(s), Max: max}
	}
	return out, nil
}

var (
	_ bounded = (*replace)(nil)
	_ bounded = prepend{}
	_ bounded = (*precompiled)(nil)
)

func (n prepend) normalizeMax(s string, max int) (string, bool) {
	if s != "" && len(n.prefix)+len(s) > max {
		return "", false
	}
	return n.Normalize(s), true
}

func (n *replace) normalizeMax(s string, max int) (string, bool) {
	if s == "" {
		return s, true
	}
	if n.re == nil {
		count := 0
		if n.literal == "" {
			count = utf8.RuneCountInString(s) + 1 // between every two characters and at both ends
		} else {
			count = strings.Count(s, n.literal)
		}
		if len(s)+count*(len(n.content)-len(n.literal)) > max {
			return "", false
		}
		return n.Normalize(s), true
	}
	if n.run != nil {
		return n.run.replaceMax(s, n.content, max)
	}
	matches, err := n.re.FindAllStringIndex(s, -1)
	if err != nil || len(matches) == 0 {
		return s, len(s) <= max
	}
	size := len(s)
	for _, m := range matches {
		size += len(n.content) - (m[1] - m[0])
	}
	if size > max {
		return "", false
	}
	return n.build(s, matches), true
}
