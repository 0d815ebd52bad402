// Package remote moves gload datasets between a local directory and object storage (package objstore): it reads a
// stored dataset's metadata first (gload.index, state.json, dataset_info.json) so a server can plan before any shard
// is local, copies whole datasets with every shard verified against the content hash in the index (gload sync), and
// uploads datasets so that an interrupted upload never looks complete (shards first, gload.index last).
//
// gload.index is downloaded to a file (never read into memory whole: it holds 4 bytes per row) and
// memory-mapped; before it is renamed into place its header, block table and size are checked
// (dataset.CheckIndexFile), and its lengths are checked per block when they are first read, as for a local dataset.
//
// It does not parse shards (loader/dataset does) and keeps no state beyond the directories it is given.
//
// # Caveats
//
// A Meta's Index is memory-mapped: its Lengths are valid until Meta.Close (its Shards stay valid after it).
package remote

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/gload/gload/internal/dirlock"
	"github.com/gload/gload/internal/safename"
	"github.com/gload/gload/loader/dataset"
	"github.com/gload/gload/loader/objstore"
)

// Metadata files, in the order they are uploaded; gload.index is always last.
var metaFiles = []string{dataset.InfoFile, dataset.StateFile}

// MaxIndexBytes bounds the gload.index downloaded from object storage. The index goes to a file in the cache (or
// sync) directory and is memory-mapped, never read into memory whole, so the bound is about disk: 64 GiB is the
// index of about 1.7·10^10 rows (4 bytes per row). A bucket stating or sending more gets objstore.ErrTooLarge
// naming the object, before anything is written.
const MaxIndexBytes int64 = 64 << 30

// maxIndexBytes is MaxIndexBytes; a variable so that tests can lower it.
var maxIndexBytes = MaxIndexBytes

// maxJSONBytes bounds the JSON metadata fetched whole (state.json, dataset_info.json): no more than a dataset
// directory's reader accepts.
const maxJSONBytes = safename.MaxMetaBytes

// maxJournalBytes bounds the resume journal (gload.progress.json) read from a bucket by tokenize --resume.
const maxJournalBytes = 1 << 30

// ErrIncomplete says a stored dataset has no gload.index (still uploading, or written by another tool).
var ErrIncomplete = errors.New("remote: no gload.index in the bucket")

// Meta is a stored dataset's metadata, downloaded into Dir.
type Meta struct {
	URL    objstore.URL
	Dir    string               // local directory holding the metadata (and, for a cache, the shards)
	Index  *dataset.Index       // memory-mapped (dataset.MapIndex): its Lengths are valid until Close
	Shards []dataset.ShardEntry // in dataset order, from the index; valid after Close
}

// Close unmaps the index. Shards (and the index's entries) stay valid; the index's Lengths do not.
func (m *Meta) Close() error {
	if m == nil || m.Index == nil {
		return nil
	}
	return m.Index.Close()
}

// FetchMeta downloads the metadata of the dataset at st into dir (each file through a temporary name; the index
// written last) and maps the index. A dataset in the bucket with no gload.index gives ErrIncomplete, naming it.
// dir is made 0700 and the files 0600: it is meant for a cache. The caller closes the returned Meta.
//
// gload.index is streamed to a file (at most MaxIndexBytes; more is objstore.ErrTooLarge before anything is
// written under dir) and checked before it is renamed into place (dataset.CheckIndexFile: magic and version,
// header checksum, shard entries, block table, and a size exactly the one the header implies; every length of an
// index of at most 2^20 rows). The lengths of a larger index are checked per block when first read.
//
// An index downloaded before is kept, not downloaded again, while the store describes the same object (size, ETag
// and last-modified time, recorded in dir's gload.fetched.json) and the file still decodes; the JSON metadata is
// always fetched again.
func FetchMeta(ctx context.Context, st *objstore.Store, dir string) (*Meta, error) {
	return fetchMeta(ctx, st, dir, 0o600, true)
}

