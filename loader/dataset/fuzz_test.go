package dataset

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"
)

func FuzzUnmarshalIndex(f *testing.F) {
	for _, ix := range []*Index{{}, sampleIndex()} {
		b, _ := ix.MarshalBinary()
		f.Add(b)
	}
	dir := f.TempDir()
	writeDataset(f, dir, genRows(20, 0, 5, 1), WriterOptions{RowsPerBatch: 3}, 8)
	b, _ := os.ReadFile(filepath.Join(dir, IndexFile))
	f.Add(b)
	v2, _ := sampleIndex().MarshalBinary()
	f.Add(marshalV2(sampleIndex()))
	f.Add(v2[:len(v2)-5])
	f.Fuzz(func(t *testing.T, b []byte) {
		// The open path: the header alone, then every row through IndexLengths (blocks checked on first access).
		if dix, err := decodeIndex(b); err == nil {
			ls := newIndexLengths("fuzz", dix.Lengths, dix.table(), false)
			for i := range ls.Len() {
				if l := ls.Length(i); l != 0 && l != dix.Lengths[i] {
					t.Fatalf("row %d: %d, the index holds %d", i, l, dix.Lengths[i])
				}
			}
			if (ls.Err() == nil) != (dix.Verify() == nil) && ls.Err() != nil {
				t.Fatalf("IndexLengths found %v, Verify nothing", ls.Err())
			}
		}
		ix, err := UnmarshalIndex(b)
		if err != nil {
			return
		}
		// The encoding is canonical: whatever decodes re-encodes to the same bytes.
		out, err := ix.MarshalBinary()
		if err != nil {
			t.Fatalf("decoded index does not re-encode: %v", err)
		}
		if !bytes.Equal(out, b) {
			t.Fatal("re-encoded index differs from its input")
		}
	})
}

// FuzzShard feeds arbitrary bytes to the shard reader as one shard file: Open's
// scan, then every row through Tokens, AppendTokens and Column. Errors are
// fine; panics and tokens that disagree with the lengths are not.
func FuzzShard(f *testing.F) {
	dir := f.TempDir()
	writeDataset(f, dir, genRows(12, 2, 6, 1), WriterOptions{Columns: []string{"a", "b"}, RowsPerBatch: 5}, 12)
	seeds := []string{filepath.Join(dir, DataFileName(0, 1))}
	for _, fx := range []string{"hf_int64_3shards/data-00000-of-00003.arrow", "hf_uint16_large/data-00000-of-00002.arrow",
		"hf_fixed_int32/data-00000-of-00001.arrow", "pa_mixed/data-00000-of-00001.arrow", "pa_uint32_big/part-b.arrow"} {
		seeds = append(seeds, filepath.Join("testdata", "hf", fx))
	}
	for _, p := range seeds {
		b, err := os.ReadFile(p)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		d, err := memDataset("fuzz.arrow", b, nil)
		if err != nil {
			return
		}
		if err := readAll(d, "fuzz.arrow"); err != nil {
			t.Fatal(err)
		}
	})
}
