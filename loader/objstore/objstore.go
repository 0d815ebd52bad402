// Package objstore reads and writes gload datasets in S3-compatible object storage (AWS S3, GCS through its S3
// API, R2, MinIO, Ceph, Versity): URLs of the form s3://bucket/prefix, credentials and endpoints found the standard
// way, verified downloads under temporary names, and uploads that never make a partial object look complete.
//
// It knows nothing of the dataset format: callers pass a verify function (the dataset package checks a shard
// against the content hash recorded in gload.index) and choose the order of objects. The S3 protocol itself is
// github.com/minio/minio-go/v7's: request signing, retries with backoff on 5xx and timeouts, multipart uploads and
// concurrent ranged GETs.
//
// # Secrets
//
// Errors, logs and String methods never contain a secret key or session token: errors name the endpoint, the
// bucket, the object and the S3 error code only.
package objstore

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"path"
	"path/filepath"
	"strings"
	"time"

	"github.com/minio/minio-go/v7"
	"github.com/minio/minio-go/v7/pkg/credentials"
)

// Sentinel errors; every error this package returns wraps one of them or the S3 error it got.
var (
	ErrBadURL      = errors.New("objstore: bad object storage URL")
	ErrCredentials = errors.New("objstore: credentials refused")
	ErrNotFound    = errors.New("objstore: no such object")
	ErrNoBucket    = errors.New("objstore: no such bucket")
	ErrVerify      = errors.New("objstore: downloaded object failed verification")
	ErrTooLarge    = errors.New("objstore: object larger than expected")
	ErrStalled     = errors.New("objstore: transfer stalled")
	ErrTooSlow     = errors.New("objstore: transfer past its deadline")
)

// URL is s3://bucket/prefix. Prefix has no leading or trailing slash.
type URL struct {
	Bucket string
	Prefix string
}

// IsURL says whether s names object storage (s3://...) rather than a local path.
func IsURL(s string) bool { return strings.HasPrefix(s, "s3://") }

// ParseURL parses s3://bucket[/prefix].
func ParseURL(s string) (URL, error) {
	rest, ok := strings.CutPrefix(s, "s3://")
	if !ok {
		return URL{}, fmt.Errorf("%w %q: want s3://bucket/prefix", ErrBadURL, s)
	}
	bucket, prefix, _ := strings.Cut(rest, "/")
	prefix = strings.Trim(prefix, "/")
	if bucket == "" {
		return URL{}, fmt.Errorf("%w %q: no bucket", ErrBadURL, s)
	}
	if err := checkBucketName(bucket); err != nil {
		return URL{}, fmt.Errorf("%w %q: %w", ErrBadURL, s, err)
	}
	for _, part := range strings.Split(prefix, "/") {
		if part == "." || part == ".." {
			return URL{}, fmt.Errorf("%w %q: %q in the prefix", ErrBadURL, s, part)
		}
	}
	return URL{Bucket: bucket, Prefix: prefix}, nil
}

func (u URL) String() string {
	if u.Prefix == "" {
		return "s3://" + u.Bucket
	}
	return "s3://" + u.Bucket + "/" + u.Prefix
}

// Key is the object key of name under the prefix.
func (u URL) Key(name string) string {
	if u.Prefix == "" {
		return name
	}
	return u.Prefix + "/" + name
}

func checkBucketName(b string) error {
	if len(b) < 3 || len(b) > 63 {
		return fmt.Errorf("bucket name %q must have 3 to 63 characters", b)
	}
	for _, c := range b {
		if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '-' || c == '.') {
			return fmt.Errorf("bucket name %q: character %q (lower-case letters, digits, '-' and '.' only)", b, c)
		}
	}
	return nil
}

