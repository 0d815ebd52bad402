package loader

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/keepalive"
	"google.golang.org/grpc/status"

	"github.com/gload/gload/loader/dataset"
	"github.com/gload/gload/loader/objstore"
	"github.com/gload/gload/loader/shardcache"
	"github.com/gload/gload/loader/shm"
	"github.com/gload/gload/proto/gloadpb"

	"github.com/gload/gload/internal/safename"
)

// Server is the gload batch service. Build it with NewServer, run it with
// Serve; its methods are safe for concurrent use.
type Server struct {
	gloadpb.UnimplementedLoaderServer

	cfg      Config
	log      *slog.Logger
	datasets map[string]*served
	// mixtures are the mixtures of datasets the server was started with.
	mixtures map[string]*served
	paths    pathRegistry // datasets opened by path (openpath.go)
	conns    connGauge    // open client connections (Idle)
	names    []string
	plans    *planCache
	pool     *bufPool
	metrics  *metrics
	clients  *clientTable
	admit    atomic.Pointer[admitListener] // set by Serve
	budget   *bufferBudget
	watch    *watchState
	grpc     *grpc.Server
	started  time.Time
	now      func() time.Time

	streams  atomic.Int64
	draining atomic.Bool
	served   atomic.Bool
	// abort ends running streams once the drain timeout has passed.
	abort     context.Context
	abortFunc context.CancelFunc
	// wg owns every goroutine a stream starts.
	wg        sync.WaitGroup
	closeOnce sync.Once
	closeErr  error
}

// served is one dataset the server was started with.
type served struct {
	name  string
	dir   string
	ds    *dataset.Dataset
	info  *gloadpb.DatasetInfo
	files []shardFile
	// cache fetches the shards of a dataset in object storage (nil for local datasets).
	cache      *shardcache.Cache
	shardWaits atomic.Int64 // batches that waited for a shard download
	waitMu     sync.Mutex
	waitTimes  []time.Time // when they waited (recent ones), for the watch
	// broken holds the reason the dataset is refused, once it is.
	broken atomic.Pointer[string]
	// mix is set for a mixture of datasets (mixture.go); ds is nil then.
	mix *mixServed
}

// shardFile is what a shard looked like on disk when the dataset was opened.
type shardFile struct {
	name, path string
	size       int64
	mtime      time.Time
	fi         os.FileInfo
}