// fetchMeta is FetchMeta; reuse says whether an index recorded in dir may be kept (a cache) or is always
// downloaded (sync).
func fetchMeta(ctx context.Context, st *objstore.Store, dir string, perm os.FileMode, reuse bool) (*Meta, error) {
	// The index is stated first: a bucket without one holds no complete dataset, and one over the bound is refused
	// before anything is written under dir.
	info, err := st.Stat(ctx, dataset.IndexFile)
	if errors.Is(err, objstore.ErrNotFound) {
		if _, jerr := st.Stat(ctx, "gload.progress.json"); jerr == nil {
			return nil, fmt.Errorf("%w: %s is an unfinished gload tokenize upload (gload.progress.json is there): "+
				"finish it with gload tokenize --resume", ErrIncomplete, st.URL())
		}
		return nil, fmt.Errorf("%w: %s (not written by gload tokenize, or its upload did not finish)", ErrIncomplete, st.URL())
	}
	if err != nil {
		return nil, err
	}
	if info.Size > maxIndexBytes {
		return nil, fmt.Errorf("remote: get %s/%s: %w: the store says %d bytes, at most %d accepted (remote.MaxIndexBytes)",
			st.URL(), dataset.IndexFile, objstore.ErrTooLarge, info.Size, maxIndexBytes)
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("remote: %w", err)
	}
	if reuse {
		if ix := cachedIndex(dir, info); ix != nil {
			if err := fetchJSON(ctx, st, dir, perm); err != nil {
				return nil, errors.Join(err, ix.Close())
			}
			return &Meta{URL: st.URL(), Dir: dir, Index: ix, Shards: ix.Shards}, nil
		}
	}
	// The index of an earlier fetch (and its record) goes first, the new one comes last: a directory holding
	// gload.index has all its metadata, and never another dataset's index beside new metadata. (A process that has
	// the old index mapped keeps it: the file is unlinked, not changed.)
	ixPath := filepath.Join(dir, dataset.IndexFile)
	for _, p := range []string{filepath.Join(dir, fetchedFile), ixPath} {
		if err := os.Remove(p); err != nil && !errors.Is(err, os.ErrNotExist) {
			return nil, fmt.Errorf("remote: %w", err)
		}
	}
	if err := fetchJSON(ctx, st, dir, perm); err != nil {
		return nil, err
	}
	if _, err := st.Download(ctx, dataset.IndexFile, ixPath, objstore.DownloadOptions{
		MaxSize: maxIndexBytes,
		Perm:    perm,
		Verify:  dataset.CheckIndexFile,
	}); err != nil {
		return nil, fmt.Errorf("remote: %w", err)
	}
	if reuse {
		// Recorded only when the store describes the same object after the download as before it: an index
		// replaced meanwhile is downloaded again next time.
		if after, err := st.Stat(ctx, dataset.IndexFile); err == nil && recordOf(info).matches(after) {
			recordFetched(dir, info, perm)
		}
	}
	ix, err := dataset.MapIndex(ixPath)
	if err != nil {
		return nil, fmt.Errorf("remote: %s/%s: %w", st.URL(), dataset.IndexFile, err)
	}
	return &Meta{URL: st.URL(), Dir: dir, Index: ix, Shards: ix.Shards}, nil
}

// fetchJSON downloads the JSON metadata (state.json, dataset_info.json) into dir.
func fetchJSON(ctx context.Context, st *objstore.Store, dir string, perm os.FileMode) error {
	for _, name := range metaFiles {
		b, err := st.ReadSmall(ctx, name, maxJSONBytes)
		if err != nil {
			return err
		}
		if err := writeAtomic(filepath.Join(dir, name), b, perm); err != nil {
			return err
		}
	}
	return nil
}

// VerifyShard checks a downloaded shard file against its index entry: size, and the content hash when the index
// has one.
func VerifyShard(path string, e dataset.ShardEntry) error {
	fi, err := safename.LstatRegular(path) // a symbolic link is not a verified shard: it is downloaded again

	if err != nil {
		return err
	}
	if fi.Size() != e.Size { // the cheap check first: no hashing of a file of the wrong size
		return fmt.Errorf("shard %s: %d bytes, gload.index says %d", e.Name, fi.Size(), e.Size)
	}
	if e.ContentHash.IsZero() {
		return nil
	}
	got, _, err := dataset.FileDigest(path)
	if err != nil {
		return fmt.Errorf("shard %s: %w", e.Name, err)
	}
	if got != e.ContentHash {
		return fmt.Errorf("shard %s: content hash (sha256) %s, gload.index says %s", e.Name, got, e.ContentHash)
	}
	return nil
}

