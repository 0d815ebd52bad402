package chat_test

import (
	"errors"
	"testing"

	"github.com/gload/gload/internal/fixtures"
	"github.com/gload/gload/tokenize"
	"github.com/gload/gload/tokenize/chat"
)

// FuzzRecord: any record bytes give a sample with as many labels as ids (each label the id or -100) or a
// *SkipError — never a panic or another error.
func FuzzRecord(f *testing.F) {
	for _, s := range []string{
		`{"messages":[{"role":"user","content":"hi"},{"role":"assistant","content":"yo"}]}`,
		`{"prompt":[{"role":"user","content":"p"}],"completion":[{"role":"assistant","content":"c"}]}`,
		`{"prompt":"p","completion":"c"}`,
		`{"messages":[{"role":"assistant","content":"\u0301é<|eot_id|>"}],"tools":[{"a":1.5}]}`,
		`{"messages":[{"role":1}]}`, `[]`, `{`, `{"messages":[{"role":"user","content":{"x":[1,2]}}]}`,
	} {
		f.Add([]byte(s))
	}
	tok, err := tokenize.Load(fixtures.TokenizerPath(f, "llama3"))
	if err != nil {
		f.Fatal(err)
	}
	tmpl, err := chat.LoadTemplate(fixtures.Path(f, "chat", "tokenizers", "llama3-instruct", "tokenizer_config.json.gz"), "", "")
	if err != nil {
		f.Fatal(err)
	}
	enc := chat.NewEncoder(tok, tmpl, chat.Options{MaxLength: 64})
	f.Fuzz(func(t *testing.T, rec []byte) {
		s, err := enc.Record(rec)
		if err != nil {
			var se *chat.SkipError
			if !errors.As(err, &se) || se.Kind == chat.KindInternal {
				t.Fatalf("not a SkipError: %v", err)
			}
			return
		}
		if len(s.Labels) != len(s.InputIDs) || len(s.InputIDs) > 64 {
			t.Fatalf("%d labels, %d ids", len(s.Labels), len(s.InputIDs))
		}
		for i, l := range s.Labels {
			if l != chat.IgnoreIndex && l != s.InputIDs[i] {
				t.Fatalf("label %d is %d, id %d", i, l, s.InputIDs[i])
			}
		}
	})
}
