package pipeline

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gload/gload/loader/dataset"
	"github.com/gload/gload/tokenize/corpus"
)

// Regression (issue 10 item 6): two runs into one --out corrupted each other. The second one now fails at once,
// naming the holder's pid, and the first one finishes a complete dataset.
func TestSecondRunIntoSameOutFailsAtOnce(t *testing.T) {
	tok := loadTok(t)
	dir := t.TempDir()
	const n = 8 * chunkRecords
	in := writeTinyCorpus(t, dir, n)
	out := filepath.Join(dir, "ds")

	started, release := make(chan struct{}), make(chan struct{})
	first := true
	setHook(t, &testHookChunkQueued, func() { // the first run pauses after its first chunk
		if first {
			first = false
			close(started)
			<-release
		}
	})
	type result struct {
		s   Summary
		err error
	}
	done := make(chan result, 1)
	go func() {
		s, err := Run(context.Background(), Options{Inputs: []string{in}, Out: out, Engine: tok, Workers: 2})
		done <- result{s, err}
	}()
	<-started
	for _, o := range []Options{
		{Inputs: []string{in}, Out: out, Engine: tok},
		{Inputs: []string{in}, Out: out, Engine: tok, Overwrite: true},
		{Inputs: []string{in}, Out: out, Engine: tok, Resume: true},
	} {
		_, err := Run(context.Background(), o)
		want := fmt.Sprintf("in use by another gload tokenize run (pid %d)", os.Getpid())
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("second run (overwrite=%v resume=%v): err = %v, want %q", o.Overwrite, o.Resume, err, want)
		}
	}
	close(release)
	r := <-done
	if r.err != nil {
		t.Fatal(r.err)
	}
	checkComplete(t, out, n, r.s)
	if _, err := os.Stat(filepath.Join(out, lockName)); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("lock file left behind: %v", err)
	}
	// Released: the next run may take the directory (and a stale lock file of a killed run does not block it).
	if err := os.WriteFile(filepath.Join(out, lockName), []byte("999999\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := Run(context.Background(), Options{Inputs: []string{in}, Out: out, Engine: tok, Overwrite: true}); err != nil {
		t.Fatalf("run after release: %v", err)
	}
}

// Regression (issue 10 item 11): --overwrite with --out inside an input directory planned the old output as
// input, deleted it, then failed. Now it is refused before anything is written or deleted.
func TestOutInsideInputsRefused(t *testing.T) {
	tok := loadTok(t)
	dir := t.TempDir()
	data := filepath.Join(dir, "data")
	if err := os.Mkdir(data, 0o755); err != nil {
		t.Fatal(err)
	}
	in, _ := writeCorpus(t, data, 50)
	old := filepath.Join(data, "out")
	run(t, Options{Inputs: []string{in}, Out: old, Engine: tok}) // a file input: allowed
	before := dirBytes(t, old)
	if err := os.Symlink(data, filepath.Join(dir, "link")); err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name   string
		inputs []string
		out    string
		want   string
	}{
		{"out inside input dir", []string{data}, old, "is inside the input directory"},
		{"out is the input dir", []string{data}, data, "is inside the input directory"},
		{"out inside via symlink", []string{filepath.Join(dir, "link")}, filepath.Join(data, "new"), "is inside the input directory"},
		{"input file inside out", []string{filepath.Join(old, "*.arrow")}, old, "lies inside the output directory"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Run(context.Background(), Options{Inputs: tc.inputs, Out: tc.out, Engine: tok, Overwrite: true})
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err = %v, want %q", err, tc.want)
			}
		})
	}
	sameMaps(t, before, dirBytes(t, old))
	if _, err := os.Stat(filepath.Join(data, "new")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("refused run created its output directory: %v", err)
	}
}

func sameMaps(t *testing.T, a, b map[string][]byte) {
	t.Helper()
	if len(a) != len(b) {
		t.Fatalf("%d files, then %d", len(a), len(b))
	}
	for k, v := range a {
		if string(b[k]) != string(v) {
			t.Fatalf("%s changed", k)
		}
	}
}

// Regression (issue 10 item 10): --keep-columns input_ids was refused only after the output directory was made.
func TestBadKeepColumnsRefusedBeforeOutIsMade(t *testing.T) {
	tok := loadTok(t)
	dir := t.TempDir()
	in, _ := writeCorpus(t, dir, 5)
	for _, cols := range [][]string{{"input_ids"}, {"id", "id"}, {""}} {
		out := filepath.Join(dir, "ds")
		_, err := Run(context.Background(), Options{Inputs: []string{in}, Out: out, Engine: tok,
			Corpus: corpus.Options{KeepColumns: cols}})
		if err == nil || !errors.Is(err, dataset.ErrBadInput) || !strings.Contains(err.Error(), "--keep-columns") {
			t.Errorf("--keep-columns %q: err = %v, want a --keep-columns error", cols, err)
		}
		if _, err := os.Stat(out); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("--keep-columns %q: output directory was made", cols)
		}
	}
}
