package normalize

import (
	"bufio"
	"compress/gzip"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"unicode/utf8"

	"github.com/gload/gload/tokenize/tokjson"
)

// fixtures is ../shared/fixtures beside the repository root.
var fixtures = filepath.Join("..", "..", "..", "shared", "fixtures")

func readGzip(t testing.TB, path string) []byte {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatalf("open %s: %v", path, err)
	}
	defer f.Close()
	z, err := gzip.NewReader(f)
	if err != nil {
		t.Fatalf("gunzip %s: %v", path, err)
	}
	var b strings.Builder
	if _, err := bufio.NewReader(z).WriteTo(&b); err != nil {
		t.Fatalf("read %s: %v", path, err)
	}
	return []byte(b.String())
}

var fixtureNormalizers sync.Map // name -> json.RawMessage

func fixtureNormalizer(t testing.TB, name string) json.RawMessage {
	if v, ok := fixtureNormalizers.Load(name); ok {
		return v.(json.RawMessage)
	}
	var tok struct {
		Normalizer json.RawMessage `json:"normalizer"`
	}
	data := readGzip(t, filepath.Join(fixtures, "tokenizers", name, "tokenizer.json.gz"))
	if err := json.Unmarshal(data, &tok); err != nil {
		t.Fatalf("tokenizer %s: %v", name, err)
	}
	fixtureNormalizers.Store(name, tok.Normalizer)
	return tok.Normalizer
}

// resolve replaces the goldens' {"$fixture": name[, "$index": i]} stand-ins by the fixture's normalizer JSON.
func resolve(t testing.TB, raw json.RawMessage) json.RawMessage {
	t.Helper()
	var ref struct {
		Fixture *string `json:"$fixture"`
		Index   *int    `json:"$index"`
	}
	if err := json.Unmarshal(raw, &ref); err != nil || ref.Fixture == nil {
		return raw
	}
	n := fixtureNormalizer(t, *ref.Fixture)
	if ref.Index == nil {
		return n
	}
	var seq struct {
		Normalizers []json.RawMessage `json:"normalizers"`
	}
	if err := json.Unmarshal(n, &seq); err != nil || *ref.Index >= len(seq.Normalizers) {
		t.Fatalf("fixture %s has no normalizers[%d]", *ref.Fixture, *ref.Index)
	}
	return seq.Normalizers[*ref.Index]
}

func build(t testing.TB, raw json.RawMessage) Normalizer {
	t.Helper()
	n, err := FromJSON(resolve(t, raw), "normalizer")
	if err != nil {
		t.Fatalf("FromJSON(%.200s): %v", raw, err)
	}
	if n == nil {
		t.Fatalf("FromJSON(%.200s) = nil", raw)
	}
	return n
}

func TestCases(t *testing.T) {
	var cases []struct {
		Normalizer json.RawMessage `json:"normalizer"`
		IO         [][2]string     `json:"io"`
	}
	if err := json.Unmarshal(readGzip(t, filepath.Join("testdata", "cases.json.gz")), &cases); err != nil {
		t.Fatal(err)
	}
	for _, c := range cases {
		name := string(c.Normalizer)
		if len(name) > 80 {
			name = name[:80]
		}
		t.Run(name, func(t *testing.T) {
			n := build(t, c.Normalizer)
			for _, io := range c.IO {
				if got := n.Normalize(io[0]); got != io[1] {
					t.Errorf("Normalize(%+q) = %+q, want %+q", io[0], got, io[1])
				}
			}
		})
	}
}

type hashGoldens struct {
	Normalizers  map[string]json.RawMessage     `json:"normalizers"`
	Codepoints   map[string][]string            `json:"codepoints"`
	Probes       map[string]map[string][]string `json:"probes"`
	Fixtures     map[string][]string            `json:"fixtures"`
	Random       map[string][]string            `json:"random"`
	RandomInputs []string                       `json:"random_inputs"`
}

