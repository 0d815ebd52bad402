package main

// Object storage in the commands: `gload tokenize --out s3://…`, `gload sync`, and the flags they share.

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/gload/gload/internal/privdir"
	"github.com/gload/gload/loader"
	"github.com/gload/gload/loader/dataset"
	"github.com/gload/gload/loader/objstore"
	"github.com/gload/gload/loader/remote"
	"github.com/gload/gload/tokenize/pipeline"
)

// s3Flags are the object-storage flags of tokenize, serve and sync. Credentials never come from flags: they are
// read the AWS way (environment, shared credentials/config files with $AWS_PROFILE, instance roles).
type s3Flags struct {
	endpoint string
	region   string
	profile  string
	idle     time.Duration
	minRate  string
}

func (s *s3Flags) add(f *pflag.FlagSet) {
	f.StringVar(&s.endpoint, "s3-endpoint", "", "S3-compatible endpoint, http(s)://host:port (default: $AWS_ENDPOINT_URL_S3, $AWS_ENDPOINT_URL, AWS)")
	f.StringVar(&s.region, "s3-region", "", "region (default: $AWS_REGION, $AWS_DEFAULT_REGION)")
	f.StringVar(&s.profile, "s3-profile", "", "profile of ~/.aws/credentials and ~/.aws/config (default: $AWS_PROFILE, default)")
	f.DurationVar(&s.idle, "s3-idle-timeout", 60*time.Second, "a request that receives no byte for this long fails (and is retried)")
	f.StringVar(&s.minRate, "s3-min-rate", "256KiB", "slowest download accepted, bytes per second: a download of N bytes must end within --s3-idle-timeout + N/rate")
}

func (s *s3Flags) config() (objstore.Config, error) {
	if s.idle <= 0 {
		return objstore.Config{}, fmt.Errorf("--s3-idle-timeout must be > 0")
	}
	rate, err := parseSize(s.minRate)
	if err != nil || rate <= 0 {
		return objstore.Config{}, fmt.Errorf("--s3-min-rate %q: want a positive size such as 256KiB", s.minRate)
	}
	return objstore.Config{Endpoint: s.endpoint, Region: s.region, Profile: s.profile, IdleTimeout: s.idle, MinRate: rate}, nil
}

func (s *s3Flags) open(ctx context.Context, rawURL string) (*objstore.Store, error) {
	u, err := objstore.ParseURL(rawURL)
	if err != nil {
		return nil, err
	}
	cfg, err := s.config()
	if err != nil {
		return nil, err
	}
	return objstore.Open(ctx, u, cfg)
}

// defaultCacheRoot is $XDG_CACHE_HOME/gload (or ~/.cache/gload; without either, $TMPDIR/gload-cache-<uid>),
// made or checked private to the user (0700, owned by them, nobody else can write it).
func defaultCacheRoot() (string, error) {
	root := privdir.TempRoot("gload-cache")
	if d, err := os.UserCacheDir(); err == nil {
		root = filepath.Join(d, "gload")
	}
	if err := privdir.Ensure(root); err != nil {
		return "", fmt.Errorf("cache directory: %w", err)
	}
	return root, nil
}

// stageRemoteOut points a tokenize run whose --out is s3://… at a local stage directory and uploads each shard as
// it completes. The returned finish publishes the dataset (gload.index last) after a successful run.
func (o *tokenizeOptions) stageRemoteOut(ctx context.Context, opts *pipeline.Options) (finish func() error, err error) {
	if !objstore.IsURL(opts.Out) {
		return nil, nil
	}
	st, err := o.s3.open(ctx, opts.Out)
	if err != nil {
		return nil, fmt.Errorf("--out: %w", err)
	}
	stage := o.stage
	if stage == "" {
		root, err := defaultCacheRoot()
		if err != nil {
			return nil, fmt.Errorf("--out: %w", err)
		}
		stage = remote.CacheDir(filepath.Join(root, "upload"), st.URL())
	}
	if !opts.Resume {
		if err := os.RemoveAll(stage); err != nil {
			return nil, fmt.Errorf("--stage: %w", err)
		}
	}
	if err := os.MkdirAll(stage, 0o700); err != nil {
		return nil, fmt.Errorf("--stage: %w", err)
	}
	up, err := remote.NewStagedUpload(ctx, st, stage, remote.StageOptions{Overwrite: opts.Overwrite, Resume: opts.Resume})
	if err != nil {
		return nil, err
	}
	if opts.Resume {
		if _, err := os.Stat(filepath.Join(stage, "gload.progress.json")); os.IsNotExist(err) {
			opts.Resume = false // nothing to resume: start afresh into the stage
			os.RemoveAll(stage)
		}
	}
	opts.Out = stage
	opts.ShardDone = func(s dataset.ShardInfo) error { return up.ShardDone(ctx, s) }
	return func() error {
		if err := up.Finish(ctx); err != nil {
			return err
		}
		return os.RemoveAll(stage)
	}, nil
}

// remoteServeFlags configure gload serve for datasets given as NAME=s3://bucket/prefix.
type remoteServeFlags struct {
	s3        s3Flags
	cache     string
	cacheSize string
	ahead     int
	fetch     int
}

