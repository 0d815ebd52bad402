package dataset

import (
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"sort"
	"sync/atomic"

	"golang.org/x/sync/errgroup"

	"github.com/gload/gload/internal/safename"
)

// OpenOptions control Open.
type OpenOptions struct {
	// RebuildIndex ignores gload.index and rebuilds it by scanning the shards.
	RebuildIndex bool
	// WriteIndex stores a rebuilt index and the freshness stamp (atomically):
	// beside the shards when the dataset has its own gload.index and the
	// directory is writable, else in IndexDir. A failure to write is logged,
	// not returned.
	WriteIndex bool
	// IndexDir is the index cache directory (see DefaultIndexDir) for datasets
	// without their own gload.index (written by Hugging Face) and for
	// directories that cannot be written. "" keeps such indexes beside the
	// shards (WriteIndex) or in memory only.
	IndexDir string
	// Verify hashes every shard and compares it with the index, even when the
	// freshness stamp says the shards have not changed.
	Verify bool
	// Logger receives rebuild notices; nil discards them.
	Logger *slog.Logger
	// Shards, if set, makes shard files local on demand (object storage): Open then reads only state.json,
	// dataset_info.json and gload.index, and readers call Dataset.Acquire before reading rows (see lazy.go).
	Shards ShardSource
}

// ShardStat describes one open shard.
type ShardStat struct {
	Name    string
	Rows    int64
	Tokens  int64
	Bytes   int64
	Batches int    // record batches holding rows
	IDsType string // Arrow type of input_ids, e.g. "list<int32>"
	// ContentHash is the SHA-256 of the shard file.
	ContentHash Digest
}

// Dataset is an open dataset directory. All methods but Close are safe for
// concurrent use.
type Dataset struct {
	dir          string
	shards       []*shard
	starts       []int64 // starts[k] is the global index of shard k's first row; len(shards)+1 entries
	lengths      []uint32
	tokHash      string
	fp           Digest
	index        *Index // the index in use (read, or rebuilt)
	ixMap        []byte // the mapping of gload.index whose lengths d.lengths views, unmapped by Close
	ixPath       string // the index file read (for errors)
	ixChecked    bool   // every length of the index in use was checked at open
	lens         *IndexLengths
	upgraded     bool // the index in use was read from an older format version (rewritten with WriteIndex)
	verified     int  // shards hashed at open
	scanned      int  // shards scanned at open
	scannedNames []string
	columns      []string
	closed       atomic.Bool
	zeroCopy     bool
	hasLabels    bool
	fromIndex    bool
	src          ShardSource // lazy datasets only
	idsType      string      // lazy datasets: input_ids' dtype from dataset_info.json
}

type shard struct {
	name, path string
	data       []byte
	mapped     bool
	size       int64
	stat       fileStat
	schema     *arrowSchema
	ids        idsLayout
	labels     *idsLayout // the SFT labels column, nil when the shard has none
	colIndex   map[string]int
	firstMsg   int64 // offset of the first message after the schema
	entry      ShardEntry
	uniform    int64 // rows per batch when all batches but the last have the same size
	cache      []atomic.Pointer[batchSlot]
	lazy       *lazyShard // set when the file is mapped on demand
}

type batchSlot struct {
	b   *idsBatch
	lb  *idsBatch // labels, when the shard has them
	err error
}

// Open opens the dataset in dir: it reads state.json, memory-maps every shard
// listed there and loads gload.index (from dir, or from the index cache for
// datasets without one). A shard whose size, mtime, ctime or inode differ
// from the freshness stamp is hashed and compared with the index; a missing,
// corrupt or older index, and a shard whose content no longer matches, is
// rebuilt by scanning that shard's list offsets (never its token values).
func Open(dir string, opts OpenOptions) (*Dataset, error) {
	if opts.Shards != nil {
		return openLazy(dir, opts)
	}
	log := opts.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	files, err := readState(dir)
	if err != nil {
		return nil, err
	}
	d := &Dataset{dir: dir}
	for _, name := range files {
		sh, err := openShard(dir, name)
		if err != nil {
			return nil, errors.Join(err, d.Close())
		}
		d.shards = append(d.shards, sh)
	}
	loc := locateIndex(dir, opts)
	var ix *Index
	reason := "rebuild requested"
	if !opts.RebuildIndex {
		r := loc.read()
		ix, reason, d.ixMap, d.ixPath, d.upgraded = r.ix, r.reason, r.mapping, r.path, r.upgraded
		d.ixChecked = ix != nil && d.ixMap == nil // read in full (an older version), or nothing to check
		if d.upgraded {
			log.Info("gload index of an older format version read in full", "dir", dir, "reason", reason,
				"upgrade", "gload index "+dir)
		}
		if ix != nil && d.ixMap != nil && (opts.Verify || ix.Rows() <= eagerCheckRows) {
			if err := ix.Verify(); err != nil {
				log.Warn("gload index is corrupt", "index", d.ixPath, "err", err)
				ix, reason = nil, fmt.Sprintf("index %s: %v", d.ixPath, err)
			} else {
				d.ixChecked = true
			}
		}
	}
	if err := d.init(ix, loc.stamp(), reason, opts, log); err != nil {
		return nil, errors.Join(err, d.Close())
	}
	if opts.WriteIndex && (d.scanned > 0 || d.verified > 0 || d.upgraded) {
		loc.save(d, d.scanned > 0 || d.upgraded, log)
	}
	return d, nil
}

