package dataset

import (
	"bytes"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

func TestIndexRebuildAndCache(t *testing.T) {
	dir := t.TempDir()
	rows := genRows(200, 1, 30, 2)
	opts := WriterOptions{Columns: []string{"c"}, RowsPerBatch: 16, TokenizerHash: "tok"}
	writeDataset(t, dir, rows, opts, 70)
	idx := filepath.Join(dir, IndexFile)
	orig, _ := os.ReadFile(idx)
	os.Remove(idx)

	var logBuf bytes.Buffer
	log := slog.New(slog.NewTextHandler(&logBuf, nil))
	d := checkRows(t, dir, rows, opts.Columns, OpenOptions{Logger: log})
	if d.IndexUsed() || d.TokenizerHash() != "" {
		t.Errorf("missing index: IndexUsed %v, TokenizerHash %q", d.IndexUsed(), d.TokenizerHash())
	}
	if !strings.Contains(logBuf.String(), "gload index rebuilt") {
		t.Errorf("no rebuild notice logged: %q", logBuf.String())
	}
	if _, err := os.Stat(idx); err == nil {
		t.Error("index written without WriteIndex")
	}
	os.Remove(filepath.Join(dir, StampFile))
	checkRows(t, dir, rows, opts.Columns, OpenOptions{WriteIndex: true})
	d3 := checkRows(t, dir, rows, opts.Columns, OpenOptions{})
	if !d3.IndexUsed() {
		t.Error("written index not used")
	}
	if d3.ShardsVerified() != 0 {
		t.Errorf("fresh stamp: %d shards hashed", d3.ShardsVerified())
	}
	// The rebuilt index equals the writer's, content hashes and fingerprint
	// included, but for the (unknowable) tokenizer hash.
	ia, _ := UnmarshalIndex(orig)
	ib, err := ReadIndex(dir)
	if err != nil {
		t.Fatal(err)
	}
	ia.TokenizerHash = ""
	ea, _ := ia.MarshalBinary()
	eb, _ := ib.MarshalBinary()
	if !bytes.Equal(ea, eb) {
		t.Error("rebuilt index differs from the writer's")
	}
	if d.Fingerprint() != ia.Fingerprint() {
		t.Errorf("rebuilt fingerprint %s, writer's %s", d.Fingerprint(), ia.Fingerprint())
	}
	// A touched shard is hashed, found unchanged, and the index kept (tokenizer hash included).
	os.WriteFile(idx, orig, 0o644)
	if d := checkRows(t, dir, rows, opts.Columns, OpenOptions{WriteIndex: true}); d.ShardsVerified() != 3 {
		t.Errorf("stamp of another index: %d shards hashed, want 3", d.ShardsVerified())
	}
	touch(t, filepath.Join(dir, DataFileName(1, 3)))
	d4 := checkRows(t, dir, rows, opts.Columns, OpenOptions{WriteIndex: true})
	if !d4.IndexUsed() || d4.TokenizerHash() != "tok" || d4.ShardsVerified() != 1 || d4.Fingerprint() != ia.Fingerprint() {
		t.Errorf("touched shard: IndexUsed %v, TokenizerHash %q, %d verified, fingerprint %s",
			d4.IndexUsed(), d4.TokenizerHash(), d4.ShardsVerified(), d4.Fingerprint())
	}
	if got, _ := os.ReadFile(idx); !bytes.Equal(got, orig) {
		t.Error("index rewritten after a touch")
	}
	if d5 := checkRows(t, dir, rows, opts.Columns, OpenOptions{}); d5.ShardsVerified() != 0 {
		t.Errorf("after the new stamp: %d shards hashed", d5.ShardsVerified())
	}
	if d6 := checkRows(t, dir, rows, opts.Columns, OpenOptions{Verify: true}); d6.ShardsVerified() != 3 || !d6.IndexUsed() {
		t.Errorf("Verify: %d shards hashed, IndexUsed %v", d6.ShardsVerified(), d6.IndexUsed())
	}
}

func touch(t *testing.T, path string) {
	t.Helper()
	st, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Chtimes(path, st.ModTime(), st.ModTime().Add(time.Second)); err != nil {
		t.Fatal(err)
	}
}

func TestCorruptIndexIsRebuilt(t *testing.T) {
	dir := t.TempDir()
	rows := genRows(40, 0, 10, 3)
	writeDataset(t, dir, rows, WriterOptions{RowsPerBatch: 6}, 15)
	idx := filepath.Join(dir, IndexFile)
	orig, _ := os.ReadFile(idx)
	for i := 0; i < len(orig); i += max(1, len(orig)/97) {
		bad := bytes.Clone(orig)
		bad[i] ^= 0x5a
		os.WriteFile(idx, bad, 0o644)
		d := checkRows(t, dir, rows, nil, OpenOptions{})
		if d.IndexUsed() {
			t.Fatalf("byte %d flipped: corrupt index used", i)
		}
		d.Close()
	}
	for _, n := range []int{0, 5, 8, 20, len(orig) / 2, len(orig) - 1} {
		os.WriteFile(idx, orig[:n], 0o644)
		if d := checkRows(t, dir, rows, nil, OpenOptions{}); d.IndexUsed() {
			t.Fatalf("index truncated to %d bytes used", n)
		}
	}
}

func TestStaleIndexDetected(t *testing.T) {
	rows := genRows(60, 0, 10, 4)
	other := genRows(60, 0, 10, 5)
	opts := WriterOptions{RowsPerBatch: 8}
	cases := []struct {
		name    string
		changed bool // the content changed: a new fingerprint
		apply   func(t *testing.T, dir, alt string)
	}{
		{"replaced_same_size_and_mtime", true, func(t *testing.T, dir, alt string) {
			// Same name, size and mtime, different bytes: ctime and then the content hash tell.
			p := filepath.Join(dir, DataFileName(1, 2))
			st, _ := os.Stat(p)
			b, _ := os.ReadFile(p)
			b[len(b)-20] ^= 1 // inside the last batch's values
			os.WriteFile(p, b, 0o644)
			os.Chtimes(p, st.ModTime(), st.ModTime())
		}},
		{"other_dataset_index", false, func(t *testing.T, dir, alt string) {
			b, _ := os.ReadFile(filepath.Join(alt, IndexFile))
			os.WriteFile(filepath.Join(dir, IndexFile), b, 0o644)
		}},
		{"shard_renamed", false, func(t *testing.T, dir, _ string) {
			os.Rename(filepath.Join(dir, DataFileName(1, 2)), filepath.Join(dir, "moved.arrow"))
			os.WriteFile(filepath.Join(dir, StateFile), []byte(`{"_data_files": [{"filename": "data-00000-of-00002.arrow"}, {"filename": "moved.arrow"}]}`), 0o644)
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			dir, alt := t.TempDir(), t.TempDir()
			writeDataset(t, dir, rows, opts, 30)
			writeDataset(t, alt, other, opts, 30)
			d0, err := Open(dir, OpenOptions{})
			if err != nil {
				t.Fatal(err)
			}
			fp := d0.Fingerprint()
			d0.Close()
			tc.apply(t, dir, alt)
			d, err := Open(dir, OpenOptions{})
			if err != nil {
				t.Fatal(err)
			}
			defer d.Close()
			if d.IndexUsed() {
				t.Error("stale index used")
			}
			if tc.changed == (d.Fingerprint() == fp) {
				t.Errorf("content changed %v, fingerprint %s before, %s after", tc.changed, fp, d.Fingerprint())
			}
			if d.Len() != len(rows) {
				t.Errorf("Len %d", d.Len())
			}
		})
	}
}

// TestIndexLengthsMismatch: an index that matches the files' size, mtime and
// footer but lies about lengths is caught row by row, not served.
func TestIndexLengthsMismatch(t *testing.T) {
	dir := t.TempDir()
	rows := genRows(30, 0, 10, 6)
	writeDataset(t, dir, rows, WriterOptions{RowsPerBatch: 4}, 30)
	ix, _ := ReadIndex(dir)
	lengths := append([]uint32(nil), ix.Lengths...)
	lengths[5], lengths[6] = lengths[5]+1, lengths[6]-1 // same total, wrong rows
	if lengths[6]+1 == 0 {
		t.Skip("row 6 is empty")
	}
	ix.Lengths = lengths
	if err := WriteIndex(dir, ix); err != nil {
		t.Fatal(err)
	}
	d, err := Open(dir, OpenOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	if !d.IndexUsed() {
		t.Fatal("index not used")
	}
	for _, i := range []int{5, 6} {
		if _, err := d.Tokens(i); !errors.Is(err, ErrStaleIndex) {
			t.Errorf("Tokens(%d) = %v, want ErrStaleIndex", i, err)
		}
		if _, err := d.AppendTokens(nil, i); !errors.Is(err, ErrStaleIndex) {
			t.Errorf("AppendTokens(%d) = %v, want ErrStaleIndex", i, err)
		}
	}
	if got, err := d.Tokens(7); err != nil || !equalInt32(got, rows[7].ids) {
		t.Errorf("Tokens(7) = %v, %v", got, err)
	}
}

func TestOpenErrors(t *testing.T) {
	good := t.TempDir()
	writeDataset(t, good, genRows(5, 0, 3, 1), WriterOptions{}, 5)
	cases := []struct {
		name  string
		setup func(dir string)
		want  error
		text  string
	}{
		{"no_state", func(dir string) {}, ErrNotDataset, "no state.json"},
		{"dataset_dict", func(dir string) {
			os.WriteFile(filepath.Join(dir, "dataset_dict.json"), []byte(`{"splits": ["train"]}`), 0o644)
		}, ErrNotDataset, "DatasetDict"},
		{"bad_json", func(dir string) { os.WriteFile(filepath.Join(dir, StateFile), []byte(`{"_data_files": [`), 0o644) }, ErrNotDataset, "parse"},
		{"no_data_files", func(dir string) { os.WriteFile(filepath.Join(dir, StateFile), []byte(`{}`), 0o644) }, ErrNotDataset, "_data_files"},
		{"path_escape", func(dir string) {
			os.WriteFile(filepath.Join(dir, StateFile), []byte(`{"_data_files": [{"filename": "../x.arrow"}]}`), 0o644)
		}, ErrNotDataset, "bad file name"},
		{"twice", func(dir string) {
			os.WriteFile(filepath.Join(dir, StateFile), []byte(`{"_data_files": [{"filename": "a"}, {"filename": "a"}]}`), 0o644)
		}, ErrNotDataset, "twice"},
		{"missing_shard", func(dir string) {
			os.WriteFile(filepath.Join(dir, StateFile), []byte(`{"_data_files": [{"filename": "gone.arrow"}]}`), 0o644)
		}, os.ErrNotExist, "gone.arrow"},
		{"not_arrow", func(dir string) {
			os.WriteFile(filepath.Join(dir, "x.arrow"), []byte("hello, world, this is not arrow"), 0o644)
			os.WriteFile(filepath.Join(dir, StateFile), []byte(`{"_data_files": [{"filename": "x.arrow"}]}`), 0o644)
		}, ErrCorrupt, "x.arrow"},
		{"empty_file", func(dir string) {
			os.WriteFile(filepath.Join(dir, "x.arrow"), nil, 0o644)
			os.WriteFile(filepath.Join(dir, StateFile), []byte(`{"_data_files": [{"filename": "x.arrow"}]}`), 0o644)
		}, ErrCorrupt, "x.arrow"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			tc.setup(dir)
			_, err := Open(dir, OpenOptions{})
			if !errors.Is(err, tc.want) || !strings.Contains(err.Error(), tc.text) {
				t.Errorf("Open = %v, want %v containing %q", err, tc.want, tc.text)
			}
		})
	}
	t.Run("zero_shards", func(t *testing.T) {
		dir := t.TempDir()
		os.WriteFile(filepath.Join(dir, StateFile), []byte(`{"_data_files": []}`), 0o644)
		d, err := Open(dir, OpenOptions{})
		if err != nil || d.Len() != 0 {
			t.Fatalf("Open = %v", err)
		}
		d.Close()
	})
}

func TestRowErrorsAndClose(t *testing.T) {
	dir := t.TempDir()
	rows := genRows(10, 1, 5, 1)
	writeDataset(t, dir, rows, WriterOptions{Columns: []string{"c"}}, 10)
	d, err := Open(dir, OpenOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, i := range []int{-1, 10, 1 << 40} {
		if _, err := d.Tokens(i); !errors.Is(err, ErrRange) {
			t.Errorf("Tokens(%d) = %v", i, err)
		}
		if _, err := d.AppendTokens(nil, i); !errors.Is(err, ErrRange) {
			t.Errorf("AppendTokens(%d) = %v", i, err)
		}
	}
	if _, _, err := d.Column("nope", 0); !errors.Is(err, ErrNoColumn) {
		t.Errorf("Column(nope) = %v", err)
	}
	if _, _, err := d.Column("input_ids", 0); !errors.Is(err, ErrNoColumn) {
		t.Errorf("Column(input_ids) = %v", err)
	}
	// Returned views cannot be appended to in place (that would write the map).
	v, _ := d.Tokens(0)
	if cap(v) != len(v) {
		t.Errorf("Tokens view has spare capacity %d > %d", cap(v), len(v))
	}
	if err := d.Close(); err != nil {
		t.Fatal(err)
	}
	if err := d.Close(); err != nil {
		t.Errorf("second Close: %v", err)
	}
	if _, err := d.Tokens(0); !errors.Is(err, ErrClosed) {
		t.Errorf("Tokens after Close = %v", err)
	}
	if _, _, err := d.Column("c", 0); !errors.Is(err, ErrClosed) {
		t.Errorf("Column after Close = %v", err)
	}
}

func TestConcurrentReaders(t *testing.T) {
	dir := t.TempDir()
	rows := genRows(3000, 0, 20, 8)
	writeDataset(t, dir, rows, WriterOptions{RowsPerBatch: 37}, 1000)
	d, err := Open(dir, OpenOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	for g := range 8 {
		wg.Go(func() {
			var buf []int32
			for i := g; i < len(rows); i += 3 {
				v, err := d.Tokens(i)
				if err == nil && !equalInt32(v, rows[i].ids) {
					err = errors.New("wrong tokens")
				}
				if err == nil {
					buf, err = d.AppendTokens(buf[:0], i)
				}
				if err != nil {
					errs <- err
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
}

// TestCorruptShard truncates a shard at every offset and flips every byte: the
// result is an error naming the shard, or rows whose tokens agree with the
// index, never a panic. Both paths are tried: scanning (no index) and an index
// that matches the damaged file, so damage is found only when a batch is decoded.
func TestCorruptShard(t *testing.T) {
	src := t.TempDir()
	rows := genRows(24, 1, 6, 9)
	opts := WriterOptions{Columns: []string{"s"}, RowsPerBatch: 5}
	writeDataset(t, src, rows, opts, 24)
	name := DataFileName(0, 1)
	orig, _ := os.ReadFile(filepath.Join(src, name))
	goodIndex, _ := ReadIndex(src)

	try := func(what string, data []byte) {
		t.Helper()
		for _, withIndex := range []bool{false, true} {
			var ix *Index
			if withIndex {
				e := goodIndex.Shards[0]
				e.Size = int64(len(data))
				ix = &Index{Shards: []ShardEntry{e}, Lengths: goodIndex.Lengths}
				if ix.validate() != nil {
					continue
				}
			}
			d, err := memDataset(name, data, ix)
			if err != nil {
				if !strings.Contains(err.Error(), name) {
					t.Fatalf("%s: error does not name the shard: %v", what, err)
				}
				continue
			}
			if withIndex && !d.IndexUsed() {
				t.Fatalf("%s: matching index not used", what)
			}
			if err := readAll(d, name); err != nil {
				t.Fatalf("%s: %v", what, err)
			}
		}
	}
	for n := range len(orig) {
		try(fmt.Sprintf("truncated to %d", n), orig[:n])
	}
	for i := range orig {
		for _, x := range []byte{0xff, 0x80, 0x01} {
			bad := bytes.Clone(orig)
			bad[i] ^= x
			try(fmt.Sprintf("byte %d ^ %#x", i, x), bad)
		}
	}

	// Through the file system, a few cases: Open names the file.
	dir := t.TempDir()
	state, _ := os.ReadFile(filepath.Join(src, StateFile))
	os.WriteFile(filepath.Join(dir, StateFile), state, 0o644)
	for _, n := range []int{0, 3, 8, 100, len(orig) / 2, len(orig) - 9, len(orig) - 1} {
		os.WriteFile(filepath.Join(dir, name), orig[:n], 0o644)
		_, err := Open(dir, OpenOptions{})
		if !errors.Is(err, ErrCorrupt) || !strings.Contains(err.Error(), filepath.Join(dir, name)) {
			t.Errorf("Open of a shard truncated to %d bytes: %v", n, err)
		}
	}
}
