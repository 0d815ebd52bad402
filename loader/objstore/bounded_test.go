package objstore_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gload/gload/loader/objstore"
	"github.com/gload/gload/loader/objstore/s3test"
)

// hostileS3 is a minimal S3 endpoint on loopback (HEAD bucket, HEAD and GET object, nothing signed is checked)
// whose GET misbehaves as get says; HEAD states size.
func hostileS3(t *testing.T, size int64, get func(w http.ResponseWriter, r *http.Request)) (*httptest.Server, *atomic.Int64) {
	t.Helper()
	var gets atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		parts := strings.SplitN(strings.TrimPrefix(r.URL.Path, "/"), "/", 2)
		if len(parts) < 2 || parts[1] == "" { // the bucket
			w.WriteHeader(http.StatusOK)
			return
		}
		w.Header().Set("ETag", `"0123456789abcdef0123456789abcdef"`)
		w.Header().Set("Last-Modified", time.Unix(1700000000, 0).UTC().Format(http.TimeFormat))
		w.Header().Set("Content-Type", "application/octet-stream")
		switch r.Method {
		case http.MethodHead:
			w.Header().Set("Content-Length", fmt.Sprint(size))
			w.WriteHeader(http.StatusOK)
		case http.MethodGet:
			gets.Add(1)
			get(w, r)
		}
	}))
	t.Cleanup(srv.Close)
	return srv, &gets
}

func openHostile(t *testing.T, endpoint string, cfg objstore.Config) *objstore.Store {
	t.Helper()
	s3test.SetEnv(t, endpoint)
	cfg.Endpoint, cfg.MaxRetries = endpoint, 1
	st, err := objstore.Open(context.Background(), objstore.URL{Bucket: "hostile", Prefix: "ds"}, cfg)
	if err != nil {
		t.Fatal(err)
	}
	return st
}

// A server that sends more than the object's size (here: a GET that claims and streams 1 TiB for a 5000-byte
// object) is cut off after size+1 bytes, with an error naming the object and both sizes (issue 34 item 5).
func TestDownloadTooMuchIsCutOff(t *testing.T) {
	const size = 5000
	var sent atomic.Int64
	srv, _ := hostileS3(t, size, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Length", fmt.Sprint(int64(1)<<40))
		w.WriteHeader(http.StatusOK)
		buf := make([]byte, 64<<10)
		for sent.Load() < 1<<30 { // until the client hangs up (or 1 GiB: the old code's fate)
			n, err := w.Write(buf)
			sent.Add(int64(n))
			if err != nil {
				return
			}
		}
	})
	st := openHostile(t, srv.URL, objstore.Config{IdleTimeout: time.Minute})
	dst := filepath.Join(t.TempDir(), "shard.arrow")
	_, err := st.Download(context.Background(), "shard.arrow", dst, objstore.DownloadOptions{Size: size})
	if !errors.Is(err, objstore.ErrTooLarge) {
		t.Fatalf("Download: %v, want ErrTooLarge", err)
	}
	for _, want := range []string{"s3://hostile/ds/shard.arrow", "5000"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not name %q", err, want)
		}
	}
	if _, err := os.Stat(dst); err == nil {
		t.Error("a file was left under the destination name")
	}
	ents, _ := os.ReadDir(filepath.Dir(dst))
	for _, e := range ents {
		t.Errorf("left behind: %s", e.Name())
	}
	t.Logf("%v; server sent %d bytes before the client hung up", err, sent.Load())
	if sent.Load() >= 1<<30 {
		t.Errorf("the client read %d bytes of a 5000-byte object", sent.Load())
	}
}

// The store stating a size other than the one gload.index recorded fails before any byte is fetched.
func TestDownloadStatedSizeMismatch(t *testing.T) {
	srv, gets := hostileS3(t, 3<<30, func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(http.StatusOK) })
	st := openHostile(t, srv.URL, objstore.Config{})
	_, err := st.Download(context.Background(), "shard.arrow", filepath.Join(t.TempDir(), "x"), objstore.DownloadOptions{Size: 5800000})
	if !errors.Is(err, objstore.ErrTooLarge) || !strings.Contains(err.Error(), "3221225472") || !strings.Contains(err.Error(), "5800000") {
		t.Fatalf("Download: %v", err)
	}
	if gets.Load() != 0 {
		t.Errorf("%d GETs for an object of the wrong size", gets.Load())
	}
}

