package dataset

import (
	"bytes"
	"encoding/binary"
	"errors"
	"hash/crc32"
	"reflect"
	"testing"
)

func sampleIndex() *Index {
	return &Index{
		TokenizerHash: "sha256:abc",
		Shards: []ShardEntry{
			{Name: "data-00000-of-00003.arrow", Size: 5000, ModTime: 1700000000123456789, FooterHash: 0x1234, ContentHash: 0x99,
				Rows: 3, Tokens: 6, Batches: []BatchRef{{Offset: 400, FirstRow: 0}, {Offset: 900, FirstRow: 2}}},
			{Name: "data-00001-of-00003.arrow", Size: 300, ModTime: -5, FooterHash: 1},
			{Name: "data-00002-of-00003.arrow", Size: 800, ModTime: 7, FooterHash: 2, Rows: 2, Tokens: 4000000000,
				Batches: []BatchRef{{Offset: 200, FirstRow: 0}}},
		},
		Lengths: []uint32{1, 2, 3, 2000000000, 2000000000},
	}
}

func TestIndexRoundTrip(t *testing.T) {
	for _, ix := range []*Index{
		{},
		{TokenizerHash: "x", Lengths: []uint32{}},
		sampleIndex(),
	} {
		b, err := ix.MarshalBinary()
		if err != nil {
			t.Fatal(err)
		}
		got, err := UnmarshalIndex(b)
		if err != nil {
			t.Fatal(err)
		}
		b2, _ := got.MarshalBinary()
		if !bytes.Equal(b, b2) || got.TokenizerHash != ix.TokenizerHash || len(got.Shards) != len(ix.Shards) ||
			got.Fingerprint() != ix.Fingerprint() || got.Rows() != ix.Rows() {
			t.Errorf("round trip of %+v gave %+v", ix, got)
		}
		if len(ix.Shards) > 0 && !reflect.DeepEqual(got.Shards, ix.Shards) {
			t.Errorf("shards %+v, want %+v", got.Shards, ix.Shards)
		}
	}
}

func TestIndexFingerprint(t *testing.T) {
	base := sampleIndex().Fingerprint()
	for name, mutate := range map[string]func(*ShardEntry){
		"name":   func(e *ShardEntry) { e.Name = "other.arrow" },
		"size":   func(e *ShardEntry) { e.Size++ },
		"mtime":  func(e *ShardEntry) { e.ModTime++ },
		"footer": func(e *ShardEntry) { e.FooterHash++ },
	} {
		ix := sampleIndex()
		mutate(&ix.Shards[1])
		if ix.Fingerprint() == base {
			t.Errorf("fingerprint ignores %s", name)
		}
	}
	ix := sampleIndex()
	ix.Lengths[0], ix.Shards[0].ContentHash, ix.TokenizerHash = 9, 1, ""
	if ix.Fingerprint() != base {
		t.Error("fingerprint depends on more than name, size, mtime and footer")
	}
}

// reseal recomputes the checksum of an edited index encoding.
func reseal(b []byte) []byte {
	b = bytes.Clone(b)
	binary.LittleEndian.PutUint32(b[len(b)-4:], crc32.Checksum(b[:len(b)-4], castagnoli))
	return b
}

func TestIndexDecodeErrors(t *testing.T) {
	good, _ := sampleIndex().MarshalBinary()
	for n := range len(good) {
		if _, err := UnmarshalIndex(good[:n]); !errors.Is(err, ErrBadIndex) {
			t.Fatalf("truncated to %d: %v", n, err)
		}
	}
	for i := range good {
		bad := bytes.Clone(good)
		bad[i] ^= 0x10
		if _, err := UnmarshalIndex(bad); !errors.Is(err, ErrBadIndex) {
			t.Fatalf("byte %d flipped: %v", i, err)
		}
	}
	// Valid checksums over bad content: counts and consistency are still checked.
	put32 := func(off int, v uint32) []byte {
		b := bytes.Clone(good)
		binary.LittleEndian.PutUint32(b[off:], v)
		return reseal(b)
	}
	nameAt := 16 + 4 + len("sha256:abc")
	cases := map[string][]byte{
		"version":       put32(8, 2),
		"huge_shards":   put32(12, 0xffffffff),
		"huge_tok_hash": put32(16, 0xfffffff0),
		"huge_name":     put32(nameAt, 0xffffff00),
		"huge_batches":  put32(nameAt+4+len("data-00000-of-00003.arrow")+48, 0x7fffffff),
		"tokens_sum": func() []byte {
			ix := sampleIndex()
			ix.Lengths[0] = 5
			b, _ := (&Index{TokenizerHash: ix.TokenizerHash, Shards: ix.Shards, Lengths: ix.Lengths}).marshalUnchecked()
			return b
		}(),
		"batch_order": func() []byte {
			ix := sampleIndex()
			ix.Shards[0].Batches[1].Offset = 100
			b, _ := ix.marshalUnchecked()
			return b
		}(),
		"name_path": func() []byte {
			ix := sampleIndex()
			ix.Shards[0].Name = "../../etc/x"
			b, _ := ix.marshalUnchecked()
			return b
		}(),
	}
	for name, b := range cases {
		if _, err := UnmarshalIndex(b); !errors.Is(err, ErrBadIndex) {
			t.Errorf("%s: %v", name, err)
		}
	}
}
