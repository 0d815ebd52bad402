package remote

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"hash/crc32"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gload/gload/bench"
	"github.com/gload/gload/loader/dataset"
	"github.com/gload/gload/loader/objstore"
	"github.com/gload/gload/loader/objstore/s3test"
)

// bucketDataset writes a dataset of rows one-token rows in shards of shardRows rows, uploads it to
// s3://gload-test/ds and returns the store and the bytes of its gload.index.
func bucketDataset(t *testing.T, rows, shardRows int64) (*objstore.Store, []byte) {
	t.Helper()
	s3test.Start(t, "gload-test")
	dir := t.TempDir()
	if err := bench.WriteScaleDataset(dir, rows, shardRows, 2); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	st, err := objstore.Open(ctx, objstore.URL{Bucket: "gload-test", Prefix: "ds"}, objstore.Config{})
	if err != nil {
		t.Fatal(err)
	}
	if err := Upload(ctx, dir, st); err != nil {
		t.Fatal(err)
	}
	ix, err := os.ReadFile(filepath.Join(dir, dataset.IndexFile))
	if err != nil {
		t.Fatal(err)
	}
	return st, ix
}

// indexLayout finds, in an encoded version-3 index of rows rows, the offset of the total-rows field (followed by
// the block rows, histogram buckets and lengths offset fields), of the block table, of the header checksum, and of
// the lengths.
func indexLayout(t *testing.T, b []byte, rows int64) (rowsAt, tableAt, crcAt, lengthsAt int) {
	t.Helper()
	lengthsAt = len(b) - 4*int(rows)
	var pat []byte
	pat = binary.LittleEndian.AppendUint64(pat, uint64(rows))
	pat = binary.LittleEndian.AppendUint32(pat, dataset.BlockRows)
	pat = binary.LittleEndian.AppendUint32(pat, dataset.HistBuckets)
	pat = binary.LittleEndian.AppendUint64(pat, uint64(lengthsAt))
	rowsAt = bytes.Index(b, pat)
	if rowsAt < 0 || bytes.Index(b[rowsAt+1:], pat) >= 0 {
		t.Fatal("the index's rows field not found once")
	}
	tableAt = rowsAt + len(pat)
	crcAt = tableAt + blockEntryBytes*int(dataset.NumBlocks(rows))
	return rowsAt, tableAt, crcAt, lengthsAt
}

// blockEntryBytes is the size of one block table entry: tokens u64, longest u32, crc32c u32, 16 histogram u32s.
const blockEntryBytes = 8 + 4 + 4 + 4*dataset.HistBuckets

// resum rewrites the header checksum of b (at crcAt) after a change to the header.
func resum(b []byte, crcAt int) {
	binary.LittleEndian.PutUint32(b[crcAt:], crc32.Checksum(b[:crcAt], crc32.MakeTable(crc32.Castagnoli)))
}

// assertNoIndex fails if dir holds gload.index or any temporary file.
func assertNoIndex(t *testing.T, dir string) {
	t.Helper()
	ents, _ := os.ReadDir(dir)
	for _, e := range ents {
		if e.Name() == dataset.IndexFile || strings.HasSuffix(e.Name(), objstore.TempSuffix) || strings.HasSuffix(e.Name(), ".tmp") {
			t.Errorf("%s left in %s", e.Name(), dir)
		}
	}
}

// An index larger than the bound is refused with ErrTooLarge naming it, before anything is written under the cache
// directory; at the bound it is fetched, mapped and its lengths readable until Close.
func TestFetchMetaIndexOverBound(t *testing.T) {
	st, ixb := bucketDataset(t, 5000, 2000)
	defer func(v int64) { maxIndexBytes = v }(maxIndexBytes)
	root := t.TempDir()
	dir := filepath.Join(root, "s3", "gload-test", "ds")

	maxIndexBytes = int64(len(ixb)) - 1
	_, err := FetchMeta(context.Background(), st, dir)
	if !errors.Is(err, objstore.ErrTooLarge) || !strings.Contains(err.Error(), "s3://gload-test/ds/gload.index") {
		t.Fatalf("FetchMeta of an index over the bound: %v; want ErrTooLarge naming s3://gload-test/ds/gload.index", err)
	}
	if ents, _ := os.ReadDir(root); len(ents) != 0 {
		t.Fatalf("%s written under the cache root for an index over the bound", ents[0].Name())
	}

	maxIndexBytes = int64(len(ixb))
	meta, err := FetchMeta(context.Background(), st, dir)
	if err != nil {
		t.Fatalf("FetchMeta at the bound: %v", err)
	}
	if meta.Index.Rows() != 5000 || len(meta.Shards) != 3 || meta.Index.Lengths[4999] != 1 {
		t.Fatalf("fetched index: %d rows, %d shards", meta.Index.Rows(), len(meta.Shards))
	}
	if got, _ := os.ReadFile(filepath.Join(dir, dataset.IndexFile)); !bytes.Equal(got, ixb) {
		t.Fatal("the cached gload.index differs from the bucket's")
	}
	if err := meta.Close(); err != nil {
		t.Fatal(err)
	}
	if err := meta.Close(); err != nil || meta.Index.Lengths != nil || meta.Shards[2].Rows != 1000 {
		t.Fatalf("after Close: %v, %d lengths, shards %+v", err, len(meta.Index.Lengths), meta.Shards)
	}
}

