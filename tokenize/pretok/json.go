package pretok

import (
	"encoding/json"
	"errors"
	"unicode/utf8"

	"github.com/gload/gload/tokenize/tokjson"
)

// step is one pre-tokenizer of the pipeline once nested Sequences are flattened (a Sequence applies each of
// its members to every word of the one before, so nesting changes nothing).
type step struct {
	typ  string
	raw  json.RawMessage
	path string
}

func fromJSON(raw json.RawMessage, path string) (PreTokenizer, Info, error) {
	if tokjson.IsNull(raw) {
		return nil, Info{}, nil
	}
	var steps []step
	if err := flatten(raw, path, &steps); err != nil {
		return nil, Info{}, err
	}
	var info Info
	var built []splitter
	for i, st := range steps {
		last := i == len(steps)-1
		if st.typ == "ByteLevel" {
			if !last {
				return nil, Info{}, tokjson.Unsupported(st.path, "ByteLevel before other pre-tokenizers "+
					"(words are kept as raw bytes and the model maps them to the byte-level alphabet, "+
					"so ByteLevel must be the last pre-tokenizer)")
			}
			info.ByteLevel = true
		}
		sp, err := build(st)
		if err != nil {
			return nil, Info{}, err
		}
		if _, ok := sp.(identity); ok {
			continue
		}
		built = append(built, sp)
	}
	switch len(built) {
	case 0:
		return identity{}, info, nil
	case 1:
		return built[0], info, nil
	}
	return &sequence{steps: built}, info, nil
}

func flatten(raw json.RawMessage, path string, out *[]step) error {
	if tokjson.IsNull(raw) {
		return tokjson.Invalid(path, "null pre-tokenizer")
	}
	typ, err := tokjson.TypeOf(raw, path)
	if err != nil {
		return err
	}
	if typ != "Sequence" {
		*out = append(*out, step{typ: typ, raw: raw, path: path})
		return nil
	}
	var seq struct {
		PreTokenizers *[]json.RawMessage `json:"pretokenizers"`
	}
	if err := tokjson.Decode(raw, path, &seq); err != nil {
		return err
	}
	if seq.PreTokenizers == nil {
		return tokjson.Invalid(path, `missing field "pretokenizers"`)
	}
	for i, r := range *seq.PreTokenizers {
		if err := flatten(r, tokjson.Index(path, "pretokenizers", i), out); err != nil {
			return err
		}
	}
	return nil
}

// oneChar checks a JSON char field (serde: a string of exactly one character).
func oneChar(path, field string, v *string) (string, error) {
	if v == nil {
		return "", tokjson.Missing(path, field)
	}
	if utf8.RuneCountInString(*v) != 1 {
		return "", tokjson.Invalid(path, "%s must be one character, got %q", field, *v)
	}
	return *v, nil
}

func parseBehavior(path string, v *string) (behavior, error) {
	if v == nil {
		return 0, tokjson.Missing(path, "behavior")
	}
	b, ok := behaviorNames[*v]
	if !ok {
		return 0, tokjson.Unsupported(path, "split behavior %q", *v)
	}
	return b, nil
}