// NewServer opens every dataset of cfg and returns a server ready to Serve.
// A dataset that cannot be opened (a corrupt or truncated shard, a missing
// file) fails the start with an error naming the dataset, the file and why.
func NewServer(cfg Config) (*Server, error) {
	cfg, err := cfg.normalized()
	if err != nil {
		return nil, err
	}
	s := &Server{
		cfg:      cfg,
		log:      cfg.Logger,
		datasets: map[string]*served{},
		names:    sortedNames(cfg.Datasets),
		pool:     &bufPool{},
		metrics:  newMetrics(cfg.MaxClientLabels, cfg.Version),
		now:      time.Now,
	}
	s.clients = newClientTable(func() time.Time { return s.now() })
	s.budget = &bufferBudget{maxBytes: cfg.MaxBufferBytes, maxStreams: cfg.MaxStreams,
		gauge: func(n int64) { s.metrics.bufferBytes.Set(float64(n)) }}
	s.abort, s.abortFunc = context.WithCancel(context.Background())
	s.plans = newPlanCache(s.abort, cfg.PlanCacheSize, s.metrics.observePlan)
	s.plans.counts = newCountsKeeper(cfg.PlanCountsDir, s.log)

	opts := []grpc.ServerOption{
		grpc.ForceServerCodecV2(newServerCodec()),
		grpc.WaitForHandlers(true),
		grpc.MaxRecvMsgSize(1 << 20),
		grpc.KeepaliveEnforcementPolicy(keepalive.EnforcementPolicy{MinTime: 5 * time.Second, PermitWithoutStream: true}),
		grpc.InitialWindowSize(4 << 20),
		grpc.InitialConnWindowSize(16 << 20),
		grpc.WriteBufferSize(256 << 10),
		grpc.MaxConcurrentStreams(uint32(cfg.MaxStreamsPerConn + connSlack)),
		grpc.StatsHandler(connCounts{}),
		grpc.StatsHandler(&s.conns),
	}
	if cfg.TLSCertFile != "" {
		cert, err := tls.LoadX509KeyPair(cfg.TLSCertFile, cfg.TLSKeyFile)
		if err != nil {
			return nil, fmt.Errorf("%w: load TLS key pair %s, %s: %w", ErrConfig, cfg.TLSCertFile, cfg.TLSKeyFile, err)
		}
		opts = append(opts, grpc.Creds(credentials.NewTLS(&tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12})))
	}

	for _, name := range s.names {
		d, err := s.openDataset(name, cfg.Datasets[name])
		if err != nil {
			s.log.Error("dataset refused", "dataset", name, "dir", cfg.Datasets[name], "err", err)
			return nil, errors.Join(err, s.closeDatasets())
		}
		s.datasets[name] = d
		s.metrics.streams.WithLabelValues(name).Set(0)
	}
	s.mixtures = map[string]*served{}
	for _, name := range sortedMixtureNames(cfg.Mixtures) {
		d, err := s.newMixture(name, cfg.Mixtures[name], "mixture "+name)
		if err != nil {
			err = fmt.Errorf("%w: %s", ErrConfig, status.Convert(err).Message())
			s.log.Error("mixture refused", "mixture", name, "err", err)
			return nil, errors.Join(err, s.closeDatasets())
		}
		s.mixtures[name] = d
		s.log.Info("mixture ready", "mixture", name, "sources", len(d.mix.parts), "fingerprint", d.info.Fingerprint)
	}
	removed, err := shm.Sweep(cfg.ShmDir)
	for _, p := range removed {
		s.log.Info("stale ring removed", "path", p)
	}
	if err != nil {
		s.log.Warn("stale rings not removed", "dir", cfg.ShmDir, "err", err)
	}
	opts = append(opts, s.authOptions()...)
	s.metrics.reg.MustRegister(&remoteCollector{s})
	s.grpc = grpc.NewServer(opts...)
	gloadpb.RegisterLoaderServer(s.grpc, s)
	s.watch = s.newWatch() // after every failure path: it may open NVML
	s.started = s.now()
	return s, nil
}

func (s *Server) openDataset(name, dir string) (*served, error) {
	if objstore.IsURL(dir) {
		return s.openRemoteDataset(name, dir)
	}
	t0 := time.Now()
	ds, err := dataset.Open(dir, dataset.OpenOptions{
		WriteIndex: !s.cfg.NoWriteIndex, IndexDir: s.cfg.IndexDir, Verify: s.cfg.VerifyContent,
		Logger: s.log.With("dataset", name),
	})
	if err != nil {
		return nil, fmt.Errorf("%w: dataset %s: %w", ErrDataset, name, err)
	}
	d := &served{name: name, dir: dir, ds: ds}
	tokens, maxLen := ds.TotalTokens(), ds.MaxLength() // from the index's block table: no length is read
	shards := ds.Shards()
	for _, sh := range shards {
		path, err := safename.Join(dir, sh.Name)
		if err != nil {
			return nil, errors.Join(fmt.Errorf("%w: dataset %s: %w", ErrDataset, name, err), ds.Close())
		}
		fi, err := safename.LstatRegular(path)
		if err != nil {
			return nil, errors.Join(fmt.Errorf("%w: dataset %s: stat shard %s: %w", ErrDataset, name, path, err), ds.Close())
		}
		if fi.Size() != sh.Bytes {
			return nil, errors.Join(fmt.Errorf("%w: dataset %s: shard %s changed while it was opened (%d bytes, mapped %d)",
				ErrDataset, name, path, fi.Size(), sh.Bytes), ds.Close())
		}
		d.files = append(d.files, shardFile{name: sh.Name, path: path, size: sh.Bytes, mtime: fi.ModTime(), fi: fi})
	}
	special, err := dataset.ReadSpecialTokens(dir)
	if err != nil {
		return nil, errors.Join(fmt.Errorf("%w: dataset %s: %w", ErrDataset, name, err), ds.Close())
	}
	d.info = &gloadpb.DatasetInfo{
		Name: name, Rows: uint64(ds.Len()), Tokens: uint64(tokens), Fingerprint: ds.Fingerprint(),
		TokenizerHash: ds.TokenizerHash(), Shards: uint32(len(shards)), MaxLength: maxLen,
		PadId: special.PadID, PadToken: special.PadToken, PadFrom: special.PadFrom,
		HasLabels: ds.HasLabels(),
	}
	s.log.Info("dataset opened", "dataset", name, "dir", dir, "rows", ds.Len(), "tokens", tokens,
		"shards", len(shards), "fingerprint", ds.Fingerprint(), "index_used", ds.IndexUsed(), "shards_verified", ds.ShardsVerified(),
		"zero_copy", ds.ZeroCopy(), "took", time.Since(t0))
	return d, nil
}