// indexLocation says where a dataset's index and stamp are read and written.
type indexLocation struct {
	dir   string // the dataset
	own   bool   // the dataset has its own gload.index (written by gload)
	cache string // the index cache entry ("" without IndexDir)
}

func locateIndex(dir string, opts OpenOptions) indexLocation {
	loc := indexLocation{dir: dir}
	if _, err := os.Lstat(filepath.Join(dir, IndexFile)); err == nil {
		loc.own = true
	}
	if opts.IndexDir != "" {
		if c, err := cacheEntry(opts.IndexDir, dir); err == nil {
			loc.cache = c
		}
	}
	return loc
}

// eagerCheckRows: Open checks every length of an index of at most this many rows (4 MiB of lengths) at open, so
// that a corrupt small index is rebuilt from the shards as before; a larger one is checked per block on first
// access (IndexLengths). A variable for tests.
var eagerCheckRows int64 = 1 << 20

// indexRead is what indexLocation.read found.
type indexRead struct {
	ix       *Index
	mapping  []byte // the index file's mapping that ix's lengths view; nil for an index read into memory
	path     string // the index file
	upgraded bool   // ix was read in full from an older format version
	reason   string // why there is no index (or why it was upgraded)
}

// read loads the index: the dataset's own, else the cached one, memory-mapped and checked in O(shards +
// blocks). A valid version-2 index is read in full instead; for a version-1 index (or a version 2 that does not
// decode) only the tokenizer hash is kept, and the shards are scanned.
func (l indexLocation) read() indexRead {
	dir := l.dir
	if !l.own && l.cache != "" {
		dir = l.cache
	}
	r := indexRead{path: filepath.Join(dir, IndexFile)}
	ix, m, err := mapIndex(r.path)
	if err == nil {
		r.ix, r.mapping = ix, m
		return r
	}
	r.reason = err.Error()
	if errors.Is(err, ErrOldIndex) {
		if ix, v2err := readIndexV2(r.path); v2err == nil {
			r.ix, r.upgraded = ix, true
			return r
		}
		// Rebuilt from the shards, keeping what only the old index knew.
		r.ix = &Index{TokenizerHash: oldTokenizerHash(dir)}
	}
	return r
}

// stamp loads the freshness stamp beside the index, or from the cache entry.
func (l indexLocation) stamp() *stamp {
	if l.own || l.cache == "" {
		if st := readStamp(filepath.Join(l.dir, StampFile)); st != nil || l.cache == "" {
			return st
		}
	}
	return readStamp(filepath.Join(l.cache, StampFile))
}

// save stores a rebuilt index (when rebuilt) and a fresh stamp: beside the
// shards for a gload dataset (or with no cache), else — or when that fails —
// in the cache entry.
func (l indexLocation) save(d *Dataset, rebuilt bool, log *slog.Logger) {
	write := func(dir string) error {
		if rebuilt {
			if err := WriteIndex(dir, d.index); err != nil {
				return err
			}
		}
		return writeStamp(dir, d.index.checksum, d.shards)
	}
	if l.own || l.cache == "" {
		err := write(l.dir)
		if err == nil {
			return
		}
		if l.cache == "" {
			log.Warn("gload index not written", "dir", l.dir, "err", err)
			return
		}
		log.Info("gload index not written beside the shards, using the index cache", "dir", l.dir, "err", err)
		rebuilt = true // the cache entry needs the index too
	}
	err := os.MkdirAll(l.cache, 0o755)
	if err == nil {
		err = write(l.cache)
	}
	if err != nil {
		log.Warn("gload index not written", "dir", l.dir, "cache", l.cache, "err", err)
	}
}

