package main

import (
	"context"
	"fmt"
	"net"
	"path/filepath"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"golang.org/x/sync/errgroup"

	"github.com/gload/gload/internal/version"
	"github.com/gload/gload/loader"
	"github.com/gload/gload/loader/access"
	"github.com/gload/gload/loader/dataset"
	"github.com/gload/gload/loader/gpuwatch"
)

type serveOptions struct {
	g               *globalOptions
	remote          remoteServeFlags // NAME=s3://… datasets
	datasets        []string
	mixtures        []string // NAME=DATASET:WEIGHT,…
	mixtureFile     string
	listen          string
	metrics         string
	allowRemote     bool
	socketGroup     string
	authTokenFile   string
	tlsCert         string
	tlsKey          string
	maxPrefetch     int
	defaultPrefetch int
	drainTimeout    time.Duration
	planCache       int
	maxBatchBytes   int64
	maxMixtureRows  int64
	maxClientLabels int
	maxStreams      int
	maxBufferBytes  int64
	maxPerConn      int
	maxConns        int
	maxConnsPerPeer int
	connReserve     int
	authTimeout     time.Duration
	noWriteIndex    bool
	indexDir        string
	planCountsDir   string
	verify          bool
	watchInterval   time.Duration
	watchWindow     time.Duration
	noGPUWatch      bool
	lifetime        lifetimeOptions // --idle-exit, --owner-pid, --lock-file (lifetime.go)
	pathsOnly       bool
}

