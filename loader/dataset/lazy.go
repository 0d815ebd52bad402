package dataset

// Lazy shards: a dataset whose shard files become local only when a reader needs them (object storage through
// loader/shardcache). Open plans from gload.index alone; Acquire makes the shards of a batch's rows local and
// mapped and pins them; their token slices stay valid until the release.

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/gload/gload/internal/safename"
)

// ShardSource makes shard files local on demand (loader/shardcache.Cache implements it). Acquire blocks until the
// named shard is a complete, verified file and pins it until Release; waiting, if set, is called first when it is
// not local yet.
type ShardSource interface {
	Acquire(ctx context.Context, name string, waiting func()) (path string, err error)
	Release(name string)
}

// ErrNotAcquired means a row of a lazy dataset was read without Acquire.
var ErrNotAcquired = errors.New("dataset: shard not acquired")

// lazyShard is the part of a shard that changes when its file is mapped or evicted.
type lazyShard struct {
	mu     sync.Mutex
	mapped atomic.Bool
}

// openLazy opens dir, which must hold state.json and a gload.index covering exactly its shards, without touching
// any shard file: rows, lengths and batch tables come from the index, the column list and id type from
// dataset_info.json.
func openLazy(dir string, opts OpenOptions) (*Dataset, error) {
	files, err := readState(dir)
	if err != nil {
		return nil, err
	}
	path := filepath.Join(dir, IndexFile)
	ix, m, err := mapIndex(path)
	if err != nil {
		return nil, fmt.Errorf("open dataset %s: a dataset whose shards are fetched on demand needs a valid gload.index: %w", dir, err)
	}
	d := &Dataset{dir: dir, src: opts.Shards, tokHash: ix.TokenizerHash, lengths: ix.Lengths, fromIndex: true, ixMap: m, ixPath: path}
	ok := false
	defer func() {
		if !ok {
			unmapFile(m)
		}
	}()
	if len(ix.Shards) != len(files) {
		return nil, fmt.Errorf("open dataset %s: %w: state.json lists %d shards, gload.index %d", dir, ErrStaleIndex, len(files), len(ix.Shards))
	}
	d.starts = make([]int64, len(files)+1)
	for k, name := range files {
		e := ix.Shards[k]
		if e.Name != name {
			return nil, fmt.Errorf("open dataset %s: %w: shard %d is %s in state.json, %s in gload.index", dir, ErrStaleIndex, k, name, e.Name)
		}
		sh := &shard{name: name, path: filepath.Join(dir, name), size: e.Size, stat: fileStat{Size: e.Size},
			entry: e, lazy: &lazyShard{}}
		sh.cache = make([]atomic.Pointer[batchSlot], len(e.Batches))
		sh.uniform = uniformBatch(e)
		d.shards = append(d.shards, sh)
		d.starts[k+1] = d.starts[k] + e.Rows
	}
	if int64(len(ix.Lengths)) != d.starts[len(files)] {
		return nil, fmt.Errorf("open dataset %s: %w: %d lengths for %d rows", dir, ErrBadIndex, len(ix.Lengths), d.starts[len(files)])
	}
	d.fp, d.index = ix.readFP, ix
	d.lens = newIndexLengths(path, d.lengths, ix.table(), false)
	// The shards are not here to rebuild it from: the index came with them (object storage).
	d.lens.fix = "it came from the object store: rebuild it where the dataset was written (`gload index --rebuild DIR`) " +
		"and upload it again (`gload sync DIR s3://…`)"
	cols, idsType, labelsType, err := readFeatures(dir)
	if err != nil {
		return nil, err
	}
	d.hasLabels = labelsType != ""
	for _, c := range cols {
		if !(c == "labels" && d.hasLabels) {
			d.columns = append(d.columns, c)
		}
	}
	d.zeroCopy = hostLittleEndian && idsType == "int32"
	d.idsType = idsType
	ok = true
	return d, nil
}

// readFeatures reads the column names (other than input_ids), input_ids' element dtype and, when labels is a list
// of integers (SFT labels), its element dtype from dataset_info.json, accepting both feature forms ("List" with
// "feature", and "Sequence").
func readFeatures(dir string) (cols []string, idsType, labelsType string, err error) {
	path := filepath.Join(dir, InfoFile)
	b, err := safename.ReadFile(path, safename.MaxMetaBytes)
	if err != nil {
		return nil, "", "", fmt.Errorf("open dataset %s: %w", dir, err)
	}
	var info struct {
		Features map[string]json.RawMessage `json:"features"`
	}
	if err := json.Unmarshal(b, &info); err != nil {
		return nil, "", "", fmt.Errorf("open dataset %s: %w: %s: %w", dir, ErrNotDataset, InfoFile, err)
	}
	listDtype := func(raw json.RawMessage) string {
		var f struct {
			Type    string `json:"_type"`
			Feature struct {
				Dtype string `json:"dtype"`
			} `json:"feature"`
		}
		if json.Unmarshal(raw, &f) != nil || (f.Type != "Sequence" && f.Type != "List" && f.Type != "LargeList") {
			return ""
		}
		return f.Feature.Dtype
	}
	ids, ok := info.Features["input_ids"]
	if !ok || listDtype(ids) == "" {
		return nil, "", "", fmt.Errorf("open dataset %s: %w: %s has no input_ids list feature", dir, ErrNotDataset, InfoFile)
	}
	if lb, ok := info.Features["labels"]; ok && strings.HasPrefix(listDtype(lb), "int") {
		labelsType = listDtype(lb)
	}
	for name := range info.Features {
		if name != "input_ids" {
			cols = append(cols, name)
		}
	}
	sort.Strings(cols) // JSON objects have no order Go keeps; names sorted for a stable listing
	return cols, listDtype(ids), labelsType, nil
}