// readState returns the data file names listed in dir/state.json.
func readState(dir string) ([]string, error) {
	path := filepath.Join(dir, StateFile)
	b, err := safename.ReadFile(path, safename.MaxMetaBytes)
	if errors.Is(err, os.ErrNotExist) {
		if _, derr := os.Stat(filepath.Join(dir, "dataset_dict.json")); derr == nil {
			return nil, fmt.Errorf("open dataset %s: %w: it is a DatasetDict, open one of its splits", dir, ErrNotDataset)
		}
		return nil, fmt.Errorf("open dataset %s: %w: no %s", dir, ErrNotDataset, StateFile)
	}
	if err != nil {
		return nil, fmt.Errorf("open dataset %s: %w", dir, err)
	}
	var st struct {
		DataFiles *[]struct {
			Filename string `json:"filename"`
		} `json:"_data_files"`
	}
	if err := json.Unmarshal(b, &st); err != nil {
		return nil, fmt.Errorf("open dataset %s: %w: parse %s: %w", dir, ErrNotDataset, StateFile, err)
	}
	if st.DataFiles == nil {
		return nil, fmt.Errorf("open dataset %s: %w: %s has no _data_files", dir, ErrNotDataset, StateFile)
	}
	names := make([]string, 0, len(*st.DataFiles))
	seen := make(map[string]bool)
	for _, f := range *st.DataFiles {
		if err := checkFileName(f.Filename); err != nil {
			return nil, fmt.Errorf("open dataset %s: %w: %s: %w", dir, ErrNotDataset, StateFile, err)
		}
		if seen[f.Filename] {
			return nil, fmt.Errorf("open dataset %s: %w: %s lists %s twice", dir, ErrNotDataset, StateFile, f.Filename)
		}
		seen[f.Filename] = true
		names = append(names, f.Filename)
	}
	return names, nil
}

func openShard(dir, name string) (*shard, error) {
	path := filepath.Join(dir, name)
	f, st, err := safename.OpenRegular(path) // never through a symbolic link, never a FIFO or device
	if err != nil {
		return nil, fmt.Errorf("open shard %s: %w", path, err)
	}
	defer f.Close()
	data, err := mapFile(f, st.Size())
	if err != nil {
		return nil, fmt.Errorf("open shard %s: %w", path, err)
	}
	sh := &shard{name: name, path: path, data: data, mapped: true, size: st.Size(), stat: statOf(st)}
	if err := sh.parseSchema(); err != nil {
		return nil, errors.Join(err, sh.close())
	}
	return sh, nil
}

func (sh *shard) close() error {
	if !sh.mapped {
		return nil
	}
	sh.mapped = false
	if err := unmapFile(sh.data); err != nil {
		return fmt.Errorf("unmap shard %s: %w", sh.path, err)
	}
	sh.data = nil
	return nil
}

// corrupt wraps a decoding error with the shard path (and ErrCorrupt unless
// the data is merely unsupported).
func (sh *shard) corrupt(err error) error {
	if errors.Is(err, ErrUnsupported) || errors.Is(err, ErrCorrupt) {
		return fmt.Errorf("shard %s: %w", sh.path, err)
	}
	return fmt.Errorf("shard %s: %w: %w", sh.path, ErrCorrupt, err)
}

func (sh *shard) parseSchema() error {
	m, err := readMessage(sh.data, 0)
	if err != nil {
		return sh.corrupt(err)
	}
	if m.eos {
		return sh.corrupt(errors.New("stream ends before its schema"))
	}
	s, err := decodeSchema(m)
	if err != nil {
		return sh.corrupt(err)
	}
	ids, err := findIDs(s)
	if err != nil {
		return sh.corrupt(err)
	}
	sh.schema, sh.ids, sh.firstMsg = s, ids, m.next
	for _, f := range s.fields {
		if f.name == "labels" {
			// A labels column that is not a list of integers (a class label) is an ordinary column, not SFT labels.
			if l, err := findIntList(s, "labels"); err == nil {
				sh.labels = &l
			}
			break
		}
	}
	sh.colIndex = make(map[string]int, len(s.fields))
	for k, f := range s.fields {
		if _, dup := sh.colIndex[f.name]; !dup {
			sh.colIndex[f.name] = k
		}
	}
	return nil
}

