package main

import (
	"compress/gzip"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/gload/gload/internal/fixtures"
	"github.com/gload/gload/loader"
	"github.com/gload/gload/loader/client"
	"github.com/gload/gload/loader/dataset"
	"github.com/gload/gload/proto/gloadpb"
	"github.com/gload/gload/tokenize/chat"
)

func gunzipTo(t *testing.T, src, dst string) {
	t.Helper()
	f, err := os.Open(src)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	zr, err := gzip.NewReader(f)
	if err != nil {
		t.Fatal(err)
	}
	b, err := io.ReadAll(zr)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(dst, b, 0o644); err != nil {
		t.Fatal(err)
	}
}

// TestTokenizeChatFixtures: `gload tokenize --format chat` on every chat fixture writes exactly the reference
// input_ids and labels, in order, and skips exactly as many records per reason as the reference has error records.
func TestTokenizeChatFixtures(t *testing.T) {
	for _, ft := range fixtures.ChatTemplates {
		t.Run(ft.Name, func(t *testing.T) {
			dir := t.TempDir()
			tokDir := filepath.Join(dir, "tok")
			os.Mkdir(tokDir, 0o755)
			gunzipTo(t, fixtures.TokenizerPath(t, ft.Tokenizer), filepath.Join(tokDir, "tokenizer.json"))
			cfg := filepath.Join(dir, "chat_config.json")
			gunzipTo(t, fixtures.Path(t, ft.Config...), cfg)
			out := filepath.Join(dir, "ds")
			stdout, stderr, code := gload(t, "", "tokenize", "--format", "chat", "--quiet", "--workers", "3",
				"--tokenizer", filepath.Join(tokDir, "tokenizer.json"), "--chat-template", cfg, "--out", out,
				fixtures.ChatConversationsPath(t))
			if code != 0 {
				t.Fatalf("exit %d\n%s\n%s", code, stdout, stderr)
			}
			refs := fixtures.ChatRefs(t, ft.Name)
			var ok []fixtures.ChatRef
			errs := map[string]int{}
			trained := 0
			for _, r := range refs {
				if r.Error != "" {
					errs[strings.SplitN(r.Error, ":", 2)[0]]++
					continue
				}
				ok = append(ok, r)
				for _, l := range r.Labels {
					if l != chat.IgnoreIndex {
						trained++
					}
				}
			}
			d, err := dataset.Open(out, dataset.OpenOptions{})
			if err != nil {
				t.Fatal(err)
			}
			defer d.Close()
			if !d.HasLabels() || d.Len() != len(ok) {
				t.Fatalf("HasLabels %v, %d rows, want %d", d.HasLabels(), d.Len(), len(ok))
			}
			for i, r := range ok {
				ids, _ := d.Tokens(i)
				lb, err := d.Labels(i)
				if err != nil {
					t.Fatal(err)
				}
				if !slices.Equal(ids, r.InputIDs) || !slices.Equal(lb, r.Labels) {
					t.Fatalf("row %d (%s) differs from the reference", i, r.ID)
				}
			}
			for kind, n := range errs {
				if want := fmt.Sprintf("skipped  %-18s %d", kind+":", n); !strings.Contains(stdout, want) {
					t.Errorf("summary lacks %q:\n%s", want, stdout)
				}
			}
			if trained > 0 && !strings.Contains(stdout, fmt.Sprintf("trained    %d tokens", trained)) {
				t.Errorf("summary lacks %d trained tokens:\n%s", trained, stdout)
			}
		})
	}
}

// TestTokenizeChatStrict: --strict stops at the first conversation the template refuses, naming file:line.
func TestTokenizeChatStrict(t *testing.T) {
	dir := t.TempDir()
	tokDir := filepath.Join(dir, "tok")
	os.Mkdir(tokDir, 0o755)
	gunzipTo(t, fixtures.TokenizerPath(t, "llama2"), filepath.Join(tokDir, "tokenizer.json"))
	gunzipTo(t, fixtures.Path(t, "chat", "tokenizers", "mixtral-instruct", "tokenizer_config.json.gz"), filepath.Join(tokDir, "tokenizer_config.json"))
	in := filepath.Join(dir, "sft.jsonl")
	os.WriteFile(in, []byte(`{"messages":[{"role":"user","content":"hi"},{"role":"assistant","content":"yo"}]}
{"messages":[{"role":"system","content":"s"},{"role":"user","content":"hi"}]}
`), 0o644)
	stdout, stderr, code := gload(t, "", "tokenize", "--format", "chat", "--quiet", "--strict",
		"--tokenizer", filepath.Join(tokDir, "tokenizer.json"), "--out", filepath.Join(dir, "ds"), in)
	if code == 0 || !strings.Contains(stderr, "sft.jsonl:2") || !strings.Contains(stderr, "template raised") {
		t.Fatalf("exit %d\n%s\n%s", code, stdout, stderr)
	}
}

