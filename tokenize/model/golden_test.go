package model

import (
	"bufio"
	"compress/gzip"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
)

// Goldens come from Hugging Face tokenizers 0.23.2 through testdata/gen_golden.py.

type goldenWord struct {
	W   string  `json:"w"`
	IDs []int32 `json:"ids"`
}

type goldenCase struct {
	Name      string          `json:"name"`
	Model     json.RawMessage `json:"model"`
	ByteLevel bool            `json:"byte_level"`
	LoadError *string         `json:"load_error"`
	Words     []goldenWord    `json:"words"`
}

func readGzip(t testing.TB, path string) []byte {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatalf("open %s: %v", path, err)
	}
	defer f.Close()
	zr, err := gzip.NewReader(f)
	if err != nil {
		t.Fatalf("gunzip %s: %v", path, err)
	}
	var b strings.Builder
	if _, err := bufio.NewReader(zr).WriteTo(&b); err != nil {
		t.Fatalf("read %s: %v", path, err)
	}
	return []byte(b.String())
}

func readJSONL[T any](t testing.TB, path string) []T {
	t.Helper()
	var out []T
	for line := range strings.SplitSeq(string(readGzip(t, path)), "\n") {
		if line == "" {
			continue
		}
		var v T
		if err := json.Unmarshal([]byte(line), &v); err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		out = append(out, v)
	}
	return out
}

