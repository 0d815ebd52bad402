package merge

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gload/gload/loader/dataset"
)

// A part whose shard was replaced by a symbolic link (to a file with the very bytes the index records, so every
// hash agrees) is refused: a link is never merged, hashed through or stamped (issue 34 item 8).
func TestMergeRefusesSymlinkedShard(t *testing.T) {
	in := writeInputs(t)
	o := baseOptions(t, in)
	root := t.TempDir()
	parts := runTasks(t, o, filepath.Join(root, "a"), 3)
	ix, err := dataset.ReadIndex(parts[1])
	if err != nil {
		t.Fatal(err)
	}
	for _, target := range []string{"abs", "rel"} {
		t.Run(target, func(t *testing.T) {
			shard := filepath.Join(parts[1], ix.Shards[0].Name)
			keep := filepath.Join(parts[1], "kept-"+target+".arrow")
			if err := os.Rename(shard, keep); err != nil {
				t.Fatal(err)
			}
			link := keep
			if target == "rel" {
				link = filepath.Base(keep) // resolves inside whatever directory holds the link
			}
			if err := os.Symlink(link, shard); err != nil {
				t.Fatal(err)
			}
			defer func() { os.Remove(shard); os.Rename(keep, shard) }()
			out := filepath.Join(t.TempDir(), "out")
			_, err := Merge(out, parts, Options{})
			if err == nil || !strings.Contains(err.Error(), "symbolic link") || !strings.Contains(err.Error(), ix.Shards[0].Name) {
				t.Fatalf("merge over a symlinked shard: %v", err)
			}
			for _, f := range []string{dataset.StateFile, dataset.IndexFile, dataset.StampFile} {
				if _, err := os.Stat(filepath.Join(out, f)); err == nil {
					t.Errorf("refused merge left %s", f)
				}
			}
		})
	}
}

// A shard changed in place after the merge linked it (before or after it was hashed) is refused: the bytes
// stamped as verified are always the bytes hashed.
func TestMergeNeverStampsUnhashedBytes(t *testing.T) {
	in := writeInputs(t)
	o := baseOptions(t, in)
	parts := runTasks(t, o, filepath.Join(t.TempDir(), "a"), 2)
	for _, point := range []string{"linked", "hashed"} {
		t.Run(point, func(t *testing.T) {
			done := false
			testHook = func(p, path string) {
				if p != point || done {
					return
				}
				done = true
				f, err := os.OpenFile(path, os.O_WRONLY, 0)
				if err != nil {
					t.Fatal(err)
				}
				defer f.Close()
				var b [1]byte
				b[0] = 0x5a
				if _, err := f.WriteAt(b[:], 100); err != nil { // the part's file too: it is a hard link
					t.Fatal(err)
				}
			}
			defer func() { testHook = nil }()
			out := filepath.Join(t.TempDir(), "out")
			_, err := Merge(out, parts, Options{})
			if err == nil || (!strings.Contains(err.Error(), "modified after it was written") && !strings.Contains(err.Error(), "changed while")) {
				t.Fatalf("merge with a shard changed at %q: %v", point, err)
			}
			if _, err := os.Stat(filepath.Join(out, dataset.StampFile)); err == nil {
				t.Error("a stamp vouches for bytes that were not hashed")
			}
			if _, err := os.Stat(filepath.Join(out, dataset.StateFile)); err == nil {
				t.Error("the refused merge left state.json: the directory looks complete")
			}
		})
		parts = runTasks(t, o, filepath.Join(t.TempDir(), "b"), 2) // the parts' shard was changed too
	}
}
