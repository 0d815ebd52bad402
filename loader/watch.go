package loader

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/gload/gload/loader/gpuwatch"
	"github.com/gload/gload/proto/gloadpb"
)

// The GPU starvation watch (DESIGN.md "Watching the GPU"): the server feeds
// a gpuwatch.Watcher with what it knows about its clients — step reports
// from batch streams and from the Report RPC, queue depths, batches asked
// for before any was ready — and serves the watcher's report through the
// Watch RPC and /metrics.

// Bounds of the Watch RPC's report interval.
const (
	minWatchInterval     = 100 * time.Millisecond
	maxWatchInterval     = time.Hour
	defaultWatchInterval = time.Second
	// queueSamplePeriod is how often the queue depths of clients with open
	// batch streams are handed to the watcher (each watcher poll samples the
	// last depth handed over).
	queueSamplePeriod = 250 * time.Millisecond
)

// anonymousClient names, in the watch, clients that sent no client_id.
const anonymousClient = "anonymous"

// watchState is a Server's part of the GPU watch.
type watchState struct {
	w *gpuwatch.Watcher
	// src is the source of a watcher the server made (it runs and closes
	// it); nil when Config.Watch was given.
	src gpuwatch.Source
	// stop is closed when serving stops: Watch and Report streams end.
	stop     chan struct{}
	stopOnce sync.Once
	closed   atomic.Bool
}

// newWatch sets up the watch of cfg: the given watcher, or one over NVML
// (or over no GPU: "no GPU visible"), registered on the metrics registry and
// hooked to the client table.
func (s *Server) newWatch() *watchState {
	ws := &watchState{w: s.cfg.Watch, stop: make(chan struct{})}
	if ws.w == nil {
		var src gpuwatch.Source
		if s.cfg.NoGPUWatch {
			src = gpuwatch.Unavailable(errors.New("GPU watch disabled (--no-gpu-watch)"))
		} else {
			var err error
			if src, err = gpuwatch.OpenNVML(); err != nil {
				src = gpuwatch.Unavailable(err) // the watcher logs "no gpu visible" once
			}
		}
		opts := s.cfg.WatchOptions
		if opts.Logger == nil {
			opts.Logger = s.log.With("part", "gpuwatch")
		}
		ws.src, ws.w = src, gpuwatch.New(src, opts)
	}
	if err := s.metrics.reg.Register(&watchCollector{inner: gpuwatch.NewCollector(ws.w), labels: s.metrics.labels}); err != nil {
		s.log.Warn("gpu watch metrics not registered", "err", err)
	}
	w := ws.w
	s.clients.onReport = func(id string, wait, step time.Duration, clientTime time.Time) {
		w.RecordStep(watchName(id), uint64(max(wait, 0).Microseconds()), uint64(max(step, 0).Microseconds()), clientTime)
	}
	s.clients.onDrained = func(id string) { w.NotReady(watchName(id)) }
	s.clients.onClosed = w.StreamClosed
	return ws
}

// watchCollector exports the watch's series, keeping the per-client ones
// to the clients that hold a metrics label (Config.MaxClientLabels bounds
// the client label's cardinality for every series of the server).
type watchCollector struct {
	inner  *gpuwatch.Collector
	labels *clientLabels
}

var _ prometheus.Collector = (*watchCollector)(nil)

func (c *watchCollector) Describe(ch chan<- *prometheus.Desc) { c.inner.Describe(ch) }

func (c *watchCollector) Collect(ch chan<- prometheus.Metric) {
	all := make(chan prometheus.Metric, 64)
	go func() {
		defer close(all)
		c.inner.Collect(all)
	}()
	for m := range all {
		var d dto.Metric
		if err := m.Write(&d); err == nil && !c.keep(&d) {
			continue
		}
		ch <- m
	}
}

// keep says whether a series is exported: those without a client label,
// and those of clients holding one.
func (c *watchCollector) keep(d *dto.Metric) bool {
	for _, l := range d.GetLabel() {
		if l.GetName() == "client" {
			id := l.GetValue()
			if id == anonymousClient && !c.labels.has(id) {
				id = ""
			}
			return c.labels.has(id)
		}
	}
	return true
}

// has says whether id holds a label of its own.
func (c *clientLabels) has(id string) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	_, ok := c.ids[id]
	return ok
}

// watchName is a client's name in the watch.
func watchName(id string) string {
	if id == "" {
		return anonymousClient
	}
	return id
}

// Watcher returns the server's GPU watcher (the one of Config.Watch, or the
// one the server made).
func (s *Server) Watcher() *gpuwatch.Watcher { return s.watch.w }

// startWatch starts, under s.wg, the goroutines of the watch for one Serve:
// the watcher's polls (when the server made it), the queue sampler, and the
// stopper that ends Watch and Report streams when serving stops.
func (s *Server) startWatch(ctx context.Context) {
	ws := s.watch
	wctx, cancel := context.WithCancel(ctx)
	stopAbort := context.AfterFunc(s.abort, cancel)
	s.wg.Add(2)
	go func() {
		defer s.wg.Done()
		defer stopAbort()
		<-wctx.Done()
		ws.stopOnce.Do(func() { close(ws.stop) })
	}()
	go func() {
		defer s.wg.Done()
		t := time.NewTicker(queueSamplePeriod)
		defer t.Stop()
		for {
			s.sampleQueues()
			select {
			case <-wctx.Done():
				return
			case <-t.C:
			}
		}
	}()
	if ws.src != nil {
		s.wg.Add(1)
		go func() {
			defer s.wg.Done()
			_ = ws.w.Run(wctx) // returns nil when wctx ends
		}()
	}
}

