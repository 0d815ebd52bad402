package loader_test

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"math/big"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/gload/gload/loader"
	"github.com/gload/gload/loader/client"
	"github.com/gload/gload/proto/gloadpb"
)

func TestInfoRPCs(t *testing.T) {
	dir := t.TempDir()
	lengths := genLengths(500, 0, 90, 15)
	writeDataset(t, dir, lengths, 200, 64)
	ts := startServer(t, loader.Config{Datasets: map[string]string{"wiki": dir}, Version: "v9"}, "tcp")
	c := dial(t, ts.addr)
	infos, err := c.Datasets(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	var tokens uint64
	maxLen := 0
	for _, l := range lengths {
		tokens += uint64(l)
		maxLen = max(maxLen, l)
	}
	in := infos[0]
	if len(infos) != 1 || in.Name != "wiki" || in.Rows != 500 || in.Tokens != tokens || in.Shards != 3 ||
		in.MaxLength != uint32(maxLen) || in.TokenizerHash != "test" || len(in.Fingerprint) != 32 {
		t.Fatalf("datasets: %v", infos)
	}
	h, err := c.Health(t.Context())
	if err != nil || !h.Serving || h.Version != "v9" || len(h.Datasets) != 1 || h.Datasets[0] != "wiki" {
		t.Fatalf("health: %v, %v", h, err)
	}
	open := &gloadpb.Open{Dataset: "wiki", Seed: 3, Policy: &gloadpb.BatchPolicy{BatchSize: 10, PadMultiple: 32}, WorldSize: 3, Rank: 1, NumWorkers: 2, Worker: 1}
	pr, err := c.Plan(t.Context(), open)
	if err != nil {
		t.Fatal(err)
	}
	if pr.GlobalBatches != 50 || pr.Batches != 8 || len(pr.Shapes) == 0 || pr.PaddingShare <= 0 || pr.PaddingShare >= 1 {
		t.Fatalf("plan: %v", pr)
	}
	for i, sh := range pr.Shapes {
		if sh.Length%32 != 0 || (i > 0 && sh.Length > pr.Shapes[i-1].Length) {
			t.Fatalf("shapes not padded to 32 or not longest first: %v", pr.Shapes)
		}
	}
	bs, _, opened, err := pullAll(t.Context(), c, open, -1)
	if err != nil {
		t.Fatal(err)
	}
	if uint64(len(bs)) != pr.Batches || opened.Batches != pr.Batches || len(opened.Shapes) != len(pr.Shapes) ||
		opened.WorldSize != 3 || opened.NumWorkers != 2 || opened.Prefetch != loader.DefaultPrefetch {
		t.Fatalf("opened %v, %d batches; plan said %d", opened, len(bs), pr.Batches)
	}
}

func TestPrefetchBound(t *testing.T) {
	dir := t.TempDir()
	writeDataset(t, dir, genLengths(400, 1, 30, 16), 400, 100)
	ts := startServer(t, loader.Config{Datasets: map[string]string{"d": dir}, MaxPrefetch: 5, DefaultPrefetch: 2}, "unix")
	c := dial(t, ts.addr)
	for _, tc := range []struct{ ask, want uint32 }{{0, 2}, {1, 1}, {5, 5}, {1000, 5}} {
		open := &gloadpb.Open{Dataset: "d", Policy: &gloadpb.BatchPolicy{BatchSize: 4}, Prefetch: tc.ask, ClientId: "p"}
		s, err := c.Stream(t.Context(), open, client.AckOnNext(false), client.Reports(false))
		if err != nil {
			t.Fatal(err)
		}
		if s.Opened().Prefetch != tc.want {
			t.Fatalf("asked %d: granted %d, want %d", tc.ask, s.Opened().Prefetch, tc.want)
		}
		// Without acks the server sends exactly `prefetch` batches, then waits.
		var held []*client.Batch
		for range tc.want {
			b, err := s.Next(t.Context())
			if err != nil {
				t.Fatal(err)
			}
			held = append(held, b)
		}
		waitFor(t, "queue depth", func() (bool, string) {
			cs := ts.srv.Clients()
			return len(cs) == 1 && cs[0].QueueDepth == int(tc.want), "not at prefetch"
		})
		ctx, cancel := context.WithTimeout(t.Context(), 100*time.Millisecond)
		if _, err := s.Next(ctx); !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("asked %d: batch beyond prefetch without an ack (%v)", tc.ask, err)
		}
		cancel()
		held[0].Release()
		if _, err := s.Next(t.Context()); err != nil {
			t.Fatalf("after one ack: %v", err)
		}
		s.Close()
	}
}

