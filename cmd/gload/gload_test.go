package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/gload/gload/internal/version"
	"github.com/gload/gload/loader/dataset"
)

const (
	exampleTokenizer = "../../examples/udhr/tokenizer.json"
	exampleCorpus    = "../../examples/udhr/corpus.jsonl.gz"
)

// gload runs the command tree in-process and returns stdout, stderr and the exit status.
func gload(t *testing.T, stdin string, args ...string) (string, string, int) {
	t.Helper()
	var out, errb bytes.Buffer
	code := run(context.Background(), args, strings.NewReader(stdin), &out, &errb)
	return out.String(), errb.String(), code
}

func TestHelpOnEveryCommand(t *testing.T) {
	for _, cmd := range [][]string{{"--help"}, {"encode", "--help"}, {"tokenize", "--help"}, {"compress", "--help"}, {"inspect", "--help"},
		{"serve", "--help"}, {"watch", "--help"}, {"bench", "--help"}} {
		out, _, code := gload(t, "", cmd...)
		if code != 0 || !strings.Contains(out, "Usage:") {
			t.Errorf("%v: exit %d, output %q", cmd, code, out)
		}
	}
	// The root's help lists every subcommand once (cobra's list; the overview above it does not repeat it).
	out, _, _ := gload(t, "", "--help")
	for _, sub := range []string{"encode", "tokenize", "compress", "inspect", "merge", "index", "serve", "watch", "bench", "sync"} {
		if n := len(regexp.MustCompile(`(?m)^ +(gload )?`+sub+` +\S`).FindAllString(out, -1)); n != 1 {
			t.Errorf("root --help describes %s %d times, want once:\n%s", sub, n, out)
		}
	}
	out, _, code := gload(t, "", "--version")
	if code != 0 || !strings.HasPrefix(out, "gload "+version.Release()) {
		t.Errorf("--version: exit %d, %q", code, out)
	}
}

func TestEncode(t *testing.T) {
	in := `{"text": "All human beings are born free"}` + "\n" + `{"text": "égaux en dignité"}` + "\n\n"
	out, errOut, code := gload(t, in, "encode", "--tokenizer", exampleTokenizer, "--decode", "--add-special-tokens")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if len(lines) != 3 {
		t.Fatalf("%d output lines, want 3 (one per input line): %q", len(lines), out)
	}
	var first struct {
		IDs     []int32 `json:"ids"`
		Decoded string  `json:"decoded"`
	}
	if err := json.Unmarshal([]byte(lines[0]), &first); err != nil {
		t.Fatal(err)
	}
	if first.IDs[0] != 0 || first.Decoded != "<|bos|>All human beings are born free" {
		t.Errorf("first line %+v", first)
	}
	_, errOut, code = gload(t, "{\"text\": 1}\n", "encode", "--tokenizer", exampleTokenizer)
	if code != 1 || !strings.Contains(errOut, "stdin:1") {
		t.Errorf("non-string text: exit %d, stderr %q", code, errOut)
	}
}