// An object of unknown size read with a bound (MaxSize, as gload.index is): one the store states larger fails
// before any byte is fetched or written; one stated within the bound but sent larger is cut off after its stated
// size + 1 bytes; both with ErrTooLarge naming the object.
func TestDownloadMaxSize(t *testing.T) {
	t.Run("stated larger", func(t *testing.T) {
		srv, gets := hostileS3(t, 1<<40, func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(http.StatusOK) })
		st := openHostile(t, srv.URL, objstore.Config{})
		dir := t.TempDir()
		_, err := st.Download(context.Background(), "gload.index", filepath.Join(dir, "gload.index"),
			objstore.DownloadOptions{MaxSize: 1 << 20})
		if !errors.Is(err, objstore.ErrTooLarge) || !strings.Contains(err.Error(), "s3://hostile/ds/gload.index") ||
			!strings.Contains(err.Error(), "1099511627776") || !strings.Contains(err.Error(), "1048576") {
			t.Fatalf("Download: %v; want ErrTooLarge naming the object, its size and the bound", err)
		}
		if gets.Load() != 0 {
			t.Errorf("%d GETs for an object over the bound", gets.Load())
		}
		if ents, _ := os.ReadDir(dir); len(ents) != 0 {
			t.Errorf("left behind: %s", ents[0].Name())
		}
	})
	t.Run("sent larger", func(t *testing.T) {
		srv, _ := hostileS3(t, 5000, func(w http.ResponseWriter, r *http.Request) {
			w.WriteHeader(http.StatusOK)
			buf := make([]byte, 64<<10)
			for range 64 { // 4 MiB, far more than stated
				if _, err := w.Write(buf); err != nil {
					return
				}
			}
		})
		st := openHostile(t, srv.URL, objstore.Config{IdleTimeout: time.Minute})
		dir := t.TempDir()
		_, err := st.Download(context.Background(), "gload.index", filepath.Join(dir, "gload.index"),
			objstore.DownloadOptions{MaxSize: 1 << 20})
		if !errors.Is(err, objstore.ErrTooLarge) || !strings.Contains(err.Error(), "s3://hostile/ds/gload.index") {
			t.Fatalf("Download: %v; want ErrTooLarge naming the object", err)
		}
		if ents, _ := os.ReadDir(dir); len(ents) != 0 {
			t.Errorf("left behind: %s", ents[0].Name())
		}
	})
	t.Run("within", func(t *testing.T) {
		s3test.Start(t, "gload-test")
		u, _ := objstore.ParseURL("s3://gload-test/ds")
		st, err := objstore.Open(context.Background(), u, objstore.Config{})
		if err != nil {
			t.Fatal(err)
		}
		payload := []byte(strings.Repeat("x", 5000))
		if err := st.Put(context.Background(), "gload.index", payload); err != nil {
			t.Fatal(err)
		}
		dir := t.TempDir()
		for _, bound := range []int64{5000, 4999} {
			n, err := st.Download(context.Background(), "gload.index", filepath.Join(dir, "gload.index"),
				objstore.DownloadOptions{MaxSize: bound})
			switch {
			case bound >= 5000 && (err != nil || n != 5000):
				t.Errorf("bound %d: Download = %d, %v", bound, n, err)
			case bound < 5000 && !errors.Is(err, objstore.ErrTooLarge):
				t.Errorf("bound %d: Download = %d, %v; want ErrTooLarge", bound, n, err)
			}
		}
	})
}

