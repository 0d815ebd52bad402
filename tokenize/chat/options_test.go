package chat_test

import (
	"errors"
	"testing"

	"github.com/gload/gload/internal/fixtures"
	"github.com/gload/gload/tokenize"
	"github.com/gload/gload/tokenize/chat"
)

var llama3Tok *tokenize.Tokenizer

func llama3(t *testing.T, cfg []string, opts chat.Options) (*tokenize.Tokenizer, *chat.Encoder) {
	t.Helper()
	if llama3Tok == nil {
		tok, err := tokenize.Load(fixtures.TokenizerPath(t, "llama3"))
		if err != nil {
			t.Fatal(err)
		}
		llama3Tok = tok
	}
	tok := llama3Tok
	tmpl, err := chat.LoadTemplate(fixtures.Path(t, cfg...), "", "")
	if err != nil {
		t.Fatal(err)
	}
	return tok, chat.NewEncoder(tok, tmpl, opts)
}

const twoTurns = `{"messages":[{"role":"user","content":"a"},{"role":"assistant","content":"first"},{"role":"user","content":"b"},{"role":"assistant","content":"second answer"}]}`

// trainedText decodes the trained tokens.
func trainedText(tok *tokenize.Tokenizer, s *chat.Sample) string {
	var ids []int32
	for _, l := range s.Labels {
		if l != chat.IgnoreIndex {
			ids = append(ids, l)
		}
	}
	return tok.Decode(ids, false)
}

func TestLastTurnOnly(t *testing.T) {
	early := []string{"tokenizers", "llama3", "tokenizer_config.json.gz"}
	_, enc := llama3(t, early, chat.Options{})
	var se *chat.SkipError
	if _, err := enc.Record([]byte(twoTurns)); !errors.As(err, &se) || se.Kind != chat.KindUnstable {
		t.Fatalf("default: %v, want a prefix-stability skip", err)
	}
	tok, enc := llama3(t, early, chat.Options{LastTurnOnly: true})
	s, err := enc.Record([]byte(twoTurns))
	if err != nil {
		t.Fatal(err)
	}
	// The early template's last segment: content, <|eot_id|> and the dangling assistant header.
	if got, want := trainedText(tok, s), "second answer<|eot_id|><|start_header_id|>assistant<|end_header_id|>\n\n"; got != want {
		t.Errorf("trained %q, want %q", got, want)
	}
}

func TestTruncation(t *testing.T) {
	instruct := []string{"chat", "tokenizers", "llama3-instruct", "tokenizer_config.json.gz"}
	_, full := llama3(t, instruct, chat.Options{})
	ref, err := full.Record([]byte(twoTurns))
	if err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name    string
		max     int
		drop    bool
		wantErr string
	}{
		{"keeps prefix", 12, false, ""},
		{"all trained cut kept", 3, false, ""},
		{"all trained cut dropped", 3, true, chat.KindAllTruncated},
		{"longer than sample", 1000, true, ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, enc := llama3(t, instruct, chat.Options{MaxLength: tc.max, DropAllTruncated: tc.drop})
			s, err := enc.Record([]byte(twoTurns))
			if tc.wantErr != "" {
				var se *chat.SkipError
				if !errors.As(err, &se) || se.Kind != tc.wantErr {
					t.Fatalf("err %v, want %s", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			n := min(tc.max, len(ref.InputIDs))
			if len(s.InputIDs) != n || len(s.Labels) != n {
				t.Fatalf("%d ids %d labels, want %d", len(s.InputIDs), len(s.Labels), n)
			}
			for i := range n {
				if s.InputIDs[i] != ref.InputIDs[i] || s.Labels[i] != ref.Labels[i] {
					t.Fatalf("position %d differs from the untruncated sample", i)
				}
			}
		})
	}
}

func TestBadRecords(t *testing.T) {
	_, enc := llama3(t, []string{"chat", "tokenizers", "llama3-instruct", "tokenizer_config.json.gz"}, chat.Options{})
	for _, rec := range []string{
		`[1,2]`,
		`{"text":"no conversation"}`,
		`{"messages":"hi"}`,
		`{"messages":[1]}`,
		`{"messages":[{"content":"no role"}]}`,
		`{"messages":[]}`,
		`{"messages":[{"role":"user"},{"role":"assistant","content":"a"}]}`,
		`{"messages":[{"role":"user","content":null},{"role":"assistant","content":"a"}]}`,
		`{"messages":[{"role":"user","content":5},{"role":"assistant","content":"a"}]}`,
		`{"prompt":[],"completion":[{"role":"assistant","content":"c"}]}`,
		`{"prompt":"p"}`,
		`{"prompt":[{"role":"user","content":"p"}],"completion":"c"}`,
		`{"messages":[{"role":"user","content":"p"}],"tools":[{"default":1.0}]}`, // Jinja2 prints 1.0, the engine 1
	} {
		var se *chat.SkipError
		if _, err := enc.Record([]byte(rec)); !errors.As(err, &se) || se.Kind != chat.KindBadRecord {
			t.Errorf("%s: %v, want a bad-record skip", rec, err)
		}
	}
}
