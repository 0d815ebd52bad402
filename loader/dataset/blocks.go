package dataset

// The block table of gload.index (format version 3): one fixed-size summary per block of BlockRows consecutive
// rows, enough to plan and to describe a dataset without reading its per-row lengths, and the crc32c that checks
// a block's lengths when they are first read from the memory-mapped index.

import (
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"math/bits"
)

const (
	// BlockRows is the rows of one block of the index's block table (bucket.LazyBlockRows): block b holds rows
	// [b·BlockRows, min((b+1)·BlockRows, rows)); only the last block may be shorter.
	BlockRows = 1 << blockBits
	blockBits = 16
	// HistBuckets is the number of buckets of a block's length histogram (see HistBucket).
	HistBuckets = 16
	// blockEntrySize is the encoded size of one block: tokens u64 | max length u32 | crc32c u32 | histogram u32 × 16.
	blockEntrySize = 8 + 4 + 4 + 4*HistBuckets
	// lengthsAlign is the file offset alignment of the lengths array, so that it can be mapped in place.
	lengthsAlign = 4096
)

// BlockSummary describes one block of rows of an index.
type BlockSummary struct {
	Rows      int64  // rows in the block: BlockRows, or fewer for the dataset's last block
	Tokens    int64  // sum of the rows' lengths
	MaxLength uint32 // the longest row
	// Hist[k] counts the rows whose length l has HistBucket(l) == k.
	Hist [HistBuckets]uint32
	// CRC is the crc32c (Castagnoli) of the block's lengths as little-endian u32s.
	CRC uint32
}

// HistBucket is the length histogram bucket of a row of l tokens: 0 for l = 0, k for 2^(k−1) ≤ l < 2^k
// (1 ≤ k ≤ 14), and 15 for l ≥ 2^14.
func HistBucket(l uint32) int {
	return min(bits.Len32(l), HistBuckets-1)
}

// histLow is the smallest length in bucket k.
func histLow(k int) uint64 {
	if k == 0 {
		return 0
	}
	return 1 << (k - 1)
}

// NumBlocks is the number of blocks of an index of rows rows.
func NumBlocks(rows int64) int64 { return (rows + BlockRows - 1) >> blockBits }

// blockRows is the row count of block b of an index of rows rows.
func blockRows(rows, b int64) int64 { return min(rows-b<<blockBits, BlockRows) }

// summarize computes the summary of one block's lengths.
func summarize(lengths []uint32) BlockSummary {
	s := BlockSummary{Rows: int64(len(lengths))}
	for _, l := range lengths {
		s.Tokens += int64(l)
		s.MaxLength = max(s.MaxLength, l)
		s.Hist[HistBucket(l)]++
	}
	s.CRC = lengthsCRC(lengths)
	return s
}

// lengthsCRC is the crc32c of lengths encoded little-endian.
func lengthsCRC(lengths []uint32) uint32 {
	if hostLittleEndian {
		return crc32.Checksum(uint32Bytes(lengths), castagnoli)
	}
	var crc uint32
	buf := make([]byte, 0, 4096)
	for i := 0; i < len(lengths); i += 1024 {
		buf = appendUint32s(buf[:0], lengths[i:min(i+1024, len(lengths))])
		crc = crc32.Update(crc, castagnoli, buf)
	}
	return crc
}

// appendBlock appends the encoding of s to dst.
func appendBlock(dst []byte, s BlockSummary) []byte {
	dst = binary.LittleEndian.AppendUint64(dst, uint64(s.Tokens))
	dst = binary.LittleEndian.AppendUint32(dst, s.MaxLength)
	dst = binary.LittleEndian.AppendUint32(dst, s.CRC)
	for _, h := range s.Hist {
		dst = binary.LittleEndian.AppendUint32(dst, h)
	}
	return dst
}

// blockTable is an encoded block table (blockEntrySize bytes per block) over rows rows: a view of a mapped index,
// or computed from lengths in memory.
type blockTable struct {
	b    []byte
	rows int64
}

// computeBlocks builds the block table of lengths (O(rows)).
func computeBlocks(lengths []uint32) blockTable {
	n := int64(len(lengths))
	t := blockTable{rows: n, b: make([]byte, 0, NumBlocks(n)*blockEntrySize)}
	for b := int64(0); b < NumBlocks(n); b++ {
		t.b = appendBlock(t.b, summarize(lengths[b<<blockBits:b<<blockBits+blockRows(n, b)]))
	}
	return t
}