func TestGracefulShutdown(t *testing.T) {
	dir := t.TempDir()
	writeDataset(t, dir, genLengths(2000, 1, 100, 17), 2000, 100)
	srv, err := loader.NewServer(loader.Config{Datasets: map[string]string{"d": dir}, DrainTimeout: 10 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	sock := "unix://" + filepath.Join(t.TempDir(), "s.sock")
	lis, err := loader.Listen(sock, loader.ListenOptions{})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ctx, lis) }()
	c := dial(t, sock)
	open := &gloadpb.Open{Dataset: "d", Policy: &gloadpb.BatchPolicy{BatchSize: 4}, Prefetch: 2}
	s, err := c.Stream(t.Context(), open)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	cancel() // drain: the open stream runs to its end
	n := 0
	for {
		b, err := s.Next(t.Context())
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatalf("after %d batches: %v", n, err)
		}
		b.Release()
		n++
	}
	if uint64(n) != s.Opened().Batches {
		t.Fatalf("%d batches during drain, want %d", n, s.Opened().Batches)
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(strings.TrimPrefix(sock, "unix://")); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("socket file left behind: %v", err)
	}
}

func TestDrainTimeout(t *testing.T) {
	dir := t.TempDir()
	writeDataset(t, dir, genLengths(2000, 1, 100, 18), 2000, 100)
	srv, err := loader.NewServer(loader.Config{Datasets: map[string]string{"d": dir}, DrainTimeout: 50 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	lis, err := loader.Listen("127.0.0.1:0", loader.ListenOptions{})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ctx, lis) }()
	c := dial(t, lis.Addr().String())
	s, err := c.Stream(t.Context(), &gloadpb.Open{Dataset: "d", Policy: &gloadpb.BatchPolicy{BatchSize: 4}, Prefetch: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if _, err := s.Next(t.Context()); err != nil { // hold it: the server waits for the ack
		t.Fatal(err)
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	var err2 error
	for err2 == nil {
		_, err2 = s.Next(t.Context())
	}
	if c := status.Code(err2); c != codes.Unavailable {
		t.Fatalf("stream after drain timeout: %v, want Unavailable", err2)
	}
}

// selfSigned writes a certificate for 127.0.0.1 and its key.
func selfSigned(t *testing.T) (certFile, keyFile string, pool *x509.CertPool) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "gload test"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IPAddresses: []net.IP{net.ParseIP("127.0.0.1")}, KeyUsage: x509.KeyUsageDigitalSignature,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}, IsCA: true, BasicConstraintsValid: true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	kb, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	certFile, keyFile = filepath.Join(dir, "cert.pem"), filepath.Join(dir, "key.pem")
	if err := os.WriteFile(certFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(keyFile, pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kb}), 0o600); err != nil {
		t.Fatal(err)
	}
	cert, _ := x509.ParseCertificate(der)
	pool = x509.NewCertPool()
	pool.AddCert(cert)
	return certFile, keyFile, pool
}

