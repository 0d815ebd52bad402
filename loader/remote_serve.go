package loader

// Datasets in object storage (NAME=s3://bucket/prefix): metadata first, shards through a bounded local cache
// (loader/shardcache) fetched in the order each stream's share of the plan touches them.

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime/debug"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/gload/gload/bucket"
	"github.com/gload/gload/internal/privdir"
	"github.com/gload/gload/loader/dataset"
	"github.com/gload/gload/loader/gpuwatch"
	"github.com/gload/gload/loader/objstore"
	"github.com/gload/gload/loader/remote"
	"github.com/gload/gload/loader/shardcache"
	"github.com/gload/gload/proto/gloadpb"
)

// RemoteConfig configures datasets served from object storage.
type RemoteConfig struct {
	// CacheDir holds downloaded shards and metadata (default: the user cache dir's gload/cache).
	CacheDir string
	// CacheBytes bounds the shard bytes kept per dataset (0: no bound).
	CacheBytes int64
	// Ahead is how many shards each stream fetches ahead of the one it reads (default 2).
	Ahead int
	// Fetch is the number of concurrent shard downloads per dataset (default 2).
	Fetch int
	// S3 says where the store is; credentials come from the environment, the AWS way.
	S3 objstore.Config
}

func (c RemoteConfig) cacheRoot() string {
	if c.CacheDir != "" {
		return c.CacheDir
	}
	if d, err := os.UserCacheDir(); err == nil {
		return filepath.Join(d, "gload", "cache")
	}
	return filepath.Join(privdir.TempRoot("gload-cache"), "cache")
}

// openRemoteDataset opens the dataset at rawURL: it downloads the metadata (the plan needs nothing else), indexes a
// dataset that has no gload.index once into the cache, and opens it with shards fetched on demand.
func (s *Server) openRemoteDataset(name, rawURL string) (*served, error) {
	t0 := time.Now()
	// No fixed overall deadline (it was 10 minutes): gload.index grows with the rows (40 GB at 10^10), and every
	// request and transfer is bounded by objstore itself (the idle timeout; a download of N bytes within
	// IdleTimeout + N/MinRate), so a fixed one would only refuse large datasets on slower links.
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	u, err := objstore.ParseURL(rawURL)
	if err != nil {
		return nil, fmt.Errorf("%w: dataset %s: %w", ErrDataset, name, err)
	}
	st, err := objstore.Open(ctx, u, s.cfg.Remote.S3)
	if err != nil {
		return nil, fmt.Errorf("%w: dataset %s: %w", ErrDataset, name, err)
	}
	root := s.cfg.Remote.cacheRoot()
	if s.cfg.Remote.CacheDir == "" {
		// The default root may be under a shared $TMPDIR: it must be this user's, 0700, nobody else's.
		for _, d := range []string{filepath.Dir(root), root} {
			if err := privdir.Ensure(d); err != nil {
				return nil, fmt.Errorf("%w: dataset %s: cache: %w", ErrDataset, name, err)
			}
		}
	} else if err := os.MkdirAll(root, 0o700); err != nil { // a directory the user chose: made private, not judged
		return nil, fmt.Errorf("%w: dataset %s: cache: %w", ErrDataset, name, err)
	}
	dir := remote.CacheDir(root, u)
	meta, err := remote.FetchMeta(ctx, st, dir)
	if errors.Is(err, remote.ErrIncomplete) {
		s.log.Info("dataset has no gload.index: indexing it once into the cache", "dataset", name, "url", u.String())
		meta, err = s.indexRemote(ctx, st, dir)
	}
	if err != nil {
		return nil, fmt.Errorf("%w: dataset %s: %w", ErrDataset, name, err)
	}
	entries := map[string]dataset.ShardEntry{}
	shards := make([]shardcache.Shard, 0, len(meta.Shards))
	var total int64
	for _, e := range meta.Shards {
		entries[e.Name] = e
		shards = append(shards, shardcache.Shard{Name: e.Name, Size: e.Size})
		total += e.Size
	}
	// Only the shard entries were needed: the dataset maps the index again (dataset.Open) and checks its lengths
	// per block as plans read them.
	if err := meta.Close(); err != nil {
		return nil, fmt.Errorf("%w: dataset %s: %w", ErrDataset, name, err)
	}
	cache, err := shardcache.New(st, shards, shardcache.Options{
		Dir: dir, Limit: s.cfg.Remote.CacheBytes, Ahead: s.cfg.Remote.Ahead, Fetch: s.cfg.Remote.Fetch,
		Verify: func(name, path string) error { return remote.VerifyShard(path, entries[name]) },
		Logger: s.log.With("dataset", name),
	})
	if err != nil {
		return nil, fmt.Errorf("%w: dataset %s: %w", ErrDataset, name, err)
	}
	ds, err := dataset.Open(dir, dataset.OpenOptions{Shards: cache})
	if err != nil {
		return nil, errors.Join(fmt.Errorf("%w: dataset %s: %w", ErrDataset, name, err), cache.Close())
	}
	cache.OnEvict(ds.Evict)
	d := &served{name: name, dir: rawURL, ds: ds, cache: cache}
	tokens, maxLen := ds.TotalTokens(), ds.MaxLength() // from the index's block table: no length is read
	d.info = &gloadpb.DatasetInfo{
		Name: name, Rows: uint64(ds.Len()), Tokens: uint64(tokens), Fingerprint: ds.Fingerprint(),
		TokenizerHash: ds.TokenizerHash(), Shards: uint32(len(shards)), MaxLength: maxLen,
	}
	if lim := s.cfg.Remote.CacheBytes; lim > 0 && lim < total {
		s.log.Info("cache smaller than the dataset: shards are evicted once no stream needs them soon; "+
			"ask for shuffle_window (locality) to avoid fetching shards again within an epoch",
			"dataset", name, "cache_bytes", lim, "dataset_bytes", total)
	}
	s.log.Info("dataset opened from object storage", "dataset", name, "url", u.String(), "cache", dir,
		"rows", ds.Len(), "shards", len(shards), "bytes", total, "cached", cache.Stats().ShardsCached,
		"fingerprint", ds.Fingerprint(), "took", time.Since(t0))
	return d, nil
}

