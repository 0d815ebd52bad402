package model

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/gload/gload/tokenize/tokjson"
)

func TestSerdeFloat(t *testing.T) {
	var cases []struct {
		Text string `json:"text"`
		Bits string `json:"bits"`
	}
	b, err := os.ReadFile("testdata/golden_serde_floats.json")
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, &cases); err != nil {
		t.Fatal(err)
	}
	for _, tc := range cases {
		t.Run(tc.Text, func(t *testing.T) {
			want, err := strconv.ParseUint(tc.Bits, 16, 64)
			if err != nil {
				t.Fatal(err)
			}
			got, err := serdeFloat([]byte(tc.Text))
			if err != nil {
				t.Fatal(err)
			}
			if math.Float64bits(got) != want {
				t.Errorf("serdeFloat(%s) = %v (%016x), serde_json gives %v (%016x)", tc.Text, got,
					math.Float64bits(got), math.Float64frombits(want), want)
			}
		})
	}
}

func TestSerdeFloatRejects(t *testing.T) {
	for _, s := range []string{"", "-", "01", "1.", ".5", "1e", "1e+", "+1", "1x", "--1", "1e400", "NaN", "0x10",
		"1.5e99999999999"} {
		if v, err := serdeFloat([]byte(s)); err == nil {
			t.Errorf("serdeFloat(%q) = %v, want an error", s, v)
		}
	}
}

func mustLoad(t *testing.T, js string, opts Options) Model {
	t.Helper()
	m, err := FromJSON(json.RawMessage(js), "model", opts)
	if err != nil {
		t.Fatalf("FromJSON: %v", err)
	}
	return m
}

const tinyBPE = `{"type":"BPE","unk_token":"<unk>","vocab":{"<unk>":0,"a":1,"b":2,"ab":3},"merges":["a b"]}`

func TestFromJSONErrors(t *testing.T) {
	tests := []struct {
		name        string
		json        string
		opts        Options
		unsupported bool
		path        string // must appear in the message
	}{
		{"dropout", `{"type":"BPE","dropout":0.1,"vocab":{},"merges":[]}`, Options{}, true, "model.dropout"},
		{"unknown type", `{"type":"Sentencepiece","vocab":{}}`, Options{}, true, "model.type"},
		{"bpe unk missing", `{"type":"BPE","unk_token":"<u>","vocab":{"a":0},"merges":[]}`, Options{}, true,
			"model.unk_token"},
		{"wordpiece unk missing", `{"type":"WordPiece","unk_token":"[UNK]","continuing_subword_prefix":"##",
			"max_input_chars_per_word":100,"vocab":{"a":0}}`, Options{}, true, "model.unk_token"},
		{"wordlevel unk missing", `{"type":"WordLevel","unk_token":"?","vocab":{"a":0}}`, Options{}, true,
			"model.unk_token"},
		{"unigram null unk_id", `{"type":"Unigram","unk_id":null,"vocab":[["a",-1]]}`, Options{}, true,
			"model.unk_id"},
		{"id above int32", `{"type":"BPE","vocab":{"a":2147483648},"merges":[]}`, Options{}, true, "model.vocab"},
		{"negative id", `{"type":"BPE","vocab":{"a":-1},"merges":[]}`, Options{}, false, "model.vocab"},
		{"float id", `{"type":"BPE","vocab":{"a":1.0},"merges":[]}`, Options{}, false, "model.vocab"},
		{"merge not in vocab", `{"type":"BPE","vocab":{"a":0},"merges":["a b"]}`, Options{}, false, "model.merges"},
		{"merge three parts", `{"type":"BPE","vocab":{"a":0},"merges":[["a","a","a"]]}`, Options{}, false,
			"model.merges"},
		{"merge one part", `{"type":"BPE","vocab":{"a":0},"merges":[["a"]]}`, Options{}, false, "model.merges"},
		{"mixed merges", `{"type":"BPE","vocab":{"a":0,"aa":1},"merges":["a a",["a","a"]]}`, Options{}, false,
			"model.merges"},
		{"merge shorter than prefix", `{"type":"BPE","continuing_subword_prefix":"##","vocab":{"a":0,"aa":1},
			"merges":["a a"]}`, Options{}, false, "model.merges"},
		{"missing merges", `{"type":"BPE","vocab":{"a":0}}`, Options{}, false, "model"},
		{"not an object", `[1,2]`, Options{}, false, "model"},
		{"bad json", `{"type":"BPE",`, Options{}, false, "model"},
		{"invalid utf8", "{\"type\":\"BPE\",\"vocab\":{\"\xff\":0},\"merges\":[]}", Options{}, false, "model"},
		{"lone surrogate", `{"type":"BPE","vocab":{"\ud800":0},"merges":[]}`, Options{}, false, "model"},
		{"unigram unk range", `{"type":"Unigram","unk_id":3,"vocab":[["a",-1]]}`, Options{}, false, "model.unk_id"},
		{"unigram bad piece", `{"type":"Unigram","unk_id":0,"vocab":[["a"]]}`, Options{}, false, "model.vocab"},
		{"unigram string score", `{"type":"Unigram","unk_id":0,"vocab":[["a","1"]]}`, Options{}, false,
			"model.vocab"},
		{"wordpiece missing max", `{"type":"WordPiece","unk_token":"a","continuing_subword_prefix":"##",
			"vocab":{"a":0}}`, Options{}, false, "model.max_input_chars_per_word"},
		{"untyped nothing", `{"vocab":5}`, Options{}, false, "model"},
		{"type mismatch field", `{"type":"BPE","fuse_unk":"yes","vocab":{},"merges":[]}`, Options{}, false,
			"model.fuse_unk"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			m, err := FromJSON(json.RawMessage(tc.json), "model", tc.opts)
			if err == nil {
				t.Fatalf("loaded %T, want an error", m)
			}
			if m != nil {
				t.Errorf("non-nil model %T with error", m)
			}
			if got := errors.Is(err, tokjson.ErrUnsupported); got != tc.unsupported {
				t.Errorf("errors.Is(ErrUnsupported) = %v: %v", got, err)
			}
			var inv *tokjson.InvalidError
			if !tc.unsupported && !errors.As(err, &inv) {
				t.Errorf("not a tokjson.InvalidError: %v", err)
			}
			if !strings.Contains(err.Error(), tc.path) {
				t.Errorf("error %q does not name %s", err, tc.path)
			}
		})
	}
}