// scan walks every message of the shard, validating each record batch's
// input_ids, and returns the shard's index entry and per-row lengths. It
// reads list offsets and validity bitmaps, never token values, and hashes the
// file for the entry's ContentHash unless the caller passes the hash.
func (sh *shard) scan(hash *Digest) (ShardEntry, []uint32, error) {
	e := ShardEntry{Name: sh.name, Size: int64(len(sh.data))}
	if hash != nil {
		e.ContentHash = *hash
	} else {
		e.ContentHash = bytesDigest(sh.data)
	}
	var lengths []uint32
	p := sh.firstMsg
	for {
		m, err := readMessage(sh.data, p)
		if err != nil {
			return e, nil, sh.corrupt(err)
		}
		if m.eos {
			break
		}
		switch m.kind {
		case msgRecordBatch:
			b, err := decodeIDs(sh.data, m, sh.schema, sh.ids)
			if err != nil {
				return e, nil, sh.corrupt(fmt.Errorf("batch %d: %w", len(e.Batches), err))
			}
			if b.rows == 0 {
				break
			}
			// Ids stored wider than int32 are checked while the shard is read
			// anyway (it is being hashed): an id gload cannot serve refuses the
			// dataset at open, naming shard and row (batch reads check again
			// when the index came from the cache).
			if r, x, bad := b.firstWideID(); bad {
				return e, nil, sh.corrupt(fmt.Errorf("%w: row %d of the shard (batch %d row %d): token id %s does not fit in int32",
					ErrUnsupported, e.Rows+r, len(e.Batches), r, x))
			}
			e.Batches = append(e.Batches, BatchRef{Offset: m.start, FirstRow: e.Rows})
			for r := int64(0); r < b.rows; r++ {
				start, end, err := b.span(r)
				if err != nil {
					return e, nil, sh.corrupt(fmt.Errorf("batch %d: %w", len(e.Batches)-1, err))
				}
				if end-start > math.MaxUint32 {
					return e, nil, sh.corrupt(fmt.Errorf("batch %d row %d: %d tokens", len(e.Batches)-1, r, end-start))
				}
				lengths = append(lengths, uint32(end-start))
				e.Tokens += end - start
			}
			e.Rows += b.rows
		case msgDictionaryBatch:
			// Dictionaries of other columns: nothing to index.
		default:
			return e, nil, sh.corrupt(fmt.Errorf("message at offset %d: unexpected message type %d", m.start, m.kind))
		}
		p = m.next
	}
	if lengths == nil {
		lengths = []uint32{}
	}
	return e, lengths, nil
}

