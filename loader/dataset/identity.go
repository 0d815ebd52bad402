package dataset

// Content identity: shard content hashes, the dataset fingerprint, and the
// freshness stamp that lets Open trust an index without re-reading shards.
//
// Identity is content (house style 19): a shard is named by the SHA-256 of its
// bytes, recorded when it is written; a dataset by its fingerprint, a pure
// function of its shards' content hashes in order and its per-row lengths.
// Names, paths, mtimes and inode numbers never enter either, so a copy (cp -r,
// rsync without -t, tar, a download from object storage), a touch or a move
// keeps the fingerprint and therefore plans the same epochs.
//
// Freshness is a cache, not identity: gload.verified records, for an index
// checksum, each shard's size, mtime, ctime and inode as they were when the
// shard's content was last known to match the index. When every shard still
// stats the same, Open trusts the index without hashing; otherwise it hashes
// the shards whose stat changed (or all of them, with OpenOptions.Verify) and
// compares with the index. ctime cannot be set from user space, so a rewrite
// that restores the mtime is still caught.

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"unsafe"

	"github.com/gload/gload/internal/safename"
)

// Digest is a SHA-256 digest: a shard's content hash or a dataset fingerprint.
type Digest [32]byte

// String is the digest in lower-case hex (64 digits).
func (d Digest) String() string { return hex.EncodeToString(d[:]) }

// IsZero reports whether d is the zero digest (unknown).
func (d Digest) IsZero() bool { return d == Digest{} }

// MarshalText encodes d as hex.
func (d Digest) MarshalText() ([]byte, error) { return []byte(d.String()), nil }

// UnmarshalText decodes 64 hex digits.
func (d *Digest) UnmarshalText(b []byte) error {
	if len(b) != 2*len(d) {
		return fmt.Errorf("digest: %d hex digits, want %d", len(b), 2*len(d))
	}
	if _, err := hex.Decode(d[:], b); err != nil {
		return fmt.Errorf("digest: %w", err)
	}
	return nil
}

// FileDigest hashes a whole file.
func FileDigest(path string) (Digest, int64, error) {
	f, _, err := safename.OpenRegular(path)
	if err != nil {
		return Digest{}, 0, fmt.Errorf("hash %s: %w", path, err)
	}
	defer f.Close()
	h := sha256.New()
	n, err := io.Copy(h, f)
	if err != nil {
		return Digest{}, 0, fmt.Errorf("hash %s: %w", path, err)
	}
	var d Digest
	h.Sum(d[:0])
	return d, n, nil
}

func bytesDigest(b []byte) Digest { return sha256.Sum256(b) }

// fingerprintTag opens the fingerprint hash; a new layout of the hashed bytes needs a new tag.
const fingerprintTag = "gload/dataset-fingerprint/v2\x00"

// ComputeFingerprint is the dataset fingerprint of ix:
//
//	SHA-256( "gload/dataset-fingerprint/v2" 0x00 ‖ u64le(shard count) ‖
//	         per shard: content SHA-256 (32 bytes) ‖ u64le(rows) ‖
//	         u64le(total rows) ‖ u32le(length) per row )
//
// It depends on nothing but the shards' content hashes, their order and the
// per-row token lengths — never names, paths, sizes on disk, times or the
// tokenizer hash.
func (ix *Index) ComputeFingerprint() Digest {
	h := sha256.New()
	io.WriteString(h, fingerprintTag)
	var b [8]byte
	put := func(v uint64) {
		binary.LittleEndian.PutUint64(b[:], v)
		h.Write(b[:])
	}
	put(uint64(len(ix.Shards)))
	for _, s := range ix.Shards {
		h.Write(s.ContentHash[:])
		put(uint64(s.Rows))
	}
	put(uint64(len(ix.Lengths)))
	if hostLittleEndian && len(ix.Lengths) > 0 {
		h.Write(unsafe.Slice((*byte)(unsafe.Pointer(&ix.Lengths[0])), 4*len(ix.Lengths)))
	} else {
		buf := make([]byte, 0, 4096)
		for i, l := range ix.Lengths {
			buf = binary.LittleEndian.AppendUint32(buf, l)
			if len(buf) == cap(buf) || i == len(ix.Lengths)-1 {
				h.Write(buf)
				buf = buf[:0]
			}
		}
	}
	var d Digest
	h.Sum(d[:0])
	return d
}

// FingerprintString is the printed form of a fingerprint: its first 16 bytes in
// hex (32 digits). Epoch plans, resume states and the wire protocol use it.
func FingerprintString(d Digest) string { return hex.EncodeToString(d[:16]) }

// ---- freshness stamps ----

// StampFile records when the shards were last known to match gload.index.
const StampFile = "gload.verified"

const stampVersion = 1