func TestGoldenTiny(t *testing.T) {
	var file struct {
		Cases []goldenCase `json:"cases"`
	}
	if err := json.Unmarshal(readGzip(t, "testdata/golden_tiny.json.gz"), &file); err != nil {
		t.Fatal(err)
	}
	if len(file.Cases) < 50 {
		t.Fatalf("only %d golden cases", len(file.Cases))
	}
	for _, tc := range file.Cases {
		t.Run(tc.Name, func(t *testing.T) {
			m, err := FromJSON(tc.Model, "model", Options{ByteLevel: tc.ByteLevel})
			if tc.LoadError != nil {
				if err == nil {
					t.Fatalf("loaded a model Hugging Face rejects (%s)", *tc.LoadError)
				}
				if !strings.Contains(err.Error(), "model") {
					t.Errorf("error %q does not name the JSON path", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			enc := m.NewEncoder()
			for pass := range 2 { // the second pass reads the word cache
				for _, w := range tc.Words {
					got := enc.Encode(w.W, nil)
					if !slices.Equal(got, w.IDs) {
						t.Errorf("pass %d: Encode(%q) = %v, want %v", pass, w.W, got, w.IDs)
					}
				}
			}
		})
	}
}

// fixturesDir is ../shared/fixtures next to the repository root, or $GLOAD_FIXTURES.
func fixturesDir(t testing.TB) string {
	t.Helper()
	dir := filepath.Join("..", "..", "..", "shared", "fixtures")
	if env := os.Getenv("GLOAD_FIXTURES"); env != "" {
		dir = env
	}
	if _, err := os.Stat(dir); err != nil {
		t.Skipf("fixtures not available: %v", err)
	}
	return dir
}

var fixtureModels sync.Map // name → *fixtureModel

type fixtureModel struct {
	once sync.Once
	m    Model
	err  error
}

var byteLevelFixtures = map[string]bool{"llama3": true, "qwen3": true, "gpt4o": true}

// loadFixture loads the model of a fixture tokenizer once per test binary.
func loadFixture(t testing.TB, name string) Model {
	t.Helper()
	dir := fixturesDir(t)
	v, _ := fixtureModels.LoadOrStore(name, &fixtureModel{})
	fm := v.(*fixtureModel)
	fm.once.Do(func() {
		raw, err := fixtureModelJSON(dir, name)
		if err != nil {
			fm.err = err
			return
		}
		fm.m, fm.err = FromJSON(raw, "model", Options{ByteLevel: byteLevelFixtures[name]})
	})
	if fm.err != nil {
		t.Fatalf("load %s: %v", name, fm.err)
	}
	return fm.m
}

func fixtureModelJSON(dir, name string) (json.RawMessage, error) {
	path := filepath.Join(dir, "tokenizers", name, "tokenizer.json.gz")
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	zr, err := gzip.NewReader(f)
	if err != nil {
		return nil, fmt.Errorf("gunzip %s: %w", path, err)
	}
	var doc struct {
		Model json.RawMessage `json:"model"`
	}
	if err := json.NewDecoder(zr).Decode(&doc); err != nil {
		return nil, fmt.Errorf("decode %s: %w", path, err)
	}
	return doc.Model, nil
}

func TestGoldenFixtureWords(t *testing.T) {
	for _, name := range []string{"llama3", "qwen3", "gpt4o", "unigram-spm8k", "bert-base-uncased"} {
		t.Run(name, func(t *testing.T) {
			m := loadFixture(t, name)
			words := readJSONL[goldenWord](t, filepath.Join("testdata", "golden_words_"+name+".jsonl.gz"))
			enc := m.NewEncoder()
			bad := 0
			for _, w := range words {
				got := enc.Encode(w.W, nil)
				if !slices.Equal(got, w.IDs) {
					if bad++; bad <= 10 {
						t.Errorf("Encode(%q) = %v, want %v", w.W, got, w.IDs)
					}
				}
			}
			if bad > 0 {
				t.Errorf("%d of %d words differ", bad, len(words))
			}
		})
	}
}

// fixtureTexts reads the texts of the parity fixture.
func fixtureTexts(t testing.TB) []string {
	type rec struct {
		Text string `json:"text"`
	}
	recs := readJSONL[rec](t, filepath.Join(fixturesDir(t), "parity", "texts.jsonl.gz"))
	out := make([]string, len(recs))
	for i, r := range recs {
		out[i] = r.Text
	}
	return out
}

// llama2Word is what llama2's normalizer (Prepend ▁, Replace " " → ▁) makes of a text; with no pre-tokenizer it
// reaches the model as one word.
func llama2Word(text string) string {
	if text == "" {
		return ""
	}
	return "▁" + strings.ReplaceAll(text, " ", "▁")
}

func idsDigest(ids []int32) string {
	buf := make([]byte, 4*len(ids))
	for i, id := range ids {
		binary.LittleEndian.PutUint32(buf[4*i:], uint32(id))
	}
	sum := sha256.Sum256(buf)
	return hex.EncodeToString(sum[:])
}

func TestGoldenLlama2Documents(t *testing.T) {
	m := loadFixture(t, "llama2")
	texts := fixtureTexts(t)
	type rec struct {
		Doc    int    `json:"doc"`
		N      int    `json:"n"`
		SHA256 string `json:"sha256"`
	}
	want := readJSONL[rec](t, filepath.Join("testdata", "golden_llama2_docs.jsonl.gz"))
	if len(want) != len(texts) {
		t.Fatalf("%d goldens for %d texts", len(want), len(texts))
	}
	enc := m.NewEncoder()
	longest := 0
	for _, w := range want {
		word := llama2Word(texts[w.Doc])
		longest = max(longest, len(word))
		got := enc.Encode(word, nil)
		if len(got) != w.N || idsDigest(got) != w.SHA256 {
			t.Errorf("doc %d (%d bytes): %d ids, digest %s; want %d ids, %s", w.Doc, len(word), len(got),
				idsDigest(got)[:12], w.N, w.SHA256[:12])
		}
	}
	if longest < 50_000 {
		t.Errorf("longest document only %d bytes: the heap path is not exercised", longest)
	}
}

func TestUnigramScoresMatchSerde(t *testing.T) {
	m := loadFixture(t, "unigram-spm8k").(*unigramModel)
	var want struct {
		N      int    `json:"n"`
		SHA256 string `json:"sha256"`
	}
	b, err := os.ReadFile("testdata/golden_unigram_scores.json")
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, &want); err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 8*len(m.scores))
	for i, s := range m.scores {
		binary.LittleEndian.PutUint64(buf[8*i:], math.Float64bits(s))
	}
	sum := sha256.Sum256(buf)
	if len(m.scores) != want.N || hex.EncodeToString(sum[:]) != want.SHA256 {
		t.Errorf("scores differ from the f64 values Hugging Face holds (%d scores)", len(m.scores))
	}
}
