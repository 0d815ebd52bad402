package loader

import (
	"fmt"
	"log/slog"
	"regexp"
	"sort"
	"time"

	"github.com/gload/gload/loader/access"
	"github.com/gload/gload/loader/gpuwatch"
	"github.com/gload/gload/loader/shm"
)

// Defaults applied to zero Config fields.
const (
	DefaultMaxPrefetch     = 64
	DefaultPrefetch        = 8
	DefaultDrainTimeout    = 10 * time.Second
	DefaultPlanCacheSize   = 8
	DefaultMaxBatchBytes   = 64 << 20
	DefaultMaxClientLabels = 64
	// DefaultMaxMixtureRows bounds a mixture epoch's rows (about 20 bytes of
	// plan each) unless its sources together have more.
	DefaultMaxMixtureRows = 1 << 27
	// maxMessageBytes is gRPC's hard limit on one message.
	maxMessageBytes = 1<<31 - 1
)

// Config configures a Server. The zero value of every field but Datasets
// means its documented default.
type Config struct {
	// Datasets maps the names clients use to dataset directories.
	Datasets map[string]string
	// PathsOnly lets a server start without Datasets: it serves those its
	// owner's clients open by path (the OpenPath RPC; open to every server).
	PathsOnly bool
	// Mixtures maps names clients use to weighted mixtures of Datasets
	// (a name may not be both a dataset and a mixture).
	Mixtures map[string]MixtureSpec
	// MaxPrefetch bounds the prefetch depth a client may ask for (default 64).
	MaxPrefetch int
	// DefaultPrefetch is granted to clients that ask for 0 (default 8).
	DefaultPrefetch int
	// DrainTimeout bounds how long Serve waits for open streams to finish
	// after its context ends (default 10s; negative: do not wait).
	DrainTimeout time.Duration
	// PlanCacheSize is how many epoch plans stay cached (default 8).
	PlanCacheSize int
	// MaxMixtureRows bounds the rows of a mixture epoch a client may ask
	// for (epoch_samples, epoch_tokens, epoch_until; default 2^27): an
	// epoch longer than both this and its sources' rows together is
	// refused with RESOURCE_EXHAUSTED before it is planned. The epoch of
	// all sources' rows (the default length) always fits.
	MaxMixtureRows int64
	// MaxBatchBytes bounds the encoded size of one batch message (default
	// 64 MiB: 16 M tokens, eight times a 64 × 32k batch); a stream whose
	// largest shape exceeds it is refused, naming max_length. The client's
	// batch is up to six times larger (int64 input_ids, mask and labels).
	MaxBatchBytes int64
	// MaxStreams bounds the open batch streams (default 1024); MaxBufferBytes
	// the memory they may reserve for batches in flight, gRPC buffers and
	// shared-memory rings (default 2 GiB); MaxStreamsPerConn the streams of
	// one connection (default 256); MaxConns the connections (default 1024).
	// See limits.go.
	MaxStreams        int
	MaxBufferBytes    int64
	MaxStreamsPerConn int
	MaxConns          int
	// MaxConnsPerPeer bounds the connections of one peer (a uid for unix
	// sockets and loopback TCP, else a remote IP address; default
	// MaxConns/4); with an AuthToken, AuthTimeout is how long a connection may
	// go without a call carrying it (default 10 s) and ConnReserve how many
	// of MaxConns such pending connections may never take (default
	// MaxConns/8). See admit.go.
	MaxConnsPerPeer int
	AuthTimeout     time.Duration
	ConnReserve     int
	// MaxClientLabels bounds the distinct client_id label values in metrics
	// (default 64); further clients share the label "_other".
	MaxClientLabels int
	// AuthToken, when not empty, is the bearer token every call must carry
	// (gRPC metadata and the /metrics HTTP header "authorization: Bearer
	// <token>"); see package loader/access.
	AuthToken string
	// TLSCertFile and TLSKeyFile enable TLS (PEM files); both or neither.
	TLSCertFile, TLSKeyFile string
	// ShmDir is where shared-memory rings are created (default /dev/shm);
	// rings of dead servers found there are removed at start.
	ShmDir string
	// NoWriteIndex keeps a rebuilt gload.index (and the freshness stamp) in memory only.
	NoWriteIndex bool
	// IndexDir is the index cache directory (dataset.OpenOptions.IndexDir):
	// indexes of datasets Hugging Face wrote, and stamps of read-only
	// directories, go there. "": beside the shards.
	IndexDir string
	// PlanCountsDir keeps the counting passes of lazy tokens and packed plans (plancounts.go), so that a restarted
	// server plans the same epoch without building every window again; made private to the user (0700) on first
	// use. "": none kept. `gload serve` defaults it to the user cache directory's gload/plans.
	PlanCountsDir string
	// VerifyContent hashes every shard at start and compares it with the
	// index, even when size, mtime, ctime and inode say it did not change.
	VerifyContent bool
	// Watch is the GPU starvation watch, fed with the clients' step reports
	// and queues and served by the Watch RPC and /metrics; its caller runs
	// it and closes its source. Nil: the server makes one over NVML with
	// WatchOptions (without a GPU, or with NoGPUWatch, it says "no GPU
	// visible") and runs it while serving.
	Watch        *gpuwatch.Watcher
	WatchOptions gpuwatch.Options
	NoGPUWatch   bool
	// Remote configures datasets given as s3://bucket/prefix (cache, prefetch, store).
	Remote RemoteConfig
	// Version is reported by Health.
	Version string
	// Logger receives structured logs; nil discards them.
	Logger *slog.Logger
}