// TestServeChatLabels: an SFT dataset written by `gload tokenize --format chat` (the llama3-instruct fixture) is
// served through a real server, over gRPC and shared memory, in every policy (bucketed, tokens, packed): every batch carries labels equal
// to the reference labels of its rows (-100 at padding; packed: -100 at every document's first token), and its
// trained-token count is the number of labels other than -100.
func TestServeChatLabels(t *testing.T) {
	dir := t.TempDir()
	tokDir := filepath.Join(dir, "tok")
	os.Mkdir(tokDir, 0o755)
	gunzipTo(t, fixtures.TokenizerPath(t, "llama3"), filepath.Join(tokDir, "tokenizer.json"))
	gunzipTo(t, fixtures.Path(t, "chat", "tokenizers", "llama3-instruct", "tokenizer_config.json.gz"), filepath.Join(tokDir, "tokenizer_config.json"))
	out := filepath.Join(dir, "ds")
	if _, stderr, code := gload(t, "", "tokenize", "--format", "chat", "--quiet", "--tokenizer", filepath.Join(tokDir, "tokenizer.json"),
		"--out", out, fixtures.ChatConversationsPath(t)); code != 0 {
		t.Fatalf("tokenize exit %d: %s", code, stderr)
	}
	refs := fixtures.ChatRefs(t, "llama3-instruct") // every record is ok for this template: row i = reference i
	srv, err := loader.NewServer(loader.Config{Datasets: map[string]string{"sft": out}, ShmDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	lis, err := loader.Listen("unix://"+filepath.Join(dir, "s.sock"), loader.ListenOptions{})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ctx, lis) }()
	defer func() { cancel(); <-done }()
	c, err := client.Dial(ctx, "unix://"+filepath.Join(dir, "s.sock"))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	for _, tr := range []gloadpb.Transport{gloadpb.Transport_TRANSPORT_GRPC, gloadpb.Transport_TRANSPORT_SHM} {
		for _, pol := range []*gloadpb.BatchPolicy{
			{Policy: "bucketed", BatchSize: 8, PadMultiple: 64, Remainder: "keep"},
			{Policy: "tokens", TokenBudget: 16384, PadMultiple: 64, Remainder: "keep"},
			{Policy: "packed", BatchSize: 2, SeqLen: 8192, Remainder: "keep"},
		} {
			t.Run(tr.String()+"/"+pol.Policy, func(t *testing.T) {
				s, err := c.Stream(ctx, &gloadpb.Open{Dataset: "sft", Seed: 5, Policy: pol, Transport: tr, WorldSize: 1, NumWorkers: 1})
				if err != nil {
					t.Fatal(err)
				}
				defer s.Close()
				if !s.Opened().GetLabels() {
					t.Fatal("Opened.labels is false for an SFT dataset")
				}
				seen := 0
				for {
					b, err := s.Next(ctx)
					if errors.Is(err, io.EOF) {
						break
					}
					if err != nil {
						t.Fatal(err)
					}
					want := expectedLabels(t, b, refs, pol.Policy == "packed")
					if !slices.Equal(b.Labels(), want) {
						t.Fatalf("batch %d: labels differ from the references", b.Seq)
					}
					n := 0
					for _, l := range want {
						if l != chat.IgnoreIndex {
							n++
						}
					}
					if b.Trained != n {
						t.Fatalf("batch %d: trained %d, want %d", b.Seq, b.Trained, n)
					}
					seen += b.Pieces
					b.Release()
				}
				if seen != len(refs) {
					t.Errorf("%d documents served, want %d", seen, len(refs))
				}
			})
		}
	}
}

// expectedLabels builds a batch's labels from the references of the rows its index names.
func expectedLabels(t *testing.T, b *client.Batch, refs []fixtures.ChatRef, packed bool) []int32 {
	t.Helper()
	want := make([]int32, b.Rows*b.Length)
	for i := range want {
		want[i] = chat.IgnoreIndex
	}
	idx, lens := b.Index(), b.Lengths()
	k := 0
	for r := range b.Rows {
		off := 0
		for off < int(lens[r]) {
			if k >= len(idx) {
				t.Fatalf("batch %d: index runs out at row %d", b.Seq, r)
			}
			lab := refs[idx[k]].Labels
			if !packed {
				lab = lab[:lens[r]]
			}
			copy(want[r*b.Length+off:], lab)
			if packed {
				want[r*b.Length+off] = chat.IgnoreIndex
			}
			off += len(lab)
			k++
			if !packed {
				break
			}
		}
	}
	return want
}