// SyncOptions control Sync.
type SyncOptions struct {
	Progress func(done, total int64, shard string) // bytes of shards present so far; nil: none
	Waiting  func(holder string)                   // called once when another process holds dst's lock; nil: none
}

// SourceFile records, in a directory gload sync writes, which object-storage dataset it is a copy of.
const SourceFile = "gload.sync.json"

// ErrOtherDataset means a sync's destination holds, or is receiving, another dataset.
var ErrOtherDataset = errors.New("remote: the destination holds another dataset")

// Sync copies the dataset at st into dst, verifying every shard; shards already in dst that verify are kept, so a
// killed sync continues where it stopped. dst is complete (has gload.index) only when every shard is.
//
// Sync holds dst's lock (gload.lock, the one gload tokenize takes) for its whole run: a second sync of the same
// source waits for the first and then finds the copy complete; dst is claimed for its source (gload.sync.json)
// before anything is written, and a sync of another dataset into it fails with ErrOtherDataset, as does a sync
// into a non-empty directory that gload sync did not write (unless it already holds the same dataset).
//
// Before any shard is downloaded the whole index is checked (Index.Verify: every block's lengths, every shard's
// tokens, the recorded fingerprint against the content; it reads the index once, a small part of the shard bytes
// hashed afterwards), so a copy that gload sync completes and vouches for (gload.verified) is consistent throughout.
// The caller closes the returned Meta.
func Sync(ctx context.Context, st *objstore.Store, dst string, opts SyncOptions) (*Meta, error) {
	if err := os.MkdirAll(dst, 0o755); err != nil {
		return nil, fmt.Errorf("remote: %w", err)
	}
	lk, err := dirlock.Acquire(ctx, dst, dirlock.Options{Wait: true, Waiting: opts.Waiting})
	if err != nil {
		return nil, fmt.Errorf("remote: sync into %s: %w", dst, err)
	}
	defer lk.Release()
	claimed, err := checkSource(dst, st.URL())
	if err != nil {
		return nil, err
	}
	// The index is fetched into a side directory first and moved into dst last.
	side := filepath.Join(dst, ".gload-sync")
	meta, err := fetchMeta(ctx, st, side, 0o644, false) // a dataset directory of the user's: the usual modes
	if err != nil {
		return nil, err
	}
	ok := false
	defer func() {
		if !ok {
			meta.Close()
		}
	}()
	if !claimed {
		if err := adopt(dst, st.URL(), meta.Index); err != nil {
			return nil, err
		}
	}
	if same, err := alreadySynced(dst, side, meta); err != nil || same {
		if err == nil {
			err = os.RemoveAll(side)
		}
		if err != nil {
			return nil, fmt.Errorf("remote: %w", err)
		}
		meta.Dir, ok = dst, true
		return meta, nil
	}
	if err := meta.Index.Verify(); err != nil {
		return nil, fmt.Errorf("remote: %s/%s: %w", st.URL(), dataset.IndexFile, err)
	}
	// The commit point (state.json, loader/dataset/doc.go) and the index go first: from here on dst does not look
	// complete until every shard is verified.
	for _, name := range []string{dataset.StateFile, dataset.IndexFile} {
		if err := os.Remove(filepath.Join(dst, name)); err != nil && !errors.Is(err, os.ErrNotExist) {
			return nil, fmt.Errorf("remote: %w", err)
		}
	}
	var total, done int64
	for _, e := range meta.Shards {
		total += e.Size
	}
	for _, e := range meta.Shards {
		path, err := dataset.ShardPath(dst, e.Name)
		if err != nil {
			return nil, fmt.Errorf("remote: %s/%s: %w", st.URL(), dataset.IndexFile, err)
		}
		if VerifyShard(path, e) == nil {
			done += e.Size
			if opts.Progress != nil {
				opts.Progress(done, total, e.Name)
			}
			continue
		}
		base := done
		_, err = st.Download(ctx, e.Name, path, objstore.DownloadOptions{
			Size:   e.Size,
			Verify: func(p string) error { return VerifyShard(p, e) },
			Progress: func(n int64) {
				if opts.Progress != nil {
					opts.Progress(base+n, total, e.Name)
				}
			},
		})
		if err != nil {
			return nil, err
		}
		done += e.Size
	}
	// In a local directory the order is Finalize's: dataset_info.json, gload.index and the stamp, state.json last.
	for _, name := range []string{dataset.InfoFile, dataset.IndexFile} {
		if err := os.Rename(filepath.Join(side, name), filepath.Join(dst, name)); err != nil {
			return nil, fmt.Errorf("remote: %w", err)
		}
	}
	// Every shard was just verified against its content hash: vouch for them, so opening needs no second hashing.
	if err := dataset.WriteStamp(dst, meta.Index); err != nil {
		return nil, fmt.Errorf("remote: %w", err)
	}
	if err := os.Rename(filepath.Join(side, dataset.StateFile), filepath.Join(dst, dataset.StateFile)); err != nil {
		return nil, fmt.Errorf("remote: %w", err)
	}
	if err := os.Remove(side); err != nil {
		return nil, fmt.Errorf("remote: %w", err)
	}
	meta.Dir, ok = dst, true
	return meta, nil
}

