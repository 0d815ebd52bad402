package merge

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/gload/gload/loader/dataset"
	"github.com/gload/gload/tokenize"
	"github.com/gload/gload/tokenize/pipeline"
)

// writeInputs writes files of varied size (one empty) and returns their directory.
func writeInputs(t *testing.T) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "in")
	os.Mkdir(dir, 0o755)
	words := []string{"human", "rights", "dignity", "freedom", "justice", "peace", "équité", "自由", "123", "!"}
	docs := []int{300, 40, 0, 700, 5, 220, 90}
	id := 0
	for f, n := range docs {
		var buf bytes.Buffer
		for range n {
			var sb strings.Builder
			for j := 0; j < 1+(id*7919)%120; j++ {
				sb.WriteString(words[(id+j*31)%len(words)] + " ")
			}
			line, _ := json.Marshal(map[string]any{"text": sb.String(), "id": id})
			buf.Write(append(line, '\n'))
			id++
		}
		os.WriteFile(filepath.Join(dir, fmt.Sprintf("part-%02d.jsonl", f)), buf.Bytes(), 0o644)
	}
	return dir
}

func baseOptions(t *testing.T, in string) pipeline.Options {
	t.Helper()
	tok, err := tokenize.Load("../../examples/udhr/tokenizer.json")
	if err != nil {
		t.Fatal(err)
	}
	return pipeline.Options{Inputs: []string{in}, Engine: tok, Workers: 2, ShardSize: 20000, RowsPerBatch: 50}
}

// runTasks runs the n tasks into parts under root and returns their directories.
func runTasks(t *testing.T, o pipeline.Options, root string, n int) []string {
	t.Helper()
	var parts []string
	for i := range n {
		p := filepath.Join(root, fmt.Sprintf("part-%d-of-%d", i, n))
		oo := o
		oo.Out, oo.TaskIndex, oo.TaskCount = p, i, n
		if _, err := pipeline.Run(context.Background(), oo); err != nil {
			t.Fatalf("task %d/%d: %v", i, n, err)
		}
		parts = append(parts, p)
	}
	return parts
}

