package loader

import (
	"bytes"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/gload/gload/bucket"
	"github.com/gload/gload/loader/dataset"
	"github.com/gload/gload/proto/gloadpb"
)

// lockedBuffer is a log sink several goroutines may write.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// countsDataset writes a dataset of n rows of lengths 1…700 into a temporary directory.
func countsDataset(t *testing.T, n int) string {
	t.Helper()
	dir := t.TempDir()
	writeRows(t, dir, n, dataset.WriterOptions{}, func(i int) []int32 { return make([]int32, 1+(i*7919)%700) })
	return dir
}

// TestKeptPlanCounts: a server keeps a lazy packed or tokens plan's counting pass in PlanCountsDir, a restarted server plans
// the same epoch from it (the same plan hash, no counting), and every way the kept file can be wrong (corrupt,
// another plan's counts, a directory that is not private) costs only a count again with a warning, never another
// plan or a failed one. Exact plans keep nothing.
func TestKeptPlanCounts(t *testing.T) {
	ds := countsDataset(t, 3000)
	for _, tc := range []struct {
		name   string
		policy *gloadpb.BatchPolicy
		lazy   any // the lazy plan's type
	}{
		{"packed", &gloadpb.BatchPolicy{Policy: "packed", BatchSize: 2, SeqLen: 512}, (*bucket.LazyPacked)(nil)},
		{"tokens", &gloadpb.BatchPolicy{Policy: "tokens", TokenBudget: 4096}, (*bucket.LazyPlan)(nil)},
	} {
		t.Run(tc.name, func(t *testing.T) { testKeptPlanCounts(t, ds, tc.policy, tc.lazy) })
	}
}

func testKeptPlanCounts(t *testing.T, ds string, base *gloadpb.BatchPolicy, lazyType any) {
	countsDir := filepath.Join(t.TempDir(), "plans")
	policy := func(epoch uint32, planner string) *gloadpb.Open {
		p := proto.Clone(base).(*gloadpb.BatchPolicy)
		p.Planner = planner
		return &gloadpb.Open{Dataset: "d", Seed: 3, Epoch: epoch, Policy: p}
	}
	// plan starts a server over ds with countsDir, plans open, and returns the plan's hash, how many plans the
	// server made from kept counts, and its log.
	plan := func(countsDir string, open *gloadpb.Open) (string, int, string) {
		t.Helper()
		var log lockedBuffer
		s, err := NewServer(Config{Datasets: map[string]string{"d": ds}, NoGPUWatch: true, PlanCountsDir: countsDir,
			Logger: slog.New(slog.NewTextHandler(&log, nil))})
		if err != nil {
			t.Fatal(err)
		}
		defer s.Close()
		c, err := s.resolve(t.Context(), open)
		if err != nil {
			t.Fatal(err)
		}
		if lazy := reflect.TypeOf(c.plan) == reflect.TypeOf(lazyType); lazy != (open.Policy.Planner == "lazy") {
			t.Fatalf("planner %q planned with %T", open.Policy.Planner, c.plan)
		}
		return c.plan.(interface{ Hash() string }).Hash(), s.plans.counts.loadedCount(), log.String()
	}
	kept := func() []string {
		t.Helper()
		files, _ := filepath.Glob(filepath.Join(countsDir, "*"+countsExt))
		return files
	}

	want, loaded, _ := plan(countsDir, policy(1, "lazy"))
	files := kept()
	if loaded != 0 || len(files) != 1 {
		t.Fatalf("first start: %d plans from kept counts, files %v; want 0 and one file", loaded, files)
	}
	if fi, err := os.Stat(countsDir); err != nil || fi.Mode().Perm() != 0o700 {
		t.Fatalf("counts directory: %v, %v; want mode 0700", fi, err)
	}
	if fi, err := os.Stat(files[0]); err != nil || fi.Mode().Perm()&0o077 != 0 {
		t.Fatalf("counts file: %v, %v; want no access for others", fi, err)
	}

	// A restart plans from the kept counts: the same plan.
	if got, loaded, _ := plan(countsDir, policy(1, "lazy")); got != want || loaded != 1 {
		t.Fatalf("restart: hash %s, %d plans from kept counts; want %s and 1", got, loaded, want)
	}

	good, err := os.ReadFile(files[0])
	if err != nil {
		t.Fatal(err)
	}
	// Epoch 2's counts, kept, then put where epoch 1's are looked for.
	plan(countsDir, policy(2, "lazy"))
	var other []byte
	for _, f := range kept() {
		if f != files[0] {
			other, _ = os.ReadFile(f)
		}
	}
	flipped := bytes.Clone(good)
	flipped[len(flipped)/2] ^= 0x40
	for _, tc := range []struct {
		name string
		data []byte
		warn string
	}{
		{"corrupt file", flipped, "unreadable"},
		{"another plan's counts", other, "refused"},
		{"empty file", nil, "unreadable"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if err := os.WriteFile(files[0], tc.data, 0o600); err != nil {
				t.Fatal(err)
			}
			got, loaded, log := plan(countsDir, policy(1, "lazy"))
			if got != want || loaded != 0 || !strings.Contains(log, tc.warn) {
				t.Fatalf("hash %s, %d plans from kept counts, log %q; want %s, 0 and a warning %q", got, loaded, log, want, tc.warn)
			}
			if again, err := os.ReadFile(files[0]); err != nil || !bytes.Equal(again, good) {
				t.Fatalf("the counts were not kept again after the count: %v", err)
			}
		})
	}

	// A counts directory planted as a symbolic link is not used: the plan is counted, nothing is written through it.
	elsewhere := t.TempDir()
	link := filepath.Join(t.TempDir(), "plans")
	if err := os.Symlink(elsewhere, link); err != nil {
		t.Fatal(err)
	}
	got, loaded, log := plan(link, policy(1, "lazy"))
	if ents, _ := os.ReadDir(elsewhere); got != want || loaded != 0 || len(ents) != 0 || !strings.Contains(log, "symbolic link") {
		t.Fatalf("through a symlink: hash %s, %d loaded, %d files written there, log %q", got, loaded, len(ents), log)
	}

	// Exact plans keep nothing.
	fresh := filepath.Join(t.TempDir(), "plans")
	plan(fresh, policy(1, ""))
	if ents, _ := os.ReadDir(fresh); len(ents) != 0 {
		t.Fatalf("an exact plan kept %d files", len(ents))
	}
}

