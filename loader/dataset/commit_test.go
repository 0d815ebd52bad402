package dataset

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"testing"
)

var errCrash = errors.New("simulated crash")

// dirFiles reads every file of dir but the stamp (times and inodes).
func dirFiles(t *testing.T, dir string) map[string][]byte {
	t.Helper()
	out := map[string][]byte{}
	ents, _ := os.ReadDir(dir)
	for _, e := range ents {
		if e.Name() == StampFile {
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

// The finalisation invariant (doc.go): state.json is the commit point. A crash at any step before it leaves a
// directory that no reader takes for a dataset (no state.json: Hugging Face cannot load it, Open refuses it);
// Finalize run again completes it, byte-identical to an uninterrupted Finalize (issue 34 item 15).
func TestFinalizeCommitPoint(t *testing.T) {
	rows := genRows(300, 1, 40, 3)
	opts := WriterOptions{Columns: []string{"c0"}}
	ref := t.TempDir()
	writeDataset(t, ref, rows, opts, 70)
	want := dirFiles(t, ref)
	for _, step := range []string{"renamed", "info", "index", "stamp"} {
		t.Run(step, func(t *testing.T) {
			dir := t.TempDir()
			infos := writeShards(t, dir, rows, opts, 70)
			testHookFinalize = func(s string) error {
				if s == step {
					return errCrash
				}
				return nil
			}
			err := Finalize(dir, infos, opts)
			testHookFinalize = nil
			if !errors.Is(err, errCrash) {
				t.Fatalf("Finalize: %v", err)
			}
			if _, err := os.Stat(filepath.Join(dir, StateFile)); err == nil {
				t.Fatal("state.json written before the crash point: the directory looks complete")
			}
			if ds, err := Open(dir, OpenOptions{}); err == nil {
				ds.Close()
				t.Fatal("Open accepted a directory killed inside Finalize")
			}
			if err := Finalize(dir, infos, opts); err != nil {
				t.Fatalf("Finalize again: %v", err)
			}
			got := dirFiles(t, dir)
			if len(got) != len(want) {
				t.Fatalf("%d files, want %d", len(got), len(want))
			}
			for n, b := range want {
				if !bytes.Equal(b, got[n]) {
					t.Errorf("%s differs from an uninterrupted Finalize", n)
				}
			}
		})
	}
	// Finalize of a complete directory (a crash after the commit point, then --resume) takes state.json away
	// first and gives back the same dataset.
	infos, err := RecoverShards(ref)
	if err != nil {
		t.Fatal(err)
	}
	testHookFinalize = func(s string) error {
		if _, err := os.Stat(filepath.Join(ref, StateFile)); err == nil {
			t.Errorf("step %s of a second Finalize: state.json still in place", s)
		}
		return nil
	}
	defer func() { testHookFinalize = nil }()
	if err := Finalize(ref, infos, opts); err != nil {
		t.Fatal(err)
	}
	for n, b := range dirFiles(t, ref) {
		if !bytes.Equal(b, want[n]) {
			t.Errorf("%s changed by a second Finalize", n)
		}
	}
}