func newServeCmd(g *globalOptions) *cobra.Command {
	o := &serveOptions{g: g}
	cmd := &cobra.Command{
		Use:   "serve --dataset NAME=DIR [--dataset NAME=DIR ...] [--listen ADDR]",
		Short: "Serve length-bucketed batches of tokenized datasets to training loops over gRPC",
		Long: `Opens each dataset (a directory written by gload tokenize or Hugging Face save_to_disk) and serves batches of
it over gRPC (proto/gload.proto): clients name a dataset, their rank and worker, a seed, an epoch and a batching
policy, and receive their share of the epoch plan, the server running at most --max-prefetch batches ahead of their
acknowledgements. A dataset whose shards are corrupt or truncated stops the start with the file and the reason.

--listen takes unix:///path.sock or host:port; the default is a unix socket only this user can connect to
($GLOAD_ADDR, else $XDG_RUNTIME_DIR/gload.sock, else /tmp/gload-<uid>/gload.sock; clients default to the same).
Unix sockets get mode 0600 whatever the umask (0660 with --socket-group, for that group). Only unix sockets and
loopback addresses (127.0.0.1, ::1, localhost) are allowed unless --allow-remote is given; --tls-cert and
--tls-key enable TLS. Over TCP any user of the host can connect: --auth-token-file makes every call (and /metrics)
need the token in the file (clients send it from GLOAD_AUTH_TOKEN or their auth_token option). --metrics serves
Prometheus metrics over HTTP (same address rules). SIGINT or SIGTERM stops accepting streams, lets open ones finish for
--drain-timeout and exits.

Every server also serves the datasets its own user's clients open by path (the OpenPath RPC, allowed only over the
unix socket to the server's uid); --paths-only starts one without --dataset that serves only those. A Python Loader
given a dataset directory starts such a server itself, with --idle-exit (exit that long after the last client connection closed),
--owner-pid (exit as soon as that process has exited and no client is connected) and --lock-file (the lock its
clients take to start or attach to it; removed on exit).`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return o.run(cmd.Context())
		},
	}
	f := cmd.Flags()
	f.StringArrayVar(&o.datasets, "dataset", nil, "dataset to serve as NAME=DIR (repeatable)")
	f.StringArrayVar(&o.mixtures, "mixture", nil, "weighted mixture of datasets as NAME=DATASET:WEIGHT,DATASET:WEIGHT[,mix_by=tokens|epoch_until=DATASET|epoch_samples=N|epoch_tokens=N] (repeatable; weights are normalised)")
	f.StringVar(&o.mixtureFile, "mixture-file", "", "YAML or JSON file of mixtures (mixtures: [{name, sources: [{dataset, weight}], mix_by, epoch_until, …}])")
	f.StringVar(&o.listen, "listen", access.DefaultAddress(), "gRPC address: unix:///path.sock or host:port")
	f.StringVar(&o.socketGroup, "socket-group", "", "let this group (name or gid) connect to the unix socket too (mode 0660 instead of 0600)")
	f.StringVar(&o.authTokenFile, "auth-token-file", "", "require the bearer token in this file (mode 0600) on every call and on /metrics")
	f.StringVar(&o.metrics, "metrics", "", "Prometheus /metrics address, e.g. 127.0.0.1:9400 (empty: off)")
	f.BoolVar(&o.allowRemote, "allow-remote", false, "allow listening on non-loopback addresses (use with --tls-cert)")
	f.StringVar(&o.tlsCert, "tls-cert", "", "TLS certificate (PEM); needs --tls-key")
	f.StringVar(&o.tlsKey, "tls-key", "", "TLS private key (PEM); needs --tls-cert")
	f.IntVar(&o.maxPrefetch, "max-prefetch", loader.DefaultMaxPrefetch, "largest prefetch depth (un-acked batches) a client may ask for")
	f.IntVar(&o.defaultPrefetch, "default-prefetch", 0, "prefetch depth of clients that ask for 0 (0: 8, or --max-prefetch if smaller)")
	f.DurationVar(&o.drainTimeout, "drain-timeout", loader.DefaultDrainTimeout, "on shutdown, how long open streams may run before they are ended")
	f.IntVar(&o.planCache, "plan-cache", loader.DefaultPlanCacheSize, "epoch plans kept in memory")
	f.Int64Var(&o.maxBatchBytes, "max-batch-bytes", loader.DefaultMaxBatchBytes, "largest encoded batch; larger shapes are refused")
	f.Int64Var(&o.maxMixtureRows, "max-mixture-rows", loader.DefaultMaxMixtureRows, "most rows of a mixture epoch a client may ask for (epoch_samples/epoch_tokens/epoch_until), unless the sources together have more")
	f.IntVar(&o.maxStreams, "max-streams", loader.DefaultMaxStreams, "most batch streams open at once; more are refused with RESOURCE_EXHAUSTED")
	f.Int64Var(&o.maxBufferBytes, "max-buffer-bytes", loader.DefaultMaxBufferBytes,
		"memory all streams together may hold for batches in flight (gRPC buffers and shm rings); a stream gets the prefetch that fits, or RESOURCE_EXHAUSTED")
	f.IntVar(&o.maxPerConn, "max-streams-per-conn", loader.DefaultMaxStreamsPerConn, "most batch streams one client connection may open; more are refused with RESOURCE_EXHAUSTED")
	f.IntVar(&o.maxConns, "max-conns", loader.DefaultMaxConns, "most client connections at once (more wait to be accepted; with --auth-token-file, unauthenticated ones are closed to make room)")
	f.IntVar(&o.maxConnsPerPeer, "max-conns-per-peer", 0, "most connections of one peer (a uid on unix sockets and loopback TCP, else an IP address); more are closed at once (default --max-conns/4)")
	f.IntVar(&o.connReserve, "conn-reserve", 0, "with --auth-token-file: connections kept for clients that sent the token (default --max-conns/8)")
	f.DurationVar(&o.authTimeout, "auth-timeout", loader.DefaultAuthTimeout, "with --auth-token-file: a connection without a call carrying the token for this long is closed")
	f.IntVar(&o.maxClientLabels, "max-client-labels", loader.DefaultMaxClientLabels, "distinct client ids labelled in metrics")
	f.BoolVar(&o.noWriteIndex, "no-write-index", false, "do not store a rebuilt gload.index or freshness stamp anywhere")
	f.StringVar(&o.indexDir, "index-dir", dataset.DefaultIndexDir(), "index cache for datasets without their own gload.index (Hugging Face) and read-only directories")
	f.StringVar(&o.planCountsDir, "plan-counts-dir", defaultPlanCountsDir(), "keeps the counting passes of lazy tokens and packed plans (past 2^27 rows) so a restart plans in under a second; private to you (0700); \"\": keep none")
	f.BoolVar(&o.verify, "verify", false, "hash every shard at start and compare with the index, even when size and times are unchanged")
	f.DurationVar(&o.watchInterval, "watch-interval", time.Second, "how often the GPU watch polls NVML")
	f.DurationVar(&o.watchWindow, "watch-window", time.Minute, "sliding window of the GPU watch's statistics and verdict")
	f.BoolVar(&o.noGPUWatch, "no-gpu-watch", false, "do not open NVML (the watch then reports client statistics and \"no GPU visible\")")
	f.BoolVar(&o.pathsOnly, "paths-only", false, "start without --dataset: serve only the datasets this user's clients open by path")
	f.DurationVar(&o.lifetime.idleExit, "idle-exit", 0, "exit this long after the last client connection closed (0: never)")
	f.IntVar(&o.lifetime.ownerPID, "owner-pid", 0, "exit once this process has exited and no client is connected (0: none)")
	f.StringVar(&o.lifetime.lockFile, "lock-file", "", "start lock of the clients that share this server: taken before an idle exit, removed on exit")
	o.remote.add(f)
	return cmd
}