// indexRemote downloads a dataset without gload.index (one Hugging Face wrote, say) into the cache whole, builds
// its index there, and returns its metadata (the index mapped: the caller closes it); afterwards the cache bound
// applies as for any other dataset.
func (s *Server) indexRemote(ctx context.Context, st *objstore.Store, dir string) (*remote.Meta, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, err
	}
	for _, name := range []string{dataset.InfoFile, dataset.StateFile} {
		if _, err := st.Download(ctx, name, filepath.Join(dir, name), objstore.DownloadOptions{Perm: 0o600}); err != nil {
			return nil, err
		}
	}
	objs, err := st.List(ctx)
	if err != nil {
		return nil, err
	}
	for _, o := range objs {
		if filepath.Ext(o.Name) != ".arrow" || strings.Contains(o.Name, "/") {
			continue
		}
		// A listed name is data too: only plain base names are fetched (a key such as "..arrow", ".x.arrow" or
		// one with control characters is skipped, named in the log).
		path, err := dataset.ShardPath(dir, o.Name)
		if err != nil {
			s.log.Warn("object storage listing: object skipped", "url", st.URL().String(), "err", err)
			continue
		}
		if fi, err := os.Lstat(path); err == nil && fi.Mode().IsRegular() && fi.Size() == o.Size {
			continue
		}
		if _, err := st.Download(ctx, o.Name, path, objstore.DownloadOptions{Perm: 0o600}); err != nil {
			return nil, err
		}
	}
	ds, err := dataset.Open(dir, dataset.OpenOptions{WriteIndex: true, Logger: s.log})
	if err != nil {
		return nil, err
	}
	if err := ds.Close(); err != nil {
		return nil, err
	}
	ix, err := dataset.MapIndex(filepath.Join(dir, dataset.IndexFile))
	if err != nil {
		return nil, fmt.Errorf("index of %s not written into the cache: %w", st.URL(), err)
	}
	return &remote.Meta{URL: st.URL(), Dir: dir, Index: ix, Shards: ix.Shards}, nil // closed by the caller
}

// remoteFeed tells a dataset's cache which shards one stream will read, in order, and pins each batch's shards
// while it is assembled. It registers the shards of the next remoteHorizon batches at a time (a web-scale epoch's
// whole list would grow with its rows) and moves the list on half-way. A nil *remoteFeed (local datasets) does
// nothing.
type remoteFeed struct {
	cache      *shardcache.Cache
	ds         *dataset.Dataset
	plan       epochPlan
	assigned   bucket.Assignment
	id         int
	base, end  int   // the registered list covers the stream's batches [base, end)
	pos        []int // pos[i−base]: position in the registered list of batch i's first shard
	rows       []int // scratch
	registered bool
}