// A corrupt index in the bucket is refused at download, before it is renamed into the cache, with an error naming
// the object and what is wrong; a fetch that fails also leaves no index of an earlier fetch beside new metadata.
func TestFetchMetaCorruptIndexRefused(t *testing.T) {
	const rows = 5000
	st, good := bucketDataset(t, rows, 2000)
	rowsAt, tableAt, crcAt, lengthsAt := indexLayout(t, good, rows)
	edit := func(f func(b []byte) []byte) []byte { return f(append([]byte(nil), good...)) }
	cases := []struct {
		name string
		b    []byte
		want string
	}{
		{"truncated by one length", edit(func(b []byte) []byte { return b[:len(b)-4] }), "lengths in the"},
		{"truncated in the header", edit(func(b []byte) []byte { return b[:tableAt+3] }), "bad index"},
		{"a byte past the end", edit(func(b []byte) []byte { return append(b, 0) }), "lengths in the"},
		{"header claims more rows", edit(func(b []byte) []byte {
			binary.LittleEndian.PutUint64(b[rowsAt:], rows+1)
			resum(b, crcAt)
			return b
		}), "lengths in the"},
		{"header claims 2^40 rows", edit(func(b []byte) []byte {
			binary.LittleEndian.PutUint64(b[rowsAt:], 1<<40)
			resum(b, crcAt)
			return b
		}), "lengths in the"},
		{"block table byte flipped", edit(func(b []byte) []byte { b[tableAt+2] ^= 1; return b }), "header checksum"},
		{"block table inconsistent, checksum fixed", edit(func(b []byte) []byte {
			b[tableAt+8] ^= 0x40 // the block's longest row: not in its histogram's top bucket
			resum(b, crcAt)
			return b
		}), "block 0"},
		{"a length changed (small index: checked in full)", edit(func(b []byte) []byte {
			b[lengthsAt+4*1234] ^= 0x10
			return b
		}), "block 0"},
		{"no magic", edit(func(b []byte) []byte { b[0] = 'X'; return b }), "magic"},
		{"empty", []byte{}, "magic"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			dir := filepath.Join(t.TempDir(), "cache")
			// An earlier fetch of the good index: the failed one must not leave it beside the new metadata.
			if err := st.Put(ctx, dataset.IndexFile, good); err != nil {
				t.Fatal(err)
			}
			meta, err := FetchMeta(ctx, st, dir)
			if err != nil {
				t.Fatal(err)
			}
			meta.Close()
			if err := st.Put(ctx, dataset.IndexFile, tc.b); err != nil {
				t.Fatal(err)
			}
			_, err = FetchMeta(ctx, st, dir)
			if err == nil {
				t.Fatal("FetchMeta accepted a corrupt index")
			}
			t.Logf("%v", err)
			if !errors.Is(err, dataset.ErrBadIndex) || !errors.Is(err, objstore.ErrVerify) ||
				!strings.Contains(err.Error(), "s3://gload-test/ds/gload.index") || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error %q: want ErrBadIndex at verification naming s3://gload-test/ds/gload.index and %q", err, tc.want)
			}
			assertNoIndex(t, dir)
		})
	}
}

