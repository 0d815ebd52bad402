// Package s3test starts a real S3-compatible server (Versity's versitygw, POSIX backend, built by
// scripts/setup.sh into bin/versitygw) on loopback for tests, and a fault-injecting HTTP proxy in front of it.
// It is imported by tests only.
package s3test

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// Credentials the test server accepts.
const (
	AccessKey = "gloadtestaccess"
	SecretKey = "gloadtestsecret-do-not-log"
)

// Server is a running versitygw.
type Server struct {
	Endpoint string // http://127.0.0.1:PORT
	Root     string // the POSIX backend directory: one directory per bucket
	cmd      *exec.Cmd
}

// Binary finds versitygw: $GLOAD_S3_SERVER, bin/versitygw at the module root, or PATH.
func Binary() (string, error) {
	if p := os.Getenv("GLOAD_S3_SERVER"); p != "" {
		return p, nil
	}
	_, file, _, _ := runtime.Caller(0)
	root := filepath.Join(filepath.Dir(file), "..", "..", "..")
	if p := filepath.Join(root, "bin", "versitygw"); isExec(p) {
		return p, nil
	}
	if p, err := exec.LookPath("versitygw"); err == nil {
		return p, nil
	}
	return "", fmt.Errorf("no versitygw: make test builds it into bin/versitygw (scripts/setup.sh), or set GLOAD_S3_SERVER")
}

func isExec(p string) bool {
	st, err := os.Stat(p)
	return err == nil && !st.IsDir() && st.Mode()&0o111 != 0
}

// Start starts a server with the given buckets and sets the AWS environment of the test to reach it (endpoint,
// keys, region). Without the binary the test skips, or fails under CI=true.
func Start(t testing.TB, buckets ...string) *Server {
	t.Helper()
	bin, err := Binary()
	if err != nil {
		if os.Getenv("CI") != "" {
			t.Fatalf("s3test: %v", err)
		}
		t.Skipf("s3test: %v", err)
	}
	root := t.TempDir()
	for _, b := range buckets {
		if err := os.MkdirAll(filepath.Join(root, b), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	port := freePort(t)
	s := &Server{Endpoint: fmt.Sprintf("http://127.0.0.1:%d", port), Root: root}
	s.cmd = exec.Command(bin, "--access", AccessKey, "--secret", SecretKey, "--region", "us-east-1",
		"--port", fmt.Sprintf("127.0.0.1:%d", port), "--quiet", "posix", root)
	logf, err := os.Create(filepath.Join(t.TempDir(), "versitygw.log"))
	if err != nil {
		t.Fatal(err)
	}
	s.cmd.Stdout, s.cmd.Stderr = logf, logf
	if err := s.cmd.Start(); err != nil {
		t.Fatalf("s3test: start %s: %v", bin, err)
	}
	t.Cleanup(func() {
		s.cmd.Process.Kill()
		s.cmd.Wait()
		logf.Close()
	})
	deadline := time.Now().Add(20 * time.Second)
	for {
		c, err := net.DialTimeout("tcp", fmt.Sprintf("127.0.0.1:%d", port), 200*time.Millisecond)
		if err == nil {
			c.Close()
			break
		}
		if time.Now().After(deadline) {
			b, _ := os.ReadFile(logf.Name())
			t.Fatalf("s3test: versitygw did not listen within 20 s: %s", b)
		}
		time.Sleep(50 * time.Millisecond)
	}
	SetEnv(t, s.Endpoint)
	return s
}

// SetEnv points the AWS environment of the test at endpoint with the test credentials.
func SetEnv(t testing.TB, endpoint string) {
	t.Setenv("AWS_ENDPOINT_URL", endpoint)
	t.Setenv("AWS_ACCESS_KEY_ID", AccessKey)
	t.Setenv("AWS_SECRET_ACCESS_KEY", SecretKey)
	t.Setenv("AWS_REGION", "us-east-1")
	t.Setenv("AWS_PROFILE", "")
	t.Setenv("AWS_SHARED_CREDENTIALS_FILE", filepath.Join(t.TempDir(), "none"))
	t.Setenv("AWS_CONFIG_FILE", filepath.Join(t.TempDir(), "none"))
}

func freePort(t testing.TB) int {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// Faults is a reverse proxy in front of a server that can fail requests: the next N requests (optionally only
// those whose path contains a substring) get 503 SlowDown, or have their bodies cut short.
type Faults struct {
	Endpoint string
	skip     atomic.Int64 // matching requests to let through before failing
	fail     atomic.Int64 // requests still to fail with 503
	cut      atomic.Int64 // GET responses still to truncate
	match    atomic.Pointer[string]
	slow     atomic.Int64 // nanoseconds to sleep per 64 KiB of GET body
	Requests atomic.Int64
	srv      *http.Server
}

// Proxy starts a fault-injecting proxy to target on loopback.
func Proxy(t testing.TB, target string) *Faults {
	t.Helper()
	u, err := url.Parse(target)
	if err != nil {
		t.Fatal(err)
	}
	rp := httputil.NewSingleHostReverseProxy(u)
	f := &Faults{}
	empty := ""
	f.match.Store(&empty)
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	f.Endpoint = "http://" + l.Addr().String()
	f.srv = &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		f.Requests.Add(1)
		m := *f.match.Load()
		hit := m == "" || strings.Contains(r.URL.Path, m)
		if hit && f.fail.Load() > 0 && f.skip.Add(-1) < 0 && f.fail.Add(-1) >= 0 {
			w.Header().Set("Content-Type", "application/xml")
			w.WriteHeader(http.StatusServiceUnavailable)
			fmt.Fprint(w, `<?xml version="1.0" encoding="UTF-8"?><Error><Code>SlowDown</Code><Message>injected by s3test</Message></Error>`)
			return
		}
		if hit && r.Method == http.MethodGet && f.cut.Load() > 0 && f.cut.Add(-1) >= 0 {
			rp.ServeHTTP(&cutWriter{ResponseWriter: w, left: 1000}, r)
			return
		}
		if d := time.Duration(f.slow.Load()); d > 0 && r.Method == http.MethodGet {
			rp.ServeHTTP(&slowWriter{ResponseWriter: w, per: d}, r)
			return
		}
		rp.ServeHTTP(w, r)
	})}
	go f.srv.Serve(l)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		f.srv.Shutdown(ctx)
	})
	return f
}