var loadHashes = sync.OnceValues(func() (*hashGoldens, error) {
	f, err := os.Open(filepath.Join("testdata", "hashes.json.gz"))
	if err != nil {
		return nil, err
	}
	defer f.Close()
	z, err := gzip.NewReader(f)
	if err != nil {
		return nil, err
	}
	var h hashGoldens
	return &h, json.NewDecoder(z).Decode(&h)
})

func hashes(t testing.TB) *hashGoldens {
	h, err := loadHashes()
	if err != nil {
		t.Fatalf("hashes.json.gz: %v", err)
	}
	return h
}

func shortHash(s string, n int) string {
	sum := sha256.Sum256([]byte(s))
	return hex.EncodeToString(sum[:])[:n]
}

// blockHashes mirrors gen_golden.py's block_hashes: outputs for fmt around each code point, hashed per 4096.
func blockHashes(n Normalizer, before, after string, limit int) []string {
	var out []string
	h := sha256.New()
	var buf []byte
	for c := 0; c < limit; c++ {
		var s string
		if c < 0xD800 || c > 0xDFFF {
			buf = append(utf8.AppendRune(append(buf[:0], before...), rune(c)), after...)
			s = n.Normalize(string(buf))
		}
		h.Write([]byte(s))
		h.Write([]byte{0xff})
		if c%4096 == 4095 {
			out = append(out, hex.EncodeToString(h.Sum(nil))[:16])
			h.Reset()
		}
	}
	return out
}

func compareBlocks(t *testing.T, got, want []string, what string) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%s: %d blocks, want %d", what, len(got), len(want))
	}
	bad := 0
	for i := range got {
		if got[i] != want[i] {
			if bad < 5 {
				t.Errorf("%s: code points U+%04X..U+%04X differ from HF", what, i*4096, i*4096+4095)
			}
			bad++
		}
	}
	if bad > 5 {
		t.Errorf("%s: %d blocks differ in all", what, bad)
	}
}

// TestCodepoints checks every code point alone against HF.
func TestCodepoints(t *testing.T) {
	h := hashes(t)
	for name, want := range h.Codepoints {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			compareBlocks(t, blockHashes(build(t, h.Normalizers[name]), "", "", 0x110000), want, name)
		})
	}
}

// TestProbes checks every BMP code point in small contexts: graphemes for Precompiled, composition for NFC.
func TestProbes(t *testing.T) {
	h := hashes(t)
	for name, fmts := range h.Probes {
		n := build(t, h.Normalizers[name])
		for fmt, want := range fmts {
			before, after, _ := strings.Cut(fmt, "{}")
			t.Run(name+"/"+fmt, func(t *testing.T) {
				t.Parallel()
				compareBlocks(t, blockHashes(n, before, after, 0x10000), want, fmt)
			})
		}
	}
}

func fixtureTexts(t testing.TB) []string {
	var texts []string
	for _, line := range strings.Split(string(readGzip(t, filepath.Join(fixtures, "parity", "texts.jsonl.gz"))), "\n") {
		if line == "" {
			continue
		}
		var doc struct {
			Text string `json:"text"`
		}
		if err := json.Unmarshal([]byte(line), &doc); err != nil {
			t.Fatalf("texts.jsonl.gz: %v", err)
		}
		texts = append(texts, doc.Text)
	}
	return texts
}

// TestFixtures checks the 833 fixture documents (every normalizer, Precompiled included) against HF.
func TestFixtures(t *testing.T) {
	h := hashes(t)
	texts := fixtureTexts(t)
	for name, want := range h.Fixtures {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			if len(want) != len(texts) {
				t.Fatalf("%d hashes for %d texts", len(want), len(texts))
			}
			n := build(t, h.Normalizers[name])
			for i, text := range texts {
				if got := shortHash(n.Normalize(text), len(want[i])); got != want[i] {
					t.Errorf("text %d (%.60q...): output differs from HF", i, text)
				}
			}
		})
	}
}

