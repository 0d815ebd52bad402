package tokenize

import (
	"encoding/json"
	"fmt"

	"github.com/gload/gload/tokenize/tokjson"
)

// postProcessor adds special tokens around one encoded sequence (Hugging Face's post_processor with a single
// sequence). apply rewrites ids[start:], the sequence just encoded, and returns the extended slice.
type postProcessor interface {
	apply(ids []int32, start int) []int32
}

// wrapProcessor puts fixed ids before and after the sequence (BertProcessing, RobertaProcessing and the common
// TemplateProcessing shapes).
type wrapProcessor struct {
	before, after []int32
}

func (w *wrapProcessor) apply(ids []int32, start int) []int32 {
	if len(w.before) > 0 {
		n := len(ids) - start
		ids = append(ids, w.before...)                      // grow
		copy(ids[start+len(w.before):], ids[start:start+n]) // shift the sequence right
		copy(ids[start:], w.before)
	}
	return append(ids, w.after...)
}

type sequenceProcessor []postProcessor

func (s sequenceProcessor) apply(ids []int32, start int) []int32 {
	for _, p := range s {
		ids = p.apply(ids, start)
	}
	return ids
}

type noopProcessor struct{}

func (noopProcessor) apply(ids []int32, _ int) []int32 { return ids }

type tokenIDPair struct {
	Token string
	ID    int32
}

func (p *tokenIDPair) UnmarshalJSON(b []byte) error {
	var raw []json.RawMessage
	if err := json.Unmarshal(b, &raw); err != nil || len(raw) != 2 {
		return fmt.Errorf("want [token, id], got %s", b)
	}
	if err := json.Unmarshal(raw[0], &p.Token); err != nil {
		return fmt.Errorf("token: %v", err)
	}
	if err := json.Unmarshal(raw[1], &p.ID); err != nil {
		return fmt.Errorf("id: %v", err)
	}
	return nil
}

type templatePiece struct {
	SpecialToken *struct {
		ID     string `json:"id"`
		TypeID int    `json:"type_id"`
	} `json:"SpecialToken"`
	Sequence *struct {
		ID     string `json:"id"`
		TypeID int    `json:"type_id"`
	} `json:"Sequence"`
}

func postFromJSON(raw json.RawMessage, path string, t *Tokenizer) (postProcessor, error) {
	if tokjson.IsNull(raw) {
		return nil, nil
	}
	typ, err := tokjson.TypeOf(raw, path)
	if err != nil {
		return nil, err
	}
	switch typ {
	case "ByteLevel":
		// Only adjusts offsets; ids are unchanged.
		return noopProcessor{}, nil
	case "BertProcessing", "RobertaProcessing":
		var c struct {
			Sep tokenIDPair `json:"sep"`
			Cls tokenIDPair `json:"cls"`
		}
		if err := tokjson.Decode(raw, path, &c); err != nil {
			return nil, err
		}
		return &wrapProcessor{before: []int32{c.Cls.ID}, after: []int32{c.Sep.ID}}, nil
	case "TemplateProcessing":
		var c struct {
			Single        []templatePiece `json:"single"`
			SpecialTokens map[string]struct {
				ID  string  `json:"id"`
				IDs []int32 `json:"ids"`
			} `json:"special_tokens"`
		}
		if err := tokjson.Decode(raw, path, &c); err != nil {
			return nil, err
		}
		w := &wrapProcessor{}
		seen := false
		for i, p := range c.Single {
			ppath := tokjson.Index(path, "single", i)
			switch {
			case p.Sequence != nil:
				if p.Sequence.ID != "A" {
					return nil, tokjson.Unsupported(ppath, "sequence %q in a single-sequence template", p.Sequence.ID)
				}
				if seen {
					return nil, tokjson.Unsupported(ppath, "sequence A used twice")
				}
				seen = true
			case p.SpecialToken != nil:
				st, ok := c.SpecialTokens[p.SpecialToken.ID]
				if !ok {
					return nil, tokjson.Invalid(ppath, "special token %q not in special_tokens", p.SpecialToken.ID)
				}
				if seen {
					w.after = append(w.after, st.IDs...)
				} else {
					w.before = append(w.before, st.IDs...)
				}
			default:
				return nil, tokjson.Unsupported(ppath, "template piece %s", mustJSON(p))
			}
		}
		if !seen {
			return nil, tokjson.Invalid(path+".single", "template has no Sequence A")
		}
		return w, nil
	case "Sequence":
		var c struct {
			Processors []json.RawMessage `json:"processors"`
		}
		if err := tokjson.Decode(raw, path, &c); err != nil {
			return nil, err
		}
		var seq sequenceProcessor
		for i, r := range c.Processors {
			p, err := postFromJSON(r, tokjson.Index(path, "processors", i), t)
			if err != nil {
				return nil, err
			}
			if p != nil {
				seq = append(seq, p)
			}
		}
		return seq, nil
	default:
		return nil, tokjson.Unsupported(path, "post-processor type %q", typ)
	}
}

func mustJSON(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Sprint(v)
	}
	return string(b)
}