// Config says where the store is and how to sign requests. The zero value reads everything from the environment
// the way the AWS CLI does.
type Config struct {
	// Endpoint is http(s)://host[:port] of an S3-compatible store. Empty: $AWS_ENDPOINT_URL_S3, then
	// $AWS_ENDPOINT_URL, then AWS S3 itself (https://s3.amazonaws.com).
	Endpoint string
	// Region; empty: $AWS_REGION, then $AWS_DEFAULT_REGION, then what the store says.
	Region string
	// Profile of the shared credentials/config files; empty: $AWS_PROFILE, then "default".
	Profile string
	// MaxRetries per request (minio-go's backoff: 200 ms doubling, capped at 1 s, jittered). 0: 6.
	MaxRetries int
	// PartSize of multipart uploads and ranged parallel downloads; 0: 64 MiB.
	PartSize int64
	// Parallel ranged GETs per download; 0: 4.
	Parallel int
	// Transport replaces the HTTP transport (tests); nil: minio-go's default.
	Transport http.RoundTripper
	// IdleTimeout ends a request that receives no byte for this long (a stalled server or connection); the
	// attempt fails with ErrStalled and is retried. 0: 60 s.
	IdleTimeout time.Duration
	// MinRate is the slowest transfer accepted, in bytes per second: a download of N bytes must end within
	// IdleTimeout + N/MinRate (ErrTooSlow), however steadily a server trickles. 0: 256 KiB/s.
	MinRate int64
	// MaxListObjects bounds List: a prefix listing more entries fails with ErrTooMany instead of growing the
	// listing without end (a hostile or mistaken bucket). 0: DefaultMaxListObjects.
	MaxListObjects int
}

// DefaultMaxListObjects is List's bound when Config.MaxListObjects is 0: a dataset of a million shards is far past
// any real one (2^31 rows fit in 33), and a million entries of the listing take about 200 MB.
const DefaultMaxListObjects = 1 << 20

// ErrTooMany is returned by List for a prefix holding more than Config.MaxListObjects objects.
var ErrTooMany = errors.New("too many objects")

func (c Config) withDefaults() Config {
	if c.Endpoint == "" {
		c.Endpoint = firstEnv("AWS_ENDPOINT_URL_S3", "AWS_ENDPOINT_URL")
	}
	if c.Endpoint == "" {
		c.Endpoint = "https://s3.amazonaws.com"
	}
	if c.Region == "" {
		c.Region = firstEnv("AWS_REGION", "AWS_DEFAULT_REGION")
	}
	if c.MaxRetries == 0 {
		c.MaxRetries = 6
	}
	if c.MaxListObjects <= 0 {
		c.MaxListObjects = DefaultMaxListObjects
	}
	if c.PartSize == 0 {
		c.PartSize = 64 << 20
	}
	if c.Parallel == 0 {
		c.Parallel = 4
	}
	if c.IdleTimeout <= 0 {
		c.IdleTimeout = 60 * time.Second
	}
	if c.MinRate <= 0 {
		c.MinRate = 256 << 10
	}
	return c
}

// deadline is how long a transfer of size bytes may take in all.
func (c Config) deadline(size int64) time.Duration {
	d := c.IdleTimeout
	if size > 0 {
		d += time.Duration(float64(size) / float64(c.MinRate) * float64(time.Second))
	}
	return d
}

// watchdog bounds one transfer: the context it returns is cancelled when no byte arrived for idle (touch
// counts one) or when the overall deadline passes; cause explains which.
type watchdog struct {
	ctx    context.Context
	cancel context.CancelCauseFunc
	timer  *time.Timer
	idle   time.Duration
	stop   context.CancelFunc
}

func newWatchdog(ctx context.Context, idle, total time.Duration, what string) *watchdog {
	tctx, stop := context.WithTimeoutCause(ctx, total,
		fmt.Errorf("%w: %s did not finish within %s", ErrTooSlow, what, total.Round(time.Millisecond)))
	wctx, cancel := context.WithCancelCause(tctx)
	w := &watchdog{cancel: cancel, idle: idle, stop: stop}
	w.ctx = context.WithValue(wctx, watchdogKey{}, w)
	w.timer = time.AfterFunc(idle, func() {
		cancel(fmt.Errorf("%w: %s: no data for %s", ErrStalled, what, idle))
	})
	return w
}

func (w *watchdog) touch() { w.timer.Reset(w.idle) }

// err is the reason the watchdog's context ended, or err itself when it did not.
func (w *watchdog) err(err error) error {
	if c := context.Cause(w.ctx); c != nil && w.ctx.Err() != nil {
		if errors.Is(c, ErrStalled) || errors.Is(c, ErrTooSlow) {
			return c
		}
	}
	return err
}

func (w *watchdog) close() {
	w.timer.Stop()
	w.cancel(nil)
	w.stop()
}

type watchdogKey struct{}

// watchTransport touches the watchdog of a request's context when its response headers arrive and on every
// read of its body that returns bytes: progress is seen where bytes come off the network (minio-go's Object.Read
// fills whole buffers, so a reader above it would see a steady trickle as silence).
type watchTransport struct{ base http.RoundTripper }