// TestInspectShowLabels: inspect --show-labels prints the labels and marks the trained span of the decoded text.
func TestInspectShowLabels(t *testing.T) {
	dir := t.TempDir()
	tokDir := filepath.Join(dir, "tok")
	os.Mkdir(tokDir, 0o755)
	tokPath := filepath.Join(tokDir, "tokenizer.json")
	gunzipTo(t, fixtures.TokenizerPath(t, "llama3"), tokPath)
	gunzipTo(t, fixtures.Path(t, "chat", "tokenizers", "llama3-instruct", "tokenizer_config.json.gz"), filepath.Join(tokDir, "tokenizer_config.json"))
	in := filepath.Join(dir, "sft.jsonl")
	os.WriteFile(in, []byte(`{"messages":[{"role":"user","content":"hi"},{"role":"assistant","content":"yo there"}]}`+"\n"), 0o644)
	out := filepath.Join(dir, "ds")
	if _, stderr, code := gload(t, "", "tokenize", "--format", "chat", "--quiet", "--tokenizer", tokPath, "--out", out, in); code != 0 {
		t.Fatalf("tokenize exit %d: %s", code, stderr)
	}
	stdout, stderr, code := gload(t, "", "inspect", out, "--decode", "0", "--show-labels", "--tokenizer", tokPath)
	want := `<|start_header_id|>assistant<|end_header_id|>\n\n«yo there<|eot_id|>»`
	if code != 0 || !strings.Contains(stdout, want) || !strings.Contains(stdout, "trained 3 of") {
		t.Fatalf("exit %d, want %s in\n%s\n%s", code, want, stdout, stderr)
	}
	if _, _, code := gload(t, "", "inspect", out, "--decode", "0", "--show-labels"); code != 0 {
		t.Fatal("--show-labels without --tokenizer failed")
	}
}

// TestTokenizeChatDeterministic: the same conversations give byte-identical datasets with 1 and 4 workers.
func TestTokenizeChatDeterministic(t *testing.T) {
	dir := t.TempDir()
	tokDir := filepath.Join(dir, "tok")
	os.Mkdir(tokDir, 0o755)
	tokPath := filepath.Join(tokDir, "tokenizer.json")
	gunzipTo(t, fixtures.TokenizerPath(t, "qwen3"), tokPath)
	gunzipTo(t, fixtures.Path(t, "chat", "tokenizers", "qwen2.5", "tokenizer_config.json.gz"), filepath.Join(tokDir, "tokenizer_config.json"))
	var outs []string
	for _, w := range []string{"1", "4"} {
		out := filepath.Join(dir, "ds"+w)
		// The date is an input (recorded in dataset_info.json): fixed, as a reproducible run fixes it.
		if _, stderr, code := gload(t, "", "tokenize", "--format", "chat", "--quiet", "--workers", w, "--shard-size", "200KB", "--template-date", "2024-07-23",
			"--tokenizer", tokPath, "--out", out, fixtures.ChatConversationsPath(t)); code != 0 {
			t.Fatalf("workers %s: exit %d: %s", w, code, stderr)
		}
		outs = append(outs, out)
	}
	a, b := datasetFiles(t, outs[0]), datasetFiles(t, outs[1])
	if len(a) < 3 || len(a) != len(b) {
		t.Fatalf("%d vs %d files", len(a), len(b))
	}
	for name, data := range a {
		if string(b[name]) != string(data) {
			t.Errorf("%s differs between 1 and 4 workers", name)
		}
	}
}