// A server that sends some bytes and then stalls fails the attempt after the idle timeout (and each retry
// likewise), instead of hanging; so does one that stalls before its response headers.
func TestDownloadStallTimesOut(t *testing.T) {
	const size = 5000
	for _, tc := range []struct {
		name string
		get  func(w http.ResponseWriter, r *http.Request)
	}{
		{"after 1000 bytes", func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Length", fmt.Sprint(size))
			w.WriteHeader(http.StatusOK)
			w.Write(make([]byte, 1000))
			w.(http.Flusher).Flush()
			<-r.Context().Done()
		}},
		{"before headers", func(w http.ResponseWriter, r *http.Request) { <-r.Context().Done() }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv, gets := hostileS3(t, size, tc.get)
			st := openHostile(t, srv.URL, objstore.Config{IdleTimeout: 300 * time.Millisecond, MinRate: 1}) // deadline: 5000 s
			done := make(chan error, 1)
			go func() {
				_, err := st.Download(context.Background(), "shard.arrow", filepath.Join(t.TempDir(), "x"),
					objstore.DownloadOptions{Size: size, Attempts: 2})
				done <- err
			}()
			select {
			case err := <-done:
				if !errors.Is(err, objstore.ErrStalled) || !strings.Contains(err.Error(), "shard.arrow") {
					t.Fatalf("Download: %v, want ErrStalled naming the object", err)
				}
				if gets.Load() < 2 {
					t.Errorf("%d GETs: the stalled attempt was not retried", gets.Load())
				}
			case <-time.After(2 * time.Minute): // a hang, not a slow machine
				t.Fatal("Download still waiting on a stalled server after 2 minutes")
			}
		})
	}
}

// A server that trickles steadily (never idle) is ended by the overall deadline IdleTimeout + size/MinRate.
func TestDownloadTrickleHitsDeadline(t *testing.T) {
	const size = 100000
	srv, _ := hostileS3(t, size, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Length", fmt.Sprint(size))
		w.WriteHeader(http.StatusOK)
		for i := 0; i < size; i++ {
			if _, err := w.Write([]byte{0}); err != nil {
				return
			}
			w.(http.Flusher).Flush()
			select {
			case <-r.Context().Done():
				return
			case <-time.After(20 * time.Millisecond):
			}
		}
	})
	// 100 kB at 1 MB/s: 0.1 s, plus 2 s; the server needs 2000 s. A byte every 20 ms is never 2 s idle, even on a
	// loaded machine.
	st := openHostile(t, srv.URL, objstore.Config{IdleTimeout: 2 * time.Second, MinRate: 1e6})
	_, err := st.Download(context.Background(), "shard.arrow", filepath.Join(t.TempDir(), "x"),
		objstore.DownloadOptions{Size: size, Attempts: 1})
	if !errors.Is(err, objstore.ErrTooSlow) {
		t.Fatalf("Download: %v, want ErrTooSlow", err)
	}
}

// endlessListing answers every ListObjectsV2 page with one more object and a fresh continuation token, for ever
// (a hostile or broken store); stall, if set, makes every page after the first hang until the client gives up.
func endlessListing(t *testing.T, stall bool) (*httptest.Server, *atomic.Int64) {
	return listing(t, stall, "ds/shard-%09d.arrow", 1, true)
}

// listing answers ListObjectsV2 with pages of perPage keys named by the format key (of a running number), truncated
// (another page follows, for ever) or not; stall makes every page after the first hang until the client gives up.
func listing(t *testing.T, stall bool, key string, perPage int, truncated bool) (*httptest.Server, *atomic.Int64) {
	t.Helper()
	var pages atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Query().Get("list-type") != "2" {
			w.WriteHeader(http.StatusOK) // the bucket exists
			return
		}
		n := pages.Add(1)
		if stall && n > 1 {
			<-r.Context().Done()
			return
		}
		w.Header().Set("Content-Type", "application/xml")
		fmt.Fprintf(w, `<?xml version="1.0" encoding="UTF-8"?>
<ListBucketResult xmlns="http://s3.amazonaws.com/doc/2006-03-01/"><Name>hostile</Name><Prefix>ds/</Prefix>
<KeyCount>%d</KeyCount><MaxKeys>1000</MaxKeys><IsTruncated>%v</IsTruncated>
<NextContinuationToken>page-%d</NextContinuationToken>`, perPage, truncated, n)
		for i := range perPage {
			fmt.Fprintf(w, `<Contents><Key>`+key+`</Key><Size>1</Size><ETag>"0123456789abcdef0123456789abcdef"</ETag>
<LastModified>2023-11-14T22:13:20.000Z</LastModified></Contents>`, (n-1)*int64(perPage)+int64(i))
		}
		fmt.Fprint(w, `</ListBucketResult>`)
	}))
	t.Cleanup(srv.Close)
	return srv, &pages
}