func (t watchTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, err := t.base.RoundTrip(req)
	if w, ok := req.Context().Value(watchdogKey{}).(*watchdog); ok && err == nil {
		w.touch()
		resp.Body = &watchedBody{ReadCloser: resp.Body, w: w}
	}
	return resp, err
}

type watchedBody struct {
	io.ReadCloser
	w *watchdog
}

func (b *watchedBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	if n > 0 {
		b.w.touch()
	}
	return n, err
}

func firstEnv(names ...string) string {
	for _, n := range names {
		if v := os.Getenv(n); v != "" {
			return v
		}
	}
	return ""
}

// Store is one bucket/prefix of an S3-compatible store. It is safe for concurrent use.
type Store struct {
	url      URL
	endpoint string // scheme://host, for messages (never credentials)
	cfg      Config
	c        *minio.Client
}

// Open connects to the store of u and checks that the bucket exists and the credentials are accepted.
func Open(ctx context.Context, u URL, cfg Config) (*Store, error) {
	cfg = cfg.withDefaults()
	ep, err := url.Parse(cfg.Endpoint)
	if err != nil || ep.Host == "" || (ep.Scheme != "http" && ep.Scheme != "https") {
		return nil, fmt.Errorf("%w: endpoint %q: want http(s)://host[:port]", ErrBadURL, cfg.Endpoint)
	}
	if ep.User != nil {
		return nil, fmt.Errorf("%w: endpoint %s://%s: credentials do not belong in the endpoint URL", ErrBadURL, ep.Scheme, ep.Host)
	}
	creds := credentials.NewChainCredentials([]credentials.Provider{
		&credentials.EnvAWS{},
		&credentials.FileAWSCredentials{Profile: cfg.Profile},
		&credentials.IAM{},
	})
	base := cfg.Transport
	if base == nil {
		tr, err := minio.DefaultTransport(ep.Scheme == "https")
		if err != nil {
			return nil, fmt.Errorf("objstore: endpoint %s://%s: %w", ep.Scheme, ep.Host, err)
		}
		base = tr
	}
	c, err := minio.New(ep.Host, &minio.Options{
		Creds:      creds,
		Secure:     ep.Scheme == "https",
		Region:     cfg.Region,
		MaxRetries: cfg.MaxRetries,
		Transport:  watchTransport{base: base},
	})
	if err != nil {
		return nil, fmt.Errorf("objstore: endpoint %s://%s: %w", ep.Scheme, ep.Host, err)
	}
	s := &Store{url: u, endpoint: ep.Scheme + "://" + ep.Host, cfg: cfg, c: c}
	ok, err := c.BucketExists(ctx, u.Bucket)
	if err != nil {
		return nil, s.wrap("check bucket", "", err)
	}
	if !ok {
		return nil, fmt.Errorf("%w: %s at %s", ErrNoBucket, u.Bucket, s.endpoint)
	}
	return s, nil
}

// URL is the store's bucket and prefix.
func (s *Store) URL() URL { return s.url }

func (s *Store) String() string { return s.url.String() + " at " + s.endpoint }

// wrap turns an S3 error into one that names the operation, the object and the S3 code, never a secret.
func (s *Store) wrap(op, name string, err error) error {
	where := s.url.String()
	if name != "" {
		where = "s3://" + s.url.Bucket + "/" + s.url.Key(name)
	}
	var resp minio.ErrorResponse
	if errors.As(err, &resp) && resp.Code != "" {
		switch resp.Code {
		case "NoSuchKey":
			return fmt.Errorf("%s %s: %w (%s)", op, where, ErrNotFound, s.endpoint)
		case "NoSuchBucket":
			return fmt.Errorf("%s %s: %w (%s)", op, where, ErrNoBucket, s.endpoint)
		case "AccessDenied", "InvalidAccessKeyId", "SignatureDoesNotMatch", "ExpiredToken", "InvalidToken":
			return fmt.Errorf("%s %s at %s: %w: %s (check AWS_ACCESS_KEY_ID/AWS_SECRET_ACCESS_KEY or the profile %q)",
				op, where, s.endpoint, ErrCredentials, resp.Code, s.profile())
		}
		return fmt.Errorf("%s %s at %s: %s: %s", op, where, s.endpoint, resp.Code, redact(resp.Message))
	}
	return fmt.Errorf("%s %s at %s: %s", op, where, s.endpoint, redact(err.Error()))
}

func (s *Store) profile() string {
	if s.cfg.Profile != "" {
		return s.cfg.Profile
	}
	if p := os.Getenv("AWS_PROFILE"); p != "" {
		return p
	}
	return "default"
}