func TestAcceptedVariants(t *testing.T) {
	tests := []struct {
		name, json string
		want       string // model type
	}{
		{"dropout zero", `{"type":"BPE","dropout":0,"vocab":{},"merges":[]}`, "*model.bpeModel"},
		{"dropout zero float", `{"type":"BPE","dropout":0.0,"vocab":{},"merges":[]}`, "*model.bpeModel"},
		{"empty merges", `{"type":"BPE","vocab":{"a":0},"merges":[]}`, "*model.bpeModel"},
		{"unk missing but unreachable", `{"type":"BPE","unk_token":"<u>","byte_fallback":true,
			"vocab":` + fallbackVocab() + `,"merges":[]}`, "*model.bpeModel"},
		{"untyped bpe", `{"vocab":{"a":0,"b":1,"ab":2},"merges":["a b"]}`, "*model.bpeModel"},
		{"untyped wordpiece", `{"unk_token":"a","continuing_subword_prefix":"##","max_input_chars_per_word":5,
			"vocab":{"a":0}}`, "*model.wordPieceModel"},
		{"untyped wordlevel", `{"unk_token":"a","vocab":{"a":0}}`, "*model.wordLevelModel"},
		{"untyped unigram", `{"unk_id":0,"vocab":[["a",-1]]}`, "*model.unigramModel"},
		{"unknown fields ignored", `{"type":"BPE","vocab":{},"merges":[],"extra":{"x":[1,2,{"y":null}]}}`,
			"*model.bpeModel"},
		{"duplicate key last wins", `{"type":"WordLevel","unk_token":"x","unk_token":"a","vocab":{"a":0}}`,
			"*model.wordLevelModel"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			m := mustLoad(t, tc.json, Options{})
			if got := fmt.Sprintf("%T", m); got != tc.want {
				t.Errorf("loaded %s, want %s", got, tc.want)
			}
		})
	}
}

