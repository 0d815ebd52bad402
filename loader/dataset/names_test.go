package dataset

import (
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/gload/gload/internal/safename"
)

// Shard names in a gload.index or a state.json are data: only plain base names that are not one of the
// directory's own files pass (issue 34 item 1).
func TestIndexRefusesHostileShardNames(t *testing.T) {
	dir := t.TempDir()
	writeDataset(t, dir, genRows(20, 0, 10, 1), WriterOptions{}, 10)
	ix, err := ReadIndex(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"../x.arrow", "/abs.arrow", "a/b.arrow", ".", "..", ".hidden.arrow", ".gload-sync",
		"gload.index", "state.json", "gload.progress.json", "gload.lock", "x.arrow.tmp", ".x.arrow.1234.gload-part", "x\x01.arrow"} {
		bad := *ix
		bad.Shards = append([]ShardEntry(nil), ix.Shards...)
		bad.Shards[0].Name = name
		b, err := bad.marshalUnchecked()
		if err != nil {
			t.Fatal(err)
		}
		if _, err := UnmarshalIndex(b); err == nil {
			t.Errorf("UnmarshalIndex accepted shard name %q", name)
		}
		if _, err := ShardPath(dir, name); err == nil {
			t.Errorf("ShardPath accepted %q", name)
		}
	}
}

// A shard that is a symbolic link (or a FIFO) is refused when a dataset is opened and when it is hashed: a
// dataset directory can not make gload read another file through one of its names.
func TestOpenRefusesSymlinkedShard(t *testing.T) {
	dir := t.TempDir()
	writeDataset(t, dir, genRows(20, 0, 10, 1), WriterOptions{}, 10)
	ix, err := ReadIndex(dir)
	if err != nil {
		t.Fatal(err)
	}
	name := ix.Shards[0].Name
	moved := filepath.Join(t.TempDir(), "elsewhere.arrow")
	if err := os.Rename(filepath.Join(dir, name), moved); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(moved, filepath.Join(dir, name)); err != nil {
		t.Fatal(err)
	}
	os.Remove(filepath.Join(dir, StampFile))
	if ds, err := Open(dir, OpenOptions{}); err == nil {
		ds.Close()
		t.Fatal("Open followed a symlinked shard")
	} else if !errors.Is(err, safename.ErrNotRegular) {
		t.Errorf("Open: %v, want ErrNotRegular", err)
	}
	if _, _, err := FileDigest(filepath.Join(dir, name)); !errors.Is(err, safename.ErrNotRegular) {
		t.Errorf("FileDigest: %v, want ErrNotRegular", err)
	}
}