func TestTLS(t *testing.T) {
	dir := t.TempDir()
	lengths := genLengths(300, 1, 80, 19)
	writeDataset(t, dir, lengths, 300, 100)
	certFile, keyFile, pool := selfSigned(t)
	ts := startServer(t, loader.Config{Datasets: map[string]string{"d": dir}, TLSCertFile: certFile, TLSKeyFile: keyFile}, "tcp")
	c := dial(t, ts.addr, client.WithTLS(&tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}))
	bs, _, _, err := pullAll(t.Context(), c, &gloadpb.Open{Dataset: "d", Policy: &gloadpb.BatchPolicy{BatchSize: 8}}, -1)
	if err != nil {
		t.Fatal(err)
	}
	for _, g := range bs {
		if err := checkBatch(g, lengths, 0, 0); err != nil {
			t.Fatal(err)
		}
	}
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
	defer cancel()
	if c2, err := client.Dial(ctx, ts.addr); err == nil {
		_, err = c2.Health(ctx)
		c2.Close()
		if err == nil {
			t.Fatal("plaintext client talked to a TLS server")
		}
	}
	if _, err := loader.NewServer(loader.Config{Datasets: map[string]string{"d": dir}, TLSCertFile: certFile}); !errors.Is(err, loader.ErrConfig) {
		t.Fatalf("cert without key: %v", err)
	}
	if _, err := loader.NewServer(loader.Config{Datasets: map[string]string{"d": dir}, TLSCertFile: keyFile, TLSKeyFile: keyFile}); !errors.Is(err, loader.ErrConfig) {
		t.Fatalf("bad cert: %v", err)
	}
}

func TestMetrics(t *testing.T) {
	dir := t.TempDir()
	writeDataset(t, dir, genLengths(300, 1, 80, 20), 300, 100)
	ts := startServer(t, loader.Config{Datasets: map[string]string{"wiki": dir}, MaxClientLabels: 2}, "unix")
	c := dial(t, ts.addr)
	sent := 0
	for _, id := range []string{"a", "b", "c"} {
		bs, _, _, err := pullAll(t.Context(), c, &gloadpb.Open{Dataset: "wiki", Policy: &gloadpb.BatchPolicy{BatchSize: 8}, ClientId: id}, -1)
		if err != nil {
			t.Fatal(err)
		}
		sent += len(bs)
	}
	// A client sees End before the server's handler has run its deferred clean-up (gauges back to 0, stream count
	// last): wait for the stream count before scraping.
	deadline := time.Now().Add(10 * time.Second)
	for ts.srv.Streams() != 0 && time.Now().Before(deadline) {
		time.Sleep(time.Millisecond)
	}
	// Over real HTTP.
	mlis, err := loader.Listen("127.0.0.1:0", loader.ListenOptions{})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- ts.srv.ServeMetrics(ctx, mlis) }()
	resp, err := http.Get("http://" + mlis.Addr().String() + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	text := string(body)
	for _, w := range []string{
		fmt.Sprintf(`gload_batches_sent_total{dataset="wiki"} %d`, sent),
		`gload_bytes_sent_total{dataset="wiki"}`,
		`gload_open_streams{dataset="wiki"} 0`,
		`gload_plan_duration_seconds_count{policy="bucketed"} 1`,
		`gload_plan_cache_requests_total{result="hit"} 2`,
		`gload_client_wait_seconds_count{client="c",dataset="wiki"}`,
		`gload_client_step_seconds_bucket{client="c",dataset="wiki"`,
		`gload_client_queue_depth{client="c",dataset="wiki"} 0`,
		`gload_client_wait_share{client="c",dataset="wiki"}`,
		`go_goroutines`,
	} {
		if !strings.Contains(text, w) {
			t.Errorf("metrics lack %q", w)
		}
	}
	if strings.Contains(text, `client="a"`) {
		t.Errorf("client a should have been evicted (MaxClientLabels 2)")
	}
	rec := httptest.NewRecorder()
	ts.srv.MetricsHandler().ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
	if rec.Code != 200 || !strings.Contains(rec.Body.String(), "gload_batches_sent_total") {
		t.Fatalf("handler: %d", rec.Code)
	}
	cs := ts.srv.Clients()
	if len(cs) != 3 || cs[2].ClientID != "c" || cs[2].Reports == 0 || cs[2].Streams != 0 {
		t.Fatalf("clients: %+v", cs)
	}
}
