package decode

import (
	"encoding/json"
	"unicode/utf8"

	"github.com/gload/gload/tokenize/tokjson"
)

// JSON shapes of the decoders. Pointers tell a missing field (an error in HF too) from a zero value.
type (
	sequenceJSON struct {
		Decoders *[]json.RawMessage `json:"decoders"`
	}
	byteLevelJSON struct {
		AddPrefixSpace *bool `json:"add_prefix_space"`
		TrimOffsets    *bool `json:"trim_offsets"`
		UseRegex       *bool `json:"use_regex"`
	}
	metaspaceJSON struct {
		Replacement    *string `json:"replacement"`
		PrependScheme  *string `json:"prepend_scheme"`
		AddPrefixSpace *bool   `json:"add_prefix_space"`
		Split          *bool   `json:"split"`
	}
	wordPieceJSON struct {
		Prefix  *string `json:"prefix"`
		Cleanup *bool   `json:"cleanup"`
	}
	bpeJSON struct {
		Suffix *string `json:"suffix"`
	}
	stripJSON struct {
		Content *string `json:"content"`
		Start   *uint   `json:"start"`
		Stop    *uint   `json:"stop"`
	}
	replaceJSON struct {
		Pattern *tokjson.Pattern `json:"pattern"`
		Content *string          `json:"content"`
	}
	ctcJSON struct {
		PadToken           *string `json:"pad_token"`
		WordDelimiterToken *string `json:"word_delimiter_token"`
		Cleanup            *bool   `json:"cleanup"`
	}
)

// singleRune reads a JSON string that must hold exactly one character (a Rust char).
func singleRune(s *string, path, field string) (rune, error) {
	if s == nil {
		return 0, tokjson.Missing(path, field)
	}
	r, size := utf8.DecodeRuneInString(*s)
	if size == 0 || size != len(*s) || (r == utf8.RuneError && size == 1) {
		return 0, tokjson.Invalid(path, "%s %q is not a single character", field, *s)
	}
	return r, nil
}

func fromJSON(raw json.RawMessage, path string) (Decoder, error) {
	if tokjson.IsNull(raw) {
		return nil, nil
	}
	typ, err := tokjson.TypeOf(raw, path)
	if err != nil {
		return nil, err
	}
	switch typ {
	case "Sequence":
		var v sequenceJSON
		if err := tokjson.Decode(raw, path, &v); err != nil {
			return nil, err
		}
		if v.Decoders == nil {
			return nil, tokjson.Missing(path, "decoders")
		}
		seq := make(sequence, 0, len(*v.Decoders))
		for i, elem := range *v.Decoders {
			p := tokjson.Index(path, "decoders", i)
			if tokjson.IsNull(elem) {
				return nil, tokjson.Invalid(p, "null decoder")
			}
			d, err := fromJSON(elem, p)
			if err != nil {
				return nil, err
			}
			seq = append(seq, d)
		}
		return seq, nil
	case "ByteLevel":
		var v byteLevelJSON
		if err := tokjson.Decode(raw, path, &v); err != nil {
			return nil, err
		}
		if v.AddPrefixSpace == nil {
			return nil, tokjson.Missing(path, "add_prefix_space")
		}
		if v.TrimOffsets == nil {
			return nil, tokjson.Missing(path, "trim_offsets")
		}
		return byteLevel{}, nil
	case "Metaspace":
		var v metaspaceJSON
		if err := tokjson.Decode(raw, path, &v); err != nil {
			return nil, err
		}
		r, err := singleRune(v.Replacement, path, "replacement")
		if err != nil {
			return nil, err
		}
		d := metaspace{replacement: r, scheme: prependAlways}
		if v.PrependScheme != nil {
			switch *v.PrependScheme {
			case "always":
			case "first":
				d.scheme = prependFirst
			case "never":
				d.scheme = prependNever
			default:
				return nil, tokjson.Invalid(path, "unknown prepend_scheme %q", *v.PrependScheme)
			}
		}
		// The legacy add_prefix_space=false means "never", and HF refuses it next to another scheme (the
		// default "always" included).
		if v.AddPrefixSpace != nil && !*v.AddPrefixSpace && d.scheme != prependNever {
			return nil, tokjson.Invalid(path, "add_prefix_space does not match declared prepend_scheme")
		}
		return d, nil
	case "WordPiece":
		var v wordPieceJSON
		if err := tokjson.Decode(raw, path, &v); err != nil {
			return nil, err
		}
		if v.Prefix == nil {
			return nil, tokjson.Missing(path, "prefix")
		}
		if v.Cleanup == nil {
			return nil, tokjson.Missing(path, "cleanup")
		}
		return wordPiece{prefix: *v.Prefix, cleanup: *v.Cleanup}, nil
	case "BPEDecoder":
		var v bpeJSON
		if err := tokjson.Decode(raw, path, &v); err != nil {
			return nil, err
		}
		if v.Suffix == nil {
			return nil, tokjson.Missing(path, "suffix")
		}
		return bpeDecoder{suffix: *v.Suffix}, nil
	case "ByteFallback":
		return byteFallback{}, nil
	case "Fuse":
		return fuse{}, nil
	case "Strip":
		var v stripJSON
		if err := tokjson.Decode(raw, path, &v); err != nil {
			return nil, err
		}
		r, err := singleRune(v.Content, path, "content")
		if err != nil {
			return nil, err
		}
		if v.Start == nil {
			return nil, tokjson.Missing(path, "start")
		}
		if v.Stop == nil {
			return nil, tokjson.Missing(path, "stop")
		}
		return strip{content: r, start: int(min(*v.Start, 1<<30)), stop: int(min(*v.Stop, 1<<30))}, nil
	case "Replace":
		var v replaceJSON
		if err := tokjson.Decode(raw, path, &v); err != nil {
			return nil, err
		}
		if v.Pattern == nil {
			return nil, tokjson.Missing(path, "pattern")
		}
		if v.Content == nil {
			return nil, tokjson.Missing(path, "content")
		}
		switch p := *v.Pattern; {
		case p.String != nil && p.Regex != nil:
			return nil, tokjson.Invalid(path+".pattern", "both String and Regex")
		case p.String != nil:
			return replace{literal: *p.String, content: *v.Content}, nil
		case p.Regex != nil:
			re, err := tokjson.CompileOniguruma(*p.Regex, path+".pattern")
			if err != nil {
				return nil, err
			}
			return replace{re: re, content: *v.Content}, nil
		}
		return nil, tokjson.Invalid(path+".pattern", "neither String nor Regex")
	case "CTC":
		var v ctcJSON
		if err := tokjson.Decode(raw, path, &v); err != nil {
			return nil, err
		}
		if v.PadToken == nil {
			return nil, tokjson.Missing(path, "pad_token")
		}
		if v.WordDelimiterToken == nil {
			return nil, tokjson.Missing(path, "word_delimiter_token")
		}
		if v.Cleanup == nil {
			return nil, tokjson.Missing(path, "cleanup")
		}
		return ctc{pad: *v.PadToken, delimiter: *v.WordDelimiterToken, cleanup: *v.Cleanup}, nil
	default:
		return nil, tokjson.Unsupported(path, "decoder type %q", typ)
	}
}