// gload sync checks a large index in full before any shard is fetched: a corrupt lengths block (which fetching
// alone does not read, past 2^20 rows) fails the sync naming the block, and leaves no dataset in the destination.
func TestSyncVerifiesLargeIndex(t *testing.T) {
	const rows = 1<<20 + 5000
	st, good := bucketDataset(t, rows, 600_000)
	_, _, _, lengthsAt := indexLayout(t, good, rows)
	bad := append([]byte(nil), good...)
	bad[lengthsAt+4*(3<<16+10)] ^= 0x40
	ctx := context.Background()
	if err := st.Put(ctx, dataset.IndexFile, bad); err != nil {
		t.Fatal(err)
	}
	cache := filepath.Join(t.TempDir(), "cache")
	meta, err := FetchMeta(ctx, st, cache) // only the header and the block table are read
	if err != nil {
		t.Fatalf("FetchMeta of a large index with a corrupt lengths block: %v (its lengths are checked when read)", err)
	}
	if err := meta.Index.Verify(); !errors.Is(err, dataset.ErrBadIndex) || !strings.Contains(err.Error(), "block 3") {
		t.Errorf("Verify of the fetched index: %v; want block 3 named", err)
	}
	meta.Close()

	dst := filepath.Join(t.TempDir(), "copy")
	_, err = Sync(ctx, st, dst, SyncOptions{})
	if !errors.Is(err, dataset.ErrBadIndex) || !strings.Contains(err.Error(), "block 3") || !strings.Contains(err.Error(), "s3://gload-test/ds/gload.index") {
		t.Fatalf("Sync of a corrupt index: %v; want ErrBadIndex naming the object and block 3", err)
	}
	for _, name := range []string{dataset.StateFile, dataset.IndexFile, "data-00000-of-00002.arrow"} {
		if _, err := os.Lstat(filepath.Join(dst, name)); err == nil {
			t.Errorf("%s in the destination of a failed sync", name)
		}
	}

	if err := st.Put(ctx, dataset.IndexFile, good); err != nil {
		t.Fatal(err)
	}
	meta, err = Sync(ctx, st, dst, SyncOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer meta.Close()
	if meta.Index.Rows() != rows || meta.Dir != dst {
		t.Fatalf("synced %d rows into %s", meta.Index.Rows(), meta.Dir)
	}
	ds, err := dataset.Open(dst, dataset.OpenOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer ds.Close()
	if ds.Len() != rows || ds.ShardsVerified() != 0 || ds.ShardsScanned() != 0 {
		t.Fatalf("the copy: %d rows, %d shards hashed, %d scanned at open (the stamp vouches for them)", ds.Len(), ds.ShardsVerified(), ds.ShardsScanned())
	}
}

// An index fetched before is kept while the store describes the same object and the cached file decodes; it is
// downloaded again when the store's copy changed, when the record is gone, or when the cached file was damaged.
func TestFetchMetaKeepsUnchangedIndex(t *testing.T) {
	st, good := bucketDataset(t, 5000, 2000)
	ctx := context.Background()
	dir := filepath.Join(t.TempDir(), "cache")
	ixPath := filepath.Join(dir, dataset.IndexFile)
	fetch := func(what string, wantRows int64) os.FileInfo {
		t.Helper()
		meta, err := FetchMeta(ctx, st, dir)
		if err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		if meta.Index.Rows() != wantRows {
			t.Fatalf("%s: %d rows, want %d", what, meta.Index.Rows(), wantRows)
		}
		if err := meta.Close(); err != nil {
			t.Fatal(err)
		}
		fi, err := os.Stat(ixPath)
		if err != nil {
			t.Fatal(err)
		}
		return fi
	}
	first := fetch("first fetch", 5000)
	if _, err := os.Stat(filepath.Join(dir, fetchedFile)); err != nil {
		t.Fatalf("no record of the fetched index: %v", err)
	}
	if again := fetch("unchanged", 5000); !os.SameFile(first, again) {
		t.Error("an unchanged index was downloaded again")
	}

	// The cached file damaged in place (same size): it no longer decodes, so it is downloaded again.
	b, _ := os.ReadFile(ixPath)
	_, tableAt, _, _ := indexLayout(t, b, 5000)
	b[tableAt] ^= 1
	if err := os.WriteFile(ixPath, b, 0o600); err != nil {
		t.Fatal(err)
	}
	repaired := fetch("damaged cache", 5000)
	if os.SameFile(first, repaired) {
		t.Error("a damaged cached index was kept")
	}
	if got, _ := os.ReadFile(ixPath); !bytes.Equal(got, good) {
		t.Error("the index downloaded again differs from the bucket's")
	}

	// No record: downloaded again.
	if err := os.Remove(filepath.Join(dir, fetchedFile)); err != nil {
		t.Fatal(err)
	}
	if again := fetch("no record", 5000); os.SameFile(repaired, again) {
		t.Error("an index without a record was kept")
	}

	// Another index in the bucket (another dataset's): downloaded.
	other := t.TempDir()
	if err := bench.WriteScaleDataset(other, 7000, 7000, 1); err != nil {
		t.Fatal(err)
	}
	ob, err := os.ReadFile(filepath.Join(other, dataset.IndexFile))
	if err != nil {
		t.Fatal(err)
	}
	if err := st.Put(ctx, dataset.IndexFile, ob); err != nil {
		t.Fatal(err)
	}
	fetch("another index in the bucket", 7000)
	if got, _ := os.ReadFile(ixPath); !bytes.Equal(got, ob) {
		t.Error("the cached index is not the bucket's new one")
	}
}
