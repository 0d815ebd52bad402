package chat

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/gload/gload/internal/fixtures"
	"github.com/gload/gload/tokenize"
	"github.com/gload/gload/tokenize/chat/jinja"
)

// longConversation is n messages, user and assistant in turn (a system message first if system).
func longConversation(t testing.TB, n int, system bool) []jinja.Value {
	msgs := make([]jinja.Value, 0, n)
	if system {
		msgs = append(msgs, mustValueF(`{"role": "system", "content": "be brief"}`))
	}
	for i := len(msgs); i < n; i++ {
		role := []string{"user", "assistant"}[i%2]
		if system {
			role = []string{"assistant", "user"}[i%2]
		}
		msgs = append(msgs, mustValueF(fmt.Sprintf(`{"role": %q, "content": "turn %d: %s"}`, role, i, strings.Repeat("word ", i%7))))
	}
	return msgs
}

func fixtureEncoder(t testing.TB, ft fixtures.ChatTemplate) *Encoder {
	tok, err := tokenize.Load(fixtures.TokenizerPath(t, ft.Tokenizer))
	if err != nil {
		t.Fatal(err)
	}
	tmpl, err := LoadTemplate(fixtures.Path(t, ft.Config...), "", "")
	if err != nil {
		t.Fatal(err)
	}
	return NewEncoder(tok, tmpl, Options{})
}

// TestLinearRendering: the templates whose shape allows it label a conversation from one render (the rule's
// 1 + 2 renders per assistant turn are gone), and on every fixture conversation the linear path gives exactly
// the segments of the rule's renders, or steps aside.
func TestLinearRendering(t *testing.T) {
	wantLinear := map[string]bool{"llama3": true, "llama3-instruct": true, "qwen3": false, "qwen2.5": true, "mixtral-instruct": true}
	recs := fixtures.ChatRecords(t)
	for _, ft := range fixtures.ChatTemplates {
		t.Run(ft.Name, func(t *testing.T) {
			enc := fixtureEncoder(t, ft)
			if got := enc.tmpl.tmpl.Linear("messages", "add_generation_prompt"); got != wantLinear[ft.Name] {
				t.Fatalf("Linear = %v, want %v", got, wantLinear[ft.Name])
			}
			linear, exactOnly := 0, 0
			for _, r := range recs {
				var rec map[string]json.RawMessage
				_ = json.Unmarshal(r.Raw, &rec)
				m, ok := rec["messages"]
				if !ok {
					continue
				}
				msgs, err := messageList(m, "messages")
				if err != nil {
					t.Fatal(err)
				}
				full, pts, err := enc.tmpl.renderTracked(msgs, jinja.Undefined(), enc.opts.TemplateDate)
				if err != nil {
					continue // raised: both paths skip on the full render
				}
				want, wantErr := enc.messagesExact(msgs, jinja.Undefined(), full)
				if pts == nil {
					exactOnly++
					continue
				}
				segs, ok := linearSegments(msgs, full, pts)
				if !ok {
					exactOnly++
					continue
				}
				linear++
				if wantErr != nil {
					t.Fatalf("%s: linear path labels a record the rule skips: %v", r.ID, wantErr)
				}
				got, err := enc.encodeSegments(full, segs)
				if err != nil || !slices.Equal(got.Labels, want.Labels) || !slices.Equal(got.InputIDs, want.InputIDs) {
					t.Fatalf("%s: linear labels differ from the rule's (%v)", r.ID, err)
				}
			}
			t.Logf("%s: %d conversations labelled from one render, %d by the rule's renders", ft.Name, linear, exactOnly)
			if wantLinear[ft.Name] && ft.Name != "llama3" && exactOnly > 0 {
				t.Errorf("%d conversations fell back to the rule's renders", exactOnly)
			}

			// One render per conversation, whatever its length (the rule's renders would be 1 + 2 per assistant turn).
			if wantLinear[ft.Name] && ft.Name != "llama3" {
				msgs := longConversation(t, 1000, ft.Name == "qwen2.5")
				before := enc.tmpl.renders.Load()
				s, err := enc.Messages(msgs, jinja.Undefined())
				if err != nil {
					t.Fatal(err)
				}
				if n := enc.tmpl.renders.Load() - before; n != 1 {
					t.Errorf("1000 turns: %d renders, want 1", n)
				}
				if s.Trained() == 0 {
					t.Error("nothing trained")
				}
			}
		})
	}
}

