package pretok

import (
	"encoding/json"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
)

// fixturePretok returns the pre_tokenizer of a fixture tokenizer.json.
func fixturePretok(t testing.TB, name string) json.RawMessage {
	t.Helper()
	var doc struct {
		PreTokenizer json.RawMessage `json:"pre_tokenizer"`
	}
	readGzipJSON(t, filepath.Join(fixturesDir(), "tokenizers", name, "tokenizer.json.gz"), &doc)
	return doc.PreTokenizer
}

// goSource returns about limit bytes of Go source from GOROOT, one string per file.
func goSource(b *testing.B, limit int) []string {
	b.Helper()
	root := os.Getenv("GOROOT")
	if root == "" {
		root = runtime.GOROOT() //nolint:staticcheck // the benchmark only needs some Go source
	}
	var docs []string
	total := 0
	err := filepath.WalkDir(filepath.Join(root, "src", "net", "http"), func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || !strings.HasSuffix(path, ".go") || total >= limit {
			return err
		}
		data, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		docs = append(docs, string(data))
		total += len(data)
		return nil
	})
	if err != nil || total == 0 {
		b.Skipf("no Go source under %s: %v", root, err)
	}
	return docs
}

func benchSplit(b *testing.B, p PreTokenizer, docs []string) {
	total := 0
	for _, d := range docs {
		total += len(d)
	}
	b.SetBytes(int64(total))
	b.ReportAllocs()
	var dst []string
	for b.Loop() {
		for _, d := range docs {
			dst = p.Split(d, dst[:0])
		}
	}
}

// BenchmarkSplitLlama3 runs the Llama-3 pre-tokenizer (cl100k scanner + ByteLevel) over Go source and
// multilingual text.
func BenchmarkSplitLlama3(b *testing.B) {
	p, _ := mustLoad(b, fixturePretok(b, "llama3"))
	b.Run("go-source", func(b *testing.B) { benchSplit(b, p, goSource(b, 2<<20)) })
	b.Run("fixture-texts", func(b *testing.B) { benchSplit(b, p, fixtureTexts(b)) })
}

func BenchmarkSplitFixtures(b *testing.B) {
	src := goSource(b, 2<<20)
	texts := fixtureTexts(b)
	for _, name := range []string{"qwen3", "gpt4o", "bert-base-uncased", "unigram-spm8k"} {
		p, _ := mustLoad(b, fixturePretok(b, name))
		b.Run(name+"/go-source", func(b *testing.B) { benchSplit(b, p, src) })
		b.Run(name+"/fixture-texts", func(b *testing.B) { benchSplit(b, p, texts) })
	}
}

// BenchmarkSplitGPT2 is ByteLevel with its own regex and a prefix space (GPT-2, RoBERTa).
func BenchmarkSplitGPT2(b *testing.B) {
	p, _ := mustLoad(b, json.RawMessage(`{"type":"ByteLevel","add_prefix_space":true,"trim_offsets":true}`))
	benchSplit(b, p, goSource(b, 2<<20))
}

// BenchmarkSplitGeneralRegex runs the Llama-3 pattern on the general engine (regexp2), for comparison.
func BenchmarkSplitGeneralRegex(b *testing.B) {
	p := &patternSplit{pat: reference(b, patternCL100K), beh: isolated}
	benchSplit(b, p, goSource(b, 256<<10))
}

// TestSplitAllocs checks that the scanners and the single-pass pre-tokenizers allocate nothing once dst is
// large enough.
func TestSplitAllocs(t *testing.T) {
	text := strings.Repeat("Hello, world! It's 2024: naïve café 中文 ١٢٣ \n\n\tfunc f() {}\n", 20)
	configs := map[string]json.RawMessage{
		"llama3":     fixturePretok(t, "llama3"),
		"qwen3":      fixturePretok(t, "qwen3"),
		"gpt4o":      fixturePretok(t, "gpt4o"),
		"bert":       fixturePretok(t, "bert-base-uncased"),
		"whitespace": json.RawMessage(`{"type":"Whitespace"}`),
		"digits":     json.RawMessage(`{"type":"Digits","individual_digits":true}`),
		"sequence": json.RawMessage(`{"type":"Sequence","pretokenizers":[{"type":"WhitespaceSplit"},` +
			`{"type":"Punctuation"},{"type":"Digits","individual_digits":true}]}`),
	}
	for name, raw := range configs {
		p, _ := mustLoad(t, raw)
		dst := p.Split(text, nil)
		if allocs := testing.AllocsPerRun(20, func() { dst = p.Split(text, dst[:0]) }); allocs > 0 {
			t.Errorf("%s: %.1f allocations per Split", name, allocs)
		}
	}
}
