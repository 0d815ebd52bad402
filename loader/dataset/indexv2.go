package dataset

// The upgrade path from gload.index format version 2 (header, shard entries, every row's length and a crc32c of
// the whole file): decoded in full, in memory, and rewritten as version 3 by `gload index DIR`.

import (
	"encoding/binary"
	"fmt"
	"hash/crc32"
)

// unmarshalIndexV2 decodes and fully validates a version-2 index (the upgrade path: `gload index DIR`, and Open,
// read it into memory and write version 3). Layout (little-endian):
//
//	"GLOADIX1" | version u32 (2) | tokenizer hash (u32 len, bytes) |
//	fingerprint [32]byte | shard count u32 |
//	per shard: name (u32 len, bytes) | size u64 | content SHA-256 [32]byte |
//	           rows u64 | tokens u64 | batch count u32 | batches (offset u64, first row u64)...
//	total rows u64 | zero padding to a multiple of 4 | lengths u32 × total rows |
//	crc32c u32 of everything before it
//
// Every count is checked against the data size before allocating. Lengths may alias b; the checksum is the
// version-2 trailer, so a freshness stamp written for the version-2 index still vouches for the shards.
func unmarshalIndexV2(b []byte) (*Index, error) {
	if len(b) < 8+4+4 || string(b[:8]) != indexMagic {
		return nil, fmt.Errorf("%w: no %s magic", ErrBadIndex, indexMagic)
	}
	if v := binary.LittleEndian.Uint32(b[8:]); v != 2 {
		return nil, fmt.Errorf("%w: version %d, not 2", ErrBadIndex, v)
	}
	if len(b) < 16 {
		return nil, fmt.Errorf("%w: truncated", ErrBadIndex)
	}
	body := b[:len(b)-4]
	want, got := binary.LittleEndian.Uint32(b[len(b)-4:]), crc32.Checksum(body, castagnoli)
	if want != got {
		return nil, fmt.Errorf("%w: checksum %08x, computed %08x", ErrBadIndex, want, got)
	}
	d := indexDecoder{b: body, p: 12}
	ix := &Index{checksum: got}
	ix.TokenizerHash = d.str(maxTokHashLen)
	var fp Digest
	d.digest(&fp)
	ix.Shards = d.shardEntries()
	rows := d.u64()
	for d.err == nil && d.p%4 != 0 {
		if d.u8() != 0 {
			d.fail("nonzero padding")
		}
	}
	if d.err == nil && rows != uint64(len(body)-d.p)/4 {
		d.fail(fmt.Sprintf("%d lengths in %d bytes", rows, len(body)-d.p))
	}
	if d.err != nil {
		return nil, d.err
	}
	if (len(body)-d.p)%4 != 0 {
		return nil, fmt.Errorf("%w: trailing bytes", ErrBadIndex)
	}
	ix.Lengths = uint32s(body[d.p:])
	if err := ix.validate(); err != nil {
		return nil, err
	}
	if c := ix.ComputeFingerprint(); c != fp {
		return nil, fmt.Errorf("%w: fingerprint %s recorded, %s computed from its entries", ErrBadIndex, fp, c)
	}
	ix.readFP = fp
	return ix, nil
}
