package normalize

import (
	"encoding/json"

	"github.com/gload/gload/tokenize/tokjson"
)

// JSON shapes of the normalizers. Pointers tell a missing field (an error in HF too) from a zero value.
type (
	sequenceJSON struct {
		Normalizers *[]json.RawMessage `json:"normalizers"`
	}
	stripJSON struct {
		Left  *bool `json:"strip_left"`
		Right *bool `json:"strip_right"`
	}
	replaceJSON struct {
		Pattern *tokjson.Pattern `json:"pattern"`
		Content *string          `json:"content"`
	}
	prependJSON struct {
		Prepend *string `json:"prepend"`
	}
	bertJSON struct {
		CleanText          *bool `json:"clean_text"`
		HandleChineseChars *bool `json:"handle_chinese_chars"`
		StripAccents       *bool `json:"strip_accents"` // null: same as lowercase
		Lowercase          *bool `json:"lowercase"`
	}
	precompiledJSON struct {
		Charsmap *string `json:"precompiled_charsmap"`
	}
)

func fromJSON(raw json.RawMessage, path string) (Normalizer, error) {
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
		if v.Normalizers == nil {
			return nil, tokjson.Missing(path, "normalizers")
		}
		seq := make(sequence, 0, len(*v.Normalizers))
		for i, elem := range *v.Normalizers {
			p := tokjson.Index(path, "normalizers", i)
			if tokjson.IsNull(elem) {
				return nil, tokjson.Invalid(p, "null normalizer")
			}
			n, err := fromJSON(elem, p)
			if err != nil {
				return nil, err
			}
			if inner, ok := n.(sequence); ok {
				seq = append(seq, inner...)
			} else {
				seq = append(seq, withPath(n, p))
			}
		}
		return seq, nil
	case "NFC":
		return nfc, nil
	case "NFD":
		return nfd, nil
	case "NFKC":
		return nfkc, nil
	case "NFKD":
		return nfkd, nil
	case "Lowercase":
		return lowercase{}, nil
	case "StripAccents":
		return stripAccents{}, nil
	case "Nmt":
		return nmt{}, nil
	case "ByteLevel":
		return byteLevel{}, nil
	case "Strip":
		var v stripJSON
		if err := tokjson.Decode(raw, path, &v); err != nil {
			return nil, err
		}
		if v.Left == nil {
			return nil, tokjson.Missing(path, "strip_left")
		}
		if v.Right == nil {
			return nil, tokjson.Missing(path, "strip_right")
		}
		return strip{left: *v.Left, right: *v.Right}, nil
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
		return newReplace(*v.Pattern, *v.Content, path)
	case "Prepend":
		var v prependJSON
		if err := tokjson.Decode(raw, path, &v); err != nil {
			return nil, err
		}
		if v.Prepend == nil {
			return nil, tokjson.Missing(path, "prepend")
		}
		return prepend{prefix: *v.Prepend}, nil
	case "BertNormalizer":
		var v bertJSON
		if err := tokjson.Decode(raw, path, &v); err != nil {
			return nil, err
		}
		for _, f := range []struct {
			name string
			v    *bool
		}{{"clean_text", v.CleanText}, {"handle_chinese_chars", v.HandleChineseChars}, {"lowercase", v.Lowercase}} {
			if f.v == nil {
				return nil, tokjson.Missing(path, f.name)
			}
		}
		n := &bert{clean: *v.CleanText, chinese: *v.HandleChineseChars, lower: *v.Lowercase}
		n.stripAccents = n.lower
		if v.StripAccents != nil {
			n.stripAccents = *v.StripAccents
		}
		return n, nil
	case "Precompiled":
		var v precompiledJSON
		if err := tokjson.Decode(raw, path, &v); err != nil {
			return nil, err
		}
		// HF refuses a missing, null or empty charsmap; SentencePiece reads it as "no normalization", and so do we.
		if v.Charsmap == nil || *v.Charsmap == "" {
			return sequence{}, nil
		}
		data, err := decodeCharsmap(*v.Charsmap)
		if err != nil {
			return nil, tokjson.Invalid(path+".precompiled_charsmap", "base64: %v", err)
		}
		p, err := newPrecompiled(data)
		if err != nil {
			return nil, tokjson.Invalid(path+".precompiled_charsmap", "%w", err)
		}
		return p, nil
	default:
		return nil, tokjson.Unsupported(path, "normalizer type %q", typ)
	}
}

// newReplace builds a Replace normalizer from its pattern (exactly one of String and Regex).
func newReplace(pat tokjson.Pattern, content, path string) (*replace, error) {
	switch {
	case pat.String != nil && pat.Regex != nil:
		return nil, tokjson.Invalid(path+".pattern", "both String and Regex")
	case pat.String != nil:
		return &replace{literal: *pat.String, content: content}, nil
	case pat.Regex != nil:
		re, err := tokjson.CompileOniguruma(*pat.Regex, path+".pattern")
		if err != nil {
			return nil, err
		}
		return &replace{re: re, content: content, run: parseRunPattern(*pat.Regex)}, nil
	}
	return nil, tokjson.Invalid(path+".pattern", "neither String nor Regex")
}