// Lazy reports whether shards are fetched on demand (Acquire before reading rows).
func (d *Dataset) Lazy() bool { return d.src != nil }

// ShardOf returns the index of the shard holding row i.
func (d *Dataset) ShardOf(i int) int {
	g := int64(i)
	return sort.Search(len(d.shards), func(k int) bool { return d.starts[k+1] > g })
}

// ShardName returns the file name of shard k.
func (d *Dataset) ShardName(k int) string { return d.shards[k].name }

// Acquire makes the shards holding rows local and mapped, and pins them until the returned release is called.
// For a dataset opened from local files it does nothing. waiting is passed on to the source.
func (d *Dataset) Acquire(ctx context.Context, rows []int, waiting func()) (release func(), err error) {
	if d.src == nil {
		return func() {}, nil
	}
	var ks []int
	seen := map[int]bool{}
	for _, r := range rows {
		if r < 0 || r >= len(d.lengths) {
			return nil, fmt.Errorf("dataset %s: %w: row %d of %d", d.dir, ErrRange, r, len(d.lengths))
		}
		if k := d.ShardOf(r); !seen[k] {
			seen[k] = true
			ks = append(ks, k)
		}
	}
	sort.Ints(ks)
	var got []int
	release = func() {
		for _, k := range got {
			d.src.Release(d.shards[k].name)
		}
	}
	for _, k := range ks {
		sh := d.shards[k]
		path, err := d.src.Acquire(ctx, sh.name, waiting)
		if err != nil {
			release()
			return nil, fmt.Errorf("dataset %s: %w", d.dir, err)
		}
		got = append(got, k)
		if err := sh.mapLazy(path, d.idsType, d.hasLabels); err != nil {
			release()
			return nil, err
		}
	}
	return release, nil
}

// mapLazy maps a lazy shard's file if it is not mapped yet and checks it against its index entry.
func (sh *shard) mapLazy(path, idsType string, hasLabels bool) error {
	if sh.lazy.mapped.Load() {
		return nil
	}
	sh.lazy.mu.Lock()
	defer sh.lazy.mu.Unlock()
	if sh.lazy.mapped.Load() {
		return nil
	}
	f, st, err := safename.OpenRegular(path)
	if err != nil {
		return fmt.Errorf("open shard %s: %w", path, err)
	}
	defer f.Close()
	if st.Size() != sh.entry.Size {
		return fmt.Errorf("shard %s: %w: %d bytes, gload.index says %d", path, ErrStaleIndex, st.Size(), sh.entry.Size)
	}
	data, err := mapFile(f, st.Size())
	if err != nil {
		return fmt.Errorf("open shard %s: %w", path, err)
	}
	sh.data, sh.path, sh.mapped = data, path, true
	if err := sh.parseSchema(); err != nil {
		sh.unmapLocked()
		return err
	}
	if idsType == "int32" && (sh.ids.width != 4 || !sh.ids.signed) {
		sh.unmapLocked()
		return fmt.Errorf("shard %s: %w: input_ids are %s, dataset_info.json says int32", path, ErrCorrupt, sh.ids.typeName)
	}
	if hasLabels != (sh.labels != nil) {
		sh.unmapLocked()
		return fmt.Errorf("shard %s: %w: labels column present %v, dataset_info.json says %v", path, ErrCorrupt, sh.labels != nil, hasLabels)
	}
	sh.lazy.mapped.Store(true)
	return nil
}

// Evict unmaps shard name of a lazy dataset so its file can be removed. The caller guarantees no reader holds it
// (a cache calls it only for shards nobody pinned).
func (d *Dataset) Evict(name string) {
	for _, sh := range d.shards {
		if sh.name == name && sh.lazy != nil {
			sh.lazy.mu.Lock()
			sh.unmapLocked()
			sh.lazy.mu.Unlock()
			return
		}
	}
}

func (sh *shard) unmapLocked() {
	sh.lazy.mapped.Store(false)
	for j := range sh.cache {
		sh.cache[j].Store(nil)
	}
	if sh.mapped {
		_ = unmapFile(sh.data)
	}
	sh.data, sh.mapped = nil, false
}