// closeWatch closes the NVML source the server opened (after the watcher's
// Run has returned).
func (s *Server) closeWatch() error {
	ws := s.watch
	if ws == nil || ws.src == nil || !ws.closed.CompareAndSwap(false, true) {
		return nil
	}
	if err := ws.src.Close(); err != nil {
		return fmt.Errorf("close gpu watch source: %w", err)
	}
	return nil
}

// queueSnap is one client's queue as the sampler hands it to the watcher.
type queueSnap struct {
	name            string
	depth, capacity int
}

// sampleQueues hands the watcher the queue depth of every client with an
// open batch stream. It does so under the client table's lock, so that a
// stream closing meanwhile (clientTable.close tells the watcher under the
// same lock) is never reported open again by a stale sample.
func (s *Server) sampleQueues() {
	s.clients.mu.Lock()
	defer s.clients.mu.Unlock()
	for _, q := range s.clients.queuesLocked() {
		s.watch.w.SetQueue(q.name, q.depth, q.capacity)
	}
}

// queuesLocked returns the queues of clients with open batch streams,
// merged by watch name. t.mu must be held.
func (t *clientTable) queuesLocked() []queueSnap {
	var out []queueSnap
	idx := map[string]int{}
	for k, c := range t.clients {
		if c.stat.Streams <= 0 {
			continue
		}
		name := watchName(k.id)
		depth, capacity := int(c.queue.Load()), c.queue.capacity()
		if i, ok := idx[name]; ok {
			out[i].depth += depth
			out[i].capacity += capacity
			continue
		}
		idx[name] = len(out)
		out = append(out, queueSnap{name: name, depth: depth, capacity: capacity})
	}
	return out
}

// forgetIdle drops the longest-idle clients without streams beyond the
// table's bound (Report RPC clients never open a batch stream).
func (t *clientTable) forgetIdle() {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.prune()
}

// queueCount counts a client's batches sent and not yet acknowledged, over
// all its streams. Streams update it without locking (Add), the watch reads
// it (Load, capacity).
type queueCount struct {
	n atomic.Int64
	// peak is the most batches ever outstanding; granted the prefetch depth
	// granted to the client's open streams, when they declare it (grant).
	peak, granted atomic.Int64
	// drained, when set, is called when an acknowledgement leaves nothing
	// outstanding: the client's next request finds no batch ready unless
	// the server sends one first.
	drained func()
}

// Add adds delta to the count and returns the new count.
func (q *queueCount) Add(delta int64) int64 {
	v := q.n.Add(delta)
	if delta > 0 {
		for p := q.peak.Load(); v > p && !q.peak.CompareAndSwap(p, v); p = q.peak.Load() {
		}
	}
	if delta == -1 && v == 0 && q.drained != nil {
		q.drained()
	}
	return v
}

// Load returns the count.
func (q *queueCount) Load() int64 { return q.n.Load() }

// grant adds delta to the prefetch depth granted to the client's streams
// (a stream grants its depth when it opens and takes it back when it ends).
func (q *queueCount) grant(delta int) { q.granted.Add(int64(delta)) }

// capacity is the queue's capacity: the granted prefetch depth when streams
// declare it, else the most batches seen outstanding.
func (q *queueCount) capacity() int {
	if g := q.granted.Load(); g > 0 {
		return int(g)
	}
	return int(q.peak.Load())
}

// Watch streams the GPU watch's report every interval (default 1 s), or
// once, until the client cancels or the server stops.
func (s *Server) Watch(req *gloadpb.WatchRequest, stream gloadpb.Loader_WatchServer) error {
	if s.draining.Load() {
		return status.Error(codes.Unavailable, "server is shutting down")
	}
	interval, err := watchInterval(req.GetIntervalS())
	if err != nil {
		return err
	}
	send := func() error {
		m, err := watchMessage(s.annotateStorage(s.watch.w.Report()))
		if err != nil {
			return err
		}
		return stream.Send(m)
	}
	if err := send(); err != nil || req.GetOnce() {
		return err
	}
	t := time.NewTicker(interval)
	defer t.Stop()
	ctx := stream.Context()
	for {
		select {
		case <-ctx.Done():
			return status.FromContextError(ctx.Err()).Err()
		case <-s.watch.stop:
			return status.Error(codes.Unavailable, "server is shutting down")
		case <-t.C:
			if err := send(); err != nil {
				return err
			}
		}
	}
}

// watchInterval validates a WatchRequest's interval.
func watchInterval(sec float64) (time.Duration, error) {
	switch {
	case sec == 0:
		return defaultWatchInterval, nil
	case math.IsNaN(sec) || sec < 0:
		return 0, status.Errorf(codes.InvalidArgument, "interval_s: %v must be >= 0 (0: 1 s)", sec)
	}
	d := time.Duration(math.Min(sec, maxWatchInterval.Seconds()) * float64(time.Second))
	return min(max(d, minWatchInterval), maxWatchInterval), nil
}

// watchMessage turns a report into its wire form.
func watchMessage(r gpuwatch.Report) (*gloadpb.WatchReport, error) {
	b, err := json.Marshal(r)
	if err != nil {
		return nil, status.Errorf(codes.Internal, "watch: encode report: %v", err)
	}
	return &gloadpb.WatchReport{
		Verdict:    string(r.Verdict.State),
		Json:       string(b),
		Text:       gpuwatch.Format(r),
		TimeUnixMs: r.Time.UnixMilli(),
	}, nil
}
