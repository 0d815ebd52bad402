package dataset

import (
	"bytes"
	"encoding/binary"
	"errors"
	"hash/crc32"
	"reflect"
	"strings"
	"testing"
)

func sampleIndex() *Index {
	return &Index{
		TokenizerHash: "sha256:abc",
		Shards: []ShardEntry{
			{Name: "data-00000-of-00003.arrow", Size: 5000, ContentHash: Digest{0x99, 1},
				Rows: 3, Tokens: 6, Batches: []BatchRef{{Offset: 400, FirstRow: 0}, {Offset: 900, FirstRow: 2}}},
			{Name: "data-00001-of-00003.arrow", Size: 300, ContentHash: Digest{1}},
			{Name: "data-00002-of-00003.arrow", Size: 800, ContentHash: Digest{2}, Rows: 2, Tokens: 4000000000,
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

// TestIndexFingerprint: the fingerprint follows the shards' content hashes, their
// order and the row lengths, and nothing else.
func TestIndexFingerprint(t *testing.T) {
	base := sampleIndex().Fingerprint()
	for name, mutate := range map[string]func(*Index){
		"content_hash": func(ix *Index) { ix.Shards[1].ContentHash[31] ^= 1 },
		"order":        func(ix *Index) { ix.Shards[0], ix.Shards[2] = ix.Shards[2], ix.Shards[0] },
		"length":       func(ix *Index) { ix.Lengths[0]++ },
		"rows_split":   func(ix *Index) { ix.Shards[0].Rows, ix.Shards[1].Rows = 2, 1 },
	} {
		ix := sampleIndex()
		mutate(ix)
		if ix.Fingerprint() == base {
			t.Errorf("fingerprint ignores %s", name)
		}
	}
	ix := sampleIndex()
	ix.TokenizerHash = ""
	for k := range ix.Shards {
		ix.Shards[k].Name = "renamed-" + ix.Shards[k].Name
		ix.Shards[k].Size += 10
		for j := range ix.Shards[k].Batches {
			ix.Shards[k].Batches[j].Offset += 8
		}
	}
	if ix.Fingerprint() != base {
		t.Error("fingerprint depends on names, sizes, batch offsets or the tokenizer hash")
	}
	if len(base) != 32 {
		t.Errorf("fingerprint %q: want 32 hex digits", base)
	}
}

// TestIndexV1Refused: an index of format version 1 is not misread; the error
// says how to rewrite it.
func TestIndexV1Refused(t *testing.T) {
	b, _ := sampleIndex().MarshalBinary()
	binary.LittleEndian.PutUint32(b[8:], 1)
	_, err := UnmarshalIndex(reseal(b))
	if !errors.Is(err, ErrOldIndex) || !strings.Contains(err.Error(), "gload index DIR") {
		t.Fatalf("v1 index: %v", err)
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
	shardsAt := 12 + 4 + len("sha256:abc") + 32
	nameAt := shardsAt + 4
	cases := map[string][]byte{
		"version":       put32(8, 3),
		"huge_shards":   put32(shardsAt, 0xffffffff),
		"huge_tok_hash": put32(12, 0xfffffff0),
		"huge_name":     put32(nameAt, 0xffffff00),
		"huge_batches":  put32(nameAt+4+len("data-00000-of-00003.arrow")+8+32+16, 0x7fffffff),
		"fingerprint": func() []byte {
			b := bytes.Clone(good)
			b[shardsAt-1] ^= 1
			return reseal(b)
		}(),
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