// TestTokenizeChatKeepColumns: --keep-columns with --format chat carries record fields (a string, a nested one by
// dotted path, a number as JSON, a missing one) into string columns beside input_ids and labels, row for row,
// skipped records leaving no row; the conversation's own fields can be kept too.
func TestTokenizeChatKeepColumns(t *testing.T) {
	dir := t.TempDir()
	tokDir := filepath.Join(dir, "tok")
	os.Mkdir(tokDir, 0o755)
	gunzipTo(t, fixtures.TokenizerPath(t, "qwen3"), filepath.Join(tokDir, "tokenizer.json"))
	gunzipTo(t, fixtures.Path(t, "chat", "tokenizers", "qwen2.5", "tokenizer_config.json.gz"), filepath.Join(tokDir, "tokenizer_config.json"))
	in := filepath.Join(dir, "sft.jsonl")
	var sb strings.Builder
	for i := range 5 {
		if i == 2 {
			sb.WriteString(`{"id": "bad", "messages": []}` + "\n") // skipped: no row, no column values
			continue
		}
		fmt.Fprintf(&sb, `{"id": "r%d", "meta": {"src": "s%d", "n": %d}, "messages": [{"role": "user", "content": "q%d"}, {"role": "assistant", "content": "a%d"}]}`+"\n", i, i, i, i, i)
	}
	os.WriteFile(in, []byte(sb.String()), 0o644)
	out := filepath.Join(dir, "ds")
	if stdout, stderr, code := gload(t, "", "tokenize", "--format", "chat", "--quiet", "--workers", "2",
		"--tokenizer", filepath.Join(tokDir, "tokenizer.json"), "--keep-columns", "id,meta.src,meta.n,nope",
		"--out", out, in); code != 0 {
		t.Fatalf("exit %d\n%s\n%s", code, stdout, stderr)
	}
	d, err := dataset.Open(out, dataset.OpenOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	if !d.HasLabels() || d.Len() != 4 || !slices.Equal(d.Columns(), []string{"id", "meta.src", "meta.n", "nope"}) {
		t.Fatalf("labels %v, %d rows, columns %v", d.HasLabels(), d.Len(), d.Columns())
	}
	for row, i := range []int{0, 1, 3, 4} {
		for col, want := range map[string]string{"id": fmt.Sprintf("r%d", i), "meta.src": fmt.Sprintf("s%d", i), "meta.n": fmt.Sprint(i), "nope": ""} {
			got, _, err := d.Column(col, row)
			if err != nil || got != want {
				t.Errorf("row %d %s = %q, %v; want %q", row, col, got, err, want)
			}
		}
	}
}

// TestTokenizeChatHostileTemplate: a template that recurses forever, loops 10^10 times, asks for 10^11 bytes or
// a 10^9 range on some records skips those records with the sandbox's reason and the run finishes (before the
// sandbox the first of them killed the run, leaving its lock and journal); parseTemplateDate reads both forms.
func TestTokenizeChatHostileTemplate(t *testing.T) {
	dir := t.TempDir()
	tokDir := filepath.Join(dir, "tok")
	os.Mkdir(tokDir, 0o755)
	gunzipTo(t, fixtures.TokenizerPath(t, "llama3"), filepath.Join(tokDir, "tokenizer.json"))
	tmpl := filepath.Join(dir, "hostile.jinja")
	os.WriteFile(tmpl, []byte(`{% macro f(n) %}{{ f(n + 1) }}{% endmacro %}
{% for m in messages %}
{% if m.content == 'recurse' %}{{ f(0) }}{% endif %}
{% if m.content == 'loop' %}{% for i in range(100000) %}{% for j in range(100000) %}{% endfor %}{% endfor %}{% endif %}
{% if m.content == 'big' %}{{ 'x' * 100000000000 }}{% endif %}
{% if m.content == 'range' %}{% for i in range(10**9) %}{% endfor %}{% endif %}
{% if m.content == 'append' %}{% set l = [1] %}{% set _ = l.append(l) %}{% endif %}
<{{ m.role }}>{{ m.content }}</>
{% endfor %}{% if add_generation_prompt %}<assistant>{% endif %}`), 0o644)
	in := filepath.Join(dir, "sft.jsonl")
	var sb strings.Builder
	for _, c := range []string{"ok1", "recurse", "ok2", "loop", "big", "range", "append", "ok3"} {
		fmt.Fprintf(&sb, `{"messages": [{"role": "user", "content": %q}, {"role": "assistant", "content": "a"}]}`+"\n", c)
	}
	os.WriteFile(in, []byte(sb.String()), 0o644)
	out := filepath.Join(dir, "ds")
	stdout, stderr, code := gload(t, "", "tokenize", "--format", "chat", "--workers", "2",
		"--tokenizer", filepath.Join(tokDir, "tokenizer.json"), "--chat-template", tmpl, "--out", out, in)
	if code != 0 {
		t.Fatalf("exit %d\n%s\n%s", code, stdout, stderr)
	}
	for _, want := range []string{"template exceeded a sandbox limit: 3", "template raised: 2"} {
		if !strings.Contains(strings.Join(strings.Fields(stdout), " "), want) {
			t.Errorf("summary lacks %q:\n%s", want, stdout)
		}
	}
	d, err := dataset.Open(out, dataset.OpenOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	if d.Len() != 3 {
		t.Errorf("%d rows, want the 3 ok records", d.Len())
	}
	for _, c := range []struct{ in, want string }{{"2024-07-23", "2024-07-23T00:00:00Z"}, {"2024-07-23T10:05:00+02:00", "2024-07-23T08:05:00Z"}} {
		if got, err := parseTemplateDate(c.in, time.Now()); err != nil || got.UTC().Format(time.RFC3339) != c.want {
			t.Errorf("parseTemplateDate(%q) = %v, %v", c.in, got, err)
		}
	}
	if _, err := parseTemplateDate("yesterday", time.Now()); err == nil {
		t.Error("parseTemplateDate accepted \"yesterday\"")
	}
}
