package pipeline

import (
	"compress/gzip"
	"context"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gload/gload/tokenize"
)

// Regression (issue 10 item 3): a tokenizer whose Split regex backtracks catastrophically hung the run. The
// document is now skipped as a tokenizer error naming its file:line and the pattern's JSON path (with --strict,
// the run fails with that message), within the general engine's match bound.
func TestCatastrophicRegexDocumentNamed(t *testing.T) {
	dir := t.TempDir()
	f, err := os.Open("../pretok/testdata/redos-tokenizer.json.gz") // ../shared/repro/redos-tokenizer.json.gz
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	zr, err := gzip.NewReader(f)
	if err != nil {
		t.Fatal(err)
	}
	data, err := io.ReadAll(zr)
	if err != nil {
		t.Fatal(err)
	}
	tokPath := filepath.Join(dir, "tokenizer.json")
	if err := os.WriteFile(tokPath, data, 0o644); err != nil {
		t.Fatal(err)
	}
	tok, err := tokenize.Load(tokPath)
	if err != nil {
		t.Fatal(err)
	}
	in := filepath.Join(dir, "docs.jsonl")
	body := `{"text": "fine"}` + "\n" + `{"text": "` + strings.Repeat("a", 40) + `b"}` + "\n" + `{"text": "also fine"}` + "\n"
	if err := os.WriteFile(in, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	s, err := Run(context.Background(), Options{Inputs: []string{in}, Out: filepath.Join(dir, "ds"), Engine: tok, Workers: 2})
	if err != nil {
		t.Fatal(err)
	}
	if s.Rows != 2 || s.Skipped["tokenizer error"] != 1 {
		t.Fatalf("rows %d, skipped %v; want 2 rows and 1 tokenizer error", s.Rows, s.Skipped)
	}
	_, err = Run(context.Background(), Options{Inputs: []string{in}, Out: filepath.Join(dir, "strict"), Engine: tok, Strict: true})
	for _, want := range []string{"docs.jsonl:2", "pre_tokenizer.pretokenizers[0].pattern", "(a+)+$"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("--strict: err = %v, want it to name %q", err, want)
		}
	}
}
