package pipeline

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/gload/gload/tokenize/chat"
	"github.com/gload/gload/tokenize/corpus"
)

// TestChatResumeKeepsTemplateDate: strftime_now() returns the run's one date (chat.Options.TemplateDate) in every
// render, dataset_info.json records it, and a --resume without --template-date renders with the interrupted run's
// date (recorded in the journal), so the resumed dataset equals an uninterrupted run's byte for byte; asking for
// another date on resume is refused as changed flags.
func TestChatResumeKeepsTemplateDate(t *testing.T) {
	tok := loadTok(t)
	dir := t.TempDir()
	var sb strings.Builder
	for i := range 600 {
		fmt.Fprintf(&sb, `{"messages": [{"role": "user", "content": "question %d %s"}, {"role": "assistant", "content": "answer %d"}]}`+"\n",
			i, strings.Repeat("word ", i%40), i)
	}
	in := filepath.Join(dir, "conv.jsonl")
	if err := os.WriteFile(in, []byte(sb.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	tmpl, err := chat.NewTemplate("dated.jinja",
		"{% for m in messages %}[{{ strftime_now('%Y-%m-%d %H:%M') }}] {{ m.role }}: {{ m.content }}\n{% endfor %}", "", "")
	if err != nil {
		t.Fatal(err)
	}
	day1 := time.Date(2024, 7, 23, 10, 0, 0, 0, time.UTC)
	day2 := time.Date(2031, 1, 1, 0, 0, 0, 0, time.UTC)
	opts := func(out string, date time.Time, given bool) Options {
		enc := chat.NewEncoder(tok, tmpl, chat.Options{TemplateDate: date, TemplateDateGiven: given})
		o := Options{Inputs: []string{in}, Engine: tok, Workers: 2, ShardSize: 15000, Out: out, Chat: enc}
		o.Corpus.Format = corpus.FormatAuto
		o.Corpus.RowJSON = true
		return o
	}
	ref := filepath.Join(dir, "ref")
	run(t, opts(ref, day1, true))
	info, err := os.ReadFile(filepath.Join(ref, "dataset_info.json"))
	if err != nil || !strings.Contains(string(info), `"chat_template_date": "2024-07-23T10:00:00Z"`) {
		t.Fatalf("dataset_info.json does not record the date: %s %v", info, err)
	}
	other := filepath.Join(dir, "other")
	run(t, opts(other, day2, true))
	if string(dirBytes(t, ref)["data-00000-of-"+shardCountSuffix(t, ref)]) == string(dirBytes(t, other)["data-00000-of-"+shardCountSuffix(t, other)]) {
		t.Fatal("the date does not reach the template: two dates gave the same first shard")
	}

	out := filepath.Join(dir, "resumed")
	ctx, cancel := context.WithCancel(context.Background())
	hook := &cancelAfterShards{n: 2, cancel: cancel}
	testHookShardClosed = hook.tick
	o := opts(out, day1, true)
	o.Logger = nil
	_, err = Run(ctx, o)
	testHookShardClosed = nil
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("interrupted run: err = %v", err)
	}
	// Another explicit date: refused.
	o = opts(out, day2, true)
	o.Resume = true
	if _, err := Run(context.Background(), o); err == nil || !strings.Contains(err.Error(), "differ") {
		t.Fatalf("resume with another --template-date: %v, want refused", err)
	}
	// No --template-date (the default would be "now"): the interrupted run's date.
	o = opts(out, day2, false)
	o.Resume = true
	if s := run(t, o); !s.Resumed {
		t.Fatal("not resumed")
	}
	sameDirs(t, ref, out)
}

// shardCountSuffix is the "NNNNN.arrow" tail of the dataset's shard names.
func shardCountSuffix(t *testing.T, dir string) string {
	t.Helper()
	m, _ := filepath.Glob(filepath.Join(dir, "data-00000-of-*"))
	if len(m) != 1 {
		t.Fatalf("%s: shards %v", dir, m)
	}
	return strings.TrimPrefix(filepath.Base(m[0]), "data-00000-of-")
}
