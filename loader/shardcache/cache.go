// Package shardcache keeps the shards of a dataset in object storage in a bounded local directory: it downloads
// them (verified, under temporary names, renamed when whole) in the order a plan will need them, ahead of use by a
// configurable number of shards, and evicts shards that no stream holds and the plan does not need soon.
//
// The cache knows file names, sizes and a verify function, not the dataset format: loader/dataset opens the files
// it hands out. It owns its download goroutines (Close stops them) and its directory, nothing else.
//
// # Policy
//
// Every stream that reads the dataset registers the sequence of shards its epoch will touch (Want). A shard is
// fetched when it is among the next Ahead shards of some stream, or when a reader asks for it (Acquire, which
// blocks). When the bytes on disk would exceed Limit, the cache evicts shards that are not pinned by a reader, in
// this order: shards no stream needs any more this epoch, then the one whose next use is furthest ahead (Belady's
// rule over the known plan). A shard pinned by a reader is never evicted; if the pinned shards alone exceed the
// limit, the cache grows past it rather than deadlock (and says so in Stats), and shrinks back under it as soon as
// the pins are released.
//
// # Caveats
//
// Paths returned by Acquire stay valid until the matching Release.
package shardcache

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/gload/gload/loader/objstore"

	"github.com/gload/gload/internal/safename"
)

// Shard is one file the cache may hold.
type Shard struct {
	Name string
	Size int64
}

// Source downloads shards; objstore.Store implements it.
type Source interface {
	Download(ctx context.Context, name, dst string, opts objstore.DownloadOptions) (int64, error)
}

var _ Source = (*objstore.Store)(nil)

// Options configure a Cache.
type Options struct {
	Dir    string // local directory of the shards
	Limit  int64  // bytes of shards kept on disk; 0: no limit
	Ahead  int    // shards fetched ahead of each stream's position; 0: 2
	Fetch  int    // concurrent downloads; 0: 2
	Verify func(name, path string) error
	Logger *slog.Logger
}

// Stats are counters since the cache was made.
type Stats struct {
	Hits, Misses       int64 // Acquire found the shard local / had to wait for it
	Downloads          int64 // shards downloaded
	DownloadedBytes    int64
	DownloadSeconds    float64
	Evictions          int64
	BytesCached        int64 // shards on disk now
	OverLimit          bool  // pinned shards alone exceed Limit
	Waiting            int   // readers waiting for a download now
	Failures           int64 // downloads that failed (after the store's retries and verification attempts)
	LastError          string
	FetchingOrQueued   int
	ShardsCached       int
	ShardsInDataset    int
	LimitBytes         int64
	ResumedFromDisk    int // shards found complete on disk at start (verified)
	SweptTemporaryFile int // partial downloads of an earlier process removed at start
}

type entry struct {
	Shard
	local    bool
	fetching bool
	pins     int
	lastUse  time.Time
	done     chan struct{} // closed when a fetch ends
	err      error         // of the last fetch
}

// Cache is safe for concurrent use.
type Cache struct {
	opts  Options
	src   Source
	log   *slog.Logger
	mu    sync.Mutex
	byKey map[string]*entry
	order []string // shard names in dataset order
	want  map[int]*wantList
	// horizon bounds how far ahead in each stream's list the scheduler looks for next uses: a shard not met within
	// it counts as not needed soon.
	horizon int
	next    int
	stats   Stats
	ctx     context.Context
	stop    context.CancelFunc
	wg      sync.WaitGroup
	slots   chan struct{}
	wake    chan struct{} // kicks the scheduler
	// onEvict is told before a shard file is removed (the dataset unmaps it); it is never called for a pinned shard.
	onEvict func(name string)
}

type wantList struct {
	names []string
	pos   int
}