// datasetName is what a dataset may be called (it appears in metrics labels
// and error messages).
var datasetName = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$`)

// normalized validates c and applies defaults.
func (c Config) normalized() (Config, error) {
	if len(c.Datasets) == 0 && !c.PathsOnly {
		return c, fmt.Errorf("%w: no datasets", ErrConfig)
	}
	for name := range c.Mixtures {
		if !datasetName.MatchString(name) {
			return c, fmt.Errorf("%w: mixture name %q: want letters, digits, '.', '_' or '-' (at most 64)", ErrConfig, name)
		}
		if _, ok := c.Datasets[name]; ok {
			return c, fmt.Errorf("%w: %q names both a dataset and a mixture", ErrConfig, name)
		}
	}
	for name, dir := range c.Datasets {
		if !datasetName.MatchString(name) {
			return c, fmt.Errorf("%w: dataset name %q: want 1-64 letters, digits, '.', '_' or '-'", ErrConfig, name)
		}
		if dir == "" {
			return c, fmt.Errorf("%w: dataset %s: empty directory", ErrConfig, name)
		}
	}
	if c.MaxPrefetch == 0 {
		c.MaxPrefetch = DefaultMaxPrefetch
	}
	if c.DefaultPrefetch == 0 {
		c.DefaultPrefetch = min(DefaultPrefetch, c.MaxPrefetch)
	}
	if c.MaxPrefetch < 1 || c.MaxPrefetch > 1<<16 {
		return c, fmt.Errorf("%w: max prefetch %d: want 1 to 65536", ErrConfig, c.MaxPrefetch)
	}
	if c.DefaultPrefetch < 1 || c.DefaultPrefetch > c.MaxPrefetch {
		return c, fmt.Errorf("%w: default prefetch %d: want 1 to max prefetch %d", ErrConfig, c.DefaultPrefetch, c.MaxPrefetch)
	}
	if c.DrainTimeout == 0 {
		c.DrainTimeout = DefaultDrainTimeout
	}
	if c.DrainTimeout < 0 {
		c.DrainTimeout = 0
	}
	if c.PlanCacheSize == 0 {
		c.PlanCacheSize = DefaultPlanCacheSize
	}
	if c.MaxMixtureRows == 0 {
		c.MaxMixtureRows = DefaultMaxMixtureRows
	}
	if c.MaxMixtureRows < 0 {
		return c, fmt.Errorf("%w: max mixture rows %d: want > 0", ErrConfig, c.MaxMixtureRows)
	}
	if c.PlanCacheSize < 1 {
		return c, fmt.Errorf("%w: plan cache size %d: want > 0", ErrConfig, c.PlanCacheSize)
	}
	if c.MaxBatchBytes == 0 {
		c.MaxBatchBytes = DefaultMaxBatchBytes
	}
	if c.MaxBatchBytes < 1<<10 || c.MaxBatchBytes > maxMessageBytes {
		return c, fmt.Errorf("%w: max batch bytes %d: want 1 KiB to 2 GiB", ErrConfig, c.MaxBatchBytes)
	}
	if c.MaxStreams == 0 {
		c.MaxStreams = DefaultMaxStreams
	}
	if c.MaxBufferBytes == 0 {
		c.MaxBufferBytes = DefaultMaxBufferBytes
	}
	if c.MaxStreamsPerConn == 0 {
		c.MaxStreamsPerConn = DefaultMaxStreamsPerConn
	}
	if c.MaxConns == 0 {
		c.MaxConns = DefaultMaxConns
	}
	if c.MaxConnsPerPeer == 0 {
		c.MaxConnsPerPeer = defaultPerPeer(c.MaxConns)
	}
	if c.ConnReserve == 0 {
		c.ConnReserve = defaultReserve(c.MaxConns)
	}
	if c.AuthTimeout == 0 {
		c.AuthTimeout = DefaultAuthTimeout
	}
	if c.MaxConnsPerPeer < 1 || c.ConnReserve < 0 || c.ConnReserve >= max(c.MaxConns, 1) && c.MaxConns > 1 || c.AuthTimeout < 0 {
		return c, fmt.Errorf("%w: max connections per peer %d, connection reserve %d (of %d), auth timeout %s: want per peer > 0, "+
			"0 <= reserve < max connections, timeout > 0", ErrConfig, c.MaxConnsPerPeer, c.ConnReserve, c.MaxConns, c.AuthTimeout)
	}
	if c.MaxStreams < 1 || c.MaxStreamsPerConn < 1 || c.MaxConns < 1 || c.MaxStreamsPerConn > 1<<20 {
		return c, fmt.Errorf("%w: max streams %d, per connection %d, max connections %d: want > 0", ErrConfig,
			c.MaxStreams, c.MaxStreamsPerConn, c.MaxConns)
	}
	if c.MaxBufferBytes < 1<<20 {
		return c, fmt.Errorf("%w: max buffer bytes %d: want at least 1 MiB", ErrConfig, c.MaxBufferBytes)
	}
	if c.MaxClientLabels == 0 {
		c.MaxClientLabels = DefaultMaxClientLabels
	}
	if c.MaxClientLabels < 1 {
		return c, fmt.Errorf("%w: max client labels %d: want > 0", ErrConfig, c.MaxClientLabels)
	}
	if (c.TLSCertFile == "") != (c.TLSKeyFile == "") {
		return c, fmt.Errorf("%w: TLS needs both a certificate and a key file", ErrConfig)
	}
	if c.AuthToken != "" {
		if err := access.CheckToken(c.AuthToken); err != nil {
			return c, fmt.Errorf("%w: auth token: %w", ErrConfig, err)
		}
	}
	if c.ShmDir == "" {
		c.ShmDir = shm.DefaultDir
	}
	if c.Version == "" {
		c.Version = "dev"
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	return c, nil
}

// sortedNames returns the dataset names in order.
func sortedNames(m map[string]string) []string {
	names := make([]string, 0, len(m))
	for n := range m {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}