// init fills every shard's entry and d.lengths from ix where it matches the
// files, scanning the shards where it does not; reason says why ix is nil. A
// shard the stamp vouches for is taken from ix as it is; any other is hashed
// first (all of them with opts.Verify).
func (d *Dataset) init(ix *Index, st *stamp, reason string, opts OpenOptions, log *slog.Logger) error {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	type span struct{ start, rows int64 }
	byName := map[string]int{}
	var spans []span
	if ix != nil {
		d.tokHash = ix.TokenizerHash
		var row int64
		for i, e := range ix.Shards {
			byName[e.Name] = i
			spans = append(spans, span{row, e.Rows})
			row += e.Rows
		}
	}
	lens := make([][]uint32, len(d.shards))
	hashes := make([]*Digest, len(d.shards))
	var check, stale []int
	for k, sh := range d.shards {
		i, ok := byName[sh.name]
		switch {
		case ok && ix.Shards[i].Size == sh.size:
			sh.entry = ix.Shards[i]
			lens[k] = ix.Lengths[spans[i].start : spans[i].start+spans[i].rows]
			if opts.Verify || !st.proves(ix.checksum, sh.name, sh.stat) {
				check = append(check, k)
			}
			continue
		case ok:
			reason = fmt.Sprintf("%v: shard %s has %d bytes, the index says %d", ErrStaleIndex, sh.name, sh.size, ix.Shards[i].Size)
		case ix != nil && len(ix.Shards) > 0:
			reason = fmt.Sprintf("%v: shard %s not in the index", ErrStaleIndex, sh.name)
		}
		stale = append(stale, k)
	}
	if len(check) > 0 {
		g := errgroup.Group{}
		g.SetLimit(runtime.GOMAXPROCS(0))
		for _, k := range check {
			g.Go(func() error {
				h := bytesDigest(d.shards[k].data)
				hashes[k] = &h
				return nil
			})
		}
		_ = g.Wait()
		for _, k := range check {
			sh := d.shards[k]
			if *hashes[k] != sh.entry.ContentHash {
				log.Warn("shard content changed since it was indexed", "dir", d.dir, "shard", sh.name,
					"sha256", hashes[k].String(), "index_sha256", sh.entry.ContentHash.String())
				reason = fmt.Sprintf("%v: shard %s: sha256 %s, the index says %s", ErrContentMismatch, sh.name, *hashes[k], sh.entry.ContentHash)
				stale = append(stale, k)
			}
		}
		slices.Sort(stale)
		d.verified = len(check)
	}
	// Use the index's length array in place when it covers exactly these shards in order.
	inPlace := ix != nil && len(stale) == 0 && len(ix.Shards) == len(d.shards)
	for k, sh := range d.shards {
		inPlace = inPlace && ix.Shards[k].Name == sh.name
	}
	if !inPlace && ix != nil && d.ixMap != nil && !d.ixChecked {
		// Lengths copied out of a mapped index go into a new index with new block checksums: check them first.
		if err := ix.Verify(); err != nil {
			reason = fmt.Sprintf("index %s: %v", d.ixPath, err)
			log.Warn("gload index is corrupt", "index", d.ixPath, "err", err)
			stale = stale[:0]
			for k := range d.shards {
				stale = append(stale, k)
			}
		}
		d.ixChecked = true
	}
	if len(stale) > 0 {
		g := errgroup.Group{}
		g.SetLimit(runtime.GOMAXPROCS(0))
		for _, k := range stale {
			g.Go(func() error {
				e, l, err := d.shards[k].scan(hashes[k])
				d.shards[k].entry, lens[k] = e, l
				return err
			})
		}
		if err := g.Wait(); err != nil {
			return fmt.Errorf("open dataset %s: %w", d.dir, err)
		}
		log.Info("gload index rebuilt", "dir", d.dir, "reason", reason, "shards_scanned", len(stale), "shards", len(d.shards))
	}
	d.scanned = len(stale)
	for _, k := range stale {
		d.scannedNames = append(d.scannedNames, d.shards[k].name)
	}
	d.fromIndex = len(stale) == 0
	d.starts = make([]int64, len(d.shards)+1)
	for k, sh := range d.shards {
		d.starts[k+1] = d.starts[k] + sh.entry.Rows
		sh.cache = make([]atomic.Pointer[batchSlot], len(sh.entry.Batches))
		sh.uniform = uniformBatch(sh.entry)
	}
	if inPlace {
		d.lengths = ix.Lengths
		d.index = ix
	} else {
		d.lengths = make([]uint32, 0, d.starts[len(d.shards)])
		for _, l := range lens {
			d.lengths = append(d.lengths, l...)
		}
		d.index = &Index{TokenizerHash: d.tokHash, Lengths: d.lengths}
		for _, sh := range d.shards {
			d.index.Shards = append(d.index.Shards, sh.entry)
		}
		d.index.encodeHeader() // sets the checksum the stamp refers to, the block table and the fingerprint
		d.ixChecked = true     // built from the shards
	}
	if !d.index.readFP.IsZero() {
		d.fp = d.index.readFP // recorded in the header (covered by its checksum), or computed by encodeHeader
	} else {
		d.fp = d.index.ComputeFingerprint()
	}
	d.lens = newIndexLengths(d.ixPath, d.lengths, d.index.table(), d.ixChecked)
	d.zeroCopy = hostLittleEndian
	d.hasLabels = len(d.shards) > 0
	for _, sh := range d.shards {
		if sh.labels == nil {
			d.hasLabels = false
		}
	}
	for _, sh := range d.shards {
		if d.hasLabels != (sh.labels != nil) {
			return fmt.Errorf("dataset %s: %w: shard %s has no labels column while others have one", d.dir, ErrCorrupt, sh.name)
		}
		if sh.labels != nil && (sh.labels.width != 4 || !sh.labels.signed) {
			d.zeroCopy = false
		}
	}
	seen := map[string]bool{"input_ids": true, "labels": d.hasLabels}
	for _, sh := range d.shards {
		if sh.ids.width != 4 || !sh.ids.signed {
			d.zeroCopy = false
		}
		for _, f := range sh.schema.fields {
			if !seen[f.name] {
				seen[f.name] = true
				d.columns = append(d.columns, f.name)
			}
		}
	}
	return nil
}