// lengthsErr is the error of the first block of the index's lengths (of this dataset, or of any source of a
// mixture) that failed its check when a plan or a batch read it: rows of such a block read as length 0, so nothing
// planned or assembled after it may be served.
func (d *served) lengthsErr() error {
	if d.mix != nil {
		for _, p := range d.mix.parts {
			if err := p.lengthsErr(); err != nil {
				return fmt.Errorf("source %s: %w", p.name, err)
			}
		}
		return nil
	}
	if d.ds == nil {
		return nil
	}
	return d.ds.LengthSource().Err()
}

// check refuses a dataset whose shard files changed on disk since it was
// opened (size, mtime or the file itself replaced).
func (d *served) check() error {
	if r := d.broken.Load(); r != nil {
		return fmt.Errorf("%w: %s", ErrDataset, *r)
	}
	if err := d.lengthsErr(); err != nil {
		return fmt.Errorf("%w: %w", ErrDataset, err)
	}
	if d.mix != nil {
		for _, p := range d.mix.parts {
			if err := p.check(); err != nil {
				return fmt.Errorf("mixture %s: source %s: %w", d.name, p.name, err)
			}
		}
		return nil
	}
	for _, f := range d.files {
		fi, err := os.Stat(f.path)
		var why string
		switch {
		case err != nil:
			why = err.Error()
		case fi.Size() != f.size:
			why = fmt.Sprintf("size %d, was %d when the server opened it", fi.Size(), f.size)
		case !fi.ModTime().Equal(f.mtime):
			why = fmt.Sprintf("modified at %s, after the server opened it", fi.ModTime().UTC().Format(time.RFC3339Nano))
		case !os.SameFile(fi, f.fi):
			why = "replaced by another file since the server opened it"
		default:
			continue
		}
		reason := fmt.Sprintf("dataset %s: shard %s changed on disk (%s); restart the server to serve the new files", d.name, f.path, why)
		d.broken.CompareAndSwap(nil, &reason)
		return fmt.Errorf("%w: %s", ErrDataset, *d.broken.Load())
	}
	return nil
}

// markBroken refuses the dataset from now on.
func (d *served) markBroken(reason string) {
	d.broken.CompareAndSwap(nil, &reason)
}

