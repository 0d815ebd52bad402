package loader_test

import (
	"context"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/gload/gload/loader"
	"github.com/gload/gload/loader/dataset"
	"github.com/gload/gload/loader/objstore"
	"github.com/gload/gload/loader/objstore/s3test"
	"github.com/gload/gload/loader/remote"
	"github.com/gload/gload/proto/gloadpb"
)

// remoteDataset writes a local test dataset of 9 shards, uploads it to s3://gload-test/web and returns its row
// lengths and total shard bytes.
func remoteDataset(t *testing.T) (lengths []int, shardBytes int64, srv *s3test.Server) {
	t.Helper()
	srv = s3test.Start(t, "gload-test")
	dir := t.TempDir()
	lengths = genLengths(1800, 4, 120, 11)
	writeDataset(t, dir, lengths, 200, 50)
	u, _ := objstore.ParseURL("s3://gload-test/web")
	st, err := objstore.Open(context.Background(), u, objstore.Config{})
	if err != nil {
		t.Fatal(err)
	}
	if err := remote.Upload(context.Background(), dir, st); err != nil {
		t.Fatal(err)
	}
	ix, err := dataset.ReadIndex(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range ix.Shards {
		shardBytes += e.Size
	}
	return lengths, shardBytes, srv
}

func cachedBytes(t *testing.T, dir string) int64 {
	var n int64
	filepath.Walk(dir, func(p string, fi os.FileInfo, err error) error {
		if err == nil && !fi.IsDir() && strings.HasSuffix(p, ".arrow") {
			n += fi.Size()
		}
		return nil
	})
	return n
}

// Served from a bucket through a cache a third of the dataset's size: 2 ranks × 2 workers get every row exactly
// once with the right tokens, the cache stays within its bound, the metrics tell the storage's story, and a
// resumed run continues the same plan.
func TestServeFromObjectStorage(t *testing.T) {
	lengths, total, _ := remoteDataset(t)
	cacheDir := t.TempDir()
	limit := total / 3
	ts := startServer(t, loader.Config{
		Datasets: map[string]string{"web": "s3://gload-test/web"},
		Remote:   loader.RemoteConfig{CacheDir: cacheDir, CacheBytes: limit, Ahead: 1},
	}, "unix")
	c := dial(t, ts.addr)
	open := &gloadpb.Open{Dataset: "web", Seed: 5, Policy: &gloadpb.BatchPolicy{BatchSize: 8, ShuffleWindow: 200}}
	for _, tr := range []gloadpb.Transport{gloadpb.Transport_TRANSPORT_GRPC, gloadpb.Transport_TRANSPORT_SHM} {
		open.Transport = tr
		ranks := consumers(t, c, open, 2, 2)
		seen := make([]int, len(lengths))
		for r, bs := range ranks {
			if len(bs) != len(ranks[0]) {
				t.Fatalf("rank %d got %d batches, rank 0 %d", r, len(bs), len(ranks[0]))
			}
			for _, b := range bs {
				if err := checkBatch(b, lengths, 0, 0); err != nil {
					t.Fatal(err)
				}
				for _, i := range b.index {
					seen[i]++
				}
			}
		}
		dropped := 0
		for i, n := range seen {
			if n > 1 {
				t.Fatalf("%v: row %d delivered %d times", tr, i, n)
			}
			dropped += 1 - n
		}
		if dropped >= 4*8 {
			t.Fatalf("%v: %d rows not delivered (more than the dropped remainder)", tr, dropped)
		}
		// Four streams may pin more shards at once than the bound holds (the cache then grows past it rather than
		// deadlock); with every stream done it must be back under the bound.
		deadline := time.Now().Add(5 * time.Second)
		for cachedBytes(t, cacheDir) > limit && time.Now().Before(deadline) {
			time.Sleep(20 * time.Millisecond)
		}
		if got := cachedBytes(t, cacheDir); got > limit {
			t.Fatalf("cache holds %d bytes after the epoch, bound %d", got, limit)
		}
	}
	metrics := scrape(t, ts.srv)
	for _, want := range []string{`gload_remote_downloads_total{dataset="web"}`, `gload_remote_cache_requests_total{dataset="web",result="hit"}`,
		`gload_remote_evictions_total{dataset="web"}`, `gload_remote_cached_bytes{dataset="web"}`} {
		if v := metricValue(metrics, want); v <= 0 {
			t.Errorf("metric %s = %v, want > 0\n%s", want, v, grepLines(metrics, "gload_remote"))
		}
	}

	// Stop after 5 batches, resume with one rank: the rest of the same plan.
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	open.Transport = gloadpb.Transport_TRANSPORT_GRPC
	first, state, _, err := pullAll(ctx, c, cloneOpen(open), 5)
	if err != nil {
		t.Fatal(err)
	}
	resumed := cloneOpen(open)
	resumed.Resume = state
	rest, _, _, err := pullAll(ctx, c, resumed, -1)
	if err != nil {
		t.Fatal(err)
	}
	whole, _, _, err := pullAll(ctx, c, cloneOpen(open), -1)
	if err != nil {
		t.Fatal(err)
	}
	joined := append(first, rest...)
	if len(joined) != len(whole) {
		t.Fatalf("resumed run has %d batches, uninterrupted %d", len(joined), len(whole))
	}
	for i := range whole {
		if whole[i].global != joined[i].global {
			t.Fatalf("batch %d: global %d after resume, %d uninterrupted", i, joined[i].global, whole[i].global)
		}
	}
}

// A stream registers the shards of a few batches ahead at a time and moves the list on: with a horizon of 5
// batches every row still comes exactly once, and the cache stays within its bound.
func TestServeFromObjectStorageMovingHorizon(t *testing.T) {
	defer loader.SetRemoteHorizon(5)()
	lengths, total, _ := remoteDataset(t)
	cacheDir := t.TempDir()
	ts := startServer(t, loader.Config{
		Datasets: map[string]string{"web": "s3://gload-test/web"},
		Remote:   loader.RemoteConfig{CacheDir: cacheDir, CacheBytes: total / 3, Ahead: 2},
	}, "unix")
	c := dial(t, ts.addr)
	open := &gloadpb.Open{Dataset: "web", Seed: 9, Policy: &gloadpb.BatchPolicy{BatchSize: 8, ShuffleWindow: 200, Remainder: "keep"}}
	seen := make([]int, len(lengths))
	for _, bs := range consumers(t, c, open, 2, 2) {
		for _, b := range bs {
			if err := checkBatch(b, lengths, 0, 0); err != nil {
				t.Fatal(err)
			}
			for _, i := range b.index {
				seen[i]++
			}
		}
	}
	for i, n := range seen {
		if n != 1 {
			t.Fatalf("row %d delivered %d times", i, n)
		}
	}
}

// The store failing (503s beyond every retry): the stream ends with an error naming the object, never a partial
// shard; once the store is back, a new stream succeeds from the same cache.
func TestServeFromObjectStorageStoreErrors(t *testing.T) {
	lengths, total, srv := remoteDataset(t)
	proxy := s3test.Proxy(t, srv.Endpoint)
	cacheDir := t.TempDir()
	ts := startServer(t, loader.Config{
		Datasets: map[string]string{"web": "s3://gload-test/web"},
		Remote: loader.RemoteConfig{CacheDir: cacheDir, CacheBytes: total / 2, Ahead: 1,
			S3: objstore.Config{Endpoint: proxy.Endpoint, MaxRetries: 2}},
	}, "unix")
	c := dial(t, ts.addr)
	open := &gloadpb.Open{Dataset: "web", Policy: &gloadpb.BatchPolicy{BatchSize: 8, ShuffleWindow: 200}}
	proxy.Fail(1<<30, "/web/data-")
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	_, _, _, err := pullAll(ctx, c, cloneOpen(open), -1)
	if err == nil || !strings.Contains(err.Error(), "s3://gload-test/web/data-") {
		t.Fatalf("stream through a failing store = %v; want an error naming the object", err)
	}
	filepath.Walk(cacheDir, func(p string, fi os.FileInfo, err error) error {
		if err == nil && strings.HasSuffix(p, objstore.TempSuffix) {
			t.Errorf("partial download left: %s", p)
		}
		return nil
	})
	proxy.Fail(0, "")
	bs, _, _, err := pullAll(ctx, c, cloneOpen(open), -1)
	if err != nil {
		t.Fatalf("after the store recovered: %v", err)
	}
	for _, b := range bs {
		if err := checkBatch(b, lengths, 0, 0); err != nil {
			t.Fatal(err)
		}
	}
}

func scrape(t *testing.T, srv *loader.Server) string {
	t.Helper()
	rec := &recorder{header: http.Header{}}
	req, _ := http.NewRequest("GET", "/metrics", nil)
	srv.MetricsHandler().ServeHTTP(rec, req)
	return rec.body.String()
}

type recorder struct {
	header http.Header
	body   strings.Builder
}

func (r *recorder) Header() http.Header         { return r.header }
func (r *recorder) Write(b []byte) (int, error) { return r.body.Write(b) }
func (r *recorder) WriteHeader(int)             {}

var _ io.Writer = (*recorder)(nil)

func metricValue(text, series string) float64 {
	re := regexp.MustCompile(`(?m)^` + regexp.QuoteMeta(series) + ` (\S+)$`)
	m := re.FindStringSubmatch(text)
	if m == nil {
		return -1
	}
	v, _ := strconv.ParseFloat(m[1], 64)
	return v
}

func grepLines(text, sub string) string {
	var out []string
	for _, l := range strings.Split(text, "\n") {
		if strings.Contains(l, sub) {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}

// A store slower than the loop: batches wait for downloads, and the watch says so with the numbers.
func TestWatchNamesSlowStorage(t *testing.T) {
	_, total, srv := remoteDataset(t)
	proxy := s3test.Proxy(t, srv.Endpoint)
	proxy.Slow(20 * time.Millisecond)
	ts := startServer(t, loader.Config{
		Datasets:   map[string]string{"web": "s3://gload-test/web"},
		NoGPUWatch: true,
		Remote: loader.RemoteConfig{CacheDir: t.TempDir(), CacheBytes: total / 3, Ahead: 1, Fetch: 1,
			S3: objstore.Config{Endpoint: proxy.Endpoint}},
	}, "unix")
	c := dial(t, ts.addr)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	if _, _, _, err := pullAll(ctx, c, &gloadpb.Open{Dataset: "web", Policy: &gloadpb.BatchPolicy{BatchSize: 8, ShuffleWindow: 200}}, 40); err != nil {
		t.Fatal(err)
	}
	api := rawConn(t, ts.addr)
	ws, err := api.Watch(ctx, &gloadpb.WatchRequest{Once: true})
	if err != nil {
		t.Fatal(err)
	}
	m, err := ws.Recv()
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(m.Json, "batches waited for shard downloads from object storage") || !strings.Contains(m.Text, "dataset web") {
		t.Fatalf("watch does not name the storage:\n%s", m.Text)
	}
	if v := metricValue(scrape(t, ts.srv), `gload_remote_batch_waits_total{dataset="web"}`); v < 1 {
		t.Fatalf("gload_remote_batch_waits_total = %v", v)
	}
}

// A dataset in a bucket without gload.index (written by another tool) is downloaded once, indexed into the cache,
// and served; the bucket is left as it was.
func TestServeFromObjectStorageWithoutIndex(t *testing.T) {
	lengths, _, srv := remoteDataset(t)
	if err := os.Remove(filepath.Join(srv.Root, "gload-test", "web", dataset.IndexFile)); err != nil {
		t.Fatal(err)
	}
	cacheDir := t.TempDir()
	ts := startServer(t, loader.Config{
		Datasets: map[string]string{"web": "s3://gload-test/web"},
		Remote:   loader.RemoteConfig{CacheDir: cacheDir},
	}, "unix")
	c := dial(t, ts.addr)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	bs, _, _, err := pullAll(ctx, c, &gloadpb.Open{Dataset: "web", Policy: &gloadpb.BatchPolicy{BatchSize: 8, Remainder: "wrap"}}, -1)
	if err != nil {
		t.Fatal(err)
	}
	seen := map[int64]bool{}
	for _, b := range bs {
		if err := checkBatch(b, lengths, 0, 0); err != nil {
			t.Fatal(err)
		}
		for _, i := range b.index {
			seen[i] = true
		}
	}
	if len(seen) != len(lengths) {
		t.Fatalf("%d distinct rows of %d", len(seen), len(lengths))
	}
	if _, err := os.Stat(filepath.Join(cacheDir, "s3", "gload-test", "web", dataset.IndexFile)); err != nil {
		t.Fatalf("no index in the cache: %v", err)
	}
	if _, err := os.Stat(filepath.Join(srv.Root, "gload-test", "web", dataset.IndexFile)); !os.IsNotExist(err) {
		t.Fatal("the server wrote into the bucket")
	}
}
