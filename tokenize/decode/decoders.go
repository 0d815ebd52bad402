package decode

import (
	"strings"
	"unicode/utf8"

	"github.com/dlclark/regexp2/v2"

	"github.com/gload/gload/tokenize/tokjson"
	"github.com/gload/gload/tokenize/utf8fix"
)

// sequence applies its decoders in order.
type sequence []Decoder

func (q sequence) Decode(tokens []string) []string {
	for _, d := range q {
		tokens = d.Decode(tokens)
	}
	return tokens
}

// byteLevel maps the GPT-2 byte-level alphabet back to bytes and joins everything into one string; a token with a
// code point outside the alphabet contributes its own UTF-8 bytes. Invalid UTF-8 becomes U+FFFD per maximal
// subpart, as Rust's String::from_utf8_lossy does.
type byteLevel struct{}

// byteOf inverts tokjson.ByteToRune: byteOf[r] is the byte for r, or -1 (every alphabet rune is below 0x144).
var byteOf = func() (t [0x144]int16) {
	for i := range t {
		t[i] = -1
	}
	for b, r := range tokjson.ByteToRune {
		t[r] = int16(b)
	}
	return t
}()

func (byteLevel) Decode(tokens []string) []string {
	n := 0
	for _, t := range tokens {
		n += len(t)
	}
	raw := make([]byte, 0, n)
	for _, t := range tokens {
		start := len(raw)
		for _, r := range t {
			if r >= rune(len(byteOf)) || byteOf[r] < 0 {
				raw = append(raw[:start], t...)
				break
			}
			raw = append(raw, byte(byteOf[r]))
		}
	}
	return []string{lossyUTF8(raw)}
}

// lossyUTF8 converts b to a string, each maximal subpart of an ill-formed sequence replaced by one U+FFFD
// (Unicode's "substitution of maximal subparts", which Rust and Python's errors="replace" follow).
func lossyUTF8(b []byte) string {
	if utf8.Valid(b) {
		return string(b)
	}
	out, _ := utf8fix.AppendValid(make([]byte, 0, len(b)+8), b)
	return string(out)
}

// PrependScheme of Metaspace: whether the replacement was added before the first word ("always", "first") or
// not ("never").
type prependScheme uint8

const (
	prependAlways prependScheme = iota
	prependFirst
	prependNever
)

// metaspace turns the replacement character (▁) back into spaces; in the first token it is removed instead,
// unless the scheme is "never".
type metaspace struct {
	replacement rune
	scheme      prependScheme
}

func (d metaspace) Decode(tokens []string) []string {
	out := make([]string, len(tokens))
	rep := string(d.replacement)
	for i, t := range tokens {
		if !strings.Contains(t, rep) {
			out[i] = t
			continue
		}
		with := " "
		if i == 0 && d.scheme != prependNever {
			with = ""
		}
		out[i] = strings.ReplaceAll(t, rep, with)
	}
	return out
}

// wordPiece removes the continuation prefix (##) or puts a space before the other tokens but the first, then
// optionally cleans up tokenization artifacts.
type wordPiece struct {
	prefix  string
	cleanup bool
}

func (d wordPiece) Decode(tokens []string) []string {
	out := make([]string, len(tokens))
	for i, t := range tokens {
		if i != 0 {
			if rest, ok := strings.CutPrefix(t, d.prefix); ok {
				t = rest
			} else {
				t = " " + t
			}
		}
		if d.cleanup {
			t = cleanup(t)
		}
		out[i] = t
	}
	return out
}

// cleanupRules are HF's wordpiece::cleanup replacements, applied in this order.
var cleanupRules = [...][2]string{
	{" .", "."}, {" ?", "?"}, {" !", "!"}, {" ,", ","}, {" ' ", "'"}, {" n't", "n't"}, {" 'm", "'m"},
	{" do not", " don't"}, {" 's", "'s"}, {" 've", "'ve"}, {" 're", "'re"},
}

func cleanup(s string) string {
	if !strings.Contains(s, " ") {
		return s
	}
	for _, r := range cleanupRules {
		s = strings.ReplaceAll(s, r[0], r[1])
	}
	return s
}

// bpeDecoder replaces the end-of-word suffix (</w>) by a space, or by nothing in the last token.
type bpeDecoder struct{ suffix string }

func (d bpeDecoder) Decode(tokens []string) []string {
	out := make([]string, len(tokens))
	for i, t := range tokens {
		with := " "
		if i == len(tokens)-1 {
			with = ""
		}
		out[i] = strings.ReplaceAll(t, d.suffix, with)
	}
	return out
}

