package loader_test

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/gload/gload/loader"
	"github.com/gload/gload/loader/access"
	"github.com/gload/gload/loader/client"
	"github.com/gload/gload/proto/gloadpb"
)

// TestAuthToken: a server with a token refuses every RPC (unary and the
// batch stream) and /metrics without it or with a wrong one, and serves
// clients that send it (as an option or from GLOAD_AUTH_TOKEN).
func TestAuthToken(t *testing.T) {
	dir := t.TempDir()
	writeDataset(t, dir, genLengths(200, 1, 40, 31), 200, 50)
	tok := strings.Repeat("s3cr", 8)
	ts := startServer(t, loader.Config{Datasets: map[string]string{"d": dir}, AuthToken: tok, NoGPUWatch: true}, "tcp")
	mlis, err := loader.Listen("127.0.0.1:0", loader.ListenOptions{})
	if err != nil {
		t.Fatal(err)
	}
	mctx, mcancel := context.WithCancel(context.Background())
	mdone := make(chan error, 1)
	go func() { mdone <- ts.srv.ServeMetrics(mctx, mlis) }()
	defer func() { mcancel(); <-mdone }()

	t.Setenv(access.EnvToken, "")
	t.Setenv(access.EnvTokenFile, "")
	open := &gloadpb.Open{Dataset: "d", Policy: &gloadpb.BatchPolicy{BatchSize: 8}}
	for _, tc := range []struct {
		name string
		opts []client.Option
		env  string
		ok   bool
	}{
		{"no token", nil, "", false},
		{"wrong token", []client.Option{client.WithAuthToken(strings.Repeat("x", 32))}, "", false},
		{"token option", []client.Option{client.WithAuthToken(tok)}, "", true},
		{"token from the environment", nil, tok, true},
		{"option wins over the environment", []client.Option{client.WithAuthToken("nope-nope-nope-nope")}, tok, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Setenv(access.EnvToken, tc.env)
			c := dial(t, ts.addr, tc.opts...)
			ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
			defer cancel()
			_, err := c.Datasets(ctx)
			checkAuth(t, "ListDatasets", err, tc.ok)
			_, err = c.Health(ctx)
			checkAuth(t, "Health", err, tc.ok)
			bs, _, _, err := pullAll(ctx, c, open, -1)
			checkAuth(t, "Batches", err, tc.ok)
			if tc.ok && len(bs) != 25 {
				t.Fatalf("%d batches, want 25", len(bs))
			}
		})
	}
	url := "http://" + mlis.Addr().String() + "/metrics"
	for _, tc := range []struct {
		header string
		want   int
	}{
		{"", http.StatusUnauthorized},
		{"Bearer " + strings.Repeat("y", 32), http.StatusUnauthorized},
		{"Bearer " + tok, http.StatusOK},
	} {
		req, _ := http.NewRequestWithContext(t.Context(), "GET", url, nil)
		if tc.header != "" {
			req.Header.Set("Authorization", tc.header)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != tc.want {
			t.Fatalf("/metrics with %q: %d, want %d", tc.header, resp.StatusCode, tc.want)
		}
	}
}

func checkAuth(t *testing.T, what string, err error, ok bool) {
	t.Helper()
	if ok {
		if err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		return
	}
	if !unauthenticated(err) {
		t.Fatalf("%s: %v, want UNAUTHENTICATED", what, err)
	}
}

// unauthenticated reports whether err wraps an UNAUTHENTICATED status.
func unauthenticated(err error) bool {
	for e := err; e != nil; e = errors.Unwrap(e) {
		if status.Code(e) == codes.Unauthenticated {
			return true
		}
	}
	return false
}

func TestAuthTokenConfig(t *testing.T) {
	dir := t.TempDir()
	writeDataset(t, dir, genLengths(10, 1, 5, 1), 10, 10)
	_, err := loader.NewServer(loader.Config{Datasets: map[string]string{"d": dir}, AuthToken: "short", NoGPUWatch: true})
	if !errors.Is(err, loader.ErrConfig) || !errors.Is(err, access.ErrToken) {
		t.Fatalf("short token: %v", err)
	}
}
