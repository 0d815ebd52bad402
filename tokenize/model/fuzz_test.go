package model

import (
	"bytes"
	"encoding/json"
	"math"
	"slices"
	"strconv"
	"testing"

	"github.com/gload/gload/tokenize/tokjson"
)

// fuzzSeeds are words that reach every branch: unknown characters, invalid UTF-8, long runs, metaspace runs.
var fuzzSeeds = []string{"", "a", " the", "hello world", "\xff", "a\xffb", "é", "日本語", "🙂🙂", "\u2581\u2581x\u2581y",
	"aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa", "\t\n\r\x00", "<unk>x<0x41>"}

// FuzzBPEByteLevel: any byte string encodes without panic, the scan, heap and cached paths agree, and the
// tokens' bytes concatenate back to the input (the byte-level round trip).
func FuzzBPEByteLevel(f *testing.F) {
	m := loadFixture(f, "llama3").(*bpeModel)
	for _, s := range fuzzSeeds {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, word string) {
		e := m.NewEncoder().(*bpeEncoder)
		ids := e.Encode(word, nil)
		var raw []byte
		for _, id := range ids {
			tok, ok := m.IDToToken(id)
			if !ok {
				t.Fatalf("id %d has no token", id)
			}
			b, ok := tokjson.ByteLevelDecode(tok)
			if !ok {
				t.Fatalf("token %q is not byte-level", tok)
			}
			raw = append(raw, b...)
		}
		if !bytes.Equal(raw, []byte(word)) {
			t.Fatalf("round trip: %q -> %v -> %q", word, ids, raw)
		}
		if word != "" {
			heap := slices.Clone(e.encodeWithHeap(word))
			if !slices.Equal(heap, ids) {
				t.Fatalf("heap %v != Encode %v", heap, ids)
			}
			if len(word) <= 512 && !slices.Equal(e.encodeWithScan(word), ids) {
				t.Fatalf("scan != Encode %v", ids)
			}
		}
	})
}

// FuzzBPEChunked: for llama2 (documents are single words, cut into chunks) chunked encoding equals the
// whole-word heap, on any input.
func FuzzBPEChunked(f *testing.F) {
	m := loadFixture(f, "llama2").(*bpeModel)
	for _, s := range fuzzSeeds {
		f.Add(llama2Word(s))
	}
	f.Add(llama2Word("日本語のテキストは空白なしで長く続くことがあります。日本語のテキストは空白なしで長く続くことがあります。" +
		"日本語のテキストは空白なしで長く続くことがあります。日本語のテキストは空白なしで長く続く"))
	f.Fuzz(func(t *testing.T, word string) {
		e := m.NewEncoder().(*bpeEncoder)
		got := e.Encode(word, nil)
		if word == "" {
			return
		}
		if want := e.encodeWithHeap(word); !slices.Equal(got, want) {
			t.Fatalf("chunked %v != heap %v", got, want)
		}
	})
}

// FuzzTinyModels: the hand-made golden models never panic on arbitrary words, and for BPE the merge paths
// agree.
func FuzzTinyModels(f *testing.F) {
	var file struct {
		Cases []goldenCase `json:"cases"`
	}
	if err := json.Unmarshal(readGzip(f, "testdata/golden_tiny.json.gz"), &file); err != nil {
		f.Fatal(err)
	}
	var models []Model
	for _, c := range file.Cases {
		if c.LoadError != nil {
			continue
		}
		m, err := FromJSON(c.Model, "model", Options{ByteLevel: c.ByteLevel})
		if err != nil {
			f.Fatalf("%s: %v", c.Name, err)
		}
		models = append(models, m)
	}
	for _, s := range fuzzSeeds {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, word string) {
		for _, m := range models {
			got := m.NewEncoder().Encode(word, nil)
			bm, ok := m.(*bpeModel)
			if !ok || word == "" {
				continue
			}
			e := bm.NewEncoder().(*bpeEncoder)
			if want := e.encodeWithHeap(word); !slices.Equal(got, want) {
				t.Fatalf("Encode %v != heap %v", got, want)
			}
			if bm.regular && len(word) <= 512 && !slices.Equal(e.encodeWithScan(word), got) {
				t.Fatalf("scan != Encode %v", got)
			}
		}
	})
}

// FuzzUnigram: arbitrary words never panic and always produce ids of the vocabulary.
func FuzzUnigram(f *testing.F) {
	m := loadFixture(f, "unigram-spm8k")
	for _, s := range fuzzSeeds {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, word string) {
		for _, id := range m.NewEncoder().Encode(word, nil) {
			if _, ok := m.IDToToken(id); !ok {
				t.Fatalf("id %d outside the vocabulary", id)
			}
		}
	})
}

// FuzzSerdeFloat: the serde_json number reader never panics and stays within a few ulps of the correctly
// rounded value (serde's one multiplication or division by an inexact power of ten adds up to about two).
func FuzzSerdeFloat(f *testing.F) {
	for _, s := range []string{"0", "-3.1027262210845947", "1e-400", "18446744073709551616.5", "1e308", "5e-324"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		got, err := serdeFloat([]byte(s))
		if err != nil {
			return
		}
		if math.IsNaN(got) || math.IsInf(got, 0) {
			t.Fatalf("serdeFloat(%q) = %v", s, got)
		}
		want, perr := strconv.ParseFloat(s, 64)
		if perr != nil {
			if math.IsInf(want, 0) || want == 0 { // at the edges of the range the two roundings may part
				return
			}
			t.Fatalf("serdeFloat(%q) = %v but strconv rejects it: %v", s, got, perr)
		}
		diff := int64(math.Float64bits(math.Abs(got))) - int64(math.Float64bits(math.Abs(want)))
		if (got < 0) != (want < 0) && got != 0 && want != 0 {
			t.Fatalf("sign: serdeFloat(%q) = %v, strconv %v", s, got, want)
		}
		if diff > 4 || diff < -4 {
			t.Fatalf("serdeFloat(%q) = %v, strconv %v (%d ulps)", s, got, want, diff)
		}
	})
}