func (t blockTable) len() int64 { return int64(len(t.b)) / blockEntrySize }

// at decodes block b's summary.
func (t blockTable) at(b int64) BlockSummary {
	e := t.b[b*blockEntrySize : (b+1)*blockEntrySize]
	s := BlockSummary{
		Rows:      blockRows(t.rows, b),
		Tokens:    int64(binary.LittleEndian.Uint64(e)),
		MaxLength: binary.LittleEndian.Uint32(e[8:]),
		CRC:       binary.LittleEndian.Uint32(e[12:]),
	}
	for k := range s.Hist {
		s.Hist[k] = binary.LittleEndian.Uint32(e[16+4*k:])
	}
	return s
}

// check validates block b's summary on its own (no lengths read): the histogram counts the block's rows, the
// maximum is in the histogram's highest bucket, and the tokens lie between what the histogram allows.
func (s BlockSummary) check() error {
	if s.Tokens < 0 {
		return fmt.Errorf("%d tokens", s.Tokens)
	}
	var n, low uint64
	top := -1
	for k, h := range s.Hist {
		n += uint64(h)
		low += uint64(h) * histLow(k)
		if h > 0 {
			top = k
		}
	}
	switch {
	case n != uint64(s.Rows):
		return fmt.Errorf("histogram counts %d rows, the block has %d", n, s.Rows)
	case top != HistBucket(s.MaxLength):
		return fmt.Errorf("longest row %d tokens, histogram's highest bucket %d", s.MaxLength, top)
	case uint64(s.Tokens) < low || uint64(s.Tokens) < uint64(s.MaxLength) ||
		uint64(s.Tokens) > uint64(s.Rows)*uint64(s.MaxLength):
		return fmt.Errorf("%d tokens in %d rows of at most %d tokens (histogram: at least %d)", s.Tokens, s.Rows, s.MaxLength, low)
	}
	return nil
}

// checkTable validates the table against the shard entries in O(shards + blocks): every block on its own, the
// sum of the blocks' tokens against the shards' where a shard boundary falls on a block boundary, and the
// dataset's total. It returns the total tokens and the longest row.
func (t blockTable) checkTable(shards []ShardEntry) (tokens int64, maxLen uint32, err error) {
	n := t.len()
	if n != NumBlocks(t.rows) {
		return 0, 0, fmt.Errorf("%w: %d blocks for %d rows", ErrBadIndex, n, t.rows)
	}
	var blockTok int64 // tokens of blocks [0, b)
	b := int64(0)
	advance := func(to int64) error { // add blocks up to (not including) block to
		for ; b < to; b++ {
			s := t.at(b)
			if err := s.check(); err != nil {
				return fmt.Errorf("%w: block %d (rows %d to %d): %v", ErrBadIndex, b, b<<blockBits, b<<blockBits+s.Rows, err)
			}
			if s.Tokens > maxTokens-blockTok {
				return fmt.Errorf("%w: block %d: token count overflows", ErrBadIndex, b)
			}
			blockTok += s.Tokens
			maxLen = max(maxLen, s.MaxLength)
		}
		return nil
	}
	var row, shardTok int64
	for _, s := range shards {
		row += s.Rows
		if row > t.rows || s.Rows < 0 {
			return 0, 0, fmt.Errorf("%w: shards hold more than the %d rows", ErrBadIndex, t.rows)
		}
		if s.Tokens > maxTokens-shardTok {
			return 0, 0, fmt.Errorf("%w: shard %s: token count overflows", ErrBadIndex, s.Name)
		}
		shardTok += s.Tokens
		if row%BlockRows != 0 && row != t.rows {
			continue
		}
		if err := advance(NumBlocks(row)); err != nil {
			return 0, 0, err
		}
		if blockTok != shardTok {
			return 0, 0, fmt.Errorf("%w: shards up to %s hold %d tokens in their first %d rows, the block table %d",
				ErrBadIndex, s.Name, shardTok, row, blockTok)
		}
	}
	if err := advance(n); err != nil {
		return 0, 0, err
	}
	if blockTok != shardTok {
		return 0, 0, fmt.Errorf("%w: shards hold %d tokens, the block table %d", ErrBadIndex, shardTok, blockTok)
	}
	return blockTok, maxLen, nil
}

// maxTokens bounds token sums (no overflow of int64).
const maxTokens = int64(^uint64(0) >> 1)