func (r *remoteServeFlags) add(f *pflag.FlagSet) {
	r.s3.add(f)
	f.StringVar(&r.cache, "cache", "", "with NAME=s3://… datasets: local directory for their metadata and shards (default: the user cache dir's gload/cache)")
	f.StringVar(&r.cacheSize, "cache-size", "0", "shard bytes kept per object-storage dataset, e.g. 200GB (0: no bound); shards are evicted once no stream needs them soon")
	f.IntVar(&r.ahead, "cache-ahead", 2, "shards each stream fetches ahead of the one it reads")
	f.IntVar(&r.fetch, "cache-fetch", 2, "concurrent shard downloads per object-storage dataset")
}

func (r *remoteServeFlags) config() (loader.RemoteConfig, error) {
	var size int64
	if r.cacheSize != "0" {
		var err error
		if size, err = parseSize(r.cacheSize); err != nil {
			return loader.RemoteConfig{}, fmt.Errorf("--cache-size: %w", err)
		}
	}
	if r.ahead < 1 || r.fetch < 1 {
		return loader.RemoteConfig{}, fmt.Errorf("--cache-ahead and --cache-fetch must be ≥ 1")
	}
	cache := r.cache // "": the loader's default, made private to the user when a remote dataset first needs it
	s3cfg, err := r.s3.config()
	if err != nil {
		return loader.RemoteConfig{}, err
	}
	return loader.RemoteConfig{CacheDir: cache, CacheBytes: size, Ahead: r.ahead, Fetch: r.fetch, S3: s3cfg}, nil
}

type syncOptions struct {
	g     *globalOptions
	s3    s3Flags
	quiet bool
}

func newSyncCmd(g *globalOptions) *cobra.Command {
	o := &syncOptions{g: g}
	cmd := &cobra.Command{
		Use:   "sync SRC DST",
		Short: "Copy a dataset between object storage and a local directory, verified",
		Long: `gload sync s3://bucket/prefix DIR downloads a dataset: its metadata first, then every shard through a
temporary name, verified against the content hash recorded in gload.index, and gload.index last, so DIR looks
complete only when it is. Shards already in DIR that verify are kept: a killed sync is simply run again.

gload sync DIR s3://bucket/prefix uploads a complete local dataset: shards first (those already in the bucket
with the right size are skipped), then dataset_info.json and state.json, gload.index last.

Credentials come from the environment (AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY, AWS_SESSION_TOKEN), the shared
files (~/.aws/credentials, ~/.aws/config, AWS_PROFILE) or an instance role; --s3-endpoint (or AWS_ENDPOINT_URL)
names an S3-compatible store (MinIO, Ceph, R2, GCS's XML API at https://storage.googleapis.com with HMAC keys).`,
		Args: cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			return o.run(cmd, args[0], args[1])
		},
	}
	o.s3.add(cmd.Flags())
	cmd.Flags().BoolVar(&o.quiet, "quiet", false, "no progress output")
	return cmd
}

func (o *syncOptions) run(cmd *cobra.Command, src, dst string) error {
	ctx := cmd.Context()
	t0 := time.Now()
	switch {
	case objstore.IsURL(src) && !objstore.IsURL(dst):
		st, err := o.s3.open(ctx, src)
		if err != nil {
			return err
		}
		var prog func(done, total int64, shard string)
		var waiting func(string)
		if !o.quiet {
			prog = progressLine(cmd.ErrOrStderr())
			waiting = func(holder string) {
				fmt.Fprintf(cmd.ErrOrStderr(), "waiting for the gload process that holds %s (%s)\n", dst, holder)
			}
		}
		meta, err := remote.Sync(ctx, st, dst, remote.SyncOptions{Progress: prog, Waiting: waiting})
		if err != nil {
			return err
		}
		defer meta.Close()
		var bytes int64
		for _, e := range meta.Shards {
			bytes += e.Size
		}
		secs := time.Since(t0).Seconds()
		fmt.Fprintf(cmd.OutOrStdout(), "synced %s → %s: %d shards, %d rows, %.1f MB in %.1f s (%.1f MB/s), every shard verified\n",
			st.URL(), dst, len(meta.Shards), meta.Index.Rows(), float64(bytes)/1e6, secs, float64(bytes)/1e6/max(secs, 1e-9))
		return nil
	case !objstore.IsURL(src) && objstore.IsURL(dst):
		st, err := o.s3.open(ctx, dst)
		if err != nil {
			return err
		}
		if err := remote.Upload(ctx, src, st); err != nil {
			return err
		}
		fmt.Fprintf(cmd.OutOrStdout(), "uploaded %s → %s in %.1f s\n", src, st.URL(), time.Since(t0).Seconds())
		return nil
	}
	return fmt.Errorf("sync: one of SRC and DST must be s3://bucket/prefix and the other a local directory (got %q, %q)", src, dst)
}

// progressLine prints a sync's progress at most once a second.
func progressLine(w io.Writer) func(done, total int64, shard string) {
	var last time.Time
	return func(done, total int64, shard string) {
		if now := time.Now(); now.Sub(last) >= time.Second || done == total {
			last = now
			fmt.Fprintf(w, "sync: %.1f / %.1f MB (%s)\n", float64(done)/1e6, float64(total)/1e6, shard)
		}
	}
}
