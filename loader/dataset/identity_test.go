package dataset

import (
	"bytes"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"testing"
	"time"
)

// cpR copies a directory the way a user would: `cp -r`, which does not keep times.
func cpR(t *testing.T, src, dst string) {
	t.Helper()
	if b, err := exec.Command("cp", "-r", src, dst).CombinedOutput(); err != nil {
		t.Fatalf("cp -r %s %s: %v\n%s", src, dst, err, b)
	}
}

func openFP(t *testing.T, dir string, opts OpenOptions) *Dataset {
	t.Helper()
	d, err := Open(dir, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { d.Close() })
	return d
}

// TestFingerprintIsContent: copies, moves and touches keep the fingerprint
// (and so the plans); changing one token changes it, even with the mtime put back.
func TestFingerprintIsContent(t *testing.T) {
	rows := genRows(300, 1, 40, 11)
	opts := WriterOptions{Columns: []string{"c"}, RowsPerBatch: 32, TokenizerHash: "tok"}
	base := filepath.Join(t.TempDir(), "ds")
	os.Mkdir(base, 0o755)
	writeDataset(t, base, rows, opts, 100)
	want := openFP(t, base, OpenOptions{}).Fingerprint()
	if ix, _ := ReadIndex(base); ix.Fingerprint() != want {
		t.Fatalf("index fingerprint %s, dataset %s", ix.Fingerprint(), want)
	}
	shard1 := DataFileName(1, 3)

	cases := []struct {
		name     string
		change   func(t *testing.T, dir string) string // returns the directory to open
		same     bool
		verified int // shards hashed at open
	}{
		{"unchanged", func(t *testing.T, dir string) string { return dir }, true, 0},
		{"cp_r", func(t *testing.T, dir string) string {
			time.Sleep(5 * time.Millisecond)
			cpR(t, dir, dir+"-copy")
			return dir + "-copy"
		}, true, 3},
		{"moved", func(t *testing.T, dir string) string {
			os.Rename(dir, dir+"-moved")
			return dir + "-moved"
		}, true, 0},
		{"touched", func(t *testing.T, dir string) string {
			for i := range 3 {
				touch(t, filepath.Join(dir, DataFileName(i, 3)))
			}
			return dir
		}, true, 3},
		{"token_changed_mtime_restored", func(t *testing.T, dir string) string {
			p := filepath.Join(dir, shard1)
			st, _ := os.Stat(p)
			b, _ := os.ReadFile(p)
			d := openFP(t, dir, OpenOptions{})
			// Flip one token value of the shard's last row with tokens.
			var row int
			for i := 199; i >= 100; i-- {
				if d.Length(i) > 0 {
					row = i
					break
				}
			}
			tok, _ := d.Tokens(row)
			v := tok[len(tok)-1]
			d.Close()
			needle := []byte{byte(v), byte(v >> 8), byte(v >> 16), byte(v >> 24)}
			at := bytes.LastIndex(b, needle)
			if at < 0 {
				t.Fatal("token not found in shard")
			}
			b[at] ^= 1
			os.WriteFile(p, b, 0o644)
			os.Chtimes(p, st.ModTime(), st.ModTime())
			return dir
		}, false, 1},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "ds")
			cpR(t, base, dir)
			openFP(t, dir, OpenOptions{WriteIndex: true}) // stamp the copy as fresh
			dir = tc.change(t, dir)
			d := openFP(t, dir, OpenOptions{WriteIndex: true})
			if got := d.Fingerprint(); (got == want) != tc.same {
				t.Errorf("fingerprint %s, original %s, want same=%v", got, want, tc.same)
			}
			if d.ShardsVerified() != tc.verified {
				t.Errorf("%d shards hashed at open, want %d", d.ShardsVerified(), tc.verified)
			}
			if tc.same && (!d.IndexUsed() || d.TokenizerHash() != "tok") {
				t.Errorf("unchanged content: IndexUsed %v, tokenizer %q", d.IndexUsed(), d.TokenizerHash())
			}
			// Once verified, the next open needs no hashing.
			if d2 := openFP(t, dir, OpenOptions{}); d2.ShardsVerified() != 0 || d2.Fingerprint() != d.Fingerprint() {
				t.Errorf("reopen: %d shards hashed, fingerprint %s", d2.ShardsVerified(), d2.Fingerprint())
			}
			if !tc.same {
				ix, err := ReadIndex(dir)
				if err != nil || ix.Fingerprint() != d.Fingerprint() || ix.TokenizerHash != "tok" {
					t.Errorf("changed content: index rewritten as %v, %v", ix, err)
				}
			}
		})
	}
}

