package chat_test

import (
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/gload/gload/internal/fixtures"
	"github.com/gload/gload/tokenize"
	"github.com/gload/gload/tokenize/chat"
)

// TestFixtures: every record of every chat fixture gives exactly the reference input_ids and labels, or exactly the
// reference error record as a skip.
func TestFixtures(t *testing.T) {
	recs := fixtures.ChatRecords(t)
	for _, ft := range fixtures.ChatTemplates {
		t.Run(ft.Name, func(t *testing.T) {
			tok, err := tokenize.Load(fixtures.TokenizerPath(t, ft.Tokenizer))
			if err != nil {
				t.Fatal(err)
			}
			tmpl, err := chat.LoadTemplate(fixtures.Path(t, ft.Config...), "", "")
			if err != nil {
				t.Fatal(err)
			}
			enc := chat.NewEncoder(tok, tmpl, chat.Options{})
			refs := fixtures.ChatRefs(t, ft.Name)
			if len(refs) != len(recs) {
				t.Fatalf("%d references for %d records", len(refs), len(recs))
			}
			bad := 0
			for i, rec := range recs {
				ref := refs[i]
				s, err := enc.Record(rec.Raw)
				var why string
				switch {
				case ref.Error != "" && err == nil:
					why = "want error " + ref.Error
				case ref.Error != "":
					var se *chat.SkipError
					if !errors.As(err, &se) {
						why = "not a SkipError: " + err.Error()
					} else if !sameError(se, ref.Error) {
						why = "error\n got " + err.Error() + "\nwant " + ref.Error
					}
				case err != nil:
					why = "unexpected " + err.Error()
				case !slices.Equal(s.InputIDs, ref.InputIDs):
					why = "input_ids differ"
				case !slices.Equal(s.Labels, ref.Labels):
					why = "labels differ"
				}
				if why != "" {
					bad++
					if bad <= 5 {
						t.Errorf("%s: %s", rec.ID, why)
					}
				}
			}
			if bad > 0 {
				t.Errorf("%d of %d records differ", bad, len(recs))
			}
		})
	}
}

// sameError: prefix-stability errors match the reference word for word; raised errors match in kind and message
// (Jinja2 names the exception class, TemplateError, which a Go engine has not).
func sameError(se *chat.SkipError, ref string) bool {
	if se.Kind == chat.KindUnstable {
		return se.Error() == ref
	}
	if se.Kind != chat.KindRaised || !strings.HasPrefix(ref, chat.KindRaised+": ") {
		return false
	}
	msg := strings.TrimPrefix(ref, chat.KindRaised+": ")
	if i := strings.Index(msg, ": "); i >= 0 {
		msg = msg[i+2:]
	}
	return strings.Contains(se.Msg, msg)
}
