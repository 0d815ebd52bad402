package pipeline

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gload/gload/tokenize/corpus"
)

// TestTaskRange: the tasks' file ranges are contiguous, cover every file once
// and depend only on the sizes and N.
func TestTaskRange(t *testing.T) {
	for _, sizes := range [][]int64{{10}, {0, 0, 0}, {5, 1, 1, 1, 100, 3}, {1, 2, 3, 4, 5, 6, 7, 8, 9}} {
		files := make([]corpus.File, len(sizes))
		for i, s := range sizes {
			files[i].Size = s
		}
		for n := 1; n <= len(sizes)+2; n++ {
			next := 0
			for i := range n {
				from, to := taskRange(files, i, n)
				if from != next || to < from {
					t.Fatalf("sizes %v, task %d/%d: [%d, %d), want it to start at %d", sizes, i, n, from, to, next)
				}
				next = to
			}
			if next != len(sizes) {
				t.Fatalf("sizes %v, N=%d: tasks cover %d of %d files", sizes, n, next, len(sizes))
			}
		}
	}
}

// TestTaskKilledResumes: a task cancelled after its first shard continues with
// --resume and ends byte-identical to the same task run without interruption,
// with files read whole and with files read as pieces.
func TestTaskKilledResumes(t *testing.T) {
	for _, split := range []int64{0, 9000} {
		t.Run(fmt.Sprintf("split %d", split), func(t *testing.T) { testTaskKilledResumes(t, split) })
	}
}

func testTaskKilledResumes(t *testing.T, split int64) {
	tok := loadTok(t)
	dir := t.TempDir()
	in := filepath.Join(dir, "in")
	os.Mkdir(in, 0o755)
	for i := range 4 {
		p, _ := writeCorpus(t, dir, 200+100*i)
		os.Rename(p, filepath.Join(in, fmt.Sprintf("c%d.jsonl", i)))
	}
	base := Options{Inputs: []string{in}, Engine: tok, Workers: 2, ShardSize: 15000, TaskIndex: 1, TaskCount: 2,
		Corpus: corpus.Options{SplitBytes: split}}
	ref := base
	ref.Out = filepath.Join(dir, "ref")
	run(t, ref)

	o := base
	o.Out = filepath.Join(dir, "killed")
	ctx, cancel := context.WithCancel(context.Background())
	hook := &cancelAfterShards{n: 1, cancel: cancel}
	testHookShardClosed = hook.tick
	defer func() { testHookShardClosed = nil }()
	if _, err := Run(ctx, o); !errors.Is(err, context.Canceled) {
		t.Fatalf("interrupted task: %v", err)
	}
	testHookShardClosed = nil
	if _, err := os.Stat(filepath.Join(o.Out, TaskFile)); err == nil {
		t.Fatal("an interrupted task wrote its task record")
	}
	o.Resume = true
	run(t, o)
	sameDirs(t, ref.Out, o.Out)
	// Resuming as another task (or with another N) is refused.
	o.Out, o.Resume = filepath.Join(dir, "killed2"), false
	ctx, cancel = context.WithCancel(context.Background())
	testHookShardClosed = (&cancelAfterShards{n: 1, cancel: cancel}).tick
	Run(ctx, o)
	testHookShardClosed = nil
	o.Resume, o.TaskCount = true, 3
	if _, err := Run(context.Background(), o); err == nil {
		t.Fatal("resumed a task with another N")
	}
}

// TestPieceErrorLines: a bad record in a later piece of a file is reported
// with its line in the whole file, whether the piece is read after the one
// before it (a plain run) or first (a task starting there).
func TestPieceErrorLines(t *testing.T) {
	tok := loadTok(t)
	dir := t.TempDir()
	var lines []string
	for i := range 400 {
		lines = append(lines, fmt.Sprintf(`{"text":"document number %d"}`, i))
	}
	const badLine = 350
	lines[badLine-1] = `{"text": 12}`
	lines[41] = "" // blank lines count
	path := filepath.Join(dir, "big.jsonl")
	os.WriteFile(path, []byte(strings.Join(lines, "\n")+"\n"), 0o644)
	for _, tc := range []struct {
		name     string
		task, of int
		split    int64
	}{
		{"plain run, pieces", 0, 0, 1000},
		{"last of 4 tasks", 3, 4, 1000},
		{"last of 2 tasks", 1, 2, 1000},
		{"file read whole", 0, 0, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o := Options{Inputs: []string{path}, Engine: tok, Workers: 2, Strict: true, TaskIndex: tc.task, TaskCount: tc.of,
				Out: filepath.Join(dir, strings.ReplaceAll(tc.name, " ", "-")), Corpus: corpus.Options{SplitBytes: tc.split}}
			_, err := Run(context.Background(), o)
			want := fmt.Sprintf("%s:%d", path, badLine)
			if err == nil || !strings.Contains(err.Error(), want+":") {
				t.Fatalf("error %v, want it to name %s", err, want)
			}
		})
	}
}
