package tokenize_test

import (
	"os"
	"path/filepath"
	"runtime"
	"sort"
	"strings"
	"testing"

	"github.com/gload/gload/internal/fixtures"
	"github.com/gload/gload/tokenize"
)

// goSourceCorpus mirrors ../shared/bench/make_corpus.py at a smaller size: non-test Go files of the local Go
// installation, in path order, up to limit bytes.
func goSourceCorpus(b *testing.B, limit int) []string {
	b.Helper()
	root := filepath.Join(runtime.GOROOT(), "src")
	var paths []string
	filepath.WalkDir(root, func(p string, d os.DirEntry, err error) error {
		if err == nil && !d.IsDir() && strings.HasSuffix(p, ".go") && !strings.HasSuffix(p, "_test.go") {
			paths = append(paths, p)
		}
		return nil
	})
	sort.Strings(paths)
	var docs []string
	n := 0
	for _, p := range paths {
		data, err := os.ReadFile(p)
		if err != nil {
			continue
		}
		docs = append(docs, string(data))
		if n += len(data); n >= limit {
			break
		}
	}
	if n == 0 {
		b.Skip("no Go sources under GOROOT")
	}
	return docs
}

func corpusBytes(docs []string) int64 {
	var n int64
	for _, d := range docs {
		n += int64(len(d))
	}
	return n
}

// BenchmarkEncode measures one core: b.N passes over ~4 MB of Go source per tokenizer (MB/s in the output).
func BenchmarkEncode(b *testing.B) {
	docs := goSourceCorpus(b, 4<<20)
	for _, name := range fixtures.Tokenizers {
		b.Run(name, func(b *testing.B) {
			tok, err := tokenize.Load(fixtures.TokenizerPath(b, name))
			if err != nil {
				b.Fatal(err)
			}
			var buf []int32
			b.SetBytes(corpusBytes(docs))
			b.ReportAllocs()
			for b.Loop() {
				for _, d := range docs {
					buf = tok.AppendEncode(buf[:0], d, false)
				}
			}
		})
	}
}

// BenchmarkEncodeBatch measures all cores (GOMAXPROCS) with EncodeBatch.
func BenchmarkEncodeBatch(b *testing.B) {
	docs := goSourceCorpus(b, 4<<20)
	tok, err := tokenize.Load(fixtures.TokenizerPath(b, "llama3"))
	if err != nil {
		b.Fatal(err)
	}
	b.SetBytes(corpusBytes(docs))
	b.ReportAllocs()
	for b.Loop() {
		tok.EncodeBatch(docs, false)
	}
}

func BenchmarkLoad(b *testing.B) {
	for _, name := range []string{"llama3", "llama2", "bert-base-uncased", "unigram-spm8k"} {
		b.Run(name, func(b *testing.B) {
			path := fixtures.TokenizerPath(b, name)
			for b.Loop() {
				if _, err := tokenize.Load(path); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