// parseDatasets reads NAME=DIR flags.
func parseDatasets(flags []string) (map[string]string, error) {
	out := make(map[string]string, len(flags))
	for _, f := range flags {
		name, dir, ok := strings.Cut(f, "=")
		if !ok || name == "" || dir == "" {
			return nil, fmt.Errorf("--dataset %q: want NAME=DIR", f)
		}
		if _, dup := out[name]; dup {
			return nil, fmt.Errorf("--dataset %q: name %s given twice", f, name)
		}
		out[name] = dir
	}
	return out, nil
}

func buildVersion() string { return version.String() }

func (o *serveOptions) run(ctx context.Context) error {
	if ctx == nil {
		ctx = context.Background()
	}
	datasets, err := parseDatasets(o.datasets)
	if err != nil {
		return err
	}
	st, err := o.startUp(ctx, datasets)
	if err != nil {
		return err
	}
	srv, lis, mlis := st.srv, st.lis, st.mlis
	// A job's server (started by a Loader): idle exit, its starter's death, its lock (lifetime.go).
	var life *lifetime
	if o.lifetime.enabled() || o.lifetime.lockFile != "" {
		var stop context.CancelFunc
		ctx, stop = context.WithCancel(ctx)
		defer stop()
		life = newLifetime(o.lifetime, o.g.logger(), srv.Idle)
		go life.run(ctx, stop)
	}
	g, gctx := errgroup.WithContext(ctx)
	g.Go(func() error { return srv.Serve(gctx, lis) })
	if mlis != nil {
		g.Go(func() error { return srv.ServeMetrics(gctx, mlis) })
	}
	err = g.Wait()
	if life != nil {
		life.finish()
	}
	return err
}

// serveStart is what start-up made: the server and its listeners.
type serveStart struct {
	srv       *loader.Server
	lis, mlis net.Listener
}

// close undoes a start-up nobody waits for any more.
func (s serveStart) close() {
	if s.mlis != nil {
		s.mlis.Close()
	}
	if s.lis != nil {
		s.lis.Close()
	}
	if s.srv != nil {
		s.srv.Close()
	}
}

// startUp reads the token, opens the datasets and listens. Its steps read
// files and may fetch from object storage; none of them takes a context, so
// it runs on its own goroutine and a signal (ctx) ends the wait at once: what
// it made meanwhile is closed when it returns (issue 34 item 14).
func (o *serveOptions) startUp(ctx context.Context, datasets map[string]string) (serveStart, error) {
	type result struct {
		s   serveStart
		err error
	}
	done := make(chan result, 1)
	go func() {
		s, err := o.startSteps(datasets)
		done <- result{s, err}
	}()
	select {
	case r := <-done:
		return r.s, r.err
	case <-ctx.Done():
		go func() {
			if r := <-done; r.err == nil {
				r.s.close()
			}
		}()
		return serveStart{}, fmt.Errorf("start-up interrupted (%w): nothing was served", context.Cause(ctx))
	}
}

