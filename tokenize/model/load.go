package model

import (
	"encoding/json"
	"errors"
	"strings"

	"github.com/gload/gload/tokenize/tokjson"
)

// Compile-time checks that every model satisfies Model.
var (
	_ Model = (*bpeModel)(nil)
	_ Model = (*wordPieceModel)(nil)
	_ Model = (*wordLevelModel)(nil)
	_ Model = (*unigramModel)(nil)
)

func fromJSON(raw json.RawMessage, path string, opts Options) (Model, error) {
	if isNull(raw) {
		return nil, tokjson.Invalid(path, "%w", ErrMissingField)
	}
	f, err := objectFields(raw, path)
	if err != nil {
		return nil, err
	}
	var typ *string
	if err := decodeField(f, "type", path, &typ); err != nil {
		return nil, err
	}
	if typ == nil {
		return fromUntagged(f, path, opts)
	}
	switch *typ {
	case "BPE":
		return asModel(loadBPE(f, path, opts))
	case "WordPiece":
		return asModel(loadWordPiece(f, path, opts))
	case "WordLevel":
		return asModel(loadWordLevel(f, path, opts))
	case "Unigram":
		return asModel(loadUnigram(f, path, opts))
	default:
		return nil, tokjson.Unsupported(path+".type", "model type %q", *typ)
	}
}

// fromUntagged handles model objects without "type" (files from old tokenizers versions): like Hugging Face's
// untagged ModelWrapper it tries BPE, WordPiece, WordLevel and Unigram in this order and takes the first that
// decodes. A variant that fails only because gload does not support one of its options stops the search with
// that error, since Hugging Face would have accepted that variant.
func fromUntagged(f map[string]json.RawMessage, path string, opts Options) (Model, error) {
	variants := []struct {
		name string
		load func() (Model, error)
	}{
		{"BPE", func() (Model, error) { return asModel(loadBPE(f, path, opts)) }},
		{"WordPiece", func() (Model, error) { return asModel(loadWordPiece(f, path, opts)) }},
		{"WordLevel", func() (Model, error) { return asModel(loadWordLevel(f, path, opts)) }},
		{"Unigram", func() (Model, error) { return asModel(loadUnigram(f, path, opts)) }},
	}
	var errs []string
	for _, v := range variants {
		m, err := v.load()
		if err == nil || errors.Is(err, tokjson.ErrUnsupported) {
			return m, err
		}
		errs = append(errs, v.name+": "+err.Error())
	}
	return nil, tokjson.Invalid(path, "model without \"type\" matches no variant (%s)", strings.Join(errs, "; "))
}

// asModel turns a loader's result into a Model, never a non-nil interface holding a nil pointer.
func asModel[T Model](m T, err error) (Model, error) {
	if err != nil {
		return nil, err
	}
	return m, nil
}