// byteFallback turns runs of <0xXX> tokens into the bytes they stand for: the run's string if it is valid UTF-8,
// otherwise one U+FFFD per byte token.
type byteFallback struct{}

// fallbackByte parses "<0xXX>" as Rust's u8::from_str_radix(&token[3..5], 16) would (a '+' sign is accepted).
func fallbackByte(t string) (byte, bool) {
	if len(t) != 6 || !strings.HasPrefix(t, "<0x") || t[5] != '>' {
		return 0, false
	}
	h := t[3:5]
	if h[0] == '+' {
		v, ok := hexDigit(h[1])
		return v, ok
	}
	hi, ok1 := hexDigit(h[0])
	lo, ok2 := hexDigit(h[1])
	return hi<<4 | lo, ok1 && ok2
}

func hexDigit(c byte) (byte, bool) {
	switch {
	case '0' <= c && c <= '9':
		return c - '0', true
	case 'a' <= c && c <= 'f':
		return c - 'a' + 10, true
	case 'A' <= c && c <= 'F':
		return c - 'A' + 10, true
	}
	return 0, false
}

func (byteFallback) Decode(tokens []string) []string {
	out := make([]string, 0, len(tokens))
	var run []byte
	flush := func() {
		if len(run) == 0 {
			return
		}
		if utf8.Valid(run) {
			out = append(out, string(run))
		} else {
			for range run {
				out = append(out, "\uFFFD")
			}
		}
		run = run[:0]
	}
	for _, t := range tokens {
		if b, ok := fallbackByte(t); ok {
			run = append(run, b)
			continue
		}
		flush()
		out = append(out, t)
	}
	flush()
	return out
}

// fuse joins all tokens into one.
type fuse struct{}

func (fuse) Decode(tokens []string) []string { return []string{strings.Join(tokens, "")} }

// strip removes up to start leading and stop trailing occurrences of content from every token. Where HF would
// panic (stop longer than the token, or the two cuts crossing) the token becomes empty.
type strip struct {
	content     rune
	start, stop int
}

func (d strip) Decode(tokens []string) []string {
	out := make([]string, len(tokens))
	for i, t := range tokens {
		out[i] = d.strip(t)
	}
	return out
}

func (d strip) strip(t string) string {
	begin := 0
	for k := 0; k < d.start && begin < len(t); k++ {
		r, size := utf8.DecodeRuneInString(t[begin:])
		if r != d.content {
			break
		}
		begin += size
	}
	end := len(t)
	for k := 0; k < d.stop; k++ {
		if end == 0 {
			return "" // HF indexes before the start here
		}
		r, size := utf8.DecodeLastRuneInString(t[:end])
		if r != d.content {
			break
		}
		end -= size
	}
	if begin > end {
		return ""
	}
	return t[begin:end]
}

// replace substitutes content for the matches of a literal or an Oniguruma regex in every token.
type replace struct {
	literal string
	re      *regexp2.Regexp // nil for a literal
	content string
}

func (d replace) Decode(tokens []string) []string {
	out := make([]string, len(tokens))
	for i, t := range tokens {
		out[i] = d.replace(t)
	}
	return out
}

func (d replace) replace(t string) string {
	if t == "" {
		return t
	}
	if d.re == nil {
		return strings.ReplaceAll(t, d.literal, d.content)
	}
	matches, err := d.re.FindAllStringIndex(t, -1)
	if err != nil || len(matches) == 0 {
		return t // a match error (backtracking limit) leaves the token alone: Decode cannot report it
	}
	var b strings.Builder
	last := 0
	for _, m := range matches {
		b.WriteString(t[last:m[0]])
		b.WriteString(d.content)
		last = m[1]
	}
	b.WriteString(t[last:])
	return b.String()
}

// ctc collapses repeated tokens, drops the pad token and, with cleanup, applies the WordPiece cleanup and turns
// the word delimiter into a space; tokens that end up empty are dropped.
type ctc struct {
	pad, delimiter string
	cleanup        bool
}

func (d ctc) Decode(tokens []string) []string {
	out := make([]string, 0, len(tokens))
	for i, t := range tokens {
		if i > 0 && t == tokens[i-1] {
			continue
		}
		t = strings.ReplaceAll(t, d.pad, "")
		if d.cleanup {
			t = strings.ReplaceAll(cleanup(t), d.delimiter, " ")
		}
		if t != "" {
			out = append(out, t)
		}
	}
	return out
}
