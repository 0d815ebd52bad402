package dataset

import (
	"bytes"
	"encoding/binary"
	"errors"
	"hash/crc32"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/gload/gload/bucket"
)

var (
	_ bucket.Lengths      = (*IndexLengths)(nil)
	_ bucket.Viewer       = (*IndexLengths)(nil)
	_ bucket.MaxLengther  = (*IndexLengths)(nil)
	_ bucket.LongestRower = (*IndexLengths)(nil)
)

// indexLayout gives the offsets of an encoded version-3 index: total rows, the block table, the header checksum
// and the lengths.
type indexLayout struct{ rowsAt, tableAt, crcAt, lengthsAt int }

func layoutOf(t testing.TB, b []byte) indexLayout {
	t.Helper()
	d := indexDecoder{b: b, p: 12}
	d.str(maxTokHashLen)
	var fp Digest
	d.digest(&fp)
	for range d.count(minShardEntry) {
		d.str(maxNameLen)
		d.p += 8 + 32 + 16
		d.p += 16 * d.count(16)
	}
	var l indexLayout
	l.rowsAt = d.p
	rows := d.u64()
	d.p += 4 + 4
	l.lengthsAt = int(d.u64())
	l.tableAt = d.p
	l.crcAt = d.p + int(NumBlocks(int64(rows)))*blockEntrySize
	if d.err != nil {
		t.Fatal(d.err)
	}
	return l
}

// resealHeader recomputes the header checksum of an edited version-3 encoding whose layout was l.
func resealHeader(b []byte, l indexLayout) []byte {
	b = bytes.Clone(b)
	binary.LittleEndian.PutUint32(b[l.crcAt:], crc32.Checksum(b[:l.crcAt], castagnoli))
	return b
}

// bigIndex is an index of three blocks (the last short) over three shards whose boundaries fall inside blocks and
// on one block boundary.
func bigIndex() *Index {
	rng := rand.New(rand.NewPCG(7, 7))
	n := 2*BlockRows + 1000
	lengths := make([]uint32, n)
	for i := range lengths {
		lengths[i] = uint32(rng.IntN(3000))
	}
	lengths[17] = 1 << 20 // the open histogram bucket
	ix := &Index{TokenizerHash: "t", Lengths: lengths}
	cuts := []int{0, 1000, BlockRows, n}
	for k := range 3 {
		var tok int64
		for _, l := range lengths[cuts[k]:cuts[k+1]] {
			tok += int64(l)
		}
		ix.Shards = append(ix.Shards, ShardEntry{Name: DataFileName(k, 3), Size: 1 << 30, ContentHash: Digest{byte(k)},
			Rows: int64(cuts[k+1] - cuts[k]), Tokens: tok, Batches: []BatchRef{{Offset: 8, FirstRow: 0}}})
	}
	return ix
}

func TestIndexV3Layout(t *testing.T) {
	for _, tc := range []struct {
		name string
		ix   *Index
	}{{"empty", &Index{}}, {"sample", sampleIndex()}, {"three_blocks", bigIndex()}} {
		t.Run(tc.name, func(t *testing.T) {
			b, err := tc.ix.MarshalBinary()
			if err != nil {
				t.Fatal(err)
			}
			l := layoutOf(t, b)
			rows := tc.ix.Rows()
			if l.lengthsAt%4096 != 0 || len(b) != l.lengthsAt+4*int(rows) || l.lengthsAt < l.crcAt+4 || l.lengthsAt-(l.crcAt+4) >= 4096 {
				t.Fatalf("layout %+v for %d rows in %d bytes", l, rows, len(b))
			}
			got, err := UnmarshalIndex(b)
			if err != nil {
				t.Fatal(err)
			}
			if got.NumBlocks() != NumBlocks(rows) {
				t.Fatalf("%d blocks", got.NumBlocks())
			}
			var tokens int64
			for blk := range got.NumBlocks() {
				s := got.Block(blk)
				want := summarize(tc.ix.Lengths[blk*BlockRows : blk*BlockRows+s.Rows])
				if s != want {
					t.Fatalf("block %d: %+v, want %+v", blk, s, want)
				}
				tokens += s.Tokens
			}
			var shardTok int64
			for _, s := range tc.ix.Shards {
				shardTok += s.Tokens
			}
			if tokens != shardTok {
				t.Fatalf("block tokens %d, shard tokens %d", tokens, shardTok)
			}
		})
	}
}

