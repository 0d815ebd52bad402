package dataset

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"os"
	"path/filepath"
	"strings"
	"unicode/utf8"

	"github.com/gload/gload/internal/safename"
)

// IndexFile is the name of gload's sidecar index in a dataset directory.
const IndexFile = "gload.index"

// IndexVersion is the gload.index format version this package writes and reads.
// Versions 1 (size, mtime and footer hashes as identity) and 2 (no block table;
// the whole file read and checked at open) are refused by ReadIndex with
// ErrOldIndex; `gload index DIR` rewrites them (Open reads a valid version 2 in
// full and upgrades it in memory, a version 1 it rebuilds from the shards).
const IndexVersion = 3

const (
	indexMagic    = "GLOADIX1" // the file type; the version follows
	maxNameLen    = 4096
	maxTokHashLen = 4096
	// minShardEntry is the smallest encoded shard entry (empty name, no batches).
	minShardEntry = 4 + 8 + 32 + 2*8 + 4
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// Index is the decoded content of gload.index. It holds content only — no
// times, paths or inode numbers — so the same shards always give the same
// bytes, whatever the machine, directory, time or worker count that wrote them.
//
// Layout of version 3 (little-endian):
//
//	"GLOADIX1" | version u32 (3) | tokenizer hash (u32 len, bytes) |
//	fingerprint [32]byte (ComputeFingerprint) | shard count u32 |
//	per shard: name (u32 len, bytes) | size u64 | content SHA-256 [32]byte |
//	           rows u64 | tokens u64 | batch count u32 | batches (offset u64, first row u64)...
//	total rows u64 | block rows u32 (65536) | histogram buckets u32 (16) |
//	lengths offset u64 |
//	per block (⌈rows / 65536⌉ of them): tokens u64 | longest row u32 |
//	           crc32c of the block's lengths u32 | histogram u32 × 16 (see HistBucket) |
//	crc32c u32 of everything before it (the header checksum) |
//	zero padding up to the lengths offset: the header's end rounded up to a multiple of 4096 |
//	lengths u32 × total rows (the file ends there)
//
// Opening a dataset maps the file and reads the header and block table only
// (O(shards + blocks)); a block's lengths are checked against its crc32c when
// they are first read (Dataset.LengthSource). ReadIndex and UnmarshalIndex read
// and check everything.
//
// Every shard entry is self-contained (its rows' lengths are the next Rows
// entries of Lengths), so indexes of separately written parts are joined by
// concatenating shard entries and length arrays.
type Index struct {
	TokenizerHash string
	Shards        []ShardEntry
	Lengths       []uint32 // tokens per row over all shards, in shard order

	blocks   blockTable // the block table: read from the file, or computed by the encoder (nil b until then)
	checksum uint32     // the header checksum of the encoding this index was read from or last encoded to
	readFP   Digest     // the fingerprint recorded in the encoding this index was read from
	mapping  []byte     // MapIndex: the file's mapping that Lengths and blocks view, unmapped by Close
}

// ShardEntry describes one shard file in an Index.
type ShardEntry struct {
	Name        string // file name inside the dataset directory
	Size        int64  // file size in bytes
	ContentHash Digest // SHA-256 of the whole file
	Rows        int64
	Tokens      int64
	Batches     []BatchRef // record batches holding at least one row, in file order
}

// BatchRef locates one record batch: the byte offset of its IPC message in
// the shard file and the shard-local index of its first row.
type BatchRef struct {
	Offset   int64
	FirstRow int64
}

// Fingerprint is the printed content fingerprint (FingerprintString of ComputeFingerprint).
func (ix *Index) Fingerprint() string { return FingerprintString(ix.ComputeFingerprint()) }

// Checksum is the header checksum of the encoding ix was read from or last encoded to.
func (ix *Index) Checksum() uint32 { return ix.checksum }

// Rows returns the number of rows over all shards.
func (ix *Index) Rows() int64 { return int64(len(ix.Lengths)) }

// NumBlocks is the number of blocks of BlockRows rows (the last may be shorter).
func (ix *Index) NumBlocks() int64 { return NumBlocks(ix.Rows()) }

// Block returns the summary of block b (0 ≤ b < NumBlocks): from the block table when ix was decoded or
// encoded, else computed from Lengths.
func (ix *Index) Block(b int64) BlockSummary {
	if ix.blocks.b != nil && ix.blocks.rows == ix.Rows() {
		return ix.blocks.at(b)
	}
	n := ix.Rows()
	return summarize(ix.Lengths[b<<blockBits : b<<blockBits+blockRows(n, b)])
}

// table returns the block table, computing it from Lengths when ix has none yet.
func (ix *Index) table() blockTable {
	if ix.blocks.b == nil || ix.blocks.rows != ix.Rows() {
		ix.blocks = computeBlocks(ix.Lengths)
	}
	return ix.blocks
}

// MarshalBinary encodes the index.
func (ix *Index) MarshalBinary() ([]byte, error) {
	if err := ix.validate(); err != nil {
		return nil, err
	}
	return ix.marshalUnchecked()
}

func (ix *Index) marshalUnchecked() ([]byte, error) {
	h := ix.encodeHeader()
	return appendUint32s(append(make([]byte, 0, len(h)+4*len(ix.Lengths)), h...), ix.Lengths), nil
}

// encodeHeader encodes everything up to the lengths array (header, shard entries, block table, header checksum,
// padding), computing the block table and fingerprint from Lengths (O(rows)), and sets ix's checksum.
func (ix *Index) encodeHeader() []byte {
	fp := ix.ComputeFingerprint()
	tab := computeBlocks(ix.Lengths) // never a table decoded before: the caller may have changed Lengths
	ix.blocks = tab
	return ix.encodeHeaderWith(fp, tab)
}

// encodeHeaderWith is encodeHeader with the fingerprint and the block table (over tab.rows rows) given.
func (ix *Index) encodeHeaderWith(fp Digest, tab blockTable) []byte {
	n := 8 + 4 + 4 + len(ix.TokenizerHash) + 32 + 4 + 8 + 4 + 4 + 8 + len(tab.b) + 4
	for _, s := range ix.Shards {
		n += 4 + len(s.Name) + 8 + 32 + 2*8 + 4 + 16*len(s.Batches)
	}
	off := alignUp(n)
	b := make([]byte, 0, off)
	b = append(b, indexMagic...)
	b = binary.LittleEndian.AppendUint32(b, IndexVersion)
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
	b = binary.LittleEndian.AppendUint64(b, uint64(tab.rows))
	b = binary.LittleEndian.AppendUint32(b, BlockRows)
	b = binary.LittleEndian.AppendUint32(b, HistBuckets)
	b = binary.LittleEndian.AppendUint64(b, uint64(off))
	b = append(b, tab.b...)
	ix.checksum = crc32.Checksum(b, castagnoli)
	ix.readFP = fp
	b = binary.LittleEndian.AppendUint32(b, ix.checksum)
	return append(b, make([]byte, off-len(b))...)
}

// alignUp rounds n up to a multiple of lengthsAlign.
func alignUp(n int) int { return (n + lengthsAlign - 1) / lengthsAlign * lengthsAlign }

// validateEntries checks what an index can check without its lengths: names, batch tables, and that the shards
// hold rows rows.
func (ix *Index) validateEntries(rows int64) error {
	if len(ix.TokenizerHash) > maxTokHashLen {
		return fmt.Errorf("%w: tokenizer hash of %d bytes", ErrBadIndex, len(ix.TokenizerHash))
	}
	var row int64
	seen := make(map[string]bool, len(ix.Shards))
	for i, s := range ix.Shards {
		if err := checkFileName(s.Name); err != nil {
			return fmt.Errorf("%w: shard %d: %w", ErrBadIndex, i, err)
		}
		if seen[s.Name] {
			return fmt.Errorf("%w: shard %s listed twice", ErrBadIndex, s.Name)
		}
		seen[s.Name] = true
		if s.Size < 0 || s.Rows < 0 || s.Tokens < 0 {
			return fmt.Errorf("%w: shard %s: negative size, rows or tokens", ErrBadIndex, s.Name)
		}
		if s.Rows > rows-row {
			return fmt.Errorf("%w: shard %s: %d rows past the %d lengths", ErrBadIndex, s.Name, s.Rows, rows)
		}
		if (s.Rows == 0) != (len(s.Batches) == 0) {
			return fmt.Errorf("%w: shard %s: %d rows in %d batches", ErrBadIndex, s.Name, s.Rows, len(s.Batches))
		}
		for j, br := range s.Batches {
			if j == 0 && br.FirstRow != 0 {
				return fmt.Errorf("%w: shard %s: first batch starts at row %d", ErrBadIndex, s.Name, br.FirstRow)
			}
			if br.Offset < 0 || br.Offset >= s.Size || br.FirstRow >= s.Rows {
				return fmt.Errorf("%w: shard %s: batch %d (offset %d, row %d) outside shard", ErrBadIndex, s.Name, j, br.Offset, br.FirstRow)
			}
			if j > 0 && (br.Offset <= s.Batches[j-1].Offset || br.FirstRow <= s.Batches[j-1].FirstRow) {
				return fmt.Errorf("%w: shard %s: batch %d out of order", ErrBadIndex, s.Name, j)
			}
		}
		row += s.Rows
	}
	if row != rows {
		return fmt.Errorf("%w: shards hold %d rows, %d lengths", ErrBadIndex, row, rows)
	}
	return nil
}

// validate checks the internal consistency of an index: validateEntries, and that each shard's tokens agree with
// Lengths (a full scan of the lengths).
func (ix *Index) validate() error {
	if err := ix.validateEntries(ix.Rows()); err != nil {
		return err
	}
	var row int64
	for _, s := range ix.Shards {
		var tokens int64
		for _, l := range ix.Lengths[row : row+s.Rows] {
			tokens += int64(l)
		}
		if tokens != s.Tokens {
			return fmt.Errorf("%w: shard %s: lengths sum to %d tokens, entry says %d", ErrBadIndex, s.Name, tokens, s.Tokens)
		}
		row += s.Rows
	}
	return nil
}

// Verify is the full check of a decoded index (what ReadIndex and UnmarshalIndex do, and `gload index`): every
// block's lengths against its summary and crc32c, every shard's tokens against its lengths, and the fingerprint
// recorded in the header against the one computed from the content. It reads every length (O(rows)).
func (ix *Index) Verify() error {
	if ix.blocks.b != nil && ix.blocks.rows == ix.Rows() {
		for b := range ix.blocks.len() {
			if err := ix.verifyBlock(b); err != nil {
				return err
			}
		}
	}
	if err := ix.validate(); err != nil {
		return err
	}
	if !ix.readFP.IsZero() {
		if c := ix.ComputeFingerprint(); c != ix.readFP {
			return fmt.Errorf("%w: fingerprint %s recorded, %s computed from its entries", ErrBadIndex, ix.readFP, c)
		}
	}
	return nil
}

// verifyBlock checks block b's lengths against its entry in the block table.
func (ix *Index) verifyBlock(b int64) error {
	want := ix.blocks.at(b)
	got := summarize(ix.Lengths[b<<blockBits : b<<blockBits+want.Rows])
	if got.CRC != want.CRC {
		return fmt.Errorf("%w: block %d (rows %d to %d): lengths have crc32c %08x, the block table says %08x",
			ErrBadIndex, b, b<<blockBits, b<<blockBits+want.Rows, got.CRC, want.CRC)
	}
	if got != want {
		return fmt.Errorf("%w: block %d (rows %d to %d): lengths give %d tokens, longest %d; the block table says %d, %d (or another histogram)",
			ErrBadIndex, b, b<<blockBits, b<<blockBits+want.Rows, got.Tokens, got.MaxLength, want.Tokens, want.MaxLength)
	}
	return nil
}

// UnmarshalIndex decodes and fully checks an encoded index (Verify). It checks
// the magic, version, checksum, fingerprint and every count against the data
// size before allocating, so a corrupt or truncated index gives ErrBadIndex,
// never a panic or a huge allocation; an index of an older version gives
// ErrOldIndex. Lengths may alias b.
func UnmarshalIndex(b []byte) (*Index, error) {
	ix, err := decodeIndex(b)
	if err != nil {
		return nil, err
	}
	if err := ix.Verify(); err != nil {
		return nil, err
	}
	return ix, nil
}

// decodeIndex decodes a version-3 index and checks its header: magic, version, every count against the size of
// b, the header checksum, the shard entries and the block table (O(shards + blocks)). It reads no length: the
// lengths are a view of b, checked per block later (Verify, or IndexLengths on first access).
func decodeIndex(b []byte) (*Index, error) {
	if len(b) < 8+4 || string(b[:8]) != indexMagic {
		return nil, fmt.Errorf("%w: no %s magic", ErrBadIndex, indexMagic)
	}
	if v := binary.LittleEndian.Uint32(b[8:]); v != IndexVersion {
		if v < IndexVersion {
			why := "identity by mtime, before content fingerprints"
			if v == 2 {
				why = "no block table: opening it reads every row's length"
			}
			return nil, fmt.Errorf("%w: version %d (%s), this build reads %d; `gload index DIR` rewrites it",
				ErrOldIndex, v, why, IndexVersion)
		}
		return nil, fmt.Errorf("%w: version %d, this build reads %d", ErrBadIndex, v, IndexVersion)
	}
	d := indexDecoder{b: b, p: 12}
	ix := &Index{}
	ix.TokenizerHash = d.str(maxTokHashLen)
	d.digest(&ix.readFP)
	ix.Shards = d.shardEntries()
	rows := d.u64()
	blockRowsField, histField := d.u32(), d.u32()
	off := d.u64()
	size := uint64(len(b))
	if d.err == nil {
		switch {
		case blockRowsField != BlockRows || histField != HistBuckets:
			d.fail(fmt.Sprintf("blocks of %d rows with %d histogram buckets, this build reads %d and %d",
				blockRowsField, histField, BlockRows, HistBuckets))
		case off > size || off%lengthsAlign != 0:
			d.fail(fmt.Sprintf("lengths offset %d in a file of %d bytes", off, size))
		case rows > (size-off)/4 || size-off != 4*rows:
			d.fail(fmt.Sprintf("%d lengths in the %d bytes after offset %d", rows, size-off, off))
		}
	}
	var tab []byte
	if d.err == nil {
		n := NumBlocks(int64(rows)) * blockEntrySize // rows ≤ size/4: no overflow
		if d.need(int(n)) {
			tab = b[d.p : d.p+int(n)]
			d.p += int(n)
		}
	}
	crcAt := d.p
	want := d.u32()
	if d.err != nil {
		return nil, d.err
	}
	if got := crc32.Checksum(b[:crcAt], castagnoli); got != want {
		return nil, fmt.Errorf("%w: header checksum %08x, computed %08x", ErrBadIndex, want, got)
	}
	if uint64(alignUp(d.p)) != off {
		return nil, fmt.Errorf("%w: lengths at offset %d, the header ends at %d", ErrBadIndex, off, d.p)
	}
	for _, c := range b[d.p:off] {
		if c != 0 {
			return nil, fmt.Errorf("%w: nonzero padding after the header", ErrBadIndex)
		}
	}
	ix.checksum = want
	ix.Lengths = uint32s(b[off:])
	ix.blocks = blockTable{b: tab, rows: int64(rows)}
	if err := ix.validateEntries(int64(rows)); err != nil {
		return nil, err
	}
	if _, _, err := ix.blocks.checkTable(ix.Shards); err != nil {
		return nil, err
	}
	return ix, nil
}

type indexDecoder struct {
	b   []byte
	p   int
	err error
}

func (d *indexDecoder) fail(what string) {
	if d.err == nil {
		d.err = fmt.Errorf("%w: at byte %d: %s", ErrBadIndex, d.p, what)
	}
}

func (d *indexDecoder) need(n int) bool {
	if d.err != nil {
		return false
	}
	if n < 0 || n > len(d.b)-d.p {
		d.fail("truncated")
		return false
	}
	return true
}

func (d *indexDecoder) u8() uint8 {
	if !d.need(1) {
		return 0
	}
	d.p++
	return d.b[d.p-1]
}

func (d *indexDecoder) u32() uint32 {
	if !d.need(4) {
		return 0
	}
	d.p += 4
	return binary.LittleEndian.Uint32(d.b[d.p-4:])
}

func (d *indexDecoder) u64() uint64 {
	if !d.need(8) {
		return 0
	}
	d.p += 8
	return binary.LittleEndian.Uint64(d.b[d.p-8:])
}

// maxHeaderBytes bounds the encoded shard entries (names, batch offsets) of an index, so that what decoding
// allocates (about 1.5 times as much) does not grow with the file: the lengths after them may be tens of GB, and
// an index from a bucket is accepted up to 64 GiB. 2 GiB is the header of 1.3·10^8 record batches (1.3·10^11 rows
// in batches of 1000). A variable for tests.
var maxHeaderBytes uint64 = 1 << 31

// count reads a u32 count of items of at least minSize bytes each and checks
// that they can fit in what is left, and within maxHeaderBytes.
// shardEntries decodes the shard count and the shard entries (the layout versions 2 and 3 share).
func (d *indexDecoder) shardEntries() []ShardEntry {
	nShards := d.count(minShardEntry)
	shards := make([]ShardEntry, 0, nShards)
	for i := 0; i < nShards && d.err == nil; i++ {
		s := ShardEntry{Name: d.str(maxNameLen)}
		s.Size = int64(d.u64())
		d.digest(&s.ContentHash)
		s.Rows = int64(d.u64())
		s.Tokens = int64(d.u64())
		nb := d.count(16)
		if nb > 0 {
			s.Batches = make([]BatchRef, 0, nb)
		}
		for j := 0; j < nb && d.err == nil; j++ {
			s.Batches = append(s.Batches, BatchRef{Offset: int64(d.u64()), FirstRow: int64(d.u64())})
		}
		shards = append(shards, s)
	}
	return shards
}

func (d *indexDecoder) count(minSize int) int {
	n := d.u32()
	if d.err == nil && uint64(n)*uint64(minSize) > uint64(len(d.b)-d.p) {
		d.fail(fmt.Sprintf("count %d exceeds the remaining %d bytes", n, len(d.b)-d.p))
		return 0
	}
	if d.err == nil && uint64(d.p)+uint64(n)*uint64(minSize) > maxHeaderBytes {
		d.fail(fmt.Sprintf("count %d of entries of at least %d bytes: the header would pass %d bytes", n, minSize, maxHeaderBytes))
		return 0
	}
	return int(n)
}

func (d *indexDecoder) digest(dst *Digest) {
	if !d.need(len(dst)) {
		return
	}
	copy(dst[:], d.b[d.p:])
	d.p += len(dst)
}

func (d *indexDecoder) str(maxLen int) string {
	n := d.u32()
	if d.err == nil && n > uint32(maxLen) {
		d.fail(fmt.Sprintf("string of %d bytes", n))
	}
	if !d.need(int(n)) {
		return ""
	}
	d.p += int(n)
	return string(d.b[d.p-int(n) : d.p])
}

// oldTokenizerHash reads the tokenizer hash of a version-1 gload.index
// ("GLOADIX1" | version u32 | shard count u32 | u32 length, bytes) or of a
// version-2 one ("GLOADIX1" | version u32 | u32 length, bytes), or "".
func oldTokenizerHash(dir string) string {
	f, _, err := safename.OpenRegular(filepath.Join(dir, IndexFile))
	if err != nil {
		return ""
	}
	defer f.Close()
	b := make([]byte, 20+maxTokHashLen)
	n, _ := f.ReadAt(b, 0)
	b = b[:n]
	if len(b) < 16 || string(b[:8]) != indexMagic {
		return ""
	}
	at := 0
	switch binary.LittleEndian.Uint32(b[8:]) {
	case 1:
		at = 16
	case 2:
		at = 12
	default:
		return ""
	}
	if len(b) < at+4 {
		return ""
	}
	l := binary.LittleEndian.Uint32(b[at:])
	if l > maxTokHashLen || int(l) > len(b)-at-4 || !utf8.Valid(b[at+4:at+4+int(l)]) {
		return ""
	}
	return string(b[at+4 : at+4+int(l)])
}

// ReadIndex reads dir/gload.index into memory and checks all of it (UnmarshalIndex): O(rows). Open maps the
// index instead and checks it per block.
func ReadIndex(dir string) (*Index, error) {
	path := filepath.Join(dir, IndexFile)
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("read index %s: %w", path, err)
	}
	ix, err := UnmarshalIndex(b)
	if err != nil {
		return nil, fmt.Errorf("read index %s: %w", path, err)
	}
	return ix, nil
}

