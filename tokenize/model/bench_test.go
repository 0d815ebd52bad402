package model

import (
	"encoding/json"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
	"testing"
	"time"
	"unicode"
	"unicode/utf8"
)

// goSourceWords cuts the Go sources of the parity texts into words roughly as llama3's split regex does
// (letters with one optional leading non-letter, 1-3 digits, punctuation runs with an optional leading space,
// whitespace runs). Only for benchmarks: the real pre-tokenizer lives in package pretok.
func goSourceWords(t testing.TB) (words []string, total int) {
	type rec struct {
		Src  string `json:"src"`
		Text string `json:"text"`
	}
	for _, r := range readJSONL[rec](t, filepath.Join(fixturesDir(t), "parity", "texts.jsonl.gz")) {
		if !strings.HasPrefix(r.Src, "go/") {
			continue
		}
		for s := r.Text; s != ""; {
			n := roughWordLen(s)
			words = append(words, s[:n])
			total += n
			s = s[n:]
		}
	}
	return words, total
}

func roughWordLen(s string) int {
	r, n := utf8.DecodeRuneInString(s)
	class := func(r rune) int {
		switch {
		case unicode.IsLetter(r):
			return 0
		case unicode.IsDigit(r):
			return 1
		case unicode.IsSpace(r):
			return 2
		}
		return 3
	}
	c := class(r)
	i := n
	if c == 3 || r == ' ' { // optional leading char before letters or punctuation
		if r2, n2 := utf8.DecodeRuneInString(s[i:]); n2 > 0 && class(r2) != 2 && class(r2) != 1 {
			c = class(r2)
			i += n2
		}
	}
	for count := 1; i < len(s); count++ {
		r2, n2 := utf8.DecodeRuneInString(s[i:])
		if class(r2) != c || (c == 1 && count >= 3) {
			break
		}
		i += n2
	}
	return i
}

func BenchmarkBPELlama3Words(b *testing.B) {
	m := loadFixture(b, "llama3")
	words, total := goSourceWords(b)
	enc := m.NewEncoder()
	var ids []int32
	for _, w := range words { // warm the word cache and size ids: steady state
		ids = enc.Encode(w, ids)
	}
	b.SetBytes(int64(total))
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		ids = ids[:0]
		for _, w := range words {
			ids = enc.Encode(w, ids)
		}
	}
	b.ReportMetric(float64(len(ids))/float64(total), "ids/byte")
}

// BenchmarkBPELlama3WordsCold measures the merge path itself: a fresh encoder (empty cache) per iteration.
func BenchmarkBPELlama3WordsCold(b *testing.B) {
	m := loadFixture(b, "llama3")
	words, total := goSourceWords(b)
	b.SetBytes(int64(total))
	b.ReportAllocs()
	var ids []int32
	for b.Loop() {
		e := m.NewEncoder().(*bpeEncoder)
		ids = ids[:0]
		for _, w := range words {
			ids = append(ids, e.encodeWord(w)...)
		}
	}
}

// BenchmarkBPELongWord: a 100 KB document as one llama2 word (llama2 has no pre-tokenizer). "chunked" is the
// real path (cut at ▁ and at character pairs no token holds, chunks cached): cold with a fresh encoder per
// iteration, warm with one encoder (steady state). "heap" merges the whole word in one heap, the path of a
// model that allows no cutting.
func BenchmarkBPELongWord(b *testing.B) {
	m := loadFixture(b, "llama2").(*bpeModel)
	var sb strings.Builder
	for _, t := range fixtureTexts(b) {
		if sb.Len() >= 100_000 {
			break
		}
		sb.WriteString(t)
	}
	word := strings.ToValidUTF8(llama2Word(sb.String()[:100_000]), "")
	var ids []int32
	b.Run("chunked-cold", func(b *testing.B) {
		b.SetBytes(int64(len(word)))
		b.ReportAllocs()
		for b.Loop() {
			ids = m.NewEncoder().Encode(word, ids[:0])
		}
	})
	b.Run("chunked-warm", func(b *testing.B) {
		enc := m.NewEncoder()
		ids = enc.Encode(word, ids[:0])
		b.SetBytes(int64(len(word)))
		b.ReportAllocs()
		b.ResetTimer()
		for b.Loop() {
			ids = enc.Encode(word, ids[:0])
		}
	})
	b.Run("heap", func(b *testing.B) {
		e := m.NewEncoder().(*bpeEncoder)
		e.encodeWithHeap(word)
		b.SetBytes(int64(len(word)))
		b.ReportAllocs()
		b.ResetTimer()
		for b.Loop() {
			e.encodeWithHeap(word)
		}
	})
}

func BenchmarkUnigram(b *testing.B) {
	m := loadFixture(b, "unigram-spm8k")
	words := readJSONL[goldenWord](b, filepath.Join("testdata", "golden_words_unigram-spm8k.jsonl.gz"))
	total := 0
	for _, w := range words {
		total += len(w.W)
	}
	b.Run("cold", func(b *testing.B) {
		b.SetBytes(int64(total))
		b.ReportAllocs()
		var ids []int32
		for b.Loop() {
			e := m.NewEncoder().(*cachedEncoder).enc
			for _, w := range words {
				ids = append(ids[:0], e.encode(w.W)...)
			}
		}
	})
	b.Run("cached", func(b *testing.B) {
		enc := m.NewEncoder()
		var ids []int32
		for _, w := range words {
			ids = enc.Encode(w.W, ids[:0])
		}
		b.SetBytes(int64(total))
		b.ReportAllocs()
		b.ResetTimer()
		for b.Loop() {
			for _, w := range words {
				ids = enc.Encode(w.W, ids[:0])
			}
		}
	})
}

func BenchmarkLoad(b *testing.B) {
	for _, name := range []string{"llama3", "llama2", "unigram-spm8k"} {
		b.Run(name, func(b *testing.B) {
			raw, err := fixtureModelJSON(fixturesDir(b), name)
			if err != nil {
				b.Fatal(err)
			}
			b.SetBytes(int64(len(raw)))
			b.ReportAllocs()
			for b.Loop() {
				if _, err := FromJSON(raw, "model", Options{ByteLevel: byteLevelFixtures[name]}); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// TestLoadTimeLlama3 logs (never asserts) how long loading the llama3 model takes.
func TestLoadTimeLlama3(t *testing.T) {
	raw, err := fixtureModelJSON(fixturesDir(t), "llama3")
	if err != nil {
		t.Fatal(err)
	}
	runtime.GC()
	start, cpu0 := time.Now(), processCPU()
	if _, err := FromJSON(json.RawMessage(raw), "model", Options{ByteLevel: true}); err != nil {
		t.Fatal(err)
	}
	t.Logf("llama3 model (%d bytes of JSON) loaded in %v wall, %v CPU (all threads)", len(raw), time.Since(start),
		processCPU()-cpu0)
}

// processCPU is the user+system CPU time of the process so far (a contended machine makes wall time useless).
func processCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