// redact removes the configured secrets from a message, should an underlying library ever echo them.
func redact(msg string) string {
	for _, env := range []string{"AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "MINIO_SECRET_KEY"} {
		if v := os.Getenv(env); len(v) >= 4 {
			msg = strings.ReplaceAll(msg, v, "[redacted]")
		}
	}
	return msg
}

// Object describes one stored object.
type Object struct {
	Name     string // relative to the prefix
	Size     int64
	ETag     string
	Modified time.Time // the store's last-modified time (whole seconds through HEAD)
}

// Stat describes object name, or returns an error wrapping ErrNotFound.
func (s *Store) Stat(ctx context.Context, name string) (Object, error) {
	w := newWatchdog(ctx, s.cfg.IdleTimeout, s.cfg.IdleTimeout, "stat "+s.url.Key(name))
	defer w.close()
	info, err := s.c.StatObject(w.ctx, s.url.Bucket, s.url.Key(name), minio.StatObjectOptions{})
	if err != nil {
		if werr := w.err(nil); werr != nil {
			return Object{}, fmt.Errorf("stat s3://%s/%s: %w", s.url.Bucket, s.url.Key(name), werr)
		}
		return Object{}, s.wrap("stat", name, err)
	}
	return Object{Name: name, Size: info.Size, ETag: info.ETag, Modified: info.LastModified}, nil
}

// List returns every object under the prefix (names relative to it), sorted by name. It fails with ErrTooMany past
// Config.MaxListObjects entries (directory markers count), with ErrStalled when the store sends no listing entry for
// IdleTimeout, and with ErrTooSlow when the whole listing takes more than an hour.
func (s *Store) List(ctx context.Context) ([]Object, error) {
	prefix := ""
	if s.url.Prefix != "" {
		prefix = s.url.Prefix + "/"
	}
	where := fmt.Sprintf("s3://%s/%s", s.url.Bucket, prefix)
	// The idle bound is what matters: a long listing is fine while entries keep coming.
	w := newWatchdog(ctx, s.cfg.IdleTimeout, time.Hour, "list "+where)
	entries := s.c.ListObjects(w.ctx, s.url.Bucket, minio.ListObjectsOptions{Prefix: prefix, Recursive: true})
	defer func() {
		w.close() // cancels the listing; minio-go then sends its error and closes the channel, which must be read
		for range entries {
		}
	}()
	var out []Object
	seen := 0
	for info := range entries {
		w.touch()
		if info.Err != nil {
			if werr := w.err(nil); werr != nil {
				return nil, fmt.Errorf("list %s: %w", where, werr)
			}
			return nil, s.wrap("list", "", info.Err)
		}
		if seen++; seen > s.cfg.MaxListObjects {
			return nil, fmt.Errorf("list %s: %w: more than %d entries (objstore.Config.MaxListObjects)", where, ErrTooMany,
				s.cfg.MaxListObjects)
		}
		name := strings.TrimPrefix(info.Key, prefix)
		if name == "" || strings.HasSuffix(name, "/") {
			continue
		}
		out = append(out, Object{Name: name, Size: info.Size, ETag: info.ETag, Modified: info.LastModified})
	}
	if werr := w.err(nil); werr != nil {
		return nil, fmt.Errorf("list %s: %w", where, werr)
	}
	return out, nil
}

// ReadSmall returns the whole content of a small object (metadata, index), at most limit bytes.
func (s *Store) ReadSmall(ctx context.Context, name string, limit int64) ([]byte, error) {
	w := newWatchdog(ctx, s.cfg.IdleTimeout, s.cfg.deadline(limit), "get "+s.url.Key(name))
	defer w.close()
	obj, err := s.c.GetObject(w.ctx, s.url.Bucket, s.url.Key(name), minio.GetObjectOptions{})
	if err != nil {
		return nil, s.wrap("get", name, err)
	}
	defer obj.Close()
	b, err := io.ReadAll(io.LimitReader(obj, limit+1))
	if err != nil {
		if werr := w.err(nil); werr != nil {
			return nil, fmt.Errorf("get s3://%s/%s: %w", s.url.Bucket, s.url.Key(name), werr)
		}
		return nil, s.wrap("get", name, err)
	}
	if int64(len(b)) > limit {
		return nil, fmt.Errorf("get s3://%s/%s: larger than %d bytes", s.url.Bucket, s.url.Key(name), limit)
	}
	return b, nil
}

