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