func TestTokenizeInspect(t *testing.T) {
	out := filepath.Join(t.TempDir(), "udhr")
	stdout, errOut, code := gload(t, "", "tokenize", "--quiet", "--tokenizer", exampleTokenizer, "--append-eos",
		"--keep-columns", "src", "--out", out, exampleCorpus)
	if code != 0 {
		t.Fatalf("tokenize: exit %d: %s", code, errOut)
	}
	if !strings.Contains(stdout, "266 read, 266 rows written, 0 skipped") {
		t.Errorf("summary: %s", stdout)
	}
	stdout, errOut, code = gload(t, "", "inspect", out, "--decode", "0", "--tokenizer", exampleTokenizer)
	if code != 0 {
		t.Fatalf("inspect: exit %d: %s", code, errOut)
	}
	for _, want := range []string{"rows        266", "columns     input_ids, src", "length histogram", "data-00000-of-00001.arrow", "<|eos|>"} {
		if !strings.Contains(stdout, want) {
			t.Errorf("inspect output lacks %q:\n%s", want, stdout)
		}
	}
	// Another tokenizer (its hash differs) is refused for --decode, unless --any-tokenizer.
	data, err := os.ReadFile(exampleTokenizer)
	if err != nil {
		t.Fatal(err)
	}
	other := filepath.Join(t.TempDir(), "other.json")
	os.WriteFile(other, []byte(strings.Replace(string(data), "<|eos|>", "<|end|>", -1)), 0o644)
	_, errOut, code = gload(t, "", "inspect", out, "--decode", "0", "--tokenizer", other)
	if code != 1 || !strings.Contains(errOut, "was written by tokenizer") || !strings.Contains(errOut, "--any-tokenizer") {
		t.Errorf("wrong tokenizer: exit %d, stderr %q", code, errOut)
	}
	stdout, errOut, code = gload(t, "", "inspect", out, "--decode", "0", "--tokenizer", other, "--any-tokenizer")
	if code != 0 || !strings.Contains(errOut, "warning") || !strings.Contains(stdout, "<|end|>") {
		t.Errorf("--any-tokenizer: exit %d, stderr %q", code, errOut)
	}
	_, errOut, code = gload(t, "", "tokenize", "--quiet", "--tokenizer", exampleTokenizer, "--out", out, exampleCorpus)
	if code != 1 || !strings.Contains(errOut, "--overwrite") {
		t.Errorf("existing output: exit %d, %s", code, errOut)
	}
	// A run interrupted before it finalised: a journal beside shards, no state.json. inspect says so, and how to go on.
	if err := os.Remove(filepath.Join(out, "state.json")); err != nil {
		t.Fatal(err)
	}
	journal := `{"version": 1, "shards": [{}], "stats": {"documents": 200, "rows": 190, "tokens": 12345}}`
	if err := os.WriteFile(filepath.Join(out, "gload.progress.json"), []byte(journal), 0o644); err != nil {
		t.Fatal(err)
	}
	_, errOut, code = gload(t, "", "inspect", out)
	for _, want := range []string{"interrupted", "1 shards completed", "190 rows", "--resume"} {
		if code != 1 || !strings.Contains(errOut, want) {
			t.Errorf("inspect of an interrupted run: exit %d, stderr %q lacks %q", code, errOut, want)
		}
	}
}

func TestUnsupportedComponentNamesPath(t *testing.T) {
	dir := t.TempDir()
	data, err := os.ReadFile(exampleTokenizer)
	if err != nil {
		t.Fatal(err)
	}
	bad := strings.Replace(string(data), `"type": "ByteLevel"`, `"type": "NoSuchPreTokenizer"`, 1)
	if bad == string(data) {
		t.Skip("fixture layout changed")
	}
	path := filepath.Join(dir, "tokenizer.json")
	os.WriteFile(path, []byte(bad), 0o644)
	_, errOut, code := gload(t, "{\"text\": \"x\"}\n", "encode", "--tokenizer", path)
	if code != 1 || !strings.Contains(errOut, "pre_tokenizer") || !strings.Contains(errOut, "NoSuchPreTokenizer") {
		t.Errorf("exit %d, stderr %q", code, errOut)
	}
}

// buildBinary compiles gload once for the subprocess tests.
func buildBinary(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "gload")
	cmd := exec.Command("go", "build", "-o", bin, ".")
	cmd.Stderr = os.Stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("go build: %v", err)
	}
	return bin
}

