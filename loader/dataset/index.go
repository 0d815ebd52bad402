package dataset

import (
	"encoding/binary"
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
// Version 1 (size, mtime and footer hashes as identity) is refused with
// ErrOldIndex; Open then rebuilds the index from the shards.
const IndexVersion = 2

const (
	indexMagic    = "GLOADIX1" // the file type; the version follows
	maxNameLen    = 4096
	maxTokHashLen = 4096
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// Index is the decoded content of gload.index. It holds content only — no
// times, paths or inode numbers — so the same shards always give the same
// bytes, whatever the machine, directory, time or worker count that wrote them.
//
// Layout (little-endian):
//
//	"GLOADIX1" | version u32 (2) | tokenizer hash (u32 len, bytes) |
//	fingerprint [32]byte (ComputeFingerprint; checked on read) | shard count u32 |
//	per shard: name (u32 len, bytes) | size u64 | content SHA-256 [32]byte |
//	           rows u64 | tokens u64 | batch count u32 | batches (offset u64, first row u64)...
//	total rows u64 | zero padding to a multiple of 4 | lengths u32 × total rows |
//	crc32c u32 of everything before it
//
// Every shard entry is self-contained (its rows' lengths are the next Rows
// entries of Lengths), so indexes of separately written parts are joined by
// concatenating shard entries and length arrays (see Join).
type Index struct {
	TokenizerHash string
	Shards        []ShardEntry
	Lengths       []uint32 // tokens per row over all shards, in shard order

	checksum uint32 // crc32c of the encoding this index was read from or last marshalled to
	readFP   Digest // the fingerprint UnmarshalIndex checked
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

// Checksum is the crc32c trailer of the encoding ix was read from or last encoded to.
func (ix *Index) Checksum() uint32 { return ix.checksum }

// Rows returns the number of rows over all shards.
func (ix *Index) Rows() int64 { return int64(len(ix.Lengths)) }

// MarshalBinary encodes the index.
func (ix *Index) MarshalBinary() ([]byte, error) {
	if err := ix.validate(); err != nil {
		return nil, err
	}
	return ix.marshalUnchecked()
}

func (ix *Index) marshalUnchecked() ([]byte, error) {
	fp := ix.ComputeFingerprint()
	n := 8 + 4 + 4 + len(ix.TokenizerHash) + 32 + 4 + 8 + 4 + 4*len(ix.Lengths) + 4
	for _, s := range ix.Shards {
		n += 4 + len(s.Name) + 8 + 32 + 2*8 + 4 + 16*len(s.Batches)
	}
	b := make([]byte, 0, n+4)
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
	b = binary.LittleEndian.AppendUint64(b, uint64(len(ix.Lengths)))
	for len(b)%4 != 0 {
		b = append(b, 0)
	}
	b = appendUint32s(b, ix.Lengths)
	ix.checksum = crc32.Checksum(b, castagnoli)
	return binary.LittleEndian.AppendUint32(b, ix.checksum), nil
}

// validate checks the internal consistency of an index: names, batch tables,
// and that each shard's rows and tokens agree with Lengths.
func (ix *Index) validate() error {
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
		if s.Rows > int64(len(ix.Lengths))-row {
			return fmt.Errorf("%w: shard %s: %d rows past the %d lengths", ErrBadIndex, s.Name, s.Rows, len(ix.Lengths))
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
		var tokens int64
		for _, l := range ix.Lengths[row : row+s.Rows] {
			tokens += int64(l)
		}
		if tokens != s.Tokens {
			return fmt.Errorf("%w: shard %s: lengths sum to %d tokens, entry says %d", ErrBadIndex, s.Name, tokens, s.Tokens)
		}
		row += s.Rows
	}
	if row != int64(len(ix.Lengths)) {
		return fmt.Errorf("%w: shards hold %d rows, %d lengths", ErrBadIndex, row, len(ix.Lengths))
	}
	return nil
}

// UnmarshalIndex decodes and validates an encoded index. It checks the magic,
// version, checksum, fingerprint and every count against the data size before
// allocating, so a corrupt or truncated index gives ErrBadIndex, never a panic
// or a huge allocation; an index of an older version gives ErrOldIndex.
// Lengths may alias b.
func UnmarshalIndex(b []byte) (*Index, error) {
	if len(b) < 8+4+4 || string(b[:8]) != indexMagic {
		return nil, fmt.Errorf("%w: no %s magic", ErrBadIndex, indexMagic)
	}
	if v := binary.LittleEndian.Uint32(b[8:]); v != IndexVersion {
		if v < IndexVersion {
			return nil, fmt.Errorf("%w: version %d (identity by mtime, before content fingerprints), this build reads %d; "+
				"`gload index DIR` rewrites it", ErrOldIndex, v, IndexVersion)
		}
		return nil, fmt.Errorf("%w: version %d, this build reads %d", ErrBadIndex, v, IndexVersion)
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
	nShards := d.count(4 + 8 + 32 + 2*8 + 4) // smallest possible shard entry
	ix.Shards = make([]ShardEntry, 0, nShards)
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
		ix.Shards = append(ix.Shards, s)
	}
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
	if n > len(d.b)-d.p {
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

// count reads a u32 count of items of at least minSize bytes each and checks
// that they can fit in what is left.
func (d *indexDecoder) count(minSize int) int {
	n := d.u32()
	if d.err == nil && uint64(n)*uint64(minSize) > uint64(len(d.b)-d.p) {
		d.fail(fmt.Sprintf("count %d exceeds the remaining %d bytes", n, len(d.b)-d.p))
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

// v1TokenizerHash reads the tokenizer hash of a version-1 gload.index
// ("GLOADIX1" | version u32 | shard count u32 | u32 length, bytes), or "".
func v1TokenizerHash(dir string) string {
	b, err := os.ReadFile(filepath.Join(dir, IndexFile))
	if err != nil || len(b) < 20 || string(b[:8]) != indexMagic || binary.LittleEndian.Uint32(b[8:]) != 1 {
		return ""
	}
	n := binary.LittleEndian.Uint32(b[16:])
	if n > maxTokHashLen || int(n) > len(b)-20 || !utf8.Valid(b[20:20+n]) {
		return ""
	}
	return string(b[20 : 20+n])
}

// ReadIndex reads and decodes dir/gload.index.
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
// rename, directory fsync).
func WriteIndex(dir string, ix *Index) error {
	b, err := ix.MarshalBinary()
	if err != nil {
		return fmt.Errorf("write index in %s: %w", dir, err)
	}
	return writeFileAtomic(dir, IndexFile, b)
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
}
