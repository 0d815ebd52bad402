package objstore_test

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gload/gload/loader/objstore"
	"github.com/gload/gload/loader/objstore/s3test"
)

func TestParseURL(t *testing.T) {
	for _, tc := range []struct {
		in      string
		want    objstore.URL
		wantErr string
	}{
		{in: "s3://bucket/datasets/web", want: objstore.URL{Bucket: "bucket", Prefix: "datasets/web"}},
		{in: "s3://bucket/datasets/web/", want: objstore.URL{Bucket: "bucket", Prefix: "datasets/web"}},
		{in: "s3://bucket", want: objstore.URL{Bucket: "bucket"}},
		{in: "s3:///x", wantErr: "no bucket"},
		{in: "/local/dir", wantErr: "want s3://"},
		{in: "s3://Bucket/x", wantErr: "character 'B'"},
		{in: "s3://ab/x", wantErr: "3 to 63"},
		{in: "s3://bucket/a/../b", wantErr: `".."`},
	} {
		t.Run(tc.in, func(t *testing.T) {
			got, err := objstore.ParseURL(tc.in)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) || !errors.Is(err, objstore.ErrBadURL) {
					t.Fatalf("ParseURL(%q) = %v, %v; want error with %q", tc.in, got, err, tc.wantErr)
				}
				return
			}
			if err != nil || got != tc.want {
				t.Fatalf("ParseURL(%q) = %+v, %v; want %+v", tc.in, got, err, tc.want)
			}
			if got.String() != strings.TrimSuffix(tc.in, "/") {
				t.Errorf("String() = %q", got.String())
			}
		})
	}
}