func TestHistBucket(t *testing.T) {
	for _, tc := range []struct {
		l    uint32
		want int
	}{{0, 0}, {1, 1}, {2, 2}, {3, 2}, {4, 3}, {8191, 13}, {8192, 14}, {16383, 14}, {16384, 15}, {1 << 31, 15}, {^uint32(0), 15}} {
		if got := HistBucket(tc.l); got != tc.want {
			t.Errorf("HistBucket(%d) = %d, want %d", tc.l, got, tc.want)
		}
	}
}

// TestIndexV3DecodeErrors: with valid header checksums, bad content is refused at decode (ErrBadIndex) — or, for
// what only the lengths can show, by Verify.
func TestIndexV3DecodeErrors(t *testing.T) {
	good, err := bigIndex().MarshalBinary()
	if err != nil {
		t.Fatal(err)
	}
	l := layoutOf(t, good)
	edit := func(f func(b []byte)) []byte {
		b := bytes.Clone(good)
		f(b)
		return resealHeader(b, l)
	}
	put32 := func(off int, v uint32) []byte {
		return edit(func(b []byte) { binary.LittleEndian.PutUint32(b[off:], v) })
	}
	put64 := func(off int, v uint64) []byte {
		return edit(func(b []byte) { binary.LittleEndian.PutUint64(b[off:], v) })
	}
	block := func(blk, field int) int { return l.tableAt + blk*blockEntrySize + field }
	for _, tc := range []struct {
		name   string
		b      []byte
		decode bool // decodeIndex accepts it; only Verify (the lengths) catches it
		old    bool
	}{
		{name: "version_future", b: put32(8, 4)},
		{name: "version_2", b: put32(8, 2), old: true},
		{name: "version_1", b: put32(8, 1), old: true},
		{name: "huge_shards", b: put32(12+4+1+32, 0xffffffff)},
		{name: "huge_tok_hash", b: put32(12, 0xfffffff0)},
		{name: "huge_rows", b: put64(l.rowsAt, 1<<62)},
		{name: "rows_1e10", b: put64(l.rowsAt, 10_000_000_000)},
		{name: "rows_max", b: put64(l.rowsAt, ^uint64(0))},
		{name: "rows_one_less", b: put64(l.rowsAt, uint64(2*BlockRows+999))},
		{name: "block_rows", b: put32(l.rowsAt+8, 1<<20)},
		{name: "hist_buckets", b: put32(l.rowsAt+12, 32)},
		{name: "lengths_offset_unaligned", b: put64(l.rowsAt+16, uint64(l.lengthsAt+4))},
		{name: "lengths_offset_past_end", b: put64(l.rowsAt+16, 1<<40)},
		{name: "lengths_offset_page_later", b: put64(l.rowsAt+16, uint64(l.lengthsAt+4096))},
		{name: "block_tokens", b: put64(block(0, 0), 12345)},
		{name: "block_tokens_moved", b: edit(func(b []byte) { // the same total, moved between two blocks of one shard run
			binary.LittleEndian.PutUint64(b[block(1, 0):], binary.LittleEndian.Uint64(b[block(1, 0):])+5)
			binary.LittleEndian.PutUint64(b[block(2, 0):], binary.LittleEndian.Uint64(b[block(2, 0):])-5)
		}), decode: true},
		{name: "block_max", b: put32(block(2, 8), 1)},
		{name: "block_hist", b: put32(block(1, 16+4*3), 7)},
		{name: "block_crc", b: put32(block(1, 12), 0xdeadbeef), decode: true},
		{name: "fingerprint", b: edit(func(b []byte) { b[12+4+1] ^= 1 }), decode: true},
		{name: "padding", b: edit(func(b []byte) { b[l.lengthsAt-1] = 1 })},
		{name: "length", b: edit(func(b []byte) { b[l.lengthsAt+4*BlockRows+3] ^= 1 }), decode: true},
		{name: "trailing", b: append(bytes.Clone(good), 0, 0, 0, 0)},
		{name: "header_crc", b: func() []byte { b := bytes.Clone(good); b[l.crcAt] ^= 1; return b }()},
		{name: "name_path", b: func() []byte {
			ix := bigIndex()
			ix.Shards[1].Name = "../x"
			b, _ := ix.marshalUnchecked()
			return b
		}()},
		{name: "shard_tokens_block_boundary", b: func() []byte { // shard 1 ends where block 0 does
			ix := bigIndex()
			ix.Shards[1].Tokens++
			ix.Shards[2].Tokens--
			b, _ := ix.marshalUnchecked()
			return b
		}()},
		{name: "shard_tokens_inside_block", b: func() []byte { // shard 0 ends inside block 0
			ix := bigIndex()
			ix.Shards[0].Tokens++
			ix.Shards[1].Tokens--
			b, _ := ix.marshalUnchecked()
			return b
		}(), decode: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, derr := decodeIndex(tc.b)
			_, uerr := UnmarshalIndex(tc.b)
			want := ErrBadIndex
			if tc.old {
				want = ErrOldIndex
			}
			if !errors.Is(uerr, want) {
				t.Fatalf("UnmarshalIndex: %v, want %v", uerr, want)
			}
			if tc.decode != (derr == nil) {
				t.Fatalf("decodeIndex: %v", derr)
			}
			if derr != nil && !errors.Is(derr, want) {
				t.Fatalf("decodeIndex: %v, want %v", derr, want)
			}
			if tc.old && !strings.Contains(uerr.Error(), "gload index DIR") {
				t.Errorf("old version error does not say how to upgrade: %v", uerr)
			}
		})
	}
	// Every truncation and every single-byte change of the header is refused at decode.
	for n := 0; n < len(good); n += max(1, min(n-l.lengthsAt, 4093)) {
		if _, err := decodeIndex(good[:n]); !errors.Is(err, ErrBadIndex) {
			t.Fatalf("truncated to %d: %v", n, err)
		}
	}
	b := bytes.Clone(good)
	for i := range l.lengthsAt {
		b[i] ^= 0x21
		if _, err := decodeIndex(b); err == nil {
			t.Fatalf("header byte %d flipped: decoded", i)
		}
		b[i] ^= 0x21
	}
}