type syncSource struct {
	Source string `json:"source"` // s3://bucket/prefix
}

// checkSource reads dst's record of its source: true when dst is already a copy of u, ErrOtherDataset when it is
// a copy of something else, false when it has no record.
func checkSource(dst string, u objstore.URL) (bool, error) {
	b, err := os.ReadFile(filepath.Join(dst, SourceFile))
	if errors.Is(err, os.ErrNotExist) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("remote: %w", err)
	}
	var s syncSource
	if err := json.Unmarshal(b, &s); err != nil || s.Source == "" {
		return false, fmt.Errorf("%w: %s: %s is not gload's (%v); remove it or choose another directory", ErrOtherDataset, dst, SourceFile, err)
	}
	if s.Source != u.String() {
		return false, fmt.Errorf("%w: %s is a copy of %s (%s), not of %s; sync each dataset into its own directory",
			ErrOtherDataset, dst, s.Source, SourceFile, u)
	}
	return true, nil
}

// adopt claims dst, which has no source record, for u: when it is empty (but for the lock and the side
// directory), or already holds the dataset ix (a copy made before records were kept). Anything else is refused.
func adopt(dst string, u objstore.URL, ix *dataset.Index) error {
	ents, err := os.ReadDir(dst)
	if err != nil {
		return fmt.Errorf("remote: %w", err)
	}
	var others []string
	for _, e := range ents {
		if n := e.Name(); n != dirlock.Name && n != ".gload-sync" {
			others = append(others, n)
		}
	}
	if len(others) > 0 {
		// The fingerprints recorded in the headers (no length is read: the shards and lengths are checked later).
		have, err := dataset.MapIndex(filepath.Join(dst, dataset.IndexFile))
		var haveFP string
		if err == nil {
			haveFP = have.RecordedFingerprint()
			err = have.Close()
		}
		if err != nil || haveFP != ix.RecordedFingerprint() {
			what := "holds " + others[0]
			if err == nil {
				what = "holds the dataset with fingerprint " + haveFP
			}
			return fmt.Errorf("%w: %s is not empty and was not written by gload sync of %s (it %s; %s has fingerprint %s); "+
				"sync into an empty directory", ErrOtherDataset, dst, u, what, u, ix.RecordedFingerprint())
		}
	}
	b, _ := json.Marshal(syncSource{Source: u.String()})
	return writeAtomic(filepath.Join(dst, SourceFile), append(b, '\n'), 0o644)
}

// alreadySynced reports whether dst already holds exactly the dataset whose metadata is in side, every shard
// proven by its stamp or hashed again (a second sync of the same source after the first finished).
func alreadySynced(dst, side string, meta *Meta) (bool, error) {
	for _, name := range append(append([]string{}, metaFiles...), dataset.IndexFile) {
		if !sameFile(filepath.Join(dst, name), filepath.Join(side, name)) {
			return false, nil
		}
	}
	ds, err := dataset.Open(dst, dataset.OpenOptions{})
	if err != nil {
		return false, nil
	}
	defer ds.Close()
	return len(ds.ScannedShards()) == 0 && ds.Fingerprint() == meta.Index.RecordedFingerprint(), nil
}