// bigCorpus writes a JSONL corpus large enough for several small shards.
func bigCorpus(t *testing.T, dir string) string {
	t.Helper()
	var b bytes.Buffer
	r := rand.New(rand.NewPCG(1, 2))
	words := strings.Fields("all human beings are born free and equal in dignity and rights they are endowed with reason and conscience")
	for i := 0; i < 4000; i++ {
		var sb strings.Builder
		for j := 0; j < 20+r.IntN(400); j++ {
			sb.WriteString(words[r.IntN(len(words))])
			sb.WriteByte(' ')
		}
		line, _ := json.Marshal(map[string]string{"text": sb.String()})
		b.Write(line)
		b.WriteByte('\n')
	}
	p := filepath.Join(dir, "big.jsonl")
	if err := os.WriteFile(p, b.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

func datasetFiles(t *testing.T, dir string) map[string][]byte {
	t.Helper()
	out := map[string][]byte{}
	entries, _ := os.ReadDir(dir)
	for _, e := range entries {
		if e.Name() == dataset.StampFile {
			continue // a cache of stat results (times, inodes), not content
		}
		b, err := os.ReadFile(filepath.Join(dir, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		out[e.Name()] = b
	}
	return out
}

// burnCPU keeps every core busy (one spinning goroutine per CPU, plus as many again) until the returned stop is
// called: the kill test runs its trials under CPU contention, where a killed run's finalisation is slow and a kill
// lands inside it far more often.
func burnCPU() (stop func()) {
	done := make(chan struct{})
	var wg sync.WaitGroup
	for range 2 * runtime.NumCPU() {
		wg.Add(1)
		go func() {
			defer wg.Done()
			x := 0
			for {
				select {
				case <-done:
					return
				default:
				}
				for i := 0; i < 1<<16; i++ {
					x += i
				}
			}
		}()
	}
	return func() { close(done); wg.Wait() }
}

// TestKillAndResume kills `gload tokenize` with SIGKILL at random moments, under CPU load, checks the
// finalisation invariant (loader/dataset/doc.go: state.json is the commit point: a directory holding it is a
// complete dataset, byte for byte, even if the finished run's journal is still beside it; without it nothing
// looks complete), resumes, and demands the bytes of an uninterrupted run.
func TestKillAndResume(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binary")
	}
	bin := buildBinary(t)
	dir := t.TempDir()
	corpus := bigCorpus(t, dir)
	args := func(out string, extra ...string) []string {
		return append([]string{"tokenize", "--quiet", "--tokenizer", exampleTokenizer, "--shard-size", "200KB",
			"--workers", "2", "--out", out, corpus}, extra...)
	}
	ref := filepath.Join(dir, "ref")
	refOut, err := exec.Command(bin, args(ref)...).CombinedOutput()
	if err != nil {
		t.Fatalf("reference run: %v\n%s", err, refOut)
	}
	t.Logf("reference run:\n%s", refOut)
	want := datasetFiles(t, ref)
	r := rand.New(rand.NewPCG(7, 7))
	stop := burnCPU()
	defer stop()
	for trial := 0; trial < 8; trial++ {
		out := filepath.Join(dir, fmt.Sprintf("killed%d", trial))
		cmd := exec.Command(bin, args(out)...)
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		time.Sleep(time.Duration(50+r.IntN(1200)) * time.Millisecond)
		_ = cmd.Process.Signal(syscall.SIGKILL)
		_ = cmd.Wait()
		if _, err := os.Stat(filepath.Join(out, "state.json")); err == nil {
			// Past the commit point: complete already, whatever else the kill left (the journal, the lock).
			got := datasetFiles(t, out)
			for name, b := range want {
				if !bytes.Equal(b, got[name]) {
					t.Fatalf("trial %d: state.json is there but %s is missing or differs from the uninterrupted run", trial, name)
				}
			}
			if _, jerr := os.Stat(filepath.Join(out, "gload.progress.json")); jerr != nil {
				continue // the run had finished before the kill
			}
			t.Logf("trial %d: killed after the commit point, before the journal was removed", trial)
		} else if _, err := os.Stat(filepath.Join(out, dataset.IndexFile)); err == nil {
			t.Logf("trial %d: killed inside finalisation (gload.index without state.json)", trial)
		}
		res := exec.Command(bin, args(out, "--resume")...)
		if outb, err := res.CombinedOutput(); err != nil {
			if !strings.Contains(string(outb), "does not exist") {
				t.Fatalf("trial %d: resume: %v\n%s", trial, err, outb)
			}
			// Killed before the output directory existed: a fresh run is the right move.
			if outb, err := exec.Command(bin, args(out)...).CombinedOutput(); err != nil {
				t.Fatalf("trial %d: rerun: %v\n%s", trial, err, outb)
			}
		}
		got := datasetFiles(t, out)
		if len(got) != len(want) {
			names := []string{}
			for n := range got {
				names = append(names, n)
			}
			t.Fatalf("trial %d: %d files after resume, want %d: %v", trial, len(got), len(want), names)
		}
		for name, b := range want {
			if !bytes.Equal(b, got[name]) {
				t.Fatalf("trial %d: %s differs from the uninterrupted run", trial, name)
			}
		}
	}
}

// TestFullDisk runs tokenize under a file-size limit (prlimit --fsize), the closest portable stand-in for a full
// disk: the write fails, the error names the file, and nothing looks complete.
func TestFullDisk(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binary")
	}
	prlimit, err := exec.LookPath("prlimit")
	if err != nil {
		t.Skip("prlimit (util-linux) not installed")
	}
	bin := buildBinary(t)
	dir := t.TempDir()
	corpus := bigCorpus(t, dir)
	out := filepath.Join(dir, "ds")
	cmd := exec.Command(prlimit, "--fsize=300000", bin, "tokenize", "--quiet", "--tokenizer", exampleTokenizer,
		"--shard-size", "10MB", "--out", out, corpus)
	outb, err := cmd.CombinedOutput()
	if err == nil {
		t.Fatalf("tokenize succeeded past the size limit:\n%s", outb)
	}
	if !strings.Contains(string(outb), "shard-00000") || !strings.Contains(string(outb), "file too large") {
		t.Errorf("error does not name the shard and the cause:\n%s", outb)
	}
	if _, err := os.Stat(filepath.Join(out, "state.json")); err == nil {
		t.Error("state.json written after a failed write")
	}
	entries, _ := os.ReadDir(out)
	for _, e := range entries {
		if strings.HasSuffix(e.Name(), ".tmp") {
			t.Errorf("temporary file %s left behind", e.Name())
		}
	}
}

// gload compress writes framed files that ordinary decoders read, and tokenizing them (decoded on several
// goroutines) gives the dataset that tokenizing the original gives, byte for byte.
func TestCompressThenTokenizeIsIdentical(t *testing.T) {
	dir := t.TempDir()
	ref := filepath.Join(dir, "ref")
	if _, errOut, code := gload(t, "", "tokenize", "--quiet", "--tokenizer", exampleTokenizer, "--out", ref, exampleCorpus); code != 0 {
		t.Fatalf("tokenize: %s", errOut)
	}
	for _, c := range [][]string{
		{"framed.jsonl.zst", "--frame-bytes", "64KiB"},
		{"framed.jsonl.gz"},
		{"framed-level1.jsonl.zst", "--level", "1", "--workers", "1"},
	} {
		t.Run(c[0], func(t *testing.T) {
			p := filepath.Join(dir, c[0])
			stdout, errOut, code := gload(t, "", append([]string{"compress", "--out", p, exampleCorpus}, c[1:]...)...)
			if code != 0 || !strings.Contains(stdout, "compressed "+exampleCorpus) {
				t.Fatalf("compress: exit %d: %s%s", code, stdout, errOut)
			}
			out := filepath.Join(dir, "ds-"+c[0])
			if _, errOut, code := gload(t, "", "tokenize", "--quiet", "--tokenizer", exampleTokenizer, "--out", out, p); code != 0 {
				t.Fatalf("tokenize: %s", errOut)
			}
			for _, f := range []string{"data-00000-of-00001.arrow", "gload.index", "state.json", "dataset_info.json"} {
				a, _ := os.ReadFile(filepath.Join(ref, f))
				b, err := os.ReadFile(filepath.Join(out, f))
				if err != nil || !bytes.Equal(a, b) {
					t.Errorf("%s differs from the dataset of the original input (err %v)", f, err)
				}
			}
		})
	}
	// A damaged input fails naming it and leaves nothing under the output's name, nor a partial file.
	gz, _ := os.ReadFile(exampleCorpus)
	bad := filepath.Join(dir, "bad.jsonl.gz")
	os.WriteFile(bad, gz[:len(gz)/2], 0o644)
	outDir := t.TempDir()
	_, errOut, code := gload(t, "", "compress", "--out", filepath.Join(outDir, "x.jsonl.zst"), bad)
	if code != 1 || !strings.Contains(errOut, bad) || !strings.Contains(errOut, "unexpected EOF") {
		t.Errorf("truncated input: exit %d, stderr %q", code, errOut)
	}
	if left, _ := os.ReadDir(outDir); len(left) != 0 {
		t.Errorf("a failed compress left %v", left)
	}
	_, errOut, code = gload(t, "", "compress", "--out", filepath.Join(outDir, "x.lz4"), exampleCorpus)
	if code != 1 || !strings.Contains(errOut, "--codec") {
		t.Errorf("unknown extension: exit %d, stderr %q", code, errOut)
	}
}
