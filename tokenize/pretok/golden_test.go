package pretok

import (
	"bufio"
	"compress/gzip"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// Goldens come from testdata/gen_golden.py (Hugging Face tokenizers 0.23.2).

type goldenCase struct {
	Name   string          `json:"name"`
	Pretok json.RawMessage `json:"pretok"`
	Words  [][]string      `json:"words"`
	Hashes []string        `json:"hashes"`
}

type goldenFile struct {
	Inputs []string     `json:"inputs"`
	Cases  []goldenCase `json:"cases"`
	Errors []goldenCase `json:"errors"`
}

func readGzipJSON(t testing.TB, path string, v any) {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	zr, err := gzip.NewReader(f)
	if err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	if err := json.NewDecoder(zr).Decode(v); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
}

func mustLoad(t testing.TB, raw json.RawMessage) (PreTokenizer, Info) {
	t.Helper()
	p, info, err := FromJSON(raw, "pre_tokenizer")
	if err != nil {
		t.Fatalf("FromJSON(%s): %v", raw, err)
	}
	return p, info
}

// endsWithByteLevel reads the golden config the way the generator does.
func endsWithByteLevel(t *testing.T, raw json.RawMessage) bool {
	var c struct {
		Type          string            `json:"type"`
		PreTokenizers []json.RawMessage `json:"pretokenizers"`
	}
	if err := json.Unmarshal(raw, &c); err != nil {
		t.Fatal(err)
	}
	if c.Type == "Sequence" {
		for i := len(c.PreTokenizers) - 1; i >= 0; i-- {
			return endsWithByteLevel(t, c.PreTokenizers[i])
		}
		return false
	}
	return c.Type == "ByteLevel"
}

func TestGolden(t *testing.T) {
	var g goldenFile
	readGzipJSON(t, "testdata/golden.json.gz", &g)
	if len(g.Cases) < 300 {
		t.Fatalf("only %d golden cases", len(g.Cases))
	}
	for _, tc := range g.Cases {
		t.Run(tc.Name, func(t *testing.T) {
			p, info := mustLoad(t, tc.Pretok)
			if want := endsWithByteLevel(t, tc.Pretok); info.ByteLevel != want {
				t.Errorf("Info.ByteLevel = %v, want %v", info.ByteLevel, want)
			}
			for i, in := range g.Inputs {
				got := p.Split(in, nil)
				// tokenizers keeps the empty input as one empty word when no split runs (an empty Sequence); the
				// model makes no token of it, and Split never emits empty words.
				want := slices.DeleteFunc(slices.Clone(tc.Words[i]), func(w string) bool { return w == "" })
				if !slices.Equal(got, want) {
					t.Errorf("input %q:\n got %q\nwant %q", in, got, want)
				}
			}
		})
	}
}

func TestGoldenErrors(t *testing.T) {
	var g goldenFile
	readGzipJSON(t, "testdata/golden.json.gz", &g)
	for _, tc := range g.Errors {
		t.Run(tc.Name, func(t *testing.T) {
			if _, _, err := FromJSON(tc.Pretok, "pre_tokenizer"); err == nil {
				t.Errorf("FromJSON(%s) accepted what tokenizers refuses", tc.Pretok)
			}
		})
	}
}

// fixturesDir is ../shared/fixtures beside the repository root.
func fixturesDir() string { return filepath.Join("..", "..", "..", "shared", "fixtures") }

// fixtureTexts reads the 833 parity texts.
func fixtureTexts(t testing.TB) []string {
	t.Helper()
	path := filepath.Join(fixturesDir(), "parity", "texts.jsonl.gz")
	f, err := os.Open(path)
	if err != nil {
		t.Fatalf("fixture texts (CI keeps ../shared beside the checkout): %v", err)
	}
	defer f.Close()
	zr, err := gzip.NewReader(f)
	if err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	var texts []string
	sc := bufio.NewScanner(zr)
	sc.Buffer(nil, 64<<20)
	for sc.Scan() {
		var row struct {
			Text string `json:"text"`
		}
		if err := json.Unmarshal(sc.Bytes(), &row); err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		texts = append(texts, row.Text)
	}
	if err := sc.Err(); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	return texts
}

func wordHash(words []string) string {
	h := sha256.New()
	var n [4]byte
	for _, w := range words {
		binary.LittleEndian.PutUint32(n[:], uint32(len(w)))
		h.Write(n[:])
		h.Write([]byte(w))
	}
	return hex.EncodeToString(h.Sum(nil))[:16]
}

type fixtureGoldens struct {
	Texts          int          `json:"texts"`
	Cases          []goldenCase `json:"cases"`
	CodePointTexts int          `json:"code_point_texts"`
	CodePointCases []goldenCase `json:"code_point_cases"`
}

// checkHashes runs each case on texts and compares the word hashes.
func checkHashes(t *testing.T, cases []goldenCase, texts []string) {
	for _, tc := range cases {
		t.Run(tc.Name, func(t *testing.T) {
			p, _ := mustLoad(t, tc.Pretok)
			var words []string
			bad := 0
			for i, text := range texts {
				words = p.Split(text, words[:0])
				if wordHash(words) != tc.Hashes[i] {
					if bad++; bad <= 3 {
						t.Errorf("text %d (%.60q...): word hash differs (regenerate the words with "+
							"testdata/gen_golden.py to compare)", i, text)
					}
				}
			}
			if bad > 0 {
				t.Errorf("%d of %d texts differ", bad, len(texts))
			}
		})
	}
}

// codePointTexts returns every code point but the surrogates, in blocks of 0x4000: once as is, once with "x1 "
// after each (as gen_golden.py's code_point_texts).
func codePointTexts() []string {
	var out []string
	for lo := rune(0); lo < 0x110000; lo += 0x4000 {
		var plain, spaced strings.Builder
		for c := lo; c < lo+0x4000; c++ {
			if c >= 0xD800 && c <= 0xDFFF {
				continue
			}
			plain.WriteRune(c)
			spaced.WriteRune(c)
			spaced.WriteString("x1 ")
		}
		out = append(out, plain.String(), spaced.String())
	}
	return out
}

// TestCodePoints checks the character classes of the main pre-tokenizers on every code point.
func TestCodePoints(t *testing.T) {
	var fx fixtureGoldens
	readGzipJSON(t, "testdata/fixtures.json.gz", &fx)
	texts := codePointTexts()
	if fx.CodePointTexts != len(texts) {
		t.Fatalf("goldens made for %d texts, want %d", fx.CodePointTexts, len(texts))
	}
	checkHashes(t, fx.CodePointCases, texts)
}

// TestFixtureTexts checks every golden config of testdata/fixtures.json.gz on the 833 parity texts.
func TestFixtureTexts(t *testing.T) {
	texts := fixtureTexts(t)
	var fx fixtureGoldens
	readGzipJSON(t, "testdata/fixtures.json.gz", &fx)
	if fx.Texts != len(texts) {
		t.Fatalf("goldens made for %d texts, fixtures hold %d", fx.Texts, len(texts))
	}
	checkHashes(t, fx.Cases, texts)
}
