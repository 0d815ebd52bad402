package pipeline

import (
	"bytes"
	"compress/gzip"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gload/gload/loader/dataset"
	"github.com/gload/gload/tokenize"
)

const exampleTokenizer = "../../examples/udhr/tokenizer.json"

func loadTok(t testing.TB) *tokenize.Tokenizer {
	t.Helper()
	tok, err := tokenize.Load(exampleTokenizer)
	if err != nil {
		t.Fatal(err)
	}
	return tok
}

// writeCorpus writes n JSONL documents of varied length (deterministic) and returns the path and the texts.
func writeCorpus(t testing.TB, dir string, n int) (string, []string) {
	t.Helper()
	var buf bytes.Buffer
	texts := make([]string, n)
	words := []string{"human", "rights", "dignity", "freedom", "justice", "peace", "world", "équité", "自由", "123", "!"}
	for i := range texts {
		var sb strings.Builder
		for j := 0; j < 1+(i*7919)%300; j++ {
			if j > 0 {
				sb.WriteByte(' ')
			}
			sb.WriteString(words[(i+j*31)%len(words)])
		}
		texts[i] = sb.String()
		line, _ := json.Marshal(map[string]any{"text": texts[i], "id": i})
		buf.Write(line)
		buf.WriteByte('\n')
	}
	path := filepath.Join(dir, "corpus.jsonl")
	if err := os.WriteFile(path, buf.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	return path, texts
}

func run(t testing.TB, o Options) Summary {
	t.Helper()
	s, err := Run(context.Background(), o)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// dirBytes reads every dataset file except the freshness stamp (a cache of stat results, not content) into one map.
func dirBytes(t testing.TB, dir string) map[string][]byte {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string][]byte{}
	for _, e := range entries {
		if e.Name() == dataset.StampFile {
			continue
		}
		b, err := os.ReadFile(filepath.Join(dir, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		out[e.Name()] = b
	}
	return out
}

func sameDirs(t *testing.T, a, b string) {
	t.Helper()
	da, db := dirBytes(t, a), dirBytes(t, b)
	if len(da) != len(db) {
		t.Fatalf("%s has %d files, %s has %d", a, len(da), b, len(db))
	}
	for name, x := range da {
		if !bytes.Equal(x, db[name]) {
			t.Fatalf("%s differs between %s and %s", name, a, b)
		}
	}
}

func TestRowsEqualEncode(t *testing.T) {
	tok := loadTok(t)
	dir := t.TempDir()
	in, texts := writeCorpus(t, dir, 500)
	out := filepath.Join(dir, "ds")
	s := run(t, Options{Inputs: []string{in}, Out: out, Engine: tok, Workers: 3, ShardSize: 20000, RowsPerBatch: 7})
	if s.Rows != int64(len(texts)) || s.Documents != int64(len(texts)) || s.Shards < 2 {
		t.Fatalf("summary %+v", s)
	}
	ds, err := dataset.Open(out, dataset.OpenOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer ds.Close()
	if ds.TokenizerHash() != tok.Hash() {
		t.Errorf("tokenizer hash %q, want %q", ds.TokenizerHash(), tok.Hash())
	}
	for i, text := range texts {
		got, err := ds.AppendTokens(nil, i)
		if err != nil {
			t.Fatal(err)
		}
		want := tok.Encode(text)
		if fmt.Sprint(got) != fmt.Sprint(want) {
			t.Fatalf("row %d: got %v, want %v", i, got, want)
		}
	}
	if _, err := os.Stat(filepath.Join(out, journalName)); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("journal left behind: %v", err)
	}
}

func TestDeterministicAcrossWorkers(t *testing.T) {
	tok := loadTok(t)
	dir := t.TempDir()
	in, _ := writeCorpus(t, dir, 700)
	var outs []string
	for _, w := range []int{1, 2, 8} {
		out := filepath.Join(dir, fmt.Sprintf("w%d", w))
		run(t, Options{Inputs: []string{in}, Out: out, Engine: tok, Workers: w, ShardSize: 30000})
		outs = append(outs, out)
	}
	sameDirs(t, outs[0], outs[1])
	sameDirs(t, outs[0], outs[2])
}

func TestOverflowAndLimits(t *testing.T) {
	tok := loadTok(t)
	dir := t.TempDir()
	in, texts := writeCorpus(t, dir, 200)
	maxLen := 50
	for _, tc := range []struct {
		overflow Overflow
		min      int
	}{{OverflowTruncate, 0}, {OverflowSplit, 5}, {OverflowDrop, 0}} {
		t.Run(string(tc.overflow), func(t *testing.T) {
			out := filepath.Join(dir, string(tc.overflow))
			s := run(t, Options{Inputs: []string{in}, Out: out, Engine: tok, Workers: 2, MaxLength: maxLen,
				Overflow: tc.overflow, MinLength: tc.min})
			ds, err := dataset.Open(out, dataset.OpenOptions{})
			if err != nil {
				t.Fatal(err)
			}
			defer ds.Close()
			var want [][]int32
			for _, text := range texts {
				ids := tok.Encode(text)
				switch {
				case len(ids) <= maxLen:
					if len(ids) >= tc.min {
						want = append(want, ids)
					}
				case tc.overflow == OverflowTruncate:
					want = append(want, ids[:maxLen])
				case tc.overflow == OverflowSplit:
					for len(ids) > 0 {
						n := min(len(ids), maxLen)
						if n >= max(tc.min, 1) {
							want = append(want, ids[:n])
						}
						ids = ids[n:]
					}
				}
			}
			if ds.Len() != len(want) || int(s.Rows) != len(want) {
				t.Fatalf("%d rows (summary %d), want %d", ds.Len(), s.Rows, len(want))
			}
			for i := range want {
				got, _ := ds.AppendTokens(nil, i)
				if fmt.Sprint(got) != fmt.Sprint(want[i]) {
					t.Fatalf("row %d differs", i)
				}
			}
			if tc.overflow == OverflowDrop && s.Skipped["too long"] == 0 {
				t.Errorf("no document counted as too long: %+v", s.Skipped)
			}
		})
	}
}

func TestBadInputSkippedAndCounted(t *testing.T) {
	tok := loadTok(t)
	dir := t.TempDir()
	in := filepath.Join(dir, "bad.jsonl")
	body := strings.Join([]string{
		`{"text": "good one"}`,
		`{"text": "broken`,
		`{"other": "no text field"}`,
		`{"text": 42}`,
		`{"text": ""}`,
		"{\"text\": \"bad \xff\xfe utf8\"}",
		`{"text": "good two"}`,
	}, "\n") + "\n"
	if err := os.WriteFile(in, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(dir, "ds")
	s := run(t, Options{Inputs: []string{in}, Out: out, Engine: tok})
	if s.Documents != 7 || s.Rows != 3 || s.SkippedTotal() != 4 || s.InvalidUTF8 != 1 {
		t.Fatalf("summary %+v", s)
	}
	ds, err := dataset.Open(out, dataset.OpenOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer ds.Close()
	got, _ := ds.AppendTokens(nil, 1)
	if want := tok.Encode("bad \ufffd\ufffd utf8"); fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("invalid UTF-8 row: got %v, want %v", got, want)
	}

	// --strict stops at the first bad document and leaves nothing that looks complete.
	strictOut := filepath.Join(dir, "strict")
	_, err = Run(context.Background(), Options{Inputs: []string{in}, Out: strictOut, Engine: tok, Strict: true})
	if err == nil || !strings.Contains(err.Error(), "bad.jsonl:2") {
		t.Fatalf("strict: err = %v, want one naming bad.jsonl:2", err)
	}
	if _, err := os.Stat(filepath.Join(strictOut, "state.json")); err == nil {
		t.Error("strict failure left state.json")
	}
	// The next run into it is told that --overwrite is safe there (only gload's own files remain).
	_, err = Run(context.Background(), Options{Inputs: []string{in}, Out: strictOut, Engine: tok})
	if err == nil || !strings.Contains(err.Error(), "it deletes only files gload wrote") {
		t.Fatalf("after a failed strict run: err = %v", err)
	}
}

func TestOutputDirRules(t *testing.T) {
	tok := loadTok(t)
	dir := t.TempDir()
	in, _ := writeCorpus(t, dir, 20)
	out := filepath.Join(dir, "ds")
	run(t, Options{Inputs: []string{in}, Out: out, Engine: tok})
	if _, err := Run(context.Background(), Options{Inputs: []string{in}, Out: out, Engine: tok}); err == nil ||
		!strings.Contains(err.Error(), "--overwrite") {
		t.Fatalf("existing output: err = %v", err)
	}
	run(t, Options{Inputs: []string{in}, Out: out, Engine: tok, Overwrite: true})
	if _, err := Run(context.Background(), Options{Inputs: []string{in}, Out: out, Engine: tok, Resume: true}); err == nil ||
		!strings.Contains(err.Error(), "complete dataset") {
		t.Fatalf("resume of a complete dataset: err = %v", err)
	}
	// A directory holding files gload did not write is never wiped.
	foreign := filepath.Join(dir, "foreign")
	os.MkdirAll(foreign, 0o755)
	os.WriteFile(filepath.Join(foreign, "notes.txt"), []byte("mine"), 0o644)
	if _, err := Run(context.Background(), Options{Inputs: []string{in}, Out: foreign, Engine: tok, Overwrite: true}); err == nil {
		t.Fatal("--overwrite deleted a directory holding foreign files")
	}
	// Missing inputs are reported before anything is written.
	none := filepath.Join(dir, "never")
	_, err := Run(context.Background(), Options{Inputs: []string{in, filepath.Join(dir, "missing.jsonl")}, Out: none, Engine: tok})
	if err == nil || !strings.Contains(err.Error(), "missing.jsonl") {
		t.Fatalf("missing input: err = %v", err)
	}
	if _, err := os.Stat(none); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("output directory created despite a missing input")
	}
}

// TestResumeAfterCancel interrupts a run (context cancelled mid-way, as SIGINT does), resumes it and compares
// with an uninterrupted run. Kill -9 at random points is tested on the binary in cmd/gload.
func TestResumeAfterCancel(t *testing.T) {
	tok := loadTok(t)
	dir := t.TempDir()
	in, _ := writeCorpus(t, dir, 800)
	ref := filepath.Join(dir, "ref")
	base := Options{Inputs: []string{in}, Engine: tok, Workers: 2, ShardSize: 15000}
	o := base
	o.Out = ref
	run(t, o)

	out := filepath.Join(dir, "resumed")
	ctx, cancel := context.WithCancel(context.Background())
	o = base
	o.Out = out
	o.Logger = nil
	var shards int
	hook := &cancelAfterShards{n: 2, cancel: cancel}
	testHookShardClosed = func() { shards++; hook.tick() }
	defer func() { testHookShardClosed = nil }()
	if _, err := Run(ctx, o); !errors.Is(err, context.Canceled) {
		t.Fatalf("interrupted run: err = %v", err)
	}
	if _, err := os.Stat(filepath.Join(out, "state.json")); err == nil {
		t.Fatal("interrupted run left state.json")
	}
	testHookShardClosed = nil
	o.Resume = true
	s := run(t, o)
	if !s.Resumed {
		t.Error("summary does not say resumed")
	}
	sameDirs(t, ref, out)
}

// TestResumeVerifiesJournaledShards: a byte flipped in a completed shard
// between a kill and --resume is caught, naming the file (issue 10, item 8).
func TestResumeVerifiesJournaledShards(t *testing.T) {
	tok := loadTok(t)
	dir := t.TempDir()
	in, _ := writeCorpus(t, dir, 800)
	out := filepath.Join(dir, "out")
	ctx, cancel := context.WithCancel(context.Background())
	o := Options{Inputs: []string{in}, Engine: tok, Workers: 2, ShardSize: 15000, Out: out}
	hook := &cancelAfterShards{n: 2, cancel: cancel}
	testHookShardClosed = hook.tick
	defer func() { testHookShardClosed = nil }()
	if _, err := Run(ctx, o); !errors.Is(err, context.Canceled) {
		t.Fatalf("interrupted run: err = %v", err)
	}
	testHookShardClosed = nil
	shard := filepath.Join(out, dataset.ShardName(0))
	b, err := os.ReadFile(shard)
	if err != nil {
		t.Fatal(err)
	}
	b[len(b)-20] ^= 1
	if err := os.WriteFile(shard, b, 0o644); err != nil {
		t.Fatal(err)
	}
	o.Resume = true
	_, err = Run(context.Background(), o)
	if !errors.Is(err, dataset.ErrContentMismatch) || !strings.Contains(err.Error(), shard) {
		t.Fatalf("resume over a modified shard: %v", err)
	}
	if _, err := os.Stat(filepath.Join(out, "state.json")); err == nil {
		t.Fatal("resume over a modified shard finalized the dataset")
	}
}

type cancelAfterShards struct {
	n      int
	cancel func()
}

func (c *cancelAfterShards) tick() {
	c.n--
	if c.n == 0 {
		c.cancel()
	}
}

func TestCompressedInputs(t *testing.T) {
	tok := loadTok(t)
	dir := t.TempDir()
	in, texts := writeCorpus(t, dir, 50)
	raw, _ := os.ReadFile(in)
	gz := filepath.Join(dir, "c.jsonl.gz")
	var b bytes.Buffer
	zw := gzip.NewWriter(&b)
	zw.Write(raw)
	zw.Close()
	os.WriteFile(gz, b.Bytes(), 0o644)
	out := filepath.Join(dir, "ds")
	s := run(t, Options{Inputs: []string{gz}, Out: out, Engine: tok})
	if s.Rows != int64(len(texts)) {
		t.Fatalf("rows %d, want %d", s.Rows, len(texts))
	}
	// Corrupt compressed input: an error naming the file; nothing looks complete.
	bad := filepath.Join(dir, "bad.jsonl.gz")
	data := b.Bytes()
	os.WriteFile(bad, append(append([]byte{}, data[:len(data)/2]...), bytes.Repeat([]byte{0x55}, 64)...), 0o644)
	_, err := Run(context.Background(), Options{Inputs: []string{bad}, Out: filepath.Join(dir, "bad"), Engine: tok})
	if err == nil || !strings.Contains(err.Error(), "bad.jsonl.gz") {
		t.Fatalf("corrupt gzip: err = %v", err)
	}
	if _, err := os.Stat(filepath.Join(dir, "bad", "state.json")); err == nil {
		t.Fatal("corrupt input left a complete-looking dataset")
	}
}

// TestResumeBeforeFirstJournal: a run killed before its first journal save leaves at most a temporary journal;
// --resume then starts afresh and ends with the bytes of a plain run. A directory of foreign files is refused.
func TestResumeBeforeFirstJournal(t *testing.T) {
	tok := loadTok(t)
	dir := t.TempDir()
	in, _ := writeCorpus(t, dir, 60)
	ref := filepath.Join(dir, "ref")
	run(t, Options{Inputs: []string{in}, Out: ref, Engine: tok})
	out := filepath.Join(dir, "out")
	os.MkdirAll(out, 0o755)
	os.WriteFile(filepath.Join(out, journalName+".tmp"), []byte("{\"vers"), 0o644)
	run(t, Options{Inputs: []string{in}, Out: out, Engine: tok, Resume: true})
	sameDirs(t, ref, out)

	foreign := filepath.Join(dir, "foreign")
	os.MkdirAll(foreign, 0o755)
	os.WriteFile(filepath.Join(foreign, "notes.txt"), []byte("mine"), 0o644)
	if _, err := Run(context.Background(), Options{Inputs: []string{in}, Out: foreign, Engine: tok, Resume: true}); err == nil {
		t.Fatal("--resume accepted a directory that no gload run wrote")
	}
}