// List is bounded: a listing that never ends fails with ErrTooMany past MaxListObjects, one that stalls fails
// with ErrStalled after the idle timeout, and a real store's listing of exactly MaxListObjects objects succeeds.
func TestListIsBounded(t *testing.T) {
	t.Run("endless", func(t *testing.T) {
		srv, pages := endlessListing(t, false)
		st := openHostile(t, srv.URL, objstore.Config{MaxListObjects: 50})
		objs, err := st.List(context.Background())
		if !errors.Is(err, objstore.ErrTooMany) || !strings.Contains(err.Error(), "s3://hostile/ds/") ||
			!strings.Contains(err.Error(), "more than 50") {
			t.Fatalf("List = %d objects, %v; want ErrTooMany naming the prefix and the bound", len(objs), err)
		}
		if n := pages.Load(); n > 60 {
			t.Errorf("%d pages fetched for a bound of 50", n)
		}
	})
	t.Run("directory markers count", func(t *testing.T) {
		srv, pages := listing(t, false, "ds/dir-%09d/", 1, true)
		st := openHostile(t, srv.URL, objstore.Config{MaxListObjects: 50})
		if _, err := st.List(context.Background()); !errors.Is(err, objstore.ErrTooMany) {
			t.Fatalf("List of endless directory markers: %v; want ErrTooMany", err)
		}
		if n := pages.Load(); n > 60 {
			t.Errorf("%d pages fetched for a bound of 50", n)
		}
	})
	t.Run("no goroutine left", func(t *testing.T) {
		// One page holding more than the bound: List stops reading it, and minio-go's listing goroutine must end.
		srv, _ := listing(t, false, "ds/shard-%09d.arrow", 10, false)
		st := openHostile(t, srv.URL, objstore.Config{MaxListObjects: 5})
		before := listingGoroutines()
		for range 20 {
			if _, err := st.List(context.Background()); !errors.Is(err, objstore.ErrTooMany) {
				t.Fatalf("List: %v; want ErrTooMany", err)
			}
		}
		for deadline := time.Now().Add(time.Minute); listingGoroutines() > before; time.Sleep(10 * time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatalf("%d minio-go listing goroutines left after 20 Lists that stopped early", listingGoroutines()-before)
			}
		}
	})
	t.Run("stalled", func(t *testing.T) {
		srv, _ := endlessListing(t, true)
		st := openHostile(t, srv.URL, objstore.Config{IdleTimeout: 300 * time.Millisecond})
		done := make(chan error, 1)
		go func() { _, err := st.List(context.Background()); done <- err }()
		select {
		case err := <-done:
			if !errors.Is(err, objstore.ErrStalled) || !strings.Contains(err.Error(), "s3://hostile/ds/") {
				t.Fatalf("List: %v; want ErrStalled naming the prefix", err)
			}
		case <-time.After(2 * time.Minute):
			t.Fatal("List of a stalled listing did not return")
		}
	})
	t.Run("real store", func(t *testing.T) {
		s3test.Start(t, "gload-test")
		u, _ := objstore.ParseURL("s3://gload-test/ds")
		for _, bound := range []int{5, 4} {
			st, err := objstore.Open(context.Background(), u, objstore.Config{MaxListObjects: bound})
			if err != nil {
				t.Fatal(err)
			}
			if bound == 5 {
				for i := range 5 {
					if err := st.Put(context.Background(), fmt.Sprintf("o%d", i), []byte("x")); err != nil {
						t.Fatal(err)
					}
				}
			}
			objs, err := st.List(context.Background())
			switch {
			case bound == 5 && (err != nil || len(objs) != 5):
				t.Errorf("bound 5: List = %d objects, %v", len(objs), err)
			case bound == 4 && !errors.Is(err, objstore.ErrTooMany):
				t.Errorf("bound 4: List = %d objects, %v; want ErrTooMany", len(objs), err)
			}
		}
	})
}

// listingGoroutines counts minio-go's ListObjects goroutines.
func listingGoroutines() int {
	buf := make([]byte, 1<<22)
	n := 0
	for _, g := range strings.Split(string(buf[:runtime.Stack(buf, true)]), "\n\n") {
		if strings.Contains(g, "minio-go/v7.(*Client).ListObjects") {
			n++
		}
	}
	return n
}