// WriteIndex atomically writes ix as dir/gload.index (temporary file, fsync,
// rename, directory fsync). It checks ix in full first (validate) and writes the
// lengths from ix.Lengths without copying them.
func WriteIndex(dir string, ix *Index) error {
	if err := ix.validate(); err != nil {
		return fmt.Errorf("write index in %s: %w", dir, err)
	}
	h := ix.encodeHeader()
	var lengths []byte
	if hostLittleEndian {
		lengths = uint32Bytes(ix.Lengths)
	} else {
		lengths = appendUint32s(nil, ix.Lengths)
	}
	return writeFileAtomic(dir, IndexFile, h, lengths)
}

// checkFileName accepts shard names from data (an index, a journal, a state.json) only as plain base names
// (safename.Check: no separators, no "..", no leading dot, no control characters) that are not one of the
// directory's own files (gload.index, state.json, the journal, the lock, ...) or a temporary name.
func checkFileName(name string) error {
	if err := safename.Check(name); err != nil {
		return fmt.Errorf("bad file name: %w", err)
	}
	if reservedNames[name] || strings.HasSuffix(name, ".tmp") || strings.HasSuffix(name, ".gload-part") {
		return fmt.Errorf("bad file name %q: a name gload uses for its own files", name)
	}
	return nil
}