// Fail makes the next n requests whose path contains match ("" for any) fail with 503.
func (f *Faults) Fail(n int64, match string) { f.FailAfter(0, n, match) }

// FailAfter lets ok matching requests through, then fails the next n with 503.
func (f *Faults) FailAfter(ok, n int64, match string) {
	f.match.Store(&match)
	f.skip.Store(ok)
	f.fail.Store(n)
}

// Cut makes the next n GETs whose path contains match end after 1000 body bytes.
func (f *Faults) Cut(n int64, match string) {
	f.match.Store(&match)
	f.cut.Store(n)
}

// Slow makes GET bodies arrive at 64 KiB per d (0: full speed).
func (f *Faults) Slow(d time.Duration) { f.slow.Store(int64(d)) }

type slowWriter struct {
	http.ResponseWriter
	per time.Duration
}

func (s *slowWriter) Write(b []byte) (int, error) {
	n := 0
	for len(b) > 0 {
		k := min(len(b), 64<<10)
		m, err := s.ResponseWriter.Write(b[:k])
		n += m
		if err != nil {
			return n, err
		}
		if f, ok := s.ResponseWriter.(http.Flusher); ok {
			f.Flush()
		}
		time.Sleep(s.per)
		b = b[k:]
	}
	return n, nil
}

type cutWriter struct {
	http.ResponseWriter
	left int
}

func (c *cutWriter) Write(b []byte) (int, error) {
	if c.left <= 0 {
		panic(http.ErrAbortHandler) // closes the connection mid-body, as a dropped transfer does
	}
	if len(b) > c.left {
		b = b[:c.left]
	}
	c.left -= len(b)
	return c.ResponseWriter.Write(b)
}