// uniformBatch returns the common row count of all batches but the last, or 0.
func uniformBatch(e ShardEntry) int64 {
	if len(e.Batches) < 2 {
		return e.Rows
	}
	u := e.Batches[1].FirstRow
	for j := 2; j < len(e.Batches); j++ {
		if e.Batches[j].FirstRow-e.Batches[j-1].FirstRow != u {
			return 0
		}
	}
	if e.Rows-e.Batches[len(e.Batches)-1].FirstRow > u {
		return 0
	}
	return u
}

// batchRows is the row count of batch j of the shard.
func (sh *shard) batchRows(j int) int64 {
	if j+1 < len(sh.entry.Batches) {
		return sh.entry.Batches[j+1].FirstRow - sh.entry.Batches[j].FirstRow
	}
	return sh.entry.Rows - sh.entry.Batches[j].FirstRow
}

// batchFor returns the batch holding shard-local row r.
func (sh *shard) batchFor(r int64) int {
	if sh.uniform > 0 {
		return int(r / sh.uniform)
	}
	bs := sh.entry.Batches
	return sort.Search(len(bs), func(j int) bool { return bs[j].FirstRow > r }) - 1
}

// batch decodes (once) and returns batch j.
func (sh *shard) batch(j int) (*idsBatch, error) {
	if s := sh.cache[j].Load(); s != nil {
		return s.b, s.err
	}
	s := &batchSlot{}
	br := sh.entry.Batches[j]
	m, err := readMessage(sh.data, br.Offset)
	if err == nil {
		s.b, err = decodeIDs(sh.data, m, sh.schema, sh.ids)
	}
	if err == nil && sh.labels != nil {
		s.lb, err = decodeIntList(sh.data, m, s.b.rb, sh.schema, *sh.labels)
	}
	if err == nil && s.b.rows != sh.batchRows(j) {
		err = fmt.Errorf("record batch at offset %d: %d rows, index says %d: %w", br.Offset, s.b.rows, sh.batchRows(j), ErrStaleIndex)
	}
	if err == nil {
		// Ids stored wider than int32 (Hugging Face writes int64) are checked
		// for the whole batch at its first touch, so a bad id fails the first
		// read of its batch, naming its row, not the read that reaches it.
		if r, x, bad := s.b.firstWideID(); bad {
			err = fmt.Errorf("%w: row %d of the shard (batch row %d): token id %s does not fit in int32", ErrUnsupported, br.FirstRow+r, r, x)
		}
	}
	if err != nil {
		s.b, s.err = nil, sh.corrupt(fmt.Errorf("batch %d: %w", j, err))
	}
	sh.cache[j].CompareAndSwap(nil, s)
	s = sh.cache[j].Load()
	return s.b, s.err
}

// row locates global row i: its shard, batch, batch-local row and value span.
func (d *Dataset) row(i int) (sh *shard, b *idsBatch, r, start, end int64, err error) {
	if d.closed.Load() {
		return nil, nil, 0, 0, 0, fmt.Errorf("dataset %s: %w", d.dir, ErrClosed)
	}
	if i < 0 || i >= len(d.lengths) {
		return nil, nil, 0, 0, 0, fmt.Errorf("dataset %s: %w: row %d of %d", d.dir, ErrRange, i, len(d.lengths))
	}
	g := int64(i)
	k := sort.Search(len(d.shards), func(k int) bool { return d.starts[k+1] > g })
	sh = d.shards[k]
	if sh.lazy != nil && !sh.lazy.mapped.Load() {
		return nil, nil, 0, 0, 0, fmt.Errorf("dataset %s: row %d in shard %s: %w", d.dir, i, sh.name, ErrNotAcquired)
	}
	local := g - d.starts[k]
	j := sh.batchFor(local)
	b, err = sh.batch(j)
	if err != nil {
		return nil, nil, 0, 0, 0, err
	}
	r = local - sh.entry.Batches[j].FirstRow
	if start, end, err = b.span(r); err != nil {
		return nil, nil, 0, 0, 0, fmt.Errorf("shard %s: record batch %d: %w", sh.path, j, err)
	}
	if end-start != int64(d.lengths[i]) {
		return nil, nil, 0, 0, 0, fmt.Errorf("shard %s: batch %d row %d: %w: %d tokens, index says %d",
			sh.path, j, r, ErrStaleIndex, end-start, d.lengths[i])
	}
	return sh, b, r, start, end, nil
}

// HasLabels reports whether the dataset stores SFT labels (a `labels` list column in every shard).
func (d *Dataset) HasLabels() bool { return d.hasLabels }