// TestRandom checks random strings of marks, jamo, composites and starters against HF.
func TestRandom(t *testing.T) {
	h := hashes(t)
	for name, want := range h.Random {
		t.Run(name, func(t *testing.T) {
			n := build(t, h.Normalizers[name])
			bad := 0
			for i, in := range h.RandomInputs {
				got := n.Normalize(in)
				if shortHash(got, len(want[i])) != want[i] {
					if bad < 10 {
						t.Errorf("Normalize(%+q) = %+q: differs from HF", in, got)
					}
					bad++
				}
			}
		})
	}
}

func TestFromJSONErrors(t *testing.T) {
	for _, tc := range []struct {
		name, json, path string
		unsupported      bool
	}{
		{"unknown type", `{"type":"Foo"}`, "normalizer", true},
		{"no type", `{"lowercase":true}`, "normalizer", false},
		{"not an object", `[1]`, "normalizer", false},
		{"sequence without list", `{"type":"Sequence"}`, "normalizer", false},
		{"unknown in sequence", `{"type":"Sequence","normalizers":[{"type":"NFC"},{"type":"Bar"}]}`, "normalizer.normalizers[1]", true},
		{"null in sequence", `{"type":"Sequence","normalizers":[null]}`, "normalizer.normalizers[0]", false},
		{"strip missing", `{"type":"Strip","strip_left":true}`, "normalizer", false},
		{"strip bad type", `{"type":"Strip","strip_left":"yes","strip_right":true}`, "normalizer", false},
		{"bert missing", `{"type":"BertNormalizer","clean_text":true}`, "normalizer", false},
		{"replace both", `{"type":"Replace","pattern":{"String":"a","Regex":"b"},"content":""}`, "normalizer.pattern", false},
		{"replace neither", `{"type":"Replace","pattern":{},"content":""}`, "normalizer.pattern", false},
		{"replace no content", `{"type":"Replace","pattern":{"String":"a"}}`, "normalizer", false},
		{"replace bad regex", `{"type":"Replace","pattern":{"Regex":"(a"},"content":""}`, "normalizer.pattern", true},
		{"replace posix", `{"type":"Replace","pattern":{"Regex":"[[:alpha:]]"},"content":""}`, "normalizer.pattern", true},
		{"replace intersection", `{"type":"Replace","pattern":{"Regex":"[a-z&&[^b]]"},"content":""}`, "normalizer.pattern", true},
		{"replace \\h", `{"type":"Replace","pattern":{"Regex":"\\h+"},"content":""}`, "normalizer.pattern", true},
		{"prepend missing", `{"type":"Prepend"}`, "normalizer", false},
		{"charsmap not base64", `{"type":"Precompiled","precompiled_charsmap":"@@@"}`, "normalizer.precompiled_charsmap", false},
		{"charsmap short", `{"type":"Precompiled","precompiled_charsmap":"AAE="}`, "normalizer.precompiled_charsmap", false},
		{"charsmap trie too long", `{"type":"Precompiled","precompiled_charsmap":"EAAAAAAAAAA="}`, "normalizer.precompiled_charsmap", false},
		{"charsmap bad utf8", `{"type":"Precompiled","precompiled_charsmap":"AAAAAP8="}`, "normalizer.precompiled_charsmap", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			n, err := FromJSON(json.RawMessage(tc.json), "normalizer")
			if err == nil {
				t.Fatalf("FromJSON(%s) = %T, want an error", tc.json, n)
			}
			var ue *tokjson.UnsupportedError
			var ie *tokjson.InvalidError
			switch {
			case tc.unsupported && errors.As(err, &ue):
				if ue.Path != tc.path {
					t.Errorf("path %q, want %q (%v)", ue.Path, tc.path, err)
				}
				if !errors.Is(err, tokjson.ErrUnsupported) {
					t.Errorf("errors.Is(%v, ErrUnsupported) = false", err)
				}
			case !tc.unsupported && errors.As(err, &ie):
				if ie.Path != tc.path {
					t.Errorf("path %q, want %q (%v)", ie.Path, tc.path, err)
				}
				if strings.HasPrefix(tc.name, "charsmap") && tc.name != "charsmap not base64" && !errors.Is(err, ErrCharsmap) {
					t.Errorf("errors.Is(%v, ErrCharsmap) = false", err)
				}
			default:
				t.Errorf("error %T %v, want unsupported=%v", err, err, tc.unsupported)
			}
		})
	}
}