// writeIndexFile writes ix as dir/gload.index and returns its path.
func writeIndexFile(t *testing.T, dir string, ix *Index) string {
	t.Helper()
	if err := WriteIndex(dir, ix); err != nil {
		t.Fatal(err)
	}
	return filepath.Join(dir, IndexFile)
}

// TestIndexLengthsCorruptBlock: a corrupt lengths block is found on first access, named with the index file; its
// rows read as 0 while the other blocks read correctly.
func TestIndexLengthsCorruptBlock(t *testing.T) {
	ix := bigIndex()
	path := writeIndexFile(t, t.TempDir(), ix)
	b, _ := os.ReadFile(path)
	l := layoutOf(t, b)
	b[l.lengthsAt+4*(BlockRows+5)] ^= 0x40 // row 65541, in block 1
	os.WriteFile(path, b, 0o644)
	mix, m, err := mapIndex(path)
	if err != nil {
		t.Fatalf("the header is intact, yet: %v", err)
	}
	defer unmapFile(m)
	ls := newIndexLengths(path, mix.Lengths, mix.table(), false)
	if ls.Len() != ix.Rows() || ls.Tokens() != ix.Shards[0].Tokens+ix.Shards[1].Tokens+ix.Shards[2].Tokens || ls.MaxLength() != 1<<20 {
		t.Fatalf("summary: %d rows, %d tokens, max %d", ls.Len(), ls.Tokens(), ls.MaxLength())
	}
	for _, i := range []int64{0, 17, BlockRows - 1, 2 * BlockRows, ix.Rows() - 1} {
		if got := ls.Length(i); got != ix.Lengths[i] {
			t.Errorf("Length(%d) = %d, want %d", i, got, ix.Lengths[i])
		}
	}
	if err := ls.Err(); err != nil {
		t.Fatalf("Err before block 1 was read: %v", err)
	}
	if got := ls.Length(BlockRows + 6); got != 0 {
		t.Errorf("row of the corrupt block: %d, want 0", got)
	}
	err = ls.Err()
	if !errors.Is(err, ErrBadIndex) || !strings.Contains(err.Error(), path) || !strings.Contains(err.Error(), "block 1 ") {
		t.Fatalf("Err = %v", err)
	}
	if ls.CheckAll() != err {
		t.Error("CheckAll reports another error")
	}
	if got := ls.Length(3); got != ix.Lengths[3] {
		t.Errorf("after the error, Length(3) = %d", got)
	}
	if err := mix.Verify(); !errors.Is(err, ErrBadIndex) || !strings.Contains(err.Error(), "block 1 ") {
		t.Errorf("Verify: %v", err)
	}
	if _, err := ReadIndex(filepath.Dir(path)); !errors.Is(err, ErrBadIndex) {
		t.Errorf("ReadIndex: %v", err)
	}
}