// files reads a dataset directory's files but the freshness stamp.
func files(t *testing.T, dir string) map[string][]byte {
	t.Helper()
	out := map[string][]byte{}
	ents, _ := os.ReadDir(dir)
	for _, e := range ents {
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

func rows(t *testing.T, dir string) [][]int32 {
	t.Helper()
	d, err := dataset.Open(dir, dataset.OpenOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	out := make([][]int32, d.Len())
	for i := range out {
		if out[i], err = d.AppendTokens(nil, i); err != nil {
			t.Fatal(err)
		}
	}
	return out
}

// TestMergeEqualsSingleRun: for N = 1, 3 and 7 the merged dataset is
// byte-identical (index and fingerprint included) and holds the rows of a
// single run over the same inputs, in its order.
func TestMergeEqualsSingleRun(t *testing.T) {
	in := writeInputs(t)
	o := baseOptions(t, in)
	root := t.TempDir()
	single := o
	single.Out = filepath.Join(root, "single")
	if _, err := pipeline.Run(context.Background(), single); err != nil {
		t.Fatal(err)
	}
	want := rows(t, single.Out)
	var ref map[string][]byte
	var refFP string
	for _, n := range []int{1, 3, 7} {
		parts := runTasks(t, o, root, n)
		out := filepath.Join(root, fmt.Sprintf("merged-%d", n))
		s, err := Merge(out, parts, Options{})
		if err != nil {
			t.Fatalf("N=%d: %v", n, err)
		}
		got := rows(t, out)
		if len(got) != len(want) || s.Rows != int64(len(want)) {
			t.Fatalf("N=%d: %d rows (summary %d), single run %d", n, len(got), s.Rows, len(want))
		}
		for i := range got {
			if !slices.Equal(got[i], want[i]) {
				t.Fatalf("N=%d: row %d differs from the single run", n, i)
			}
		}
		fs := files(t, out)
		if ref == nil {
			ref, refFP = fs, s.Fingerprint
			continue
		}
		if s.Fingerprint != refFP || len(fs) != len(ref) {
			t.Fatalf("N=%d: fingerprint %s (%d files), N=1 %s (%d files)", n, s.Fingerprint, len(fs), refFP, len(ref))
		}
		for name, b := range ref {
			if !bytes.Equal(b, fs[name]) {
				t.Fatalf("N=%d: %s differs from the N=1 merge", n, name)
			}
		}
		// A merged dataset opens from its index without hashing (the stamp vouches for the links).
		d, err := dataset.Open(out, dataset.OpenOptions{})
		if err != nil || d.ShardsVerified() != 0 || !d.IndexUsed() {
			t.Fatalf("N=%d: open merged: %v, %d hashed", n, err, d.ShardsVerified())
		}
		d.Close()
	}
}

// TestMergeRefuses: parts that do not make one dataset are refused, naming them, and nothing looks complete.
func TestMergeRefuses(t *testing.T) {
	in := writeInputs(t)
	o := baseOptions(t, in)
	root := t.TempDir()
	parts := runTasks(t, o, filepath.Join(root, "a"), 3)
	other := runTasks(t, o, filepath.Join(root, "b"), 2)
	flags := o
	flags.MinLength = 3
	oddFlags := runTasks(t, flags, filepath.Join(root, "c"), 3)

	modified := filepath.Join(root, "modified")
	os.MkdirAll(modified, 0o755)
	for name, b := range files(t, parts[1]) {
		os.WriteFile(filepath.Join(modified, name), b, 0o644)
	}
	ix, _ := dataset.ReadIndex(modified)
	victim := filepath.Join(modified, ix.Shards[0].Name)
	b, _ := os.ReadFile(victim)
	b[len(b)-20] ^= 1
	os.WriteFile(victim, b, 0o644)

	incomplete := filepath.Join(root, "incomplete")
	os.MkdirAll(incomplete, 0o755)
	for name, b := range files(t, parts[2]) {
		if name != dataset.IndexFile {
			os.WriteFile(filepath.Join(incomplete, name), b, 0o644)
		}
	}
	exists := filepath.Join(root, "exists")
	os.MkdirAll(exists, 0o755)
	os.WriteFile(filepath.Join(exists, dataset.StateFile), []byte("{}"), 0o644)

	for _, tc := range []struct {
		name  string
		out   string
		parts []string
		want  []string
	}{
		{"duplicate", "", []string{parts[0], parts[1], parts[1], parts[2]}, []string{"both task 1/3", parts[1]}},
		{"missing", "", []string{parts[0], parts[2]}, []string{"no part for task 1/3"}},
		{"n_changed", "", []string{parts[0], parts[1], other[1]}, []string{"N changed", parts[0], other[1]}},
		{"flags", "", []string{parts[0], oddFlags[1], parts[2]}, []string{"different flags", parts[0], oddFlags[1]}},
		{"modified_shard", "", []string{parts[0], modified, parts[2]}, []string{"modified after it was written", victim}},
		{"incomplete", "", []string{parts[0], parts[1], incomplete}, []string{"incomplete", incomplete}},
		{"not_a_part", "", []string{parts[0], in}, []string{"not a part", in}},
		{"out_exists", exists, parts, []string{"exists and is not empty", "--overwrite"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out := tc.out
			if out == "" {
				out = filepath.Join(t.TempDir(), "out")
			}
			_, err := Merge(out, tc.parts, Options{})
			if err == nil {
				t.Fatal("merged")
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not say %q", err, w)
				}
			}
			if _, serr := os.Stat(filepath.Join(out, dataset.IndexFile)); serr == nil {
				t.Error("refused merge left a gload.index")
			}
		})
	}
	// --overwrite replaces a directory gload wrote.
	if _, err := Merge(exists, parts, Options{Overwrite: true}); err != nil {
		t.Fatalf("--overwrite: %v", err)
	}
	if _, err := Merge(exists, parts, Options{}); err == nil {
		t.Error("merge into a complete dataset without --overwrite was not refused")
	}
}

// TestMergePiecesEqualSingleRun: one large JSON Lines file read as pieces
// (a small --split-size) gives the same dataset, byte for byte (shards,
// index, fingerprint), in a plain run and merged from N = 1, 2, 3 and 5 tasks.
func TestMergePiecesEqualSingleRun(t *testing.T) {
	in := writeInputs(t)
	// One file of all the documents, CRLF line ends on some, no line end after the last.
	var big bytes.Buffer
	ents, _ := os.ReadDir(in)
	for _, e := range ents {
		b, _ := os.ReadFile(filepath.Join(in, e.Name()))
		big.Write(b)
		os.Remove(filepath.Join(in, e.Name()))
	}
	data := bytes.ReplaceAll(big.Bytes(), []byte("\"id\":7}\n"), []byte("\"id\":7}\r\n"))
	data = bytes.TrimSuffix(data, []byte("\n"))
	os.WriteFile(filepath.Join(in, "big.jsonl"), data, 0o644)
	o := baseOptions(t, in)
	o.Corpus.SplitBytes = int64(len(data) / 9)
	root := t.TempDir()
	single := o
	single.Out = filepath.Join(root, "single")
	if _, err := pipeline.Run(context.Background(), single); err != nil {
		t.Fatal(err)
	}
	ref := files(t, single.Out)
	if len(ref) < 10 {
		t.Fatalf("single run wrote %d files, want a shard per piece at least", len(ref))
	}
	for _, n := range []int{1, 2, 3, 5} {
		parts := runTasks(t, o, root, n)
		out := filepath.Join(root, fmt.Sprintf("merged-%d", n))
		if _, err := Merge(out, parts, Options{}); err != nil {
			t.Fatalf("N=%d: %v", n, err)
		}
		fs := files(t, out)
		if len(fs) != len(ref) {
			t.Fatalf("N=%d: %d files, single run %d", n, len(fs), len(ref))
		}
		for name, b := range ref {
			if !bytes.Equal(b, fs[name]) {
				t.Fatalf("N=%d: %s differs from the single run", n, name)
			}
		}
	}
	// Without pieces the single run is one shard stream over the file: the pieces are what cuts it.
	whole := baseOptions(t, in)
	whole.Out = filepath.Join(root, "whole")
	if _, err := pipeline.Run(context.Background(), whole); err != nil {
		t.Fatal(err)
	}
	if got := rows(t, whole.Out); !slices.EqualFunc(got, rows(t, single.Out), slices.Equal) {
		t.Fatal("rows read in pieces differ from rows of the file read whole")
	}
}
