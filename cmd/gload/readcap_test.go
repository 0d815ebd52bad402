package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

// TestConfigFilesCapped (issue 34 item 11): the files the CLI reads whole —
// tokenizer.json, chat templates, tokenizer_config.json, --mixture-file —
// and the lines encode reads from stdin are capped: /dev/zero, or a huge
// sparse file, is refused naming the file and the cap instead of taking all
// memory.
func TestConfigFilesCapped(t *testing.T) {
	dir := t.TempDir()
	in := filepath.Join(dir, "in.jsonl")
	if err := os.WriteFile(in, []byte(`{"text": "hello"}`+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	chatIn := filepath.Join(dir, "chat.jsonl")
	if err := os.WriteFile(chatIn, []byte(`[{"role": "user", "content": "hi"}]`+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	huge := filepath.Join(dir, "huge.json") // sparse: 1 TiB that reads as zeros
	fh, err := os.Create(huge)
	if err != nil {
		t.Fatal(err)
	}
	if err := fh.Truncate(1 << 40); err != nil {
		t.Skipf("cannot make a sparse 1 TiB file here: %v", err)
	}
	fh.Close()
	sparse := func(path string) {
		t.Helper()
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.Link(huge, path); err != nil {
			t.Fatal(err)
		}
	}
	// A --resume journal and a Hugging Face state.json of 1 TiB.
	resumeOut := filepath.Join(dir, "resume")
	sparse(filepath.Join(resumeOut, "gload.progress.json"))
	hfIn := filepath.Join(dir, "hf")
	sparse(filepath.Join(hfIn, "state.json"))
	tok := filepath.Join("..", "..", "examples", "udhr", "tokenizer.json")
	// A pipe that never ends: a writer of zeros until the reader closes it.
	fifo := filepath.Join(dir, "fifo")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Skipf("no FIFOs here: %v", err)
	}
	writerDone := make(chan struct{})
	go func() {
		defer close(writerDone)
		w, err := os.OpenFile(fifo, os.O_WRONLY, 0)
		if err != nil {
			return
		}
		defer w.Close()
		buf := make([]byte, 1<<20)
		for {
			if _, err := w.Write(buf); err != nil {
				return // the reader closed its end
			}
		}
	}()
	defer func() { <-writerDone }()
	zero, err := os.Open("/dev/zero")
	if err != nil {
		t.Skipf("no /dev/zero: %v", err)
	}
	zero.Close()
	for _, tc := range []struct {
		name  string
		stdin string // a file opened as stdin ("" none)
		args  []string
		want  []string
	}{
		{"tokenizer /dev/zero", "", []string{"tokenize", "--quiet", "--tokenizer", "/dev/zero", "--out", filepath.Join(dir, "o1"), in},
			[]string{"/dev/zero", "more than 134217728 bytes (128 MiB), the limit of tokenize.MaxTokenizerFileBytes"}},
		{"tokenizer 1 TiB file", "", []string{"tokenize", "--quiet", "--tokenizer", huge, "--out", filepath.Join(dir, "o2"), in},
			[]string{huge, "it holds 1099511627776 bytes, more than 134217728 bytes"}},
		{"tokenizer from a pipe", "", []string{"encode", "--tokenizer", fifo},
			[]string{fifo, "the limit of tokenize.MaxTokenizerFileBytes"}},
		{"chat template /dev/zero", "", []string{"tokenize", "--quiet", "--tokenizer", tok, "--format", "chat", "--chat-template", "/dev/zero",
			"--out", filepath.Join(dir, "o3"), chatIn},
			[]string{"/dev/zero", "the limit of tokenize.MaxConfigFileBytes"}},
		{"encode stdin /dev/zero", "/dev/zero", []string{"encode", "--tokenizer", tok},
			[]string{"stdin: line 1: longer than 67108864 bytes (corpus.DefaultMaxDocBytes"}},
		{"resume journal of 1 TiB", "", []string{"tokenize", "--quiet", "--tokenizer", tok, "--resume", "--out", resumeOut, in},
			[]string{"gload.progress.json", "larger than its limit"}},
		{"HF state.json of 1 TiB", "", []string{"tokenize", "--quiet", "--tokenizer", tok, "--out", filepath.Join(dir, "o5"), hfIn},
			[]string{"state.json", "larger than its limit"}},
		{"mixture file /dev/zero", "", []string{"serve", "--no-gpu-watch", "--dataset", "d=" + dir, "--mixture-file", "/dev/zero",
			"--listen", "unix://" + filepath.Join(dir, "s.sock")},
			[]string{"--mixture-file: read /dev/zero: file too large", "gload serve --mixture-file"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var stdin *os.File
			if tc.stdin != "" {
				f, err := os.Open(tc.stdin)
				if err != nil {
					t.Fatal(err)
				}
				defer f.Close()
				stdin = f
			}
			var out, errb bytes.Buffer
			var code int
			if stdin != nil {
				code = run(context.Background(), tc.args, stdin, &out, &errb)
			} else {
				code = run(context.Background(), tc.args, strings.NewReader(""), &out, &errb)
			}
			if code == 0 {
				t.Fatalf("exit 0; stderr %q", errb.String())
			}
			for _, w := range tc.want {
				if !strings.Contains(errb.String(), w) {
					t.Fatalf("stderr %q, want it to contain %q", errb.String(), w)
				}
			}
		})
	}
}

// TestNormalizerAmplificationSkipped (issue 34 item 11): a tokenizer.json
// whose normalizers amplify text (chained Replace, a huge Prepend) makes
// tokenize skip the documents they would blow up, naming the normalizer's
// JSON path, and write the others.
func TestNormalizerAmplificationSkipped(t *testing.T) {
	dir := t.TempDir()
	for _, tc := range []struct {
		name, normalizer, path string
	}{
		{"chained Replace", `{"type": "Sequence", "normalizers": [{"type": "NFC"},
			{"type": "Replace", "pattern": {"String": "a"}, "content": "` + strings.Repeat("a", 64) + `"},
			{"type": "Replace", "pattern": {"String": "a"}, "content": "` + strings.Repeat("a", 64) + `"}]}`, "normalizer.normalizers[2]"},
		{"huge Prepend", `{"type": "Prepend", "prepend": "` + strings.Repeat("p", 200_000) + `"}`, "normalizer"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			sub := filepath.Join(dir, strings.ReplaceAll(tc.name, " ", "_"))
			if err := os.MkdirAll(sub, 0o755); err != nil {
				t.Fatal(err)
			}
			tok := filepath.Join(sub, "tokenizer.json")
			js := `{"added_tokens": [], "normalizer": ` + tc.normalizer + `, "pre_tokenizer": {"type": "Whitespace"},
				"model": {"type": "WordLevel", "vocab": {"hello": 0, "[UNK]": 1}, "unk_token": "[UNK]"}}`
			if err := os.WriteFile(tok, []byte(js), 0o644); err != nil {
				t.Fatal(err)
			}
			in := filepath.Join(sub, "in.jsonl")
			body := `{"text": "hello"}` + "\n" + `{"text": "` + strings.Repeat("a", 1000) + `"}` + "\n" + `{"text": "hello hello"}` + "\n"
			if strings.Contains(tc.name, "Prepend") {
				body = `{"text": "hello"}` + "\n"
			}
			if err := os.WriteFile(in, []byte(body), 0o644); err != nil {
				t.Fatal(err)
			}
			out, errs, code := gload(t, "", "tokenize", "--tokenizer", tok, "--out", filepath.Join(sub, "out"), in)
			if code != 0 {
				t.Fatalf("exit %d: %s", code, errs)
			}
			if !strings.Contains(out, "skipped  normalized too large: 1") {
				t.Fatalf("no document skipped as normalized too large:\n%s", out)
			}
			if !strings.Contains(errs, tc.path+": normalized text of more than") {
				t.Fatalf("the skip does not name %s:\n%s", tc.path, errs)
			}
		})
	}
}