// startSteps is startUp's work.
func (o *serveOptions) startSteps(datasets map[string]string) (serveStart, error) {
	mixes, err := mixtures(o.mixtures, o.mixtureFile)
	if err != nil {
		return serveStart{}, err
	}
	log := o.g.logger()
	if err := o.lifetime.check(); err != nil {
		return serveStart{}, err
	}
	if len(datasets) == 0 && len(mixes) == 0 && !o.pathsOnly {
		return serveStart{}, fmt.Errorf("no --dataset: give --dataset NAME=DIR (repeatable), or --paths-only to serve only datasets this user's clients open by path")
	}
	var token string
	if o.authTokenFile != "" {
		if token, err = access.ReadTokenFile(o.authTokenFile); err != nil {
			return serveStart{}, fmt.Errorf("--auth-token-file: %w", err)
		}
	}
	remoteCfg, err := o.remote.config()
	if err != nil {
		return serveStart{}, err
	}
	srv, err := loader.NewServer(loader.Config{
		AuthToken:         token,
		Datasets:          datasets,
		PathsOnly:         o.pathsOnly,
		Mixtures:          mixes,
		MaxPrefetch:       o.maxPrefetch,
		DefaultPrefetch:   o.defaultPrefetch,
		DrainTimeout:      o.drainTimeout,
		PlanCacheSize:     o.planCache,
		MaxBatchBytes:     o.maxBatchBytes,
		MaxMixtureRows:    o.maxMixtureRows,
		MaxClientLabels:   o.maxClientLabels,
		MaxStreams:        o.maxStreams,
		MaxBufferBytes:    o.maxBufferBytes,
		MaxStreamsPerConn: o.maxPerConn,
		MaxConns:          o.maxConns,
		MaxConnsPerPeer:   o.maxConnsPerPeer,
		ConnReserve:       o.connReserve,
		AuthTimeout:       o.authTimeout,
		TLSCertFile:       o.tlsCert,
		TLSKeyFile:        o.tlsKey,
		NoWriteIndex:      o.noWriteIndex,
		IndexDir:          o.indexDir,
		PlanCountsDir:     o.planCountsDir,
		VerifyContent:     o.verify,
		WatchOptions:      gpuwatch.Options{Interval: o.watchInterval, Window: o.watchWindow},
		NoGPUWatch:        o.noGPUWatch,
		Version:           buildVersion(),
		Remote:            remoteCfg,
		Logger:            log,
	})
	if err != nil {
		return serveStart{}, err
	}
	lopts := loader.ListenOptions{AllowRemote: o.allowRemote}
	lis, err := loader.Listen(o.listen, loader.ListenOptions{AllowRemote: o.allowRemote, SocketGroup: o.socketGroup})
	if err != nil {
		return serveStart{}, fmt.Errorf("--listen: %w", closeAfter(err, srv))
	}
	var mlis net.Listener
	if o.metrics != "" {
		if mlis, err = loader.Listen(o.metrics, lopts); err != nil {
			lis.Close()
			return serveStart{}, fmt.Errorf("--metrics: %w", closeAfter(err, srv))
		}
	}
	return serveStart{srv: srv, lis: lis, mlis: mlis}, nil
}

// closeAfter closes srv after a failed start and keeps err first.
func closeAfter(err error, srv *loader.Server) error {
	if cerr := srv.Close(); cerr != nil {
		return fmt.Errorf("%w (closing: %v)", err, cerr)
	}
	return err
}

// defaultPlanCountsDir is the user cache directory's gload/plans ("" without one: nothing kept).
func defaultPlanCountsDir() string {
	if d := dataset.DefaultIndexDir(); d != "" {
		return filepath.Join(d, "plans")
	}
	return ""
}