// Serve serves gRPC on lis until ctx ends, then stops accepting, lets open
// streams finish for at most Config.DrainTimeout, ends the rest, and closes
// the datasets. It returns nil after a shutdown through ctx.
func (s *Server) Serve(ctx context.Context, lis net.Listener) error {
	if !s.served.CompareAndSwap(false, true) {
		return ErrServed
	}
	errc := make(chan error, 1)
	adm := newAdmitListener(withPeerCred(lis), admitConfig{
		maxConns: s.cfg.MaxConns, perPeer: s.cfg.MaxConnsPerPeer, reserve: s.cfg.ConnReserve,
		authTimeout: s.cfg.AuthTimeout, needAuth: s.cfg.AuthToken != "",
		onRefuse: func(why string) { s.metrics.connsRefused.WithLabelValues(why).Inc() },
	})
	s.admit.Store(adm)
	lis = adm
	go func() { errc <- s.grpc.Serve(lis) }()
	s.startWatch(ctx)
	s.warnOpenTCP(lis)
	s.log.Info("serving", "addr", addrString(lis.Addr()), "datasets", s.names,
		"max_prefetch", s.cfg.MaxPrefetch, "max_streams", s.cfg.MaxStreams, "max_buffer_bytes", s.cfg.MaxBufferBytes,
		"max_streams_per_conn", s.cfg.MaxStreamsPerConn, "max_conns", s.cfg.MaxConns,
		"max_conns_per_peer", s.cfg.MaxConnsPerPeer, "conn_reserve", s.cfg.ConnReserve, "auth_timeout", s.cfg.AuthTimeout, "tls", s.cfg.TLSCertFile != "", "auth_token", s.cfg.AuthToken != "")
	select {
	case err := <-errc:
		s.abortFunc()
		s.grpc.Stop()
		s.wg.Wait()
		s.plans.wait()
		return errors.Join(fmt.Errorf("serve %s: %w", addrString(lis.Addr()), err), s.closeDatasets())
	case <-ctx.Done():
	}
	s.draining.Store(true)
	s.log.Info("draining", "streams", s.streams.Load(), "timeout", s.cfg.DrainTimeout)
	stopped := make(chan struct{})
	go func() {
		s.grpc.GracefulStop()
		close(stopped)
	}()
	timer := time.NewTimer(s.cfg.DrainTimeout)
	defer timer.Stop()
	select {
	case <-stopped:
	case <-timer.C:
		s.log.Warn("drain timeout: ending open streams", "streams", s.streams.Load())
		s.abortFunc()
		s.grpc.Stop()
		<-stopped
	}
	s.abortFunc()
	<-errc
	s.wg.Wait()
	s.plans.wait()
	err := s.closeDatasets()
	s.log.Info("stopped", "err", err)
	return err
}

// Close stops the server at once (ending open streams) and closes the
// datasets. It is for servers that are not (or no longer) served; Serve
// closes on its own.
func (s *Server) Close() error {
	s.draining.Store(true)
	s.abortFunc()
	s.grpc.Stop()
	s.wg.Wait()
	s.plans.wait()
	return s.closeDatasets()
}

func (s *Server) closeDatasets() error {
	s.closeOnce.Do(func() {
		errs := []error{s.closeWatch(), s.closePaths()}
		for _, d := range s.datasets {
			if err := d.ds.Close(); err != nil {
				errs = append(errs, fmt.Errorf("close dataset %s: %w", d.name, err))
			}
			if d.cache != nil {
				errs = append(errs, d.cache.Close())
			}
		}
		s.closeErr = errors.Join(errs...)
	})
	return s.closeErr
}

// MetricsHandler serves the Prometheus metrics of this server.
func (s *Server) MetricsHandler() http.Handler { return s.metrics.handler() }

// ServeMetrics serves /metrics over HTTP on lis until ctx ends.
func (s *Server) ServeMetrics(ctx context.Context, lis net.Listener) error {
	mux := http.NewServeMux()
	mux.Handle("/metrics", s.authHTTP(s.MetricsHandler()))
	hs := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	errc := make(chan error, 1)
	go func() { errc <- hs.Serve(lis) }()
	s.log.Info("serving metrics", "addr", addrString(lis.Addr()))
	select {
	case err := <-errc:
		return fmt.Errorf("serve metrics on %s: %w", addrString(lis.Addr()), err)
	case <-ctx.Done():
	}
	sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	err := hs.Shutdown(sctx)
	<-errc
	if err != nil {
		return fmt.Errorf("stop metrics on %s: %w", addrString(lis.Addr()), err)
	}
	return nil
}

// Clients returns what the server knows about its clients (open streams,
// queue depth, step reports), sorted by dataset and client id.
func (s *Server) Clients() []ClientStat { return s.clients.snapshot() }

// Conns returns the connections admitted and, of them, those still pending
// authentication (0, 0 before Serve).
func (s *Server) Conns() (total, pending int) {
	if a := s.admit.Load(); a != nil {
		return a.counts()
	}
	return 0, 0
}

// Streams returns the number of open batch streams.
func (s *Server) Streams() int { return int(s.streams.Load()) }

func addrString(a net.Addr) string {
	if a.Network() == "unix" {
		return unixURL(a.String())
	}
	return a.String()
}