// TestForeignIndexInCache: a dataset Hugging Face wrote gets its index and
// stamp in the index cache, never in its own directory, and a content
// fingerprint that its copies share.
func TestForeignIndexInCache(t *testing.T) {
	src := filepath.Join("testdata", "hf", "hf_int64_3shards")
	dir := filepath.Join(t.TempDir(), "hf")
	cpR(t, src, dir)
	before := listDir(t, dir)
	cache := t.TempDir()
	d := openFP(t, dir, OpenOptions{WriteIndex: true, IndexDir: cache})
	if d.IndexUsed() {
		t.Error("no index anywhere, but IndexUsed")
	}
	if after := listDir(t, dir); !slices.Equal(before, after) {
		t.Errorf("dataset directory changed: %v → %v", before, after)
	}
	entry, _ := CacheEntry(cache, dir)
	for _, f := range []string{IndexFile, StampFile} {
		if _, err := os.Stat(filepath.Join(entry, f)); err != nil {
			t.Errorf("cache: %v", err)
		}
	}
	d2 := openFP(t, dir, OpenOptions{IndexDir: cache})
	if !d2.IndexUsed() || d2.ShardsVerified() != 0 || d2.Fingerprint() != d.Fingerprint() {
		t.Errorf("reopen from the cache: IndexUsed %v, %d hashed, fingerprint %s vs %s",
			d2.IndexUsed(), d2.ShardsVerified(), d2.Fingerprint(), d.Fingerprint())
	}
	// The fixture itself, with no cache at all, has the same content fingerprint.
	if d3 := openFP(t, src, OpenOptions{}); d3.Fingerprint() != d.Fingerprint() {
		t.Errorf("copy fingerprint %s, original %s", d.Fingerprint(), d3.Fingerprint())
	}
}

// TestReadOnlyDatasetStampInCache: a gload dataset in a directory that cannot
// be written keeps its stamp in the index cache.
func TestReadOnlyDatasetStampInCache(t *testing.T) {
	if os.Geteuid() == 0 {
		t.Skip("running as root: a read-only directory can still be written")
	}
	rows := genRows(50, 0, 10, 12)
	dir := filepath.Join(t.TempDir(), "ro")
	os.Mkdir(dir, 0o755)
	writeDataset(t, dir, rows, WriterOptions{RowsPerBatch: 8}, 25)
	os.Remove(filepath.Join(dir, StampFile))
	os.Chmod(dir, 0o555)
	t.Cleanup(func() { os.Chmod(dir, 0o755) })
	cache := t.TempDir()
	if d := openFP(t, dir, OpenOptions{WriteIndex: true, IndexDir: cache}); d.ShardsVerified() != 2 {
		t.Errorf("no stamp: %d shards hashed, want 2", d.ShardsVerified())
	}
	if d := openFP(t, dir, OpenOptions{IndexDir: cache}); d.ShardsVerified() != 0 || !d.IndexUsed() {
		t.Errorf("stamp in the cache: %d shards hashed, IndexUsed %v", d.ShardsVerified(), d.IndexUsed())
	}
}

// TestOldIndexRebuilt: a version-1 index is never used as it is; Open rebuilds
// a version-2 index from the shards.
func TestOldIndexRebuilt(t *testing.T) {
	rows := genRows(40, 0, 10, 13)
	dir := t.TempDir()
	writeDataset(t, dir, rows, WriterOptions{RowsPerBatch: 8}, 40)
	orig, _ := os.ReadFile(filepath.Join(dir, IndexFile))
	old := bytes.Clone(orig)
	old[8] = 1
	os.WriteFile(filepath.Join(dir, IndexFile), reseal(old), 0o644)
	if _, err := ReadIndex(dir); !errors.Is(err, ErrOldIndex) {
		t.Fatalf("ReadIndex of v1: %v", err)
	}
	d := checkRows(t, dir, rows, nil, OpenOptions{WriteIndex: true})
	if d.IndexUsed() {
		t.Error("v1 index used")
	}
	got, _ := os.ReadFile(filepath.Join(dir, IndexFile))
	ix, err := UnmarshalIndex(got)
	if err != nil {
		t.Fatal(err)
	}
	if oi, _ := UnmarshalIndex(orig); ix.Fingerprint() != oi.Fingerprint() {
		t.Error("upgraded index has another fingerprint")
	}
	// A real version-1 index keeps its tokenizer hash through the upgrade.
	v1 := []byte("GLOADIX1\x01\x00\x00\x00\x00\x00\x00\x00\x03\x00\x00\x00tok")
	os.WriteFile(filepath.Join(dir, IndexFile), v1, 0o644)
	if d := checkRows(t, dir, rows, nil, OpenOptions{}); d.TokenizerHash() != "tok" {
		t.Errorf("tokenizer hash after the v1 upgrade: %q", d.TokenizerHash())
	}
}

func listDir(t *testing.T, dir string) []string {
	t.Helper()
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, e := range ents {
		out = append(out, e.Name())
	}
	return out
}
