package dataset

import (
	"encoding/binary"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestMapIndex: MapIndex decodes an index file's header and block table without reading a length when it has more
// than eagerCheckRows rows (a corrupt lengths block passes, Verify finds it), checks every length of a smaller one,
// refuses a file whose size is not the one its header implies, and Close unmaps it (twice is harmless; the entries
// stay).
func TestMapIndex(t *testing.T) {
	ix := bigIndex() // 2 blocks + 1000 rows
	good, err := ix.MarshalBinary()
	if err != nil {
		t.Fatal(err)
	}
	l := layoutOf(t, good)
	edit := func(f func(b []byte) []byte) []byte { return f(append([]byte(nil), good...)) }
	badBlock := edit(func(b []byte) []byte { b[l.lengthsAt+4*(BlockRows+5)] ^= 0x40; return b })
	cases := []struct {
		name  string
		b     []byte
		eager int64  // eagerCheckRows
		want  string // "" when MapIndex accepts it
	}{
		{"good, header only", good, 0, ""},
		{"good, checked in full", good, 1 << 20, ""},
		{"corrupt block, header only", badBlock, 0, ""},
		{"corrupt block, checked in full", badBlock, 1 << 20, "block 1 "},
		{"truncated", good[:len(good)-1], 0, "lengths in the"},
		{"one length short", good[:len(good)-4], 0, "lengths in the"},
		{"extra bytes", append(append([]byte(nil), good...), 0, 0, 0, 0), 0, "lengths in the"},
		{"more rows claimed", resealHeader(edit(func(b []byte) []byte {
			binary.LittleEndian.PutUint64(b[l.rowsAt:], uint64(ix.Rows())+1)
			return b
		}), l), 0, "lengths in the"},
		{"block table changed", edit(func(b []byte) []byte { b[l.tableAt+1] ^= 1; return b }), 0, "header checksum"},
		{"block table changed, resealed", resealHeader(edit(func(b []byte) []byte { b[l.tableAt+blockEntrySize] ^= 1; return b }), l), 0, "the block table"},
		{"empty", nil, 0, "magic"},
	}
	defer func(v int64) { eagerCheckRows = v }(eagerCheckRows)
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			eagerCheckRows = tc.eager
			path := filepath.Join(t.TempDir(), IndexFile)
			if err := os.WriteFile(path, tc.b, 0o600); err != nil {
				t.Fatal(err)
			}
			cerr := CheckIndexFile(path)
			mix, err := MapIndex(path)
			if tc.want != "" {
				if !errors.Is(err, ErrBadIndex) || !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), path) {
					t.Fatalf("MapIndex = %v; want ErrBadIndex naming %s and %q", err, path, tc.want)
				}
				if cerr == nil || cerr.Error() != err.Error() {
					t.Fatalf("CheckIndexFile = %v, MapIndex %v", cerr, err)
				}
				return
			}
			if err != nil || cerr != nil {
				t.Fatalf("MapIndex = %v, CheckIndexFile = %v", err, cerr)
			}
			if mix.Rows() != ix.Rows() || mix.Lengths[17] != 1<<20 || mix.RecordedFingerprint() != ix.Fingerprint() {
				t.Fatalf("mapped: %d rows, length 17 = %d, fingerprint %s", mix.Rows(), mix.Lengths[17], mix.RecordedFingerprint())
			}
			if verr := mix.Verify(); (verr != nil) != (&tc.b[0] == &badBlock[0]) {
				t.Errorf("Verify = %v", verr)
			}
			if err := mix.Close(); err != nil {
				t.Fatal(err)
			}
			if err := mix.Close(); err != nil || mix.Rows() != 0 || len(mix.Shards) != 3 || mix.Shards[2].Name != ix.Shards[2].Name {
				t.Fatalf("after Close: %v, %d rows, shards %d", err, mix.Rows(), len(mix.Shards))
			}
		})
	}
	if err := (&Index{}).Close(); err != nil {
		t.Errorf("Close of an index read into memory: %v", err)
	}
}

// TestIndexHeaderBound: a header whose shard entries would pass maxHeaderBytes is refused before they are decoded
// (what decoding allocates is bounded by the header, not by the file, which may be tens of GB).
func TestIndexHeaderBound(t *testing.T) {
	b, err := bigIndex().MarshalBinary()
	if err != nil {
		t.Fatal(err)
	}
	defer func(v uint64) { maxHeaderBytes = v }(maxHeaderBytes)
	for _, tc := range []struct {
		bound uint64
		ok    bool
	}{{1 << 31, true}, {uint64(layoutOf(t, b).rowsAt), true}, {200, false}, {40, false}} {
		maxHeaderBytes = tc.bound
		_, err := decodeIndex(b)
		if tc.ok != (err == nil) || (err != nil && (!errors.Is(err, ErrBadIndex) || !strings.Contains(err.Error(), "the header would pass"))) {
			t.Errorf("header bound %d: %v", tc.bound, err)
		}
	}
}