// CheckShardName is checkFileName for other packages: the check every shard name from data passes before it is
// joined to a directory.
func CheckShardName(name string) error { return checkFileName(name) }

// ShardPath is dir/name after CheckShardName.
func ShardPath(dir, name string) (string, error) {
	if err := checkFileName(name); err != nil {
		return "", err
	}
	return safename.Join(dir, name)
}

// reservedNames are the files of a dataset directory that are not shards.
var reservedNames = map[string]bool{
	IndexFile: true, StateFile: true, InfoFile: true, StampFile: true, "dataset_dict.json": true,
	"gload.progress.json": true, "gload.lock": true, "gload.task.json": true, "gload.sync.json": true,
	"gload.fetched.json": true, // loader/remote: which object a cached gload.index was downloaded from
}

// mapIndex maps the index file at path read-only and decodes its header (decodeIndex: O(shards + blocks), no
// length read). The caller unmaps the returned mapping once it no longer uses the index's lengths.
func mapIndex(path string) (*Index, []byte, error) {
	f, fi, err := safename.OpenRegular(path)
	if err != nil {
		return nil, nil, fmt.Errorf("read index %s: %w", path, err)
	}
	defer f.Close()
	m, err := mapFile(f, fi.Size())
	if err != nil {
		return nil, nil, fmt.Errorf("read index %s: %w", path, err)
	}
	ix, err := decodeIndex(m)
	if err != nil {
		return nil, nil, errors.Join(fmt.Errorf("read index %s: %w", path, err), unmapFile(m))
	}
	return ix, m, nil
}

// readIndexV2 reads a version-2 index at path in full (the upgrade path).
func readIndexV2(path string) (*Index, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("read index %s: %w", path, err)
	}
	ix, err := unmarshalIndexV2(b)
	if err != nil {
		return nil, fmt.Errorf("read index %s: %w", path, err)
	}
	return ix, nil
}