// remoteHorizon is how many of a stream's batches its registered shard list covers.
var remoteHorizon = 1024

func newRemoteFeed(c *consumer) (*remoteFeed, error) {
	if c.ds.cache == nil {
		return nil, nil
	}
	f := &remoteFeed{cache: c.ds.cache, ds: c.ds.ds, plan: c.plan, assigned: c.assigned}
	if err := f.register(0); err != nil {
		return nil, err
	}
	return f, nil
}

// errPlanPanicked marks a plan that panicked computing a batch (a lazy plan on counts that do not match its
// lengths, say): the stream ends with INTERNAL, the server goes on.
var errPlanPanicked = errors.New("the epoch plan failed computing a batch")

// planPanic is a recovered panic of a plan, with the stack where it happened (for the log).
type planPanic struct {
	msg   string
	stack []byte
}

func (p *planPanic) Error() string        { return p.msg }
func (p *planPanic) Is(target error) bool { return target == errPlanPanicked }

// register (re)registers the shards of the stream's batches [from, from+remoteHorizon). A panic of the plan is
// returned as an error wrapping errPlanPanicked, as planBatch does for the batch being assembled.
func (f *remoteFeed) register(from int) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = &planPanic{msg: fmt.Sprintf("%v: looking ahead at the stream's batches %d to %d: %v", errPlanPanicked,
				f.base, f.end, r), stack: debug.Stack()}
		}
	}()
	f.base, f.end = from, min(from+remoteHorizon, f.assigned.Len())
	f.pos = f.pos[:0]
	var names []string
	last := -1
	for i := f.base; i < f.end; i++ {
		f.pos = append(f.pos, len(names))
		for _, p := range f.plan.Batch(f.assigned.At(i)).Pieces {
			if k := f.ds.ShardOf(p.Index); k != last {
				names = append(names, f.ds.ShardName(k))
				last = k
			}
		}
	}
	if !f.registered {
		f.id, f.registered = f.cache.Want(names), true
		return nil
	}
	f.cache.Rewant(f.id, names)
	return nil
}

// acquire makes batch i of the stream (b, its planned batch) local and pinned; waiting runs if a shard must be
// downloaded first.
func (f *remoteFeed) acquire(ctx context.Context, i int, b bucket.Batch, waiting func()) (func(), error) {
	if f == nil {
		return noRelease, nil
	}
	if i < f.base || (i >= f.base+remoteHorizon/2 && f.end < f.assigned.Len()) || i >= f.end {
		if err := f.register(i); err != nil {
			return nil, err
		}
	}
	f.cache.Advance(f.id, f.pos[i-f.base])
	f.rows = f.rows[:0]
	for _, p := range b.Pieces {
		f.rows = append(f.rows, p.Index)
	}
	return f.ds.Acquire(ctx, f.rows, waiting)
}

func noRelease() {}

// waitingForShard counts a batch that had to wait for a shard download (the watch and /metrics name the storage).
func (d *served) waitingForShard() {
	d.shardWaits.Add(1)
	d.waitMu.Lock()
	defer d.waitMu.Unlock()
	now := time.Now()
	d.waitTimes = append(d.waitTimes, now)
	if len(d.waitTimes) > 4096 { // keep the recent ones: the watch window is minutes at most
		d.waitTimes = append(d.waitTimes[:0], d.waitTimes[len(d.waitTimes)-2048:]...)
	}
}

// recentShardWaits counts batches that waited for a download since t.
func (d *served) recentShardWaits(since time.Time) int {
	d.waitMu.Lock()
	defer d.waitMu.Unlock()
	n := 0
	for i := len(d.waitTimes) - 1; i >= 0 && d.waitTimes[i].After(since); i-- {
		n++
	}
	return n
}