func TestFromJSONNull(t *testing.T) {
	for _, raw := range []string{"", "null", " null "} {
		n, err := FromJSON(json.RawMessage(raw), "normalizer")
		if n != nil || err != nil {
			t.Errorf("FromJSON(%q) = %v, %v; want nil, nil", raw, n, err)
		}
	}
	// An empty or absent charsmap is the identity (HF refuses it; SentencePiece reads it as no normalization).
	for _, raw := range []string{`{"type":"Precompiled","precompiled_charsmap":""}`, `{"type":"Precompiled"}`,
		`{"type":"Precompiled","precompiled_charsmap":null}`} {
		n, err := FromJSON(json.RawMessage(raw), "normalizer")
		if err != nil {
			t.Fatalf("FromJSON(%s): %v", raw, err)
		}
		if got := n.Normalize("ＡＢ  c"); got != "ＡＢ  c" {
			t.Errorf("%s: Normalize = %q, want the identity", raw, got)
		}
	}
}

// TestUnchangedNoAlloc checks that text a normalizer leaves alone comes back without a copy.
func TestUnchangedNoAlloc(t *testing.T) {
	h := hashes(t)
	in := "plain ascii text, nothing to do 123 " + strings.Repeat("日本語のテキスト", 4)
	for _, name := range []string{"NFC", "NFD", "NFKC", "NFKD", "StripAccents", "Precompiled", "Nmt"} {
		n := build(t, h.Normalizers[name])
		if got := n.Normalize(in); got != in {
			t.Fatalf("%s changed %q to %q", name, in, got)
		}
		if a := testing.AllocsPerRun(20, func() { n.Normalize(in) }); a != 0 {
			t.Errorf("%s: %v allocations for unchanged text", name, a)
		}
	}
	low := "already lower case ascii and ünïcödé"
	if a := testing.AllocsPerRun(20, func() { lowercase{}.Normalize(low) }); a != 0 {
		t.Errorf("Lowercase: %v allocations for unchanged text", a)
	}
}

func TestTablesBuild(t *testing.T) {
	tb := tables()
	if len(tb.props) > 1<<16 || len(tb.stage2)>>blockBits > 1<<16 {
		t.Fatalf("tables overflow uint16 indexes: %d props, %d blocks", len(tb.props), len(tb.stage2)>>blockBits)
	}
	if c := tb.ccc(0x0301); c != 230 {
		t.Errorf("ccc(U+0301) = %d, want 230", c)
	}
	if r, ok := tb.composeRunes('e', 0x0301); !ok || r != 'é' {
		t.Errorf("compose(e, U+0301) = %U %v", r, ok)
	}
	t.Logf("%d distinct properties, %d blocks", len(tb.props), len(tb.stage2)>>blockBits)
}

func allNormalizers(t testing.TB) map[string]Normalizer {
	h := hashes(t)
	out := map[string]Normalizer{}
	for name, raw := range h.Normalizers {
		out[name] = build(t, raw)
	}
	out["Replace"] = build(t, json.RawMessage(`{"type":"Replace","pattern":{"Regex":"\\s+|b*"},"content":"-"}`))
	return out
}

