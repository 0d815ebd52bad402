package pipeline

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gload/gload/loader/dataset"
)

// writeTinyCorpus writes n documents {"text":"d<i>"} (a few bytes each, so every chunk is cut by record count,
// never by size) and returns the path.
func writeTinyCorpus(t testing.TB, dir string, n int) string {
	t.Helper()
	var sb strings.Builder
	for i := range n {
		fmt.Fprintf(&sb, "{\"text\":\"d%d\"}\n", i)
	}
	path := filepath.Join(dir, "tiny.jsonl")
	if err := os.WriteFile(path, []byte(sb.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

func setHook[T any](t *testing.T, hook *T, v T) {
	var zero T
	*hook = v
	t.Cleanup(func() { *hook = zero })
}

// checkComplete opens the dataset and checks it holds n rows, row i being "d<i>" tokenized.
func checkComplete(t *testing.T, out string, n int, s Summary) {
	t.Helper()
	if s.Documents != int64(n) || s.Rows != int64(n) || s.Written != int64(n) {
		t.Fatalf("summary: %d documents, %d written, %d rows; want %d each", s.Documents, s.Written, s.Rows, n)
	}
	ds, err := dataset.Open(out, dataset.OpenOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer ds.Close()
	if ds.Len() != n {
		t.Fatalf("dataset has %d rows, want %d", ds.Len(), n)
	}
}

// Regression (issue 10 item 1): the reader decided "EOF" from c.records after handing c to a worker, which
// releases c.records; a worker that got there first made the reader end the input after one chunk, and the run
// finalised a short dataset. The hook gives the worker that time deterministically.
func TestReaderDoesNotLoseChunksToFastWorkers(t *testing.T) {
	tok := loadTok(t)
	dir := t.TempDir()
	const n = 20 * chunkRecords
	in := writeTinyCorpus(t, dir, n)
	setHook(t, &testHookChunkQueued, func() { time.Sleep(2 * time.Millisecond) })
	out := filepath.Join(dir, "ds")
	s, err := Run(context.Background(), Options{Inputs: []string{in}, Out: out, Engine: tok, Workers: 2})
	if err != nil {
		t.Fatal(err)
	}
	checkComplete(t, out, n, s)
}

// Stress (issue 10 item 1): many tiny documents, GOMAXPROCS above the core count and busy goroutines competing
// for the CPU; every run must write every document. Run under -race (make test-race) this also catches any
// unsynchronised access between the reader, the workers and the writer.
func TestTinyDocumentsUnderContention(t *testing.T) {
	tok := loadTok(t)
	dir := t.TempDir()
	n := 200_000
	if testing.Short() || raceEnabled {
		n = 100_000
	}
	in := writeTinyCorpus(t, dir, n)
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(4 * runtime.NumCPU()))

	stop := make(chan struct{})
	var wg sync.WaitGroup
	var spins atomic.Int64
	for range 2 * runtime.NumCPU() { // background CPU load
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				select {
				case <-stop:
					return
				default:
				}
				x := 0
				for i := range 20000 {
					x += i * i
				}
				spins.Add(int64(x & 1))
			}
		}()
	}
	defer func() { close(stop); wg.Wait() }()

	for _, workers := range []int{1, 3, 16} {
		t.Run(fmt.Sprintf("workers=%d", workers), func(t *testing.T) {
			out := filepath.Join(dir, fmt.Sprintf("ds%d", workers))
			s, err := Run(context.Background(), Options{Inputs: []string{in}, Out: out, Engine: tok, Workers: workers})
			if err != nil {
				t.Fatal(err)
			}
			checkComplete(t, out, n, s)
		})
	}
}

// The end-to-end count refuses to finalise when the reader's and the writer's books disagree: the run fails,
// and nothing looks like a complete dataset (no state.json, no gload.index).
func TestUnbalancedCountRefusesToFinalize(t *testing.T) {
	tok := loadTok(t)
	dir := t.TempDir()
	in := writeTinyCorpus(t, dir, 1000)
	cases := []struct {
		name string
		edit func(*readLedger)
		want string
	}{
		{"a record the writer never saw", func(l *readLedger) { t := l.perFile[0]; t.Records++; l.perFile[0] = t }, "read 1001 records"},
		{"bytes the writer never saw", func(l *readLedger) { t := l.perFile[0]; t.Bytes++; l.perFile[0] = t }, "accounted for 1000"},
		{"reader stopped early", func(l *readLedger) { l.eof = false }, "stopped before the end"},
		{"an input not finished", func(l *readLedger) { l.filesDone = 0 }, "finished 0 of 1 inputs"},
	}
	for i, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			setHook(t, &testHookLedger, tc.edit)
			out := filepath.Join(dir, fmt.Sprintf("ds%d", i))
			_, err := Run(context.Background(), Options{Inputs: []string{in}, Out: out, Engine: tok})
			if err == nil || !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), "not finalized") {
				t.Fatalf("err = %v, want one saying %q and not finalized", err, tc.want)
			}
			for _, name := range []string{"state.json", "gload.index", "dataset_info.json"} {
				if _, err := os.Stat(filepath.Join(out, name)); err == nil {
					t.Errorf("refused run left %s", name)
				}
			}
		})
	}
}

func TestCheckLedgers(t *testing.T) {
	path := func(int) string { return "in.jsonl" }
	good := func() (*readLedger, *writeLedger, *Stats, []dataset.ShardInfo) {
		r := &readLedger{eof: true, filesDone: 1, files: 1, perFile: map[int]tally{0: {3, 30}}}
		w := &writeLedger{perFile: map[int]tally{0: {3, 30}}, written: 2, skipped: map[string]int64{"empty": 1}, rows: 2, tokens: 5}
		st := &Stats{Documents: 3, Written: 2, Rows: 2, Tokens: 5, Skipped: map[string]int64{"empty": 1}}
		return r, w, st, []dataset.ShardInfo{{Rows: 2, Tokens: 5}}
	}
	cases := []struct {
		name string
		edit func(*readLedger, *writeLedger, *Stats, []dataset.ShardInfo)
		want string // "" = balanced
	}{
		{"balanced", func(*readLedger, *writeLedger, *Stats, []dataset.ShardInfo) {}, ""},
		{"writer short", func(_ *readLedger, w *writeLedger, _ *Stats, _ []dataset.ShardInfo) { w.perFile[0] = tally{2, 20} }, "read 3 records (30 bytes), accounted for 2 (20 bytes)"},
		{"file only the writer saw", func(_ *readLedger, w *writeLedger, _ *Stats, _ []dataset.ShardInfo) { w.perFile[1] = tally{1, 1} }, "read 0 records"},
		{"skip not counted", func(_ *readLedger, w *writeLedger, _ *Stats, _ []dataset.ShardInfo) { w.skipped = nil }, "but 2 written + 0 skipped"},
		{"shard rows", func(_ *readLedger, _ *writeLedger, _ *Stats, sh []dataset.ShardInfo) { sh[0].Rows = 1 }, "the shards hold 1 rows"},
		{"totals", func(_ *readLedger, _ *writeLedger, st *Stats, _ []dataset.ShardInfo) { st.Documents = 4 }, "4 documents in total"},
		{"no eof", func(r *readLedger, _ *writeLedger, _ *Stats, _ []dataset.ShardInfo) { r.eof = false }, "stopped before the end"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			r, w, st, sh := good()
			tc.edit(r, w, st, sh)
			err := checkLedgers(r, w, st, sh, path)
			if tc.want == "" {
				if err != nil {
					t.Fatal(err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err = %v, want %q", err, tc.want)
			}
		})
	}
}