// annotateStorage adds what object storage did in the report's window: batches that waited for shard downloads,
// the download rate and the cache hit rate; when clients starve for data while batches wait for downloads, the
// verdict names the storage as the cause.
func (s *Server) annotateStorage(r gpuwatch.Report) gpuwatch.Report {
	since := r.Time.Add(-time.Duration(r.WindowS * float64(time.Second)))
	var waited []string
	for _, d := range s.allServed() {
		name := d.name
		if d.cache == nil {
			continue
		}
		n := d.recentShardWaits(since)
		if n == 0 {
			continue
		}
		st := d.cache.Stats()
		rate := 0.0
		if st.DownloadSeconds > 0 {
			rate = float64(st.DownloadedBytes) / st.DownloadSeconds / 1e6
		}
		hit := 0.0
		if st.Hits+st.Misses > 0 {
			hit = float64(st.Hits) / float64(st.Hits+st.Misses) * 100
		}
		waited = append(waited, fmt.Sprintf("dataset %s: %d batches waited for shard downloads from object storage in the window "+
			"(downloads %.0f MB/s per stream, cache hits %.0f%%, %d shards cached of %d)", name, n, rate, hit, st.ShardsCached, st.ShardsInDataset))
	}
	if len(waited) == 0 {
		return r
	}
	r.Verdict.Reasons = append(r.Verdict.Reasons, waited...)
	if r.Verdict.State == gpuwatch.StateStarvedData {
		r.Verdict.Cause = "waiting for shard download (object storage is slower than the loop)"
		r.Verdict.Fix = "fetch further ahead (--cache-ahead, --cache-fetch), a larger --cache-size, shuffle_window for " +
			"locality, or copy the dataset to local disk first (gload sync)"
	}
	return r
}

// remoteCollector exports the shard caches of datasets in object storage to /metrics, labelled by dataset.
type remoteCollector struct{ s *Server }

var (
	descDownloadBytes = prometheus.NewDesc("gload_remote_download_bytes_total", "Shard bytes downloaded from object storage.", []string{"dataset"}, nil)
	descDownloadSecs  = prometheus.NewDesc("gload_remote_download_seconds_total", "Time spent downloading shards (summed over concurrent downloads).", []string{"dataset"}, nil)
	descDownloads     = prometheus.NewDesc("gload_remote_downloads_total", "Shards downloaded and verified.", []string{"dataset"}, nil)
	descFailures      = prometheus.NewDesc("gload_remote_download_failures_total", "Shard downloads that failed after retries and verification.", []string{"dataset"}, nil)
	descCacheReq      = prometheus.NewDesc("gload_remote_cache_requests_total", "Shard acquisitions by result: hit (local) or miss (waited for a download).", []string{"dataset", "result"}, nil)
	descCached        = prometheus.NewDesc("gload_remote_cached_bytes", "Shard bytes in the local cache now.", []string{"dataset"}, nil)
	descCacheLimit    = prometheus.NewDesc("gload_remote_cache_limit_bytes", "The cache bound (0: none).", []string{"dataset"}, nil)
	descEvictions     = prometheus.NewDesc("gload_remote_evictions_total", "Shards evicted from the cache.", []string{"dataset"}, nil)
	descShardWaits    = prometheus.NewDesc("gload_remote_batch_waits_total", "Batches whose assembly waited for a shard download (not ready: waiting for shard download).", []string{"dataset"}, nil)
)

func (c *remoteCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{descDownloadBytes, descDownloadSecs, descDownloads, descFailures, descCacheReq,
		descCached, descCacheLimit, descEvictions, descShardWaits} {
		ch <- d
	}
}

func (c *remoteCollector) Collect(ch chan<- prometheus.Metric) {
	for _, d := range c.s.allServed() {
		name := d.name
		if d.cache == nil {
			continue
		}
		st := d.cache.Stats()
		counter := func(desc *prometheus.Desc, v float64, labels ...string) {
			ch <- prometheus.MustNewConstMetric(desc, prometheus.CounterValue, v, append([]string{name}, labels...)...)
		}
		gauge := func(desc *prometheus.Desc, v float64) {
			ch <- prometheus.MustNewConstMetric(desc, prometheus.GaugeValue, v, name)
		}
		counter(descDownloadBytes, float64(st.DownloadedBytes))
		counter(descDownloadSecs, st.DownloadSeconds)
		counter(descDownloads, float64(st.Downloads))
		counter(descFailures, float64(st.Failures))
		counter(descCacheReq, float64(st.Hits), "hit")
		counter(descCacheReq, float64(st.Misses), "miss")
		counter(descEvictions, float64(st.Evictions))
		counter(descShardWaits, float64(d.shardWaits.Load()))
		gauge(descCached, float64(st.BytesCached))
		gauge(descCacheLimit, float64(st.LimitBytes))
	}
}

func (f *remoteFeed) close() {
	if f != nil {
		f.cache.Forget(f.id)
	}
}