// TestKeptPlanCountsTrimmed: the directory holds at most maxCountsFiles files; the least recently used go first, and
// temporary files a crash left behind go when they are an hour old.
func TestKeptPlanCountsTrimmed(t *testing.T) {
	dir := t.TempDir()
	k := newCountsKeeper(dir, slog.New(slog.DiscardHandler))
	if !k.usable() {
		t.Fatal("a fresh temporary directory is not usable")
	}
	p, err := bucket.NewLazyPacked(bucket.Synthetic{Rows: 5000, Seed: 1}, "fp", 1, 0, bucket.Config{Policy: bucket.Packed, BatchSize: 2, SeqLen: 4096}, nil)
	if err != nil {
		t.Fatal(err)
	}
	oldest := filepath.Join(dir, "0-oldest"+countsExt)
	data, err := p.Counts().MarshalBinary()
	if err != nil {
		t.Fatal(err)
	}
	if err := k.write(oldest, data); err != nil {
		t.Fatal(err)
	}
	if err := os.Chtimes(oldest, time.Unix(1, 0), time.Unix(1, 0)); err != nil {
		t.Fatal(err)
	}
	crashed, fresh := filepath.Join(dir, countsTempPrefix+"crashed"), filepath.Join(dir, countsTempPrefix+"writing")
	for _, f := range []string{crashed, fresh} {
		if err := os.WriteFile(f, data[:10], 0o600); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Chtimes(crashed, time.Unix(1, 0), time.Unix(1, 0)); err != nil {
		t.Fatal(err)
	}
	for i := range maxCountsFiles {
		if err := k.write(filepath.Join(dir, fmt.Sprintf("f%04d%s", i, countsExt)), data); err != nil {
			t.Fatal(err)
		}
	}
	kept, _ := filepath.Glob(filepath.Join(dir, "*"+countsExt))
	if len(kept) != maxCountsFiles {
		t.Fatalf("%d files kept, want %d", len(kept), maxCountsFiles)
	}
	if _, err := os.Stat(oldest); !os.IsNotExist(err) {
		t.Fatalf("the oldest file was kept: %v", err)
	}
	if _, err := os.Stat(crashed); !os.IsNotExist(err) {
		t.Fatalf("a temporary file an hour old was kept: %v", err)
	}
	if _, err := os.Stat(fresh); err != nil {
		t.Fatalf("a temporary file being written was removed: %v", err)
	}
}

// corruptBlock reads as dataset.IndexLengths does when one index block fails its check: 0 for its rows, and Err
// names it.
type corruptBlock struct {
	bucket.Lengths
	lo, hi int64
}

func (z corruptBlock) Length(i int64) uint32 {
	if i >= z.lo && i < z.hi {
		return 0
	}
	return z.Lengths.Length(i)
}

func (z corruptBlock) Err() error {
	return fmt.Errorf("index block of rows %d..%d: checksum mismatch", z.lo, z.hi)
}

// TestKeptPlanCountsNotFromACorruptPass: a counting pass over an index with a corrupt block (the server refuses the
// plan) keeps nothing; once the index is repaired (same recorded fingerprint, so the same key), the plan is counted
// again and is the one the real lengths give.
func TestKeptPlanCountsNotFromACorruptPass(t *testing.T) {
	real := bucket.Synthetic{Rows: 3_000_000, Seed: 5}
	for _, cfg := range []bucket.Config{
		{Policy: bucket.Tokens, TokenBudget: 1 << 16, Planner: bucket.PlannerLazy},
		{Policy: bucket.Packed, BatchSize: 8, SeqLen: 4096, Planner: bucket.PlannerLazy},
	} {
		t.Run(string(cfg.Policy), func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "plans")
			k := newCountsKeeper(dir, slog.New(slog.DiscardHandler))
			bad := corruptBlock{Lengths: real, lo: 14 * bucket.LazyBlockRows, hi: 15 * bucket.LazyBlockRows}
			if _, err := k.newEpochPlan(bad, "fp", 3, 1, cfg, bucket.Parallel); err != nil {
				t.Fatal(err)
			}
			if ents, _ := os.ReadDir(dir); len(ents) != 0 {
				t.Fatalf("counts of a pass over a corrupt block kept: %v", ents)
			}
			got, err := k.newEpochPlan(real, "fp", 3, 1, cfg, bucket.Parallel)
			if err != nil {
				t.Fatal(err)
			}
			want, err := bucket.NewEpochPlan(real, "fp", 3, 1, cfg, bucket.Parallel)
			if err != nil {
				t.Fatal(err)
			}
			h := func(p bucket.EpochPlan) string { return p.(interface{ Hash() string }).Hash() }
			if k.loadedCount() != 0 || h(got) != h(want) || got.Len() != want.Len() {
				t.Fatalf("after the repair: %d plans from kept counts, hash %s (%d batches); want 0, %s (%d)",
					k.loadedCount(), h(got), got.Len(), h(want), want.Len())
			}
		})
	}
}