// TestIndexLengthsConcurrent: many goroutines read the rows of unchecked blocks at once (run with -race); every
// good row reads right, every row of the corrupt block reads 0, and the error is the same for all.
func TestIndexLengthsConcurrent(t *testing.T) {
	ix := bigIndex()
	path := writeIndexFile(t, t.TempDir(), ix)
	b, _ := os.ReadFile(path)
	l := layoutOf(t, b)
	b[l.lengthsAt+4*(2*BlockRows)] ^= 1 // block 2
	os.WriteFile(path, b, 0o644)
	mix, m, err := mapIndex(path)
	if err != nil {
		t.Fatal(err)
	}
	defer unmapFile(m)
	ls := newIndexLengths(path, mix.Lengths, mix.table(), false)
	var wg sync.WaitGroup
	errs := make(chan string, 16)
	for g := range 16 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(uint64(g), 1))
			for range 2000 {
				i := rng.Int64N(ls.Len())
				got, want := ls.Length(i), ix.Lengths[i]
				if i >= 2*BlockRows {
					want = 0
				}
				if got != want {
					errs <- "wrong length"
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for e := range errs {
		t.Fatal(e)
	}
	if err := ls.Err(); err == nil || !strings.Contains(err.Error(), "block 2 ") {
		t.Fatalf("Err = %v", err)
	}
}

// TestBlockTableAtScale: the block arithmetic and the O(shards + blocks) checks at 10^10 rows, with a block
// table and shard entries but no lengths.
func TestBlockTableAtScale(t *testing.T) {
	const rows = int64(10_000_000_000)
	nb := NumBlocks(rows)
	if nb != 152588 || blockRows(rows, nb-1) != rows-(nb-1)*BlockRows || blockRows(rows, nb-1) != 58368 || blockRows(rows, 0) != BlockRows {
		t.Fatalf("%d blocks, last of %d rows", nb, blockRows(rows, nb-1))
	}
	// Every row of length 3, except one row of 100000 tokens in block 99999.
	tab := blockTable{rows: rows, b: make([]byte, 0, nb*blockEntrySize)}
	for blk := range nb {
		r := blockRows(rows, blk)
		s := BlockSummary{Rows: r, Tokens: 3 * r, MaxLength: 3}
		s.Hist[HistBucket(3)] = uint32(r)
		if blk == 99999 {
			s.Tokens += 100000 - 3
			s.MaxLength = 100000
			s.Hist[HistBucket(3)]--
			s.Hist[HistBucket(100000)]++
		}
		tab.b = appendBlock(tab.b, s)
	}
	// Shards of 3·10^9, 4·10^9 and 3·10^9 rows: no boundary on a block boundary but the end.
	shards := []ShardEntry{
		{Name: "a", Rows: 3e9, Tokens: 9e9},
		{Name: "b", Rows: 4e9, Tokens: 12e9 + 100000 - 3},
		{Name: "c", Rows: 3e9, Tokens: 9e9},
	}
	tokens, maxLen, err := tab.checkTable(shards)
	if err != nil || tokens != 3*rows+100000-3 || maxLen != 100000 {
		t.Fatalf("checkTable: %d tokens, max %d, %v", tokens, maxLen, err)
	}
	shards[2].Tokens++
	if _, _, err := tab.checkTable(shards); !errors.Is(err, ErrBadIndex) {
		t.Fatalf("a token too many: %v", err)
	}
	shards[2].Tokens--
	// A shard boundary on a block boundary: the tokens of the blocks before it are checked against the shards'.
	aligned := []ShardEntry{{Name: "a", Rows: 100000 * BlockRows, Tokens: 3*100000*BlockRows + 100000 - 3}, {Name: "b", Rows: rows - 100000*BlockRows, Tokens: 3 * (rows - 100000*BlockRows)}}
	if _, _, err := tab.checkTable(aligned); err != nil {
		t.Fatal(err)
	}
	aligned[0].Tokens, aligned[1].Tokens = aligned[0].Tokens-1, aligned[1].Tokens+1 // the same total
	if _, _, err := tab.checkTable(aligned); !errors.Is(err, ErrBadIndex) {
		t.Fatalf("tokens moved across an aligned shard boundary: %v", err)
	}
	ls := newIndexLengths("x", nil, tab, false)
	if ls.Tokens() != tokens || ls.MaxLength() != 100000 || ls.NumBlocks() != nb || ls.Block(nb-1).Rows != 58368 {
		t.Fatalf("IndexLengths summaries: %d tokens, max %d, %d blocks", ls.Tokens(), ls.MaxLength(), ls.NumBlocks())
	}
}

// TestOpenLazyBlockCheck: Open of an index above eagerCheckRows reads no length; a corrupt block is reported by
// LengthSource (and Lengths) naming the file, and Verify (gload index) rebuilds the index from the shards.
func TestOpenLazyBlockCheck(t *testing.T) {
	defer func(v int64) { eagerCheckRows = v }(eagerCheckRows)
	eagerCheckRows = 0
	dir := t.TempDir()
	rows := genRows(40, 0, 10, 3)
	writeDataset(t, dir, rows, WriterOptions{RowsPerBatch: 6}, 15)
	path := filepath.Join(dir, IndexFile)
	b, _ := os.ReadFile(path)
	l := layoutOf(t, b)
	i := 0
	for len(rows[i].ids) == 0 {
		i++
	}
	b[l.lengthsAt+4*i]++
	os.WriteFile(path, b, 0o644)
	d, err := Open(dir, OpenOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	if !d.IndexUsed() {
		t.Fatal("index not used: Open read the lengths")
	}
	var tok int64
	for _, r := range rows {
		tok += int64(len(r.ids))
	}
	if d.TotalTokens() != tok {
		t.Errorf("TotalTokens %d, want %d (from the block table)", d.TotalTokens(), tok)
	}
	if got := d.LengthSource().Length(int64(i)); got != 0 {
		t.Errorf("Length(%d) = %d from a corrupt block", i, got)
	}
	if err := d.LengthSource().Err(); !errors.Is(err, ErrBadIndex) || !strings.Contains(err.Error(), path) {
		t.Errorf("Err = %v", err)
	}
	d2 := checkRows(t, dir, rows, nil, OpenOptions{Verify: true, WriteIndex: true})
	if d2.IndexUsed() || d2.LengthSource().Err() != nil {
		t.Errorf("Verify: IndexUsed %v, Err %v", d2.IndexUsed(), d2.LengthSource().Err())
	}
	if _, err := ReadIndex(dir); err != nil {
		t.Errorf("the rebuilt index: %v", err)
	}
}

// marshalV2 encodes ix in format version 2 (the upgrade tests' input).
func marshalV2(ix *Index) []byte {
	b := appendUint32s(v2Header(ix, ix.ComputeFingerprint()), ix.Lengths)
	return binary.LittleEndian.AppendUint32(b, crc32.Checksum(b, castagnoli))
}

// v2Header is a version-2 encoding of ix up to its lengths.
func v2Header(ix *Index, fp Digest) []byte {
	b := append([]byte(indexMagic), 2, 0, 0, 0)
	b = binary.LittleEndian.AppendUint32(b, uint32(len(ix.TokenizerHash)))
	b = append(b, ix.TokenizerHash...)
	b = append(b, fp[:]...)
	b = binary.LittleEndian.AppendUint32(b, uint32(len(ix.Shards)))
	for _, s := range ix.Shards {
		b = binary.LittleEndian.AppendUint32(b, uint32(len(s.Name)))
		b = append(b, s.Name...)
		b = binary.LittleEndian.AppendUint64(b, uint64(s.Size))
		b = append(b, s.ContentHash[:]...)
		b = binary.LittleEndian.AppendUint64(b, uint64(s.Rows))
		b = binary.LittleEndian.AppendUint64(b, uint64(s.Tokens))
		b = binary.LittleEndian.AppendUint32(b, uint32(len(s.Batches)))
		for _, br := range s.Batches {
			b = binary.LittleEndian.AppendUint64(b, uint64(br.Offset))
			b = binary.LittleEndian.AppendUint64(b, uint64(br.FirstRow))
		}
	}
	b = binary.LittleEndian.AppendUint64(b, uint64(len(ix.Lengths)))
	for len(b)%4 != 0 {
		b = append(b, 0)
	}
	return b
}

// TestIndexV2Upgrade: a version-2 index is refused by ReadIndex with the way to upgrade; Open reads it in full
// without scanning the shards (its stamp still vouches for them), keeps the fingerprint, and with WriteIndex (what
// gload index does) rewrites it as version 3.
func TestIndexV2Upgrade(t *testing.T) {
	dir := t.TempDir()
	rows := genRows(50, 0, 12, 9)
	writeDataset(t, dir, rows, WriterOptions{RowsPerBatch: 7, TokenizerHash: "tok"}, 20)
	v3, _ := ReadIndex(dir)
	fp := v3.Fingerprint()
	v2 := marshalV2(v3)
	if got, err := unmarshalIndexV2(v2); err != nil || got.Fingerprint() != fp {
		t.Fatalf("the v2 encoding does not decode: %v", err)
	}
	path := filepath.Join(dir, IndexFile)
	os.WriteFile(path, v2, 0o644)
	// The stamp Finalize wrote vouches for the v3 index; one written for the v2 index still vouches after the upgrade.
	if err := stampFiles(dir, crc32.Checksum(v2[:len(v2)-4], castagnoli), []string{DataFileName(0, 3), DataFileName(1, 3), DataFileName(2, 3)}); err != nil {
		t.Fatal(err)
	}
	_, err := ReadIndex(dir)
	if !errors.Is(err, ErrOldIndex) || !strings.Contains(err.Error(), "gload index DIR") || !strings.Contains(err.Error(), "version 2") {
		t.Fatalf("ReadIndex of v2: %v", err)
	}
	d := checkRows(t, dir, rows, nil, OpenOptions{})
	if !d.IndexUsed() || !d.IndexUpgraded() || d.ShardsScanned() != 0 || d.ShardsVerified() != 0 || d.Fingerprint() != fp || d.TokenizerHash() != "tok" {
		t.Fatalf("v2 open: used %v, upgraded %v, %d scanned, %d hashed, fingerprint %s (want %s)",
			d.IndexUsed(), d.IndexUpgraded(), d.ShardsScanned(), d.ShardsVerified(), d.Fingerprint(), fp)
	}
	if b, _ := os.ReadFile(path); !bytes.Equal(b, v2) {
		t.Fatal("rewritten without WriteIndex")
	}
	d = checkRows(t, dir, rows, nil, OpenOptions{WriteIndex: true, Verify: true})
	if !d.IndexUsed() || d.ShardsScanned() != 0 || d.Fingerprint() != fp {
		t.Fatalf("upgrade: used %v, %d scanned, fingerprint %s", d.IndexUsed(), d.ShardsScanned(), d.Fingerprint())
	}
	got, err := ReadIndex(dir)
	if err != nil || got.Fingerprint() != fp {
		t.Fatalf("after the upgrade: %v", err)
	}
	if b, _ := os.ReadFile(path); !bytes.Equal(b, mustMarshal(t, v3)) {
		t.Error("the upgraded index differs from the one Finalize writes")
	}
	if d := checkRows(t, dir, rows, nil, OpenOptions{}); d.ShardsVerified() != 0 || d.IndexUpgraded() {
		t.Errorf("after the upgrade: %d shards hashed, upgraded %v", d.ShardsVerified(), d.IndexUpgraded())
	}
}

func mustMarshal(t *testing.T, ix *Index) []byte {
	t.Helper()
	b, err := ix.MarshalBinary()
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestStaleShardWithCorruptIndex: when some shards are re-indexed, the lengths of the others are copied out of
// the mapped index into a new one; a corrupt block there is found first (the whole index is rebuilt), never
// sealed into the new index with fresh checksums.
func TestStaleShardWithCorruptIndex(t *testing.T) {
	defer func(v int64) { eagerCheckRows = v }(eagerCheckRows)
	eagerCheckRows = 0
	dir := t.TempDir()
	rows := genRows(60, 0, 10, 4)
	writeDataset(t, dir, rows, WriterOptions{RowsPerBatch: 8}, 30)
	path := filepath.Join(dir, IndexFile)
	b, _ := os.ReadFile(path)
	l := layoutOf(t, b)
	b[l.lengthsAt+4*3] += 7 // row 3, in shard 0
	os.WriteFile(path, b, 0o644)
	os.Rename(filepath.Join(dir, DataFileName(1, 2)), filepath.Join(dir, "moved.arrow"))
	os.WriteFile(filepath.Join(dir, StateFile), []byte(`{"_data_files": [{"filename": "data-00000-of-00002.arrow"}, {"filename": "moved.arrow"}]}`), 0o644)
	d := checkRows(t, dir, rows, nil, OpenOptions{WriteIndex: true})
	if d.ShardsScanned() != 2 || d.Length(3) != len(rows[3].ids) || d.LengthSource().Err() != nil {
		t.Fatalf("%d shards scanned, Length(3) = %d (want %d), Err %v", d.ShardsScanned(), d.Length(3), len(rows[3].ids), d.LengthSource().Err())
	}
	if _, err := ReadIndex(dir); err != nil {
		t.Fatalf("the rewritten index: %v", err)
	}
}