// DownloadOptions control Download.
type DownloadOptions struct {
	// Verify checks the complete temporary file before it is renamed into place; an error fails the attempt
	// (ErrVerify) and the download is retried. Nil: only the size is checked.
	Verify func(path string) error
	// Attempts at a verified download; 0: 3.
	Attempts int
	// Progress, if set, is called with bytes received so far (from the downloading goroutine).
	Progress func(n int64)
	// Size is the object's expected size (from gload.index or a journal); 0: unknown, the size the store
	// states is expected. An object stated or sent larger fails with ErrTooLarge after at most Size+1 bytes.
	Size int64
	// MaxSize, when Size is 0, bounds the size of an object whose size is not known in advance (gload.index):
	// an object the store states larger fails with ErrTooLarge before anything is written, one sent larger than
	// it is stated after at most its stated size + 1 bytes. 0: no bound.
	MaxSize int64
	// Perm is the mode of the downloaded file; 0: 0644. Caches and stages use 0600.
	Perm os.FileMode
}

// Download copies object name to dst: it writes dst's directory's temporary file, checks it is whole and passes
// Verify, fsyncs and renames it to dst. A failed or corrupt download never leaves a file under dst. It returns the
// bytes downloaded.
func (s *Store) Download(ctx context.Context, name, dst string, opts DownloadOptions) (int64, error) {
	attempts := opts.Attempts
	if attempts <= 0 {
		attempts = 3
	}
	var last error
	for a := 0; a < attempts; a++ {
		if a > 0 {
			select {
			case <-ctx.Done():
				return 0, ctx.Err()
			case <-time.After(time.Duration(a) * 250 * time.Millisecond):
			}
		}
		n, err := s.downloadOnce(ctx, name, dst, opts)
		if err == nil {
			return n, nil
		}
		last = err
		if ctx.Err() != nil || errors.Is(err, ErrNotFound) || errors.Is(err, ErrCredentials) || errors.Is(err, ErrNoBucket) ||
			errors.Is(err, ErrTooLarge) {
			break
		}
	}
	return 0, last
}

func (s *Store) downloadOnce(ctx context.Context, name, dst string, opts DownloadOptions) (int64, error) {
	info, err := s.Stat(ctx, name)
	if err != nil {
		return 0, err
	}
	where := "s3://" + s.url.Bucket + "/" + s.url.Key(name)
	want := info.Size
	if opts.Size > 0 {
		if info.Size != opts.Size {
			return 0, fmt.Errorf("get %s: %w: the store says %d bytes, %d expected", where, ErrTooLarge, info.Size, opts.Size)
		}
		want = opts.Size
	} else if opts.MaxSize > 0 && info.Size > opts.MaxSize {
		return 0, fmt.Errorf("get %s: %w: the store says %d bytes, at most %d accepted", where, ErrTooLarge, info.Size, opts.MaxSize)
	}
	if want < 0 {
		return 0, fmt.Errorf("get %s: %w: the store says %d bytes", where, ErrVerify, want)
	}
	tmp, err := tempName(dst)
	if err != nil {
		return 0, err
	}
	perm := opts.Perm
	if perm == 0 {
		perm = 0o644
	}
	f, err := os.OpenFile(tmp, os.O_CREATE|os.O_EXCL|os.O_WRONLY, perm)
	if err != nil {
		return 0, fmt.Errorf("download s3://%s/%s: %w", s.url.Bucket, s.url.Key(name), err)
	}
	cleanup := func(e error) (int64, error) {
		f.Close()
		os.Remove(tmp)
		return 0, e
	}
	gopts := minio.GetObjectOptions{}
	if info.Size > s.cfg.PartSize && s.cfg.Parallel > 1 {
		gopts.ParallelWorkers = s.cfg.Parallel
		gopts.ParallelChunkSize = s.cfg.PartSize
	}
	// Bounded: at most want+1 bytes are read (one more shows a server sending too much), no byte may be more
	// than IdleTimeout after the previous one, and the whole transfer ends within IdleTimeout + want/MinRate.
	wd := newWatchdog(ctx, s.cfg.IdleTimeout, s.cfg.deadline(want), "get "+s.url.Key(name))
	defer wd.close()
	obj, err := s.c.GetObject(wd.ctx, s.url.Bucket, s.url.Key(name), gopts)
	if err != nil {
		return cleanup(s.wrap("get", name, err))
	}
	var w io.Writer = f
	if opts.Progress != nil {
		w = &progressWriter{w: f, fn: opts.Progress}
	}
	n, err := io.Copy(w, io.LimitReader(obj, want+1))
	obj.Close()
	if err != nil {
		if werr := wd.err(nil); werr != nil {
			return cleanup(fmt.Errorf("get %s: %w (%d of %d bytes arrived)", where, werr, n, want))
		}
		return cleanup(s.wrap("get", name, err))
	}
	if n > want {
		return cleanup(fmt.Errorf("get %s: %w: more than the %d bytes expected arrived (stopped after %d)", where, ErrTooLarge, want, n))
	}
	if n != want {
		return cleanup(fmt.Errorf("get %s: %w: %d of %d bytes arrived", where, ErrVerify, n, want))
	}
	if err := f.Chmod(perm); err != nil { // whatever the umask
		return cleanup(fmt.Errorf("download %s: %w", dst, err))
	}
	if err := f.Sync(); err != nil {
		return cleanup(fmt.Errorf("download %s: %w", dst, err))
	}
	if err := f.Close(); err != nil {
		os.Remove(tmp)
		return 0, fmt.Errorf("download %s: %w", dst, err)
	}
	if opts.Verify != nil {
		if err := opts.Verify(tmp); err != nil {
			os.Remove(tmp)
			return 0, fmt.Errorf("get s3://%s/%s: %w: %w", s.url.Bucket, s.url.Key(name), ErrVerify, err)
		}
	}
	if err := os.Rename(tmp, dst); err != nil {
		os.Remove(tmp)
		return 0, fmt.Errorf("download %s: %w", dst, err)
	}
	return n, nil
}