// New makes a cache of shards in opts.Dir. Files already complete there are kept when verify accepts them;
// partial downloads of an earlier process are removed.
func New(src Source, shards []Shard, opts Options) (*Cache, error) {
	if opts.Ahead <= 0 {
		opts.Ahead = 2
	}
	if opts.Fetch <= 0 {
		opts.Fetch = 2
	}
	log := opts.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	if err := os.MkdirAll(opts.Dir, 0o700); err != nil {
		return nil, fmt.Errorf("shardcache: %w", err)
	}
	ctx, stop := context.WithCancel(context.Background())
	c := &Cache{opts: opts, src: src, log: log, byKey: map[string]*entry{}, want: map[int]*wantList{},
		ctx: ctx, stop: stop, slots: make(chan struct{}, opts.Fetch), wake: make(chan struct{}, 1)}
	ents, err := os.ReadDir(opts.Dir)
	if err != nil {
		stop()
		return nil, fmt.Errorf("shardcache: %w", err)
	}
	for _, e := range ents {
		if strings.HasSuffix(e.Name(), objstore.TempSuffix) {
			if err := os.Remove(filepath.Join(opts.Dir, e.Name())); err == nil {
				c.stats.SweptTemporaryFile++
			}
		}
	}
	for _, s := range shards {
		if _, dup := c.byKey[s.Name]; dup {
			stop()
			return nil, fmt.Errorf("shardcache: shard %s listed twice", s.Name)
		}
		e := &entry{Shard: s}
		path, err := safename.Join(opts.Dir, s.Name)
		if err != nil {
			stop()
			return nil, fmt.Errorf("shardcache: %w", err)
		}
		if st, err := os.Lstat(path); err == nil {
			ok := st.Mode().IsRegular() && st.Size() == s.Size // a symlink planted in the cache is fetched over
			if ok && opts.Verify != nil {
				if verr := opts.Verify(s.Name, path); verr != nil {
					log.Warn("cached shard fails verification, fetching it again", "shard", s.Name, "err", verr)
					ok = false
				}
			}
			if ok {
				e.local = true
				c.stats.BytesCached += s.Size
				c.stats.ResumedFromDisk++
			} else {
				os.Remove(path)
			}
		}
		c.byKey[s.Name] = e
		c.order = append(c.order, s.Name)
	}
	c.stats.ShardsInDataset = len(shards)
	c.stats.LimitBytes = opts.Limit
	c.horizon = 2*len(shards) + opts.Ahead
	c.wg.Add(1)
	go c.scheduler()
	return c, nil
}

// OnEvict sets the function told before a shard's file is removed.
func (c *Cache) OnEvict(f func(name string)) {
	c.mu.Lock()
	c.onEvict = f
	c.mu.Unlock()
}

// Path is where shard name lives when it is local.
func (c *Cache) Path(name string) string { return filepath.Join(c.opts.Dir, name) }

// Want registers (or replaces) the shards a stream will read, in order, and returns its id for Advance and Forget.
func (c *Cache) Want(names []string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	id := c.next
	c.next++
	c.want[id] = &wantList{names: names}
	c.kick()
	return id
}

// Rewant replaces stream id's list by names, at position 0: a stream whose list is too long to register whole
// registers the part ahead of it and moves it on.
func (c *Cache) Rewant(id int, names []string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if w := c.want[id]; w != nil {
		w.names, w.pos = names, 0
		c.kick()
	}
}

// Advance says that stream id has moved to position pos of its list.
func (c *Cache) Advance(id, pos int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if w := c.want[id]; w != nil && pos > w.pos {
		w.pos = min(pos, len(w.names))
		c.kick()
	}
}

// Forget drops stream id's list.
func (c *Cache) Forget(id int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	delete(c.want, id)
	c.kick()
}