func openStore(t *testing.T, url string) *objstore.Store {
	t.Helper()
	u, err := objstore.ParseURL(url)
	if err != nil {
		t.Fatal(err)
	}
	s, err := objstore.Open(context.Background(), u, objstore.Config{PartSize: 5 << 20})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func TestUploadDownloadRoundTrip(t *testing.T) {
	s3test.Start(t, "gload-test")
	s := openStore(t, "s3://gload-test/ds/one")
	ctx := context.Background()
	dir := t.TempDir()
	big := bytes.Repeat([]byte("0123456789abcdef"), (12<<20)/16+7) // > PartSize: multipart up, ranged parallel down
	src := filepath.Join(dir, "big.arrow")
	if err := os.WriteFile(src, big, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := s.Upload(ctx, "big.arrow", src); err != nil {
		t.Fatal(err)
	}
	if err := s.Put(ctx, "state.json", []byte(`{"x":1}`)); err != nil {
		t.Fatal(err)
	}
	objs, err := s.List(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(objs) != 2 || objs[0].Name != "big.arrow" || objs[0].Size != int64(len(big)) || objs[1].Name != "state.json" {
		t.Fatalf("List = %+v", objs)
	}
	small, err := s.ReadSmall(ctx, "state.json", 1<<10)
	if err != nil || string(small) != `{"x":1}` {
		t.Fatalf("ReadSmall = %q, %v", small, err)
	}
	if _, err := s.ReadSmall(ctx, "big.arrow", 1<<10); err == nil {
		t.Fatal("ReadSmall over its limit succeeded")
	}
	dst := filepath.Join(dir, "copy.arrow")
	var seen int64
	n, err := s.Download(ctx, "big.arrow", dst, objstore.DownloadOptions{Progress: func(x int64) { seen = x }})
	if err != nil || n != int64(len(big)) || seen != n {
		t.Fatalf("Download = %d, %v (progress %d)", n, err, seen)
	}
	got, _ := os.ReadFile(dst)
	if !bytes.Equal(got, big) {
		t.Fatal("downloaded bytes differ")
	}
	assertNoTemp(t, dir)

	_, err = s.Stat(ctx, "missing.arrow")
	if !errors.Is(err, objstore.ErrNotFound) || !strings.Contains(err.Error(), "s3://gload-test/ds/one/missing.arrow") {
		t.Fatalf("Stat(missing) = %v", err)
	}
}

func assertNoTemp(t *testing.T, dir string) {
	t.Helper()
	ents, _ := os.ReadDir(dir)
	for _, e := range ents {
		if strings.HasSuffix(e.Name(), objstore.TempSuffix) {
			t.Errorf("temporary file left: %s", e.Name())
		}
	}
}

// A download that fails verification is retried, and after the last attempt nothing is left under the final name.
func TestDownloadVerifyFailsLeavesNothing(t *testing.T) {
	s3test.Start(t, "gload-test")
	s := openStore(t, "s3://gload-test")
	ctx := context.Background()
	if err := s.Put(ctx, "a.arrow", []byte("payload")); err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	dst := filepath.Join(dir, "a.arrow")
	calls := 0
	_, err := s.Download(ctx, "a.arrow", dst, objstore.DownloadOptions{Attempts: 3, Verify: func(string) error {
		calls++
		return errors.New("content hash 1234 != 5678")
	}})
	if !errors.Is(err, objstore.ErrVerify) || !strings.Contains(err.Error(), "s3://gload-test/a.arrow") || calls != 3 {
		t.Fatalf("Download = %v after %d verifications", err, calls)
	}
	if _, err := os.Stat(dst); !os.IsNotExist(err) {
		t.Fatalf("final name exists after failed verification: %v", err)
	}
	assertNoTemp(t, dir)
}

// The store failing for a while is retried; failing for longer gives an error naming the object.
func TestTransientErrorsRetriedThenReported(t *testing.T) {
	srv := s3test.Start(t, "gload-test")
	s := openStore(t, "s3://gload-test")
	ctx := context.Background()
	if err := s.Put(ctx, "a.arrow", bytes.Repeat([]byte{7}, 4096)); err != nil {
		t.Fatal(err)
	}
	proxy := s3test.Proxy(t, srv.Endpoint)
	t.Setenv("AWS_ENDPOINT_URL", proxy.Endpoint)
	s = openStore(t, "s3://gload-test")
	dir := t.TempDir()

	proxy.Fail(3, "a.arrow") // fewer than the retries: recovered
	if _, err := s.Download(ctx, "a.arrow", filepath.Join(dir, "ok.arrow"), objstore.DownloadOptions{}); err != nil {
		t.Fatalf("Download through 3 injected 503s: %v", err)
	}
	proxy.Cut(1, "a.arrow") // a transfer cut short: retried, never renamed half
	if _, err := s.Download(ctx, "a.arrow", filepath.Join(dir, "cut.arrow"), objstore.DownloadOptions{}); err != nil {
		t.Fatalf("Download through a cut transfer: %v", err)
	}
	if b, _ := os.ReadFile(filepath.Join(dir, "cut.arrow")); len(b) != 4096 {
		t.Fatalf("cut download has %d bytes", len(b))
	}
	proxy.Fail(1000, "a.arrow") // more than every retry of every attempt
	_, err := s.Download(ctx, "a.arrow", filepath.Join(dir, "bad.arrow"), objstore.DownloadOptions{Attempts: 2})
	if err == nil || !strings.Contains(err.Error(), "s3://gload-test/a.arrow") {
		t.Fatalf("Download through a failing store = %v; want an error naming the object", err)
	}
	if _, serr := os.Stat(filepath.Join(dir, "bad.arrow")); !os.IsNotExist(serr) {
		t.Fatal("a failed download left a file under its final name")
	}
	assertNoTemp(t, dir)
}

// Wrong credentials give a clear error that never contains the secret.
func TestWrongCredentials(t *testing.T) {
	s3test.Start(t, "gload-test")
	const secret = "this-is-the-wrong-secret-key"
	t.Setenv("AWS_SECRET_ACCESS_KEY", secret)
	u, _ := objstore.ParseURL("s3://gload-test/x")
	_, err := objstore.Open(context.Background(), u, objstore.Config{MaxRetries: 1})
	if !errors.Is(err, objstore.ErrCredentials) {
		t.Fatalf("Open with a wrong secret = %v; want ErrCredentials", err)
	}
	if strings.Contains(err.Error(), secret) || strings.Contains(err.Error(), s3test.SecretKey) {
		t.Fatalf("error contains a secret: %v", err)
	}
	if !strings.Contains(err.Error(), "AWS_SECRET_ACCESS_KEY") {
		t.Errorf("error does not say what to check: %v", err)
	}
}

func TestMissingBucket(t *testing.T) {
	s3test.Start(t, "gload-test")
	u, _ := objstore.ParseURL("s3://no-such-bucket/x")
	_, err := objstore.Open(context.Background(), u, objstore.Config{})
	if !errors.Is(err, objstore.ErrNoBucket) || !strings.Contains(err.Error(), "no-such-bucket") {
		t.Fatalf("Open(missing bucket) = %v", err)
	}
}