// rowLabels locates the labels of global row i (HasLabels datasets): the batch and value span, checked to be as
// long as the row's input_ids.
func (d *Dataset) rowLabels(i int) (sh *shard, lb *idsBatch, start, end int64, err error) {
	if !d.hasLabels {
		return nil, nil, 0, 0, fmt.Errorf("dataset %s: column \"labels\": %w", d.dir, ErrNoColumn)
	}
	sh, _, r, s0, e0, err := d.row(i)
	if err != nil {
		return nil, nil, 0, 0, err
	}
	g := int64(i)
	k := sort.Search(len(d.shards), func(k int) bool { return d.starts[k+1] > g })
	j := sh.batchFor(g - d.starts[k])
	slot := sh.cache[j].Load()
	if slot == nil || slot.lb == nil {
		return nil, nil, 0, 0, fmt.Errorf("shard %s: batch %d: labels not decoded", sh.path, j)
	}
	if start, end, err = slot.lb.span(r); err != nil {
		return nil, nil, 0, 0, fmt.Errorf("shard %s: record batch %d: labels: %w", sh.path, j, err)
	}
	if end-start != e0-s0 {
		return nil, nil, 0, 0, fmt.Errorf("shard %s: batch %d row %d: %w: %d labels for %d tokens", sh.path, j, r, ErrCorrupt, end-start, e0-s0)
	}
	return sh, slot.lb, start, end, nil
}

// Labels returns the labels of row i as a read-only view into the memory map (like Tokens): one per token, -100
// where the loss is off. ErrNoColumn when the dataset has no labels.
func (d *Dataset) Labels(i int) ([]int32, error) {
	_, lb, start, end, err := d.rowLabels(i)
	if err != nil {
		return nil, err
	}
	if lb.i32 == nil {
		return nil, fmt.Errorf("dataset %s: row %d labels: %w", d.dir, i, ErrNotZeroCopy)
	}
	return lb.i32[start:end:end], nil
}

// AppendLabels appends the labels of row i to dst, converting any integer width to int32.
func (d *Dataset) AppendLabels(dst []int32, i int) ([]int32, error) {
	sh, lb, start, end, err := d.rowLabels(i)
	if err != nil {
		return dst, err
	}
	dst, err = lb.appendRange(dst, start, end)
	if err != nil {
		return dst, fmt.Errorf("shard %s: row %d labels: %w", sh.path, i, err)
	}
	return dst, nil
}

// Len returns the number of rows.
func (d *Dataset) Len() int { return len(d.lengths) }

// Length returns the number of tokens in row i, from the index (LengthSource: 0
// for a row of a corrupt block). It panics if i is out of range, like a slice
// index.
func (d *Dataset) Length(i int) int { return int(d.lens.Length(int64(i))) }

// Lengths returns the token count of every row, from the index: a view of the
// memory-mapped gload.index (valid until Close, like Tokens), shared: callers
// must not modify it. Its first call checks every block of the index not
// checked yet (it reads all the lengths: O(rows)); when one is corrupt the
// slice is still returned and LengthSource().Err() reports the block — callers
// must check it. Planners of large datasets use LengthSource, which reads only
// the blocks they read.
func (d *Dataset) Lengths() []uint32 {
	d.lens.CheckAll()
	return d.lengths
}

// LengthSource returns the rows' lengths read per block from the index
// (bucket.Lengths), with the per-block summaries; see IndexLengths. Valid
// until Close.
func (d *Dataset) LengthSource() *IndexLengths { return d.lens }

// TotalTokens is the sum of every row's length, from the index's block table
// (no length is read).
func (d *Dataset) TotalTokens() int64 { return d.lens.Tokens() }

// MaxLength is the longest row's length, from the index's block table.
func (d *Dataset) MaxLength() uint32 { return d.lens.MaxLength() }

// ZeroCopy reports whether Tokens can return views for every row: all shards
// store input_ids as int32 and the host is little-endian. (A values buffer
// that is not 4-byte aligned would still need AppendTokens; Arrow writers
// align buffers to 8 bytes or more.)
func (d *Dataset) ZeroCopy() bool { return d.zeroCopy }

// Tokens returns the token ids of row i as a read-only view into the memory
// map, valid until Close. It returns ErrNotZeroCopy when the row's ids are not
// stored as int32 (use AppendTokens), and an error wrapping ErrCorrupt when the
// record batch holding the row is malformed.
func (d *Dataset) Tokens(i int) ([]int32, error) {
	_, b, _, start, end, err := d.row(i)
	if err != nil {
		return nil, err
	}
	if b.i32 == nil {
		return nil, fmt.Errorf("dataset %s: row %d: %w", d.dir, i, ErrNotZeroCopy)
	}
	return b.i32[start:end:end], nil
}