type progressWriter struct {
	w  io.Writer
	n  int64
	fn func(int64)
}

func (p *progressWriter) Write(b []byte) (int, error) {
	n, err := p.w.Write(b)
	p.n += int64(n)
	p.fn(p.n)
	return n, err
}

// TempSuffix marks files this package is still writing; a cache sweeps them at start.
const TempSuffix = ".gload-part"

func tempName(dst string) (string, error) {
	var r [6]byte
	if _, err := rand.Read(r[:]); err != nil {
		return "", err
	}
	return filepath.Join(filepath.Dir(dst), "."+filepath.Base(dst)+"."+hex.EncodeToString(r[:])+TempSuffix), nil
}

// Upload stores the local file src as object name (multipart above PartSize). S3 makes an object visible only
// when its upload completed, so an interrupted upload never shows a partial object.
func (s *Store) Upload(ctx context.Context, name, src string) error {
	_, err := s.c.FPutObject(ctx, s.url.Bucket, s.url.Key(name), src, minio.PutObjectOptions{
		PartSize:    uint64(s.cfg.PartSize),
		ContentType: contentType(name),
	})
	if err != nil {
		return s.wrap("upload", name, err)
	}
	return nil
}

// Put stores b as object name.
func (s *Store) Put(ctx context.Context, name string, b []byte) error {
	_, err := s.c.PutObject(ctx, s.url.Bucket, s.url.Key(name), strings.NewReader(string(b)), int64(len(b)),
		minio.PutObjectOptions{ContentType: contentType(name)})
	if err != nil {
		return s.wrap("put", name, err)
	}
	return nil
}

// Copy copies object src to dst inside the store (no data through this machine; multipart copy above 5 GiB).
func (s *Store) Copy(ctx context.Context, src, dst string) error {
	_, err := s.c.ComposeObject(ctx,
		minio.CopyDestOptions{Bucket: s.url.Bucket, Object: s.url.Key(dst)},
		minio.CopySrcOptions{Bucket: s.url.Bucket, Object: s.url.Key(src)})
	if err != nil {
		return s.wrap("copy "+s.url.Key(src)+" to", dst, err)
	}
	return nil
}

// Remove deletes object name; a missing object is not an error.
func (s *Store) Remove(ctx context.Context, name string) error {
	if err := s.c.RemoveObject(ctx, s.url.Bucket, s.url.Key(name), minio.RemoveObjectOptions{}); err != nil {
		var resp minio.ErrorResponse
		if errors.As(err, &resp) && resp.Code == "NoSuchKey" {
			return nil
		}
		return s.wrap("remove", name, err)
	}
	return nil
}

func contentType(name string) string {
	switch path.Ext(name) {
	case ".json":
		return "application/json"
	case ".arrow":
		return "application/vnd.apache.arrow.stream"
	}
	return "application/octet-stream"
}