func fallbackVocab() string {
	var sb strings.Builder
	sb.WriteString("{")
	for b := range 256 {
		if b > 0 {
			sb.WriteString(",")
		}
		fmt.Fprintf(&sb, `"<0x%02X>":%d`, b, b)
	}
	sb.WriteString("}")
	return sb.String()
}

func TestVocabAccessors(t *testing.T) {
	tests := []struct {
		name, json string
		size       int
		tok        string
		id         int32
	}{
		{"bpe", tinyBPE, 4, "ab", 3},
		{"bpe shared id", `{"type":"BPE","vocab":{"b":1,"a":1,"c":0},"merges":[]}`, 3, "a", 1},
		{"wordpiece", `{"type":"WordPiece","unk_token":"[UNK]","continuing_subword_prefix":"##",
			"max_input_chars_per_word":100,"vocab":{"[UNK]":0,"##x":7}}`, 2, "##x", 7},
		{"wordlevel", `{"type":"WordLevel","unk_token":"?","vocab":{"?":0,"hello":5}}`, 2, "hello", 5},
		{"unigram", `{"type":"Unigram","unk_id":0,"vocab":[["<unk>",0],["a",-1],["a",-2]]}`, 3, "a", 2},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			m := mustLoad(t, tc.json, Options{})
			if m.VocabSize() != tc.size {
				t.Errorf("VocabSize = %d, want %d", m.VocabSize(), tc.size)
			}
			if id, ok := m.TokenToID(tc.tok); !ok || id != tc.id {
				t.Errorf("TokenToID(%q) = %d, %v", tc.tok, id, ok)
			}
			if tok, ok := m.IDToToken(tc.id); !ok || tok != tc.tok {
				t.Errorf("IDToToken(%d) = %q, %v; want %q", tc.id, tok, ok, tc.tok)
			}
			if _, ok := m.TokenToID("\x00nope"); ok {
				t.Error("TokenToID found an absent token")
			}
			for _, id := range []int32{-1, 1 << 30} {
				if tok, ok := m.IDToToken(id); ok {
					t.Errorf("IDToToken(%d) = %q", id, tok)
				}
			}
		})
	}
}

func TestByteLevelKeepsOwnStrings(t *testing.T) {
	m := loadFixture(t, "llama3")
	id, ok := m.TokenToID("Ġthe")
	if !ok {
		t.Fatal(`TokenToID("Ġthe") not found`)
	}
	if tok, _ := m.IDToToken(id); tok != "Ġthe" {
		t.Errorf("IDToToken(%d) = %q", id, tok)
	}
	if got := m.NewEncoder().Encode(" the", nil); !slices.Equal(got, []int32{id}) {
		t.Errorf(`Encode(" the") = %v, want [%d]`, got, id)
	}
}

func TestEmptyWord(t *testing.T) {
	for _, js := range []string{tinyBPE,
		`{"type":"WordPiece","unk_token":"a","continuing_subword_prefix":"##","max_input_chars_per_word":5,"vocab":{"a":0}}`,
		`{"type":"Unigram","unk_id":0,"vocab":[["a",-1]]}`} {
		if got := mustLoad(t, js, Options{}).NewEncoder().Encode("", []int32{9}); !slices.Equal(got, []int32{9}) {
			t.Errorf("Encode(\"\") appended: %v", got)
		}
	}
	// WordLevel looks even the empty word up, like Hugging Face.
	wl := mustLoad(t, `{"type":"WordLevel","unk_token":"?","vocab":{"?":0,"":4}}`, Options{})
	if got := wl.NewEncoder().Encode("", nil); !slices.Equal(got, []int32{4}) {
		t.Errorf("WordLevel Encode(\"\") = %v", got)
	}
}

// TestChunkingSetup pins which fixtures get the exact word-chunking shortcuts.
func TestChunkingSetup(t *testing.T) {
	l2 := loadFixture(t, "llama2").(*bpeModel)
	if l2.splitChar != "▁" || l2.joins == nil {
		t.Errorf("llama2: splitChar %q, joins %v", l2.splitChar, l2.joins != nil)
	}
	for _, name := range []string{"llama3", "qwen3", "gpt4o"} {
		m := loadFixture(t, name).(*bpeModel)
		if m.splitChar != "" || m.joins != nil || !m.regular {
			t.Errorf("%s: splitChar %q, joins %v, regular %v", name, m.splitChar, m.joins != nil, m.regular)
		}
	}
}