// AppendTokens appends the token ids of row i to dst, converting any integer
// width to int32. Ids that do not fit in int32 give an error wrapping
// ErrUnsupported; dst is then returned as far as it was filled.
func (d *Dataset) AppendTokens(dst []int32, i int) ([]int32, error) {
	sh, b, r, start, end, err := d.row(i)
	if err != nil {
		return dst, err
	}
	dst, err = b.appendRange(dst, start, end)
	if err != nil {
		return dst, fmt.Errorf("shard %s: row %d (batch row %d): %w", sh.path, i, r, err)
	}
	return dst, nil
}

// Column returns row i of a string (utf8, large_utf8, binary) column; ok is
// false for a null value.
func (d *Dataset) Column(name string, i int) (s string, ok bool, err error) {
	sh, b, r, _, _, err := d.row(i)
	if err != nil {
		return "", false, err
	}
	k, found := sh.colIndex[name]
	if !found || name == "input_ids" {
		return "", false, fmt.Errorf("shard %s: column %q: %w", sh.path, name, ErrNoColumn)
	}
	s, ok, err = stringAt(sh.data, sh.schema, b.rb, k, r)
	if err != nil {
		return "", false, fmt.Errorf("shard %s: %w", sh.path, err)
	}
	return s, ok, nil
}

// Columns returns the names of the columns other than input_ids, in schema
// order (of the first shard that has each).
func (d *Dataset) Columns() []string { return d.columns }

// Fingerprint is the dataset's content fingerprint as 32 hex digits
// (FingerprintString of ContentFingerprint): the identity that seeds epoch
// plans and that resume states name. Copies of a dataset share it.
func (d *Dataset) Fingerprint() string { return FingerprintString(d.fp) }

// ContentFingerprint is the full fingerprint (Index.ComputeFingerprint).
func (d *Dataset) ContentFingerprint() Digest { return d.fp }

// Index returns the index in use (read from disk or rebuilt at open). It is
// shared: callers must not modify it.
func (d *Dataset) Index() *Index { return d.index }

// ShardsVerified is how many shards Open hashed because the freshness stamp
// could not vouch for them (or Verify was set); ShardsScanned how many it
// re-indexed.
func (d *Dataset) ShardsVerified() int { return d.verified }

// ShardsScanned is how many shards Open had to re-index by scanning.
func (d *Dataset) ShardsScanned() int { return d.scanned }

// ScannedShards names the shards Open re-indexed: not in the index, another
// size, or content that no longer hashes to the index's content hash.
func (d *Dataset) ScannedShards() []string { return d.scannedNames }

// TokenizerHash returns the tokenizer hash stored in gload.index ("" when the
// dataset has no index, e.g. one written by Hugging Face).
func (d *Dataset) TokenizerHash() string { return d.tokHash }

// IndexUsed reports whether Open took every shard from a valid gload.index
// (false when it had to scan one or more shards).
func (d *Dataset) IndexUsed() bool { return d.fromIndex }

// IndexUpgraded reports whether Open read the index from an older format
// version (in full; it rewrote it as the current version when WriteIndex was
// set and the write succeeded).
func (d *Dataset) IndexUpgraded() bool { return d.upgraded }

// Shards describes the shards in order.
func (d *Dataset) Shards() []ShardStat {
	out := make([]ShardStat, len(d.shards))
	for k, sh := range d.shards {
		out[k] = ShardStat{
			Name: sh.name, Rows: sh.entry.Rows, Tokens: sh.entry.Tokens, Bytes: sh.size,
			Batches: len(sh.entry.Batches), IDsType: sh.ids.typeName, ContentHash: sh.entry.ContentHash,
		}
	}
	return out
}

// Dir returns the dataset directory.
func (d *Dataset) Dir() string { return d.dir }

// Close unmaps the shards. Slices returned by Tokens become invalid.
func (d *Dataset) Close() error {
	if d.closed.Swap(true) {
		return nil
	}
	var errs []error
	for _, sh := range d.shards {
		errs = append(errs, sh.close())
	}
	if d.ixMap != nil {
		errs = append(errs, unmapFile(d.ixMap))
	}
	return errors.Join(errs...)
}