// sameFile reports whether the regular files a and b exist and hold the same bytes, reading both in pieces (an
// index may be tens of GB).
func sameFile(a, b string) bool {
	fa, sa, err := safename.OpenRegular(a)
	if err != nil {
		return false
	}
	defer fa.Close()
	fb, sb, err := safename.OpenRegular(b)
	if err != nil {
		return false
	}
	defer fb.Close()
	if sa.Size() != sb.Size() {
		return false
	}
	ba, bb := make([]byte, 1<<20), make([]byte, 1<<20)
	for off := int64(0); off < sa.Size(); {
		n := int(min(int64(len(ba)), sa.Size()-off))
		if _, err := fa.ReadAt(ba[:n], off); err != nil {
			return false
		}
		if _, err := fb.ReadAt(bb[:n], off); err != nil {
			return false
		}
		if !bytes.Equal(ba[:n], bb[:n]) {
			return false
		}
		off += int64(n)
	}
	return true
}

// Upload copies the complete local dataset in dir to st: shards (skipping objects already there with the same
// size, so a killed upload continues), then the Hugging Face metadata, then gload.index last.
//
// The index is checked in full first (Index.Verify, reading it once through a memory map): a corrupt one is not
// published.
func Upload(ctx context.Context, dir string, st *objstore.Store) error {
	shards, err := indexShards(dir, true)
	if err == nil {
		_, err = os.Stat(filepath.Join(dir, dataset.StateFile)) // the commit point of a local dataset
	}
	if err != nil {
		return fmt.Errorf("remote: upload %s: %w (only complete gload datasets are uploaded)", dir, err)
	}
	have := map[string]int64{}
	objs, err := st.List(ctx)
	if err != nil {
		return err
	}
	for _, o := range objs {
		have[o.Name] = o.Size
	}
	if _, ok := have[dataset.IndexFile]; ok {
		// Replacing a complete dataset: take its index away first so it never looks complete with mixed shards.
		if err := st.Remove(ctx, dataset.IndexFile); err != nil {
			return err
		}
	}
	for _, e := range shards {
		if size, ok := have[e.Name]; ok && size == e.Size {
			continue
		}
		if err := st.Upload(ctx, e.Name, filepath.Join(dir, e.Name)); err != nil {
			return err
		}
	}
	return uploadMeta(ctx, dir, st)
}

// indexShards returns the shard entries of dir/gload.index, mapped (dataset.MapIndex) and unmapped again; verify
// checks every length too (Index.Verify).
func indexShards(dir string, verify bool) ([]dataset.ShardEntry, error) {
	ix, err := dataset.MapIndex(filepath.Join(dir, dataset.IndexFile))
	if err != nil {
		return nil, err
	}
	if verify {
		if err := ix.Verify(); err != nil {
			return nil, errors.Join(fmt.Errorf("index %s: %w", filepath.Join(dir, dataset.IndexFile), err), ix.Close())
		}
	}
	return ix.Shards, ix.Close()
}

func uploadMeta(ctx context.Context, dir string, st *objstore.Store) error {
	for _, name := range append(append([]string{}, metaFiles...), dataset.IndexFile) {
		if err := st.Upload(ctx, name, filepath.Join(dir, name)); err != nil {
			return err
		}
	}
	return nil
}

// writeAtomic writes path with mode perm through a fresh temporary file (O_EXCL, a random name: nothing planted
// in the directory is followed or reused), fsync and rename.
func writeAtomic(path string, b []byte, perm os.FileMode) error {
	f, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".*.tmp")
	if err != nil {
		return fmt.Errorf("remote: %w", err)
	}
	tmp := f.Name()
	merr := f.Chmod(perm)
	_, werr := f.Write(b)
	serr := f.Sync()
	cerr := f.Close()
	if err := errors.Join(merr, werr, serr, cerr); err != nil {
		os.Remove(tmp)
		return fmt.Errorf("remote: write %s: %w", path, err)
	}
	if err := os.Rename(tmp, path); err != nil {
		os.Remove(tmp)
		return fmt.Errorf("remote: %w", err)
	}
	return nil
}

// CacheDir is the directory of the dataset at u inside a cache root: one directory per bucket and prefix.
func CacheDir(root string, u objstore.URL) string {
	parts := []string{root, "s3", u.Bucket}
	if u.Prefix != "" {
		parts = append(parts, strings.Split(u.Prefix, "/")...)
	}
	return filepath.Join(parts...)
}