// Acquire returns the local path of shard name, downloading it first when needed, and pins it until Release.
// waiting, if set, is called once when the shard is not local (so a stream can report why it is not ready).
func (c *Cache) Acquire(ctx context.Context, name string, waiting func()) (string, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	e := c.byKey[name]
	if e == nil {
		return "", fmt.Errorf("shardcache: no shard %s", name)
	}
	e.pins++ // pinned while waiting too: a shard being waited for is not evicted the moment it arrives
	if e.local {
		c.stats.Hits++
		e.lastUse = time.Now()
		return c.Path(name), nil
	}
	c.stats.Misses++
	if waiting != nil {
		waiting()
	}
	c.stats.Waiting++
	defer func() { c.stats.Waiting-- }()
	for !e.local {
		if !e.fetching {
			c.startFetch(e) // a fresh attempt, also after a failed prefetch
		}
		c.waitFetch(ctx, e.done)
		if ctx.Err() != nil {
			e.pins--
			return "", ctx.Err()
		}
		if !e.local && !e.fetching && e.err != nil {
			e.pins--
			return "", e.err
		}
	}
	e.lastUse = time.Now()
	return c.Path(name), nil
}

// waitFetch waits (mu held) until ch closes or ctx ends.
func (c *Cache) waitFetch(ctx context.Context, ch chan struct{}) {
	c.mu.Unlock()
	select {
	case <-ch:
	case <-ctx.Done():
	}
	c.mu.Lock()
}

// Release unpins a shard acquired before.
func (c *Cache) Release(name string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if e := c.byKey[name]; e != nil && e.pins > 0 {
		e.pins--
		if e.pins == 0 {
			c.kick() // room may be made now
		}
	}
}

// Stats returns the counters.
func (c *Cache) Stats() Stats {
	c.mu.Lock()
	defer c.mu.Unlock()
	s := c.stats
	for _, e := range c.byKey {
		if e.local {
			s.ShardsCached++
		}
		if e.fetching {
			s.FetchingOrQueued++
		}
	}
	return s
}

// Close stops downloads in flight (their partial files are removed) and waits for them.
func (c *Cache) Close() error {
	c.stop()
	c.wg.Wait()
	return nil
}

// nextUse returns, for every shard some stream needs within the horizon, the smallest distance (in list positions)
// to its next use over all streams.
func (c *Cache) nextUse() map[string]int {
	d := map[string]int{}
	for _, w := range c.want {
		for i := w.pos; i < min(len(w.names), w.pos+c.horizon); i++ {
			n := w.names[i]
			if v, ok := d[n]; !ok || i-w.pos < v {
				d[n] = i - w.pos
			}
		}
	}
	return d
}

// schedule (mu held) brings the cache back under its bound if pins had pushed it over, starts the downloads the
// streams will need next and makes room for them.
func (c *Cache) schedule() {
	if c.ctx.Err() != nil {
		return
	}
	use := c.nextUse()
	// Back under the bound once pins allow: readers may have pinned more than fits (the cache then grew past it).
	c.makeRoom(0, use, -1)
	type cand struct {
		e    *entry
		dist int
	}
	var need []cand
	for name, dist := range use {
		e := c.byKey[name]
		// A shard whose last download failed is not prefetched again: the next reader that needs it tries once
		// more and gets the error (no retry loop behind the readers' backs).
		if e == nil || e.local || e.fetching || e.err != nil || dist >= c.opts.Ahead {
			continue
		}
		need = append(need, cand{e, dist})
	}
	sort.Slice(need, func(i, j int) bool {
		if need[i].dist != need[j].dist {
			return need[i].dist < need[j].dist
		}
		return need[i].e.Name < need[j].e.Name
	})
	for _, n := range need {
		if !c.makeRoom(n.e.Size, use, n.dist) {
			break // the cache is full of shards needed sooner; fetch later
		}
		c.startFetch(n.e)
	}
}