// build decodes one (non-Sequence) pre-tokenizer. Required fields are those that Hugging Face tokenizers
// 0.23.2 requires; defaults are its defaults; unknown fields are ignored, as serde does.
func build(st step) (splitter, error) {
	path := st.path
	switch st.typ {
	case "ByteLevel":
		var c struct {
			AddPrefixSpace *bool `json:"add_prefix_space"`
			TrimOffsets    *bool `json:"trim_offsets"` // offsets only
			UseRegex       *bool `json:"use_regex"`
		}
		if err := tokjson.Decode(st.raw, path, &c); err != nil {
			return nil, err
		}
		if c.AddPrefixSpace == nil {
			return nil, tokjson.Missing(path, "add_prefix_space")
		}
		if c.TrimOffsets == nil {
			return nil, tokjson.Missing(path, "trim_offsets")
		}
		b := &byteLevel{prefixSpace: *c.AddPrefixSpace, useRegex: c.UseRegex == nil || *c.UseRegex}
		if !b.prefixSpace && !b.useRegex {
			return identity{}, nil // the byte mapping itself is the model's job (Info.ByteLevel)
		}
		return b, nil

	case "Split":
		var c struct {
			Pattern  *tokjson.Pattern `json:"pattern"`
			Behavior *string          `json:"behavior"`
			Invert   *bool            `json:"invert"`
		}
		if err := tokjson.Decode(st.raw, path, &c); err != nil {
			return nil, err
		}
		if c.Pattern == nil {
			return nil, tokjson.Missing(path, "pattern")
		}
		if c.Invert == nil {
			return nil, tokjson.Missing(path, "invert")
		}
		beh, err := parseBehavior(path, c.Behavior)
		if err != nil {
			return nil, err
		}
		pat, err := buildPattern(path, c.Pattern)
		if err != nil {
			return nil, err
		}
		return &patternSplit{pat: pat, beh: beh, inv: *c.Invert}, nil

	case "Metaspace":
		var c struct {
			Replacement    *string `json:"replacement"`
			AddPrefixSpace *bool   `json:"add_prefix_space"`
			PrependScheme  *string `json:"prepend_scheme"`
			Split          *bool   `json:"split"`
		}
		if err := tokjson.Decode(st.raw, path, &c); err != nil {
			return nil, err
		}
		repl, err := oneChar(path, "replacement", c.Replacement)
		if err != nil {
			return nil, err
		}
		m := &metaspace{repl: repl, scheme: prependAlways, split: c.Split == nil || *c.Split}
		if c.PrependScheme != nil {
			switch *c.PrependScheme {
			case "always":
				m.scheme = prependAlways
			case "first":
				m.scheme = prependFirst
			case "never":
				m.scheme = prependNever
			default:
				return nil, tokjson.Unsupported(path, "prepend_scheme %q", *c.PrependScheme)
			}
		}
		if c.AddPrefixSpace != nil && !*c.AddPrefixSpace {
			if m.scheme != prependNever {
				return nil, tokjson.Invalid(path, "add_prefix_space false does not match prepend_scheme")
			}
		}
		return m, nil

	case "Whitespace":
		return &patternSplit{pat: wordRuns{}, beh: removed, inv: true}, nil

	case "WhitespaceSplit":
		return &patternSplit{pat: charClass(cS), beh: removed}, nil

	case "BertPreTokenizer":
		return bert{}, nil

	case "Digits":
		var c struct {
			IndividualDigits *bool `json:"individual_digits"`
		}
		if err := tokjson.Decode(st.raw, path, &c); err != nil {
			return nil, err
		}
		if c.IndividualDigits == nil {
			return nil, tokjson.Missing(path, "individual_digits")
		}
		if *c.IndividualDigits {
			return &patternSplit{pat: charClass(cNum), beh: isolated}, nil
		}
		return &patternSplit{pat: charClass(cNum), beh: contiguous}, nil

	case "Punctuation":
		var c struct {
			Behavior *string `json:"behavior"`
		}
		if err := tokjson.Decode(st.raw, path, &c); err != nil {
			return nil, err
		}
		beh := isolated
		if c.Behavior != nil {
			var err error
			if beh, err = parseBehavior(path, c.Behavior); err != nil {
				return nil, err
			}
		}
		return &patternSplit{pat: charClass(cPunct), beh: beh}, nil

	case "CharDelimiterSplit":
		var c struct {
			Delimiter *string `json:"delimiter"`
		}
		if err := tokjson.Decode(st.raw, path, &c); err != nil {
			return nil, err
		}
		d, err := oneChar(path, "delimiter", c.Delimiter)
		if err != nil {
			return nil, err
		}
		return &patternSplit{pat: oneRune(d), beh: removed}, nil

	case "FixedLength":
		var c struct {
			Length *int `json:"length"`
		}
		if err := tokjson.Decode(st.raw, path, &c); err != nil {
			return nil, err
		}
		n := 5
		if c.Length != nil {
			n = *c.Length
		}
		if n <= 0 {
			return nil, tokjson.Invalid(path, "length must be positive, got %d", n)
		}
		return &fixedLength{n: n}, nil

	case "UnicodeScripts":
		return unicodeScripts{}, nil
	}
	return nil, tokjson.Unsupported(path, "pre-tokenizer type %q", st.typ)
}

// buildPattern picks the matcher of a Split pattern: a hand-written scanner for the known regexes, the general
// engine for other regexes, a substring search for strings.
func buildPattern(path string, p *tokjson.Pattern) (matcher, error) {
	switch {
	case p.String != nil && p.Regex != nil, p.String == nil && p.Regex == nil:
		return nil, tokjson.Invalid(path+".pattern", "want exactly one of String and Regex")
	case p.String != nil && *p.String != "":
		return literal(*p.String), nil
	}
	src := ""
	if p.Regex != nil {
		src = *p.Regex
	}
	if sk := scannerFor(src); sk != 0 {
		return sk, nil
	}
	re, err := compileRegex(src) // also the empty String pattern: Oniguruma's empty regex
	if err != nil {
		if errors.Is(err, errInvalidSyntax) {
			return nil, tokjson.Invalid(path+".pattern", "%v", err)
		}
		return nil, tokjson.Unsupported(path+".pattern", "regex %q: %v", src, err)
	}
	re.path = path + ".pattern"
	return re, nil
}