// TestMergedIDOrder documents, for the fixtures, whether the merged id rises with the merge rank. The
// encoder does not rely on it (it compares ranks), so nothing here is asserted.
func TestMergedIDOrder(t *testing.T) {
	for _, name := range []string{"llama3", "qwen3", "gpt4o", "llama2"} {
		m := loadFixture(t, name).(*bpeModel)
		t.Logf("%s: merged id rises with rank: %v", name, m.idsFollowRanks)
	}
}

// TestMergePathsAgree runs every word of the golden corpora through the quadratic scan, the heap and the
// chunked paths and requires identical output: the exactness arguments of mergeSmall and buildJoins, checked.
func TestMergePathsAgree(t *testing.T) {
	for _, name := range []string{"llama3", "gpt4o", "llama2"} {
		t.Run(name, func(t *testing.T) {
			m := loadFixture(t, name).(*bpeModel)
			var words []string
			if name == "llama2" {
				for _, text := range fixtureTexts(t)[:200] {
					words = append(words, llama2Word(text))
				}
			} else {
				for i, w := range readJSONL[goldenWord](t, "testdata/golden_words_"+name+".jsonl.gz") {
					if i%4 == 0 {
						words = append(words, w.W)
					}
				}
			}
			checkMergePaths(t, m, words)
		})
	}
}

func checkMergePaths(t *testing.T, m *bpeModel, words []string) {
	t.Helper()
	e := m.NewEncoder().(*bpeEncoder)
	for _, w := range words {
		if w == "" {
			continue
		}
		viaHeap := slices.Clone(e.encodeWithHeap(w))
		if m.regular && len(w) <= 512 { // the scan is quadratic
			if got := e.encodeWithScan(w); !slices.Equal(got, viaHeap) {
				t.Errorf("scan %v != heap %v for %q", got, viaHeap, w)
			}
		}
		if got := e.Encode(w, nil); !slices.Equal(got, viaHeap) {
			t.Errorf("Encode %v != heap %v for %.60q", got, viaHeap, w)
		}
	}
}

// encodeWithHeap and encodeWithScan force one merge path on the whole word (test only).
func (e *bpeEncoder) encodeWithHeap(word string) []int32 {
	if ids, ok := e.ignoreMergesHit(word); ok {
		return ids
	}
	e.initSymbols(word)
	if len(e.word) > 1 {
		e.mergeHeap()
	}
	return e.word
}

func (e *bpeEncoder) encodeWithScan(word string) []int32 {
	if ids, ok := e.ignoreMergesHit(word); ok {
		return ids
	}
	e.initSymbols(word)
	if len(e.word) > 1 {
		e.mergeSmall()
	}
	return e.word
}

func FuzzFromJSON(f *testing.F) {
	f.Add([]byte(tinyBPE))
	f.Add([]byte(`{"type":"Unigram","unk_id":0,"vocab":[["<unk>",0],["a",-1.5e0],["ab",-2]],"byte_fallback":true}`))
	f.Add([]byte(`{"unk_token":"[UNK]","continuing_subword_prefix":"##","max_input_chars_per_word":3,"vocab":{"[UNK]":0,"a":1,"##b":2}}`))
	f.Add([]byte(`{"type":"WordLevel","unk_token":"?","vocab":{"?":0,"\u00e9\ud83d\ude00":1}}`))
	f.Add([]byte(`{"type":"BPE","continuing_subword_prefix":"#","end_of_word_suffix":"$","vocab":{"a":0,"#a$":1,"a#a$":2,"#a":3},"merges":[["a","#a$"]],"byte_fallback":true,"fuse_unk":true}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		for _, opts := range []Options{{}, {ByteLevel: true}} {
			m, err := FromJSON(data, "model", opts)
			if err != nil {
				if m != nil {
					t.Fatalf("model and error: %v", err)
				}
				continue
			}
			m.VocabSize()
			enc := m.NewEncoder()
			for _, w := range []string{"a", "ab#", "\xff\xfe", "é日本\u2581 x", strings.Repeat("ab", 40)} {
				enc.Encode(w, nil)
			}
		}
	})
}
