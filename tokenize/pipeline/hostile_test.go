package pipeline

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gload/gload/internal/safename"
	"github.com/gload/gload/loader/dataset"
)

// interrupted runs a tokenize into out and cancels it after two shards, leaving a journal.
func interrupted(t *testing.T, o Options) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	hook := &cancelAfterShards{n: 2, cancel: cancel}
	testHookShardClosed = hook.tick
	defer func() { testHookShardClosed = nil }()
	if _, err := Run(ctx, o); !errors.Is(err, context.Canceled) {
		t.Fatalf("interrupted run: err = %v", err)
	}
}

// editJournal rewrites the journal of out through fn (as a generic JSON object).
func editJournal(t *testing.T, out string, fn func(j map[string]any)) {
	t.Helper()
	p := filepath.Join(out, journalName)
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	var j map[string]any
	if err := json.Unmarshal(b, &j); err != nil {
		t.Fatal(err)
	}
	fn(j)
	if b, err = json.Marshal(j); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, b, 0o644); err != nil {
		t.Fatal(err)
	}
}

// A journal whose shard names leave the output directory (or name its own files) is refused by --resume before
// any file is read, stat'ed or removed under that name (issue 34 item 1).
func TestResumeRefusesHostileJournalNames(t *testing.T) {
	tok := loadTok(t)
	for _, name := range []string{"../victim.arrow", "/etc/passwd", "a/b.arrow", "..", ".hidden.arrow", "gload.index", "x\x00.arrow"} {
		t.Run(name, func(t *testing.T) {
			dir := t.TempDir()
			in, _ := writeCorpus(t, dir, 800)
			out := filepath.Join(dir, "out")
			victim := filepath.Join(dir, "victim.arrow")
			if err := os.WriteFile(victim, []byte("not a shard"), 0o644); err != nil {
				t.Fatal(err)
			}
			o := Options{Inputs: []string{in}, Engine: tok, Workers: 2, ShardSize: 15000, Out: out}
			interrupted(t, o)
			editJournal(t, out, func(j map[string]any) {
				j["shards"].([]any)[0].(map[string]any)["Name"] = name
			})
			o.Resume = true
			_, err := Run(context.Background(), o)
			if !errors.Is(err, safename.ErrBadName) && (err == nil || !strings.Contains(err.Error(), "bad file name")) {
				t.Fatalf("resume with journal shard %q: %v, want a bad-name error", name, err)
			}
			if !strings.Contains(err.Error(), journalName) {
				t.Errorf("error does not name the journal: %v", err)
			}
			if _, err := os.Stat(victim); err != nil {
				t.Errorf("victim file: %v", err)
			}
		})
	}
}

// A journal edited to say "finished" after two shards does not finalize a partial dataset: --resume sees the
// input goes on and completes the run, byte-identical to an uninterrupted one; a journal that also moves its
// position to the end of the input is refused, its count not matching the input's (issue 34 item 12).
func TestResumeDoesNotTrustFinished(t *testing.T) {
	tok := loadTok(t)
	dir := t.TempDir()
	in, _ := writeCorpus(t, dir, 800)
	base := Options{Inputs: []string{in}, Engine: tok, Workers: 2, ShardSize: 15000}
	ref := base
	ref.Out = filepath.Join(dir, "ref")
	run(t, ref)

	t.Run("finished", func(t *testing.T) {
		o := base
		o.Out = filepath.Join(dir, "finished")
		interrupted(t, o)
		editJournal(t, o.Out, func(j map[string]any) { j["finished"] = true })
		o.Resume = true
		s := run(t, o)
		if s.Stats.Documents != 800 {
			t.Errorf("resumed run accounts for %d of 800 documents", s.Stats.Documents)
		}
		sameDirs(t, ref.Out, o.Out)
	})
	t.Run("finished_at_end", func(t *testing.T) {
		o := base
		o.Out = filepath.Join(dir, "at-end")
		interrupted(t, o)
		editJournal(t, o.Out, func(j map[string]any) {
			j["finished"] = true
			j["next"] = map[string]any{"File": 1, "Record": 0}
		})
		o.Resume = true
		_, err := Run(context.Background(), o)
		if err == nil || !strings.Contains(err.Error(), "the input holds 800 records") {
			t.Fatalf("resume of a journal claiming the end: %v", err)
		}
		if _, err := os.Stat(filepath.Join(o.Out, "state.json")); err == nil {
			t.Fatal("a partial dataset was finalized")
		}
	})
}

// A crash after the commit point (state.json written) but before the journal is removed leaves a complete dataset,
// byte-identical to an uninterrupted run's, that opens; --resume then succeeds and removes the journal (issue 34
// item 15).
func TestCrashAfterCommitPoint(t *testing.T) {
	tok := loadTok(t)
	dir := t.TempDir()
	in, _ := writeCorpus(t, dir, 800)
	base := Options{Inputs: []string{in}, Engine: tok, Workers: 2, ShardSize: 15000}
	ref := base
	ref.Out = filepath.Join(dir, "ref")
	run(t, ref)

	o := base
	o.Out = filepath.Join(dir, "crashed")
	crash := errors.New("simulated crash after state.json")
	testHookFinalized = func() error { return crash }
	_, err := Run(context.Background(), o)
	testHookFinalized = nil
	if !errors.Is(err, crash) {
		t.Fatalf("run: %v", err)
	}
	if _, err := os.Stat(filepath.Join(o.Out, journalName)); err != nil {
		t.Fatalf("the journal: %v", err)
	}
	ds, err := dataset.Open(o.Out, dataset.OpenOptions{})
	if err != nil {
		t.Fatalf("a directory past its commit point does not open: %v", err)
	}
	if ds.Len() != 800 {
		t.Errorf("%d rows", ds.Len())
	}
	ds.Close()
	got, want := dirBytes(t, o.Out), dirBytes(t, ref.Out)
	for name, b := range want {
		if !bytes.Equal(b, got[name]) {
			t.Fatalf("%s differs from the uninterrupted run before --resume", name)
		}
	}
	o.Resume = true
	run(t, o)
	sameDirs(t, ref.Out, o.Out)
}
