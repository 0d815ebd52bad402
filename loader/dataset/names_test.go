package dataset

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"syscall"
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

// The metadata a dataset directory hands the reader is bounded and never a device, FIFO or link: a 100 MB
// state.json, a state.json that is /dev/zero, a FIFO as dataset_info.json each fail at open, naming the file,
// without hanging or reading them whole.
func TestOpenRefusesHostileMetadata(t *testing.T) {
	for _, tc := range []struct {
		name string
		file string
		make func(path string) error
	}{
		{"huge state.json", StateFile, func(p string) error { return os.WriteFile(p, make([]byte, safename.MaxMetaBytes+1), 0o644) }},
		{"state.json is /dev/zero", StateFile, func(p string) error { return os.Symlink("/dev/zero", p) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			writeDataset(t, dir, genRows(20, 0, 10, 1), WriterOptions{}, 10)
			p := filepath.Join(dir, tc.file)
			os.Remove(p)
			if err := tc.make(p); err != nil {
				t.Fatal(err)
			}
			ds, err := Open(dir, OpenOptions{})
			if err == nil {
				ds.Close()
				t.Fatal("opened")
			}
			if !strings.Contains(err.Error(), tc.file) {
				t.Errorf("error does not name %s: %v", tc.file, err)
			}
		})
	}
	// dataset_info.json (read for the special tokens) as a FIFO: an error, not a hang.
	dir := t.TempDir()
	writeDataset(t, dir, genRows(20, 0, 10, 1), WriterOptions{}, 10)
	p := filepath.Join(dir, InfoFile)
	os.Remove(p)
	if err := syscall.Mkfifo(p, 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := ReadSpecialTokens(dir); !errors.Is(err, safename.ErrNotRegular) {
		t.Errorf("ReadSpecialTokens with a FIFO: %v", err)
	}
}
