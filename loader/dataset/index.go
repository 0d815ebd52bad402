package dataset

import (
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"hash/fnv"
	"io"
	"os"
	"path/filepath"
	"strings"
	"unicode/utf8"
)

// IndexFile is the name of gload's sidecar index in a dataset directory.
const IndexFile = "gload.index"

// IndexVersion is the gload.index format version this package writes and reads.
const IndexVersion = 1

const (
	indexMagic      = "GLOADIX1"
	footerHashBytes = 64 << 10 // the footer hash covers the last 64 KiB of a shard
	maxNameLen      = 4096
	maxTokHashLen   = 4096
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// Index is the decoded content of gload.index.
//
// Layout (little-endian):
//
//	"GLOADIX1" | version u32 | shard count u32 | tokenizer hash (u32 len, bytes)
//	per shard: name (u32 len, bytes) | size u64 | mtime ns i64 | footer hash u64 |
//	           content hash u64 | rows u64 | tokens u64 | batch count u32 |
//	           batches (offset u64, first row u64)...
//	total rows u64 | zero padding to a multiple of 4 | lengths u32 × total rows |
//	crc32c u32 of everything before it
//
// Every shard entry is self-contained (its rows' lengths are the next Rows
// entries of Lengths), so indexes of separately written parts can be joined
// by concatenating shard entries and length arrays.
type Index struct {
	TokenizerHash string
	Shards        []ShardEntry
	Lengths       []uint32 // tokens per row over all shards, in shard order
}

// ShardEntry describes one shard file in an Index.
type ShardEntry struct {
	Name        string // file name inside the dataset directory
	Size        int64  // file size in bytes
	ModTime     int64  // modification time, Unix nanoseconds
	FooterHash  uint64 // FNV-64a of the last min(Size, 64 KiB) bytes
	ContentHash uint64 // CRC-64/ECMA of the whole file; 0 when unknown
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

// Fingerprint hashes each shard's name, size, mtime and footer hash: it
// changes whenever a shard file is replaced, touched or renamed.
func (ix *Index) Fingerprint() uint64 {
	h := fnv.New64a()
	var b [8]byte
	for _, s := range ix.Shards {
		binary.LittleEndian.PutUint64(b[:], uint64(len(s.Name)))
		h.Write(b[:])
		io.WriteString(h, s.Name)
		for _, v := range []uint64{uint64(s.Size), uint64(s.ModTime), s.FooterHash} {
			binary.LittleEndian.PutUint64(b[:], v)
			h.Write(b[:])
		}
	}
	return h.Sum64()
}

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
	n := 8 + 4 + 4 + 4 + len(ix.TokenizerHash) + 8 + 4 + 4*len(ix.Lengths) + 4
	for _, s := range ix.Shards {
		n += 4 + len(s.Name) + 7*8 + 4 + 16*len(s.Batches)
	}
	b := make([]byte, 0, n+4)
	b = append(b, indexMagic...)
	b = binary.LittleEndian.AppendUint32(b, IndexVersion)
	b = binary.LittleEndian.AppendUint32(b, uint32(len(ix.Shards)))
	b = binary.LittleEndian.AppendUint32(b, uint32(len(ix.TokenizerHash)))
	b = append(b, ix.TokenizerHash...)
	for _, s := range ix.Shards {
		b = binary.LittleEndian.AppendUint32(b, uint32(len(s.Name)))
		b = append(b, s.Name...)
		for _, v := range []uint64{uint64(s.Size), uint64(s.ModTime), s.FooterHash, s.ContentHash, uint64(s.Rows), uint64(s.Tokens)} {
			b = binary.LittleEndian.AppendUint64(b, v)
		}
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
	return binary.LittleEndian.AppendUint32(b, crc32.Checksum(b, castagnoli)), nil
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
// version, checksum and every count against the data size before allocating,
// so a corrupt or truncated index gives ErrBadIndex, never a panic or a huge
// allocation. Lengths may alias b.
func UnmarshalIndex(b []byte) (*Index, error) {
	if len(b) < 8+4+4 || string(b[:8]) != indexMagic {
		return nil, fmt.Errorf("%w: no %s magic", ErrBadIndex, indexMagic)
	}
	if v := binary.LittleEndian.Uint32(b[8:]); v != IndexVersion {
		return nil, fmt.Errorf("%w: version %d, this build reads %d", ErrBadIndex, v, IndexVersion)
	}
	body := b[:len(b)-4]
	if want, got := binary.LittleEndian.Uint32(b[len(b)-4:]), crc32.Checksum(body, castagnoli); want != got {
		return nil, fmt.Errorf("%w: checksum %08x, computed %08x", ErrBadIndex, want, got)
	}
	d := indexDecoder{b: body, p: 12}
	ix := &Index{}
	nShards := d.count(4 + 7*8 + 4) // smallest possible shard entry
	ix.TokenizerHash = d.str(maxTokHashLen)
	ix.Shards = make([]ShardEntry, 0, nShards)
	for i := 0; i < nShards && d.err == nil; i++ {
		s := ShardEntry{Name: d.str(maxNameLen)}
		s.Size = int64(d.u64())
		s.ModTime = int64(d.u64())
		s.FooterHash = d.u64()
		s.ContentHash = d.u64()
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

// footerHash is FNV-64a over the last min(len(tail), 64 KiB) bytes given.
func footerHash(tail []byte) uint64 {
	if len(tail) > footerHashBytes {
		tail = tail[len(tail)-footerHashBytes:]
	}
	h := fnv.New64a()
	h.Write(tail)
	return h.Sum64()
}

// fileFooterHash reads the tail of an open file of the given size and hashes it.
func fileFooterHash(f *os.File, size int64) (uint64, error) {
	n := min(size, footerHashBytes)
	buf := make([]byte, n)
	if _, err := f.ReadAt(buf, size-n); err != nil {
		return 0, fmt.Errorf("read footer of %s: %w", f.Name(), err)
	}
	return footerHash(buf), nil
}

// checkFileName accepts plain file names only: no directories, no "..".
func checkFileName(name string) error {
	if name == "" || len(name) > maxNameLen || name == "." || name == ".." ||
		strings.ContainsAny(name, "/\\\x00") || !utf8.ValidString(name) {
		return fmt.Errorf("bad file name %q", name)
	}
	return nil
}