// TestLinearTracksObservations: templates that look at the list in ways a prefix could tell apart (its length,
// loop.last, the next message, add_generation_prompt before the loop's end) are labelled by the rule's renders
// (or not linear at all), and give the rule's labels.
func TestLinearTracksObservations(t *testing.T) {
	var tok *tokenize.Tokenizer
	for _, c := range []struct {
		name, src string
		linear    bool // compiled eligible
	}{
		{"plain loop", "{% for m in messages %}<{{ m.role }}>{{ m.content }}</>{% endfor %}{% if add_generation_prompt %}<assistant>{% endif %}", true},
		{"loop.last", "{% for m in messages %}<{{ m.role }}>{{ m.content }}{% if not loop.last %}</>{% endif %}{% endfor %}{% if add_generation_prompt %}<assistant>{% endif %}", true},
		{"loop.length", "{% for m in messages %}{{ loop.length }}<{{ m.role }}>{{ m.content }}</>{% endfor %}{% if add_generation_prompt %}<assistant>{% endif %}", true},
		{"nextitem", "{% for m in messages %}<{{ m.role }}>{{ m.content }}{% if loop.nextitem %}</>{% endif %}{% endfor %}{% if add_generation_prompt %}<assistant>{% endif %}", true},
		{"look ahead", "{% for m in messages %}<{{ m.role }}>{{ m.content }}{% if messages[loop.index0 + 1] is defined %}</>{% endif %}{% endfor %}{% if add_generation_prompt %}<assistant>{% endif %}", true},
		{"negative index", "{% for m in messages %}<{{ m.role }}>{{ m.content }}{{ messages[-1].role }}</>{% endfor %}{% if add_generation_prompt %}<assistant>{% endif %}", true},
		{"namespace state", "{% set ns = namespace(n=0) %}{% for m in messages %}{% set ns.n = ns.n + 1 %}<{{ m.role }}>{{ m.content }}</>{% endfor %}{{ ns.n }}{% if add_generation_prompt %}<assistant>{% endif %}", true},
		{"length before", "{{ messages|length }}{% for m in messages %}<{{ m.role }}>{{ m.content }}</>{% endfor %}", false},
		{"gen in loop", "{% for m in messages %}<{{ m.role }}>{{ m.content }}</>{% if loop.last and add_generation_prompt %}<assistant>{% endif %}{% endfor %}", false},
		{"tail reads list", "{% for m in messages %}<{{ m.role }}>{{ m.content }}</>{% endfor %}{{ messages|length }}{% if add_generation_prompt %}<assistant>{% endif %}", true},
	} {
		if tok == nil {
			var err error
			if tok, err = tokenize.Load(fixtures.TokenizerPath(t, "llama3")); err != nil {
				t.Fatal(err)
			}
		}
		t.Run(c.name, func(t *testing.T) {
			tm := mustTemplate(t, c.src, jinja.Limits{})
			if got := tm.tmpl.Linear("messages", "add_generation_prompt"); got != c.linear {
				t.Fatalf("Linear = %v, want %v", got, c.linear)
			}
			enc := NewEncoder(tok, tm, Options{})
			for _, n := range []int{1, 2, 5, 8} {
				msgs := longConversation(t, n, false)
				got, gotErr := enc.Messages(msgs, jinja.Undefined())
				full, err := tm.Render(msgs, jinja.Undefined(), false, enc.opts.TemplateDate)
				if err != nil {
					t.Fatal(err)
				}
				want, wantErr := enc.messagesExact(msgs, jinja.Undefined(), full)
				if fmt.Sprint(gotErr) != fmt.Sprint(wantErr) {
					t.Fatalf("%d messages: error %v, rule's %v", n, gotErr, wantErr)
				}
				if gotErr == nil && (!slices.Equal(got.Labels, want.Labels) || !slices.Equal(got.InputIDs, want.InputIDs)) {
					t.Fatalf("%d messages: labels differ from the rule's", n)
				}
			}
		})
	}
}

// TestLinearRebound: a template that sets messages to another list before its loop is labelled by the rule.
func TestLinearRebound(t *testing.T) {
	tok, err := tokenize.Load(fixtures.TokenizerPath(t, "llama3"))
	if err != nil {
		t.Fatal(err)
	}
	tm := mustTemplate(t, "{% set messages = other %}{% for m in messages %}<{{ m.role }}>{{ m.content }}</>{% endfor %}{% if add_generation_prompt %}<assistant>{% endif %}", jinja.Limits{})
	tm.vars["other"] = jinja.NewList(longConversation(t, 6, false))
	enc := NewEncoder(tok, tm, Options{})
	msgs := longConversation(t, 4, false)
	got, gotErr := enc.Messages(msgs, jinja.Undefined())
	full, _ := tm.Render(msgs, jinja.Undefined(), false, enc.opts.TemplateDate)
	want, wantErr := enc.messagesExact(msgs, jinja.Undefined(), full)
	if fmt.Sprint(gotErr) != fmt.Sprint(wantErr) || gotErr == nil && !slices.Equal(got.Labels, want.Labels) {
		t.Fatalf("got %v, rule's %v", gotErr, wantErr)
	}
}