// makeRoom (mu held) evicts unpinned shards until size more bytes fit, preferring shards no stream needs, then the
// one needed furthest ahead, never one needed sooner than dist. It reports whether the bytes fit.
func (c *Cache) makeRoom(size int64, use map[string]int, dist int) bool {
	if c.opts.Limit <= 0 {
		return true
	}
	for c.reserved()+size > c.opts.Limit {
		var victim *entry
		vdist := -1
		for _, name := range c.order {
			e := c.byKey[name]
			if !e.local || e.pins > 0 {
				continue
			}
			d, needed := use[name]
			if !needed {
				d = int(^uint(0) >> 1)
			}
			if d <= dist {
				continue
			}
			if d > vdist || (d == vdist && e.lastUse.Before(victim.lastUse)) {
				victim, vdist = e, d
			}
		}
		if victim == nil {
			return false
		}
		c.evict(victim)
	}
	return true
}

// reserved is the bytes on disk plus those being downloaded.
func (c *Cache) reserved() int64 {
	n := c.stats.BytesCached
	for _, e := range c.byKey {
		if e.fetching {
			n += e.Size
		}
	}
	return n
}

func (c *Cache) evict(e *entry) {
	if c.onEvict != nil {
		c.onEvict(e.Name)
	}
	if err := os.Remove(c.Path(e.Name)); err != nil && !errors.Is(err, os.ErrNotExist) {
		c.log.Warn("cached shard not removed", "shard", e.Name, "err", err)
	}
	e.local = false
	c.stats.BytesCached -= e.Size
	c.stats.Evictions++
	c.log.Debug("shard evicted", "shard", e.Name)
}

// startFetch (mu held) downloads e in the background.
func (c *Cache) startFetch(e *entry) {
	if e.fetching || e.local {
		return
	}
	if c.opts.Limit > 0 && c.reserved()+e.Size > c.opts.Limit {
		c.makeRoom(e.Size, c.nextUse(), -1)
		if c.reserved()+e.Size > c.opts.Limit {
			c.stats.OverLimit = true
		}
	}
	e.fetching, e.err = true, nil
	e.done = make(chan struct{})
	c.wg.Add(1)
	go func() {
		defer c.wg.Done()
		select {
		case c.slots <- struct{}{}:
		case <-c.ctx.Done():
			c.finish(e, 0, 0, c.ctx.Err())
			return
		}
		t0 := time.Now()
		var verify func(string) error
		if c.opts.Verify != nil {
			verify = func(p string) error { return c.opts.Verify(e.Name, p) }
		}
		n, err := c.src.Download(c.ctx, e.Name, c.Path(e.Name), objstore.DownloadOptions{Verify: verify, Size: e.Size, Perm: 0o600})
		<-c.slots
		c.finish(e, n, time.Since(t0), err)
	}()
}

func (c *Cache) finish(e *entry, n int64, took time.Duration, err error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	e.fetching = false
	if err == nil {
		e.local = true
		c.stats.BytesCached += e.Size
		c.stats.Downloads++
		c.stats.DownloadedBytes += n
		c.stats.DownloadSeconds += took.Seconds()
		c.log.Debug("shard downloaded", "shard", e.Name, "bytes", n, "took", took)
	} else {
		e.err = fmt.Errorf("shardcache: shard %s: %w", e.Name, err)
		if c.ctx.Err() == nil {
			c.stats.Failures++
			c.stats.LastError = e.err.Error()
			c.log.Warn("shard download failed", "shard", e.Name, "err", err)
		}
	}
	close(e.done)
	c.kick()
}

// kick asks the scheduler goroutine to look at the streams' positions again (coalesced: the readers' hot path
// only records where they are).
func (c *Cache) kick() {
	select {
	case c.wake <- struct{}{}:
	default:
	}
}

// scheduler runs schedule whenever kicked, until Close.
func (c *Cache) scheduler() {
	defer c.wg.Done()
	for {
		select {
		case <-c.ctx.Done():
			return
		case <-c.wake:
		}
		c.mu.Lock()
		c.schedule()
		c.mu.Unlock()
	}
}
