package chat_test

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/gload/gload/internal/fixtures"
	"github.com/gload/gload/tokenize"
	"github.com/gload/gload/tokenize/chat"
)

// benchSetup: the llama3-instruct fixture's encoder, its 350 records, and the plain texts of the same
// conversations (every message content joined, as a text corpus of the same material would hold them).
func benchSetup(b *testing.B) (*tokenize.Tokenizer, *chat.Encoder, [][]byte, []string, int64) {
	tok, err := tokenize.Load(fixtures.TokenizerPath(b, "llama3"))
	if err != nil {
		b.Fatal(err)
	}
	tmpl, err := chat.LoadTemplate(fixtures.Path(b, "chat", "tokenizers", "llama3-instruct", "tokenizer_config.json.gz"), "", "")
	if err != nil {
		b.Fatal(err)
	}
	enc := chat.NewEncoder(tok, tmpl, chat.Options{})
	var recs [][]byte
	var texts []string
	var size int64
	for _, r := range fixtures.ChatRecords(b) {
		recs = append(recs, r.Raw)
		size += int64(len(r.Raw))
		var x struct {
			Messages         []struct{ Content string }
			Prompt, Complete json.RawMessage
		}
		_ = json.Unmarshal(r.Raw, &x)
		var sb strings.Builder
		for _, m := range x.Messages {
			sb.WriteString(m.Content)
			sb.WriteByte('\n')
		}
		texts = append(texts, sb.String())
	}
	return tok, enc, recs, texts, size
}

// BenchmarkChatRecords: rendering + segment rule + tokenizing + labels, per byte of JSON record, on all cores.
func BenchmarkChatRecords(b *testing.B) {
	_, enc, recs, _, size := benchSetup(b)
	b.SetBytes(size)
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			for _, r := range recs {
				if _, err := enc.Record(r); err != nil {
					b.Error(err)
					return
				}
			}
		}
	})
}

// BenchmarkPlainTexts: plain-text tokenizing of the same conversations' contents, per byte of JSON record (the
// same denominator), on all cores.
func BenchmarkPlainTexts(b *testing.B) {
	tok, _, _, texts, size := benchSetup(b)
	b.SetBytes(size)
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		var ids []int32
		for pb.Next() {
			for _, t := range texts {
				ids = tok.AppendEncode(ids[:0], t, false)
			}
		}
	})
}

// BenchmarkChat100kTurns: one record of 100 000 messages (4.5 MB of JSON) through the llama3-instruct template,
// on one core: the rule's 1 + 2 renders per assistant turn made this hours; one render makes it seconds.
func BenchmarkChat100kTurns(b *testing.B) {
	tok, err := tokenize.Load(fixtures.TokenizerPath(b, "llama3"))
	if err != nil {
		b.Fatal(err)
	}
	tmpl, err := chat.LoadTemplate(fixtures.Path(b, "chat", "tokenizers", "llama3-instruct", "tokenizer_config.json.gz"), "", "")
	if err != nil {
		b.Fatal(err)
	}
	enc := chat.NewEncoder(tok, tmpl, chat.Options{})
	var sb strings.Builder
	sb.WriteString(`{"messages": [`)
	for i := range 100_000 {
		if i > 0 {
			sb.WriteString(", ")
		}
		role := []string{"user", "assistant"}[i%2]
		fmt.Fprintf(&sb, `{"role": %q, "content": "message %d: the quick brown fox jumps"}`, role, i)
	}
	sb.WriteString("]}")
	rec := []byte(sb.String())
	b.SetBytes(int64(len(rec)))
	b.ResetTimer()
	for range b.N {
		s, err := enc.Record(rec)
		if err != nil {
			b.Fatal(err)
		}
		if s.Trained() == 0 {
			b.Fatal("nothing trained")
		}
	}
}