// FuzzNormalizers checks that no normalizer panics, and that valid UTF-8 stays valid.
func FuzzNormalizers(f *testing.F) {
	for _, s := range []string{"", "a", "e\u0301\u0316", "\xff\xfe", "\u1100\u1161\u11a8", "ＡＢ\r\n\u0301", "İ",
		"\u4e2d\u0000\ufffd", strings.Repeat("\u0301", 50)} {
		f.Add(s)
	}
	ns := allNormalizers(f)
	f.Fuzz(func(t *testing.T, s string) {
		for name, n := range ns {
			out := n.Normalize(s)
			if utf8.ValidString(s) && !utf8.ValidString(out) {
				t.Errorf("%s: invalid UTF-8 output %+q for %+q", name, out, s)
			}
		}
	})
}

// FuzzCharsmap checks that a corrupt charsmap is an error at load or harmless at run time, never a panic.
func FuzzCharsmap(f *testing.F) {
	h := hashes(f)
	var pc struct {
		Charsmap string `json:"precompiled_charsmap"`
	}
	if err := json.Unmarshal(resolve(f, h.Normalizers["Precompiled"]), &pc); err != nil {
		f.Fatal(err)
	}
	good, err := decodeCharsmap(pc.Charsmap)
	if err != nil {
		f.Fatal(err)
	}
	// The real trie's first units with a short string blob: walks that leave the array or the blob.
	small := append(binary.LittleEndian.AppendUint32(nil, 60), good[4:64]...)
	small = append(small, "abc\x00\u00e9\x00"...)
	f.Add(small, "Ａb\u0301 ａ\u00a0x")
	f.Add(good[:64], "Ａb\u0301")
	f.Add([]byte{8, 0, 0, 0, 0xff, 0xff, 0xff, 0xff, 0, 0, 0, 0, 'x', 0}, "abc")
	f.Add([]byte{}, "")
	f.Fuzz(func(t *testing.T, charsmap []byte, s string) {
		p, err := newPrecompiled(charsmap)
		if err != nil {
			return
		}
		out := p.Normalize(s)
		if utf8.ValidString(s) && !utf8.ValidString(out) {
			t.Errorf("invalid UTF-8 output %+q for %+q", out, s)
		}
	})
}

func benchText(t testing.TB, kind string) string {
	switch kind {
	case "ascii":
		return strings.Repeat("The quick brown fox jumps over the lazy dog; func main() { return 42 }\n", 200)
	case "mixed":
		texts := fixtureTexts(t)
		var b strings.Builder
		for _, s := range texts[:200] {
			b.WriteString(s)
		}
		return b.String()
	}
	panic(fmt.Sprintf("unknown bench text %q", kind))
}

func BenchmarkNormalize(b *testing.B) {
	h := hashes(b)
	for _, name := range []string{"NFC", "NFKC", "NFD", "Lowercase", "BertUncased", "Precompiled", "Unigram"} {
		n := build(b, h.Normalizers[name])
		for _, kind := range []string{"ascii", "mixed"} {
			text := benchText(b, kind)
			n.Normalize(text) // build the tables outside the measurement
			b.Run(name+"/"+kind, func(b *testing.B) {
				b.ReportAllocs()
				b.SetBytes(int64(len(text)))
				for b.Loop() {
					n.Normalize(text)
				}
			})
		}
	}
}

// TestConcurrent runs the normalizers from several goroutines (meaningful under -race).
func TestConcurrent(t *testing.T) {
	ns := allNormalizers(t)
	texts := []string{"Ａｂｃ e\u0301 \u1100\u1161", "İSTANBUL\u00a0\u4e2d", strings.Repeat("a\u0301\u0316", 20)}
	want := map[string][]string{}
	for name, n := range ns {
		for _, s := range texts {
			want[name] = append(want[name], n.Normalize(s))
		}
	}
	var wg sync.WaitGroup
	for range 4 {
		wg.Go(func() {
			for name, n := range ns {
				for i, s := range texts {
					if got := n.Normalize(s); got != want[name][i] {
						t.Errorf("%s: concurrent result %+q, want %+q", name, got, want[name][i])
					}
				}
			}
		})
	}
	wg.Wait()
}
