package main

import (
	"compress/gzip"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/gload/gload/internal/fixtures"
	"github.com/gload/gload/loader/dataset"
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