// fileStat is what the freshness check compares; none of it is identity.
type fileStat struct {
	Size  int64  `json:"size"`
	MTime int64  `json:"mtime_ns"`
	CTime int64  `json:"ctime_ns"`
	Inode uint64 `json:"inode"`
}

type stampShard struct {
	Name string `json:"name"`
	fileStat
}

type stamp struct {
	Version  int          `json:"version"`
	IndexCRC string       `json:"index_crc32c"` // the checksum of the gload.index this stamp vouches for
	Shards   []stampShard `json:"shards"`
}

// proves reports whether the stamp vouches for shard sh under an index with checksum crc.
func (st *stamp) proves(crc uint32, name string, fs fileStat) bool {
	if st == nil || st.IndexCRC != fmt.Sprintf("%08x", crc) {
		return false
	}
	for _, s := range st.Shards {
		if s.Name == name {
			return s.fileStat == fs
		}
	}
	return false
}

func readStamp(path string) *stamp {
	b, err := safename.ReadFile(path, safename.MaxMetaBytes)
	if err != nil {
		return nil
	}
	var st stamp
	if json.Unmarshal(b, &st) != nil || st.Version != stampVersion {
		return nil
	}
	return &st
}

func writeStamp(dir string, crc uint32, shards []*shard) error {
	st := stamp{Version: stampVersion, IndexCRC: fmt.Sprintf("%08x", crc)}
	for _, sh := range shards {
		st.Shards = append(st.Shards, stampShard{Name: sh.name, fileStat: sh.stat})
	}
	b, err := json.MarshalIndent(&st, "", "  ")
	if err != nil {
		return fmt.Errorf("write %s: %w", StampFile, err)
	}
	return writeFileAtomic(dir, StampFile, append(b, '\n'))
}

// statFiles stats the named files in dir for a stamp.
func stampFiles(dir string, crc uint32, names []string) error {
	var shards []*shard
	for _, n := range names {
		fi, err := safename.LstatRegular(filepath.Join(dir, n))
		if err != nil {
			return fmt.Errorf("stamp %s: %w", dir, err)
		}
		shards = append(shards, &shard{name: n, stat: statOf(fi)})
	}
	return writeStamp(dir, crc, shards)
}

// WriteStamp records that the shards ix lists, as they are in dir now, hold the
// content ix describes — for callers that have just verified them (a download
// checked against the content hashes). Open then trusts them without hashing.
func WriteStamp(dir string, ix *Index) error {
	if ix.checksum == 0 {
		if _, err := ix.marshalUnchecked(); err != nil {
			return err
		}
	}
	names := make([]string, len(ix.Shards))
	for i, s := range ix.Shards {
		names[i] = s.Name
	}
	return stampFiles(dir, ix.checksum, names)
}

// ---- the index cache directory ----

// DefaultIndexDir is the user's cache directory for gload indexes:
// $XDG_CACHE_HOME/gload, or the platform's user cache dir (~/.cache/gload on
// Linux), or "" when neither is known.
func DefaultIndexDir() string {
	if d := os.Getenv("XDG_CACHE_HOME"); d != "" && filepath.IsAbs(d) {
		return filepath.Join(d, "gload")
	}
	d, err := os.UserCacheDir()
	if err != nil {
		return ""
	}
	return filepath.Join(d, "gload")
}

// cacheEntry is the cache directory that holds the sidecar index and stamp of
// the dataset in dir: indexDir/datasets/<hex of SHA-256 of the absolute path>.
// The path only finds the entry; what is in it is checked against the shards.
func cacheEntry(indexDir, dir string) (string, error) {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return "", fmt.Errorf("index cache for %s: %w", dir, err)
	}
	sum := sha256.Sum256([]byte(abs))
	return filepath.Join(indexDir, "datasets", hex.EncodeToString(sum[:16])), nil
}

// CacheEntry returns where Open keeps the index of dir under indexDir.
func CacheEntry(indexDir, dir string) (string, error) { return cacheEntry(indexDir, dir) }

// ErrContentMismatch means a shard's bytes do not hash to the content hash its
// index or journal recorded for it.
var ErrContentMismatch = errors.New("dataset: shard content does not match its recorded hash")

// VerifyShard checks that dir/s.Name has s.Bytes bytes hashing to s.Hash. The
// error names the file and both hashes.
func VerifyShard(dir string, s ShardInfo) error {
	path, err := ShardPath(dir, s.Name)
	if err != nil {
		return err
	}
	d, n, err := FileDigest(path)
	if err != nil {
		return err
	}
	if n != s.Bytes {
		return fmt.Errorf("%w: %s: %d bytes, %d were written", ErrContentMismatch, path, n, s.Bytes)
	}
	if d != s.Hash {
		return fmt.Errorf("%w: %s: sha256 %s, %s when written", ErrContentMismatch, path, d, s.Hash)
	}
	return nil
}
