package loader_test

import (
	"context"
	"io"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/gload/gload/internal/testuser"
	"github.com/gload/gload/loader"
	"github.com/gload/gload/loader/access"
	"github.com/gload/gload/loader/client"
	"github.com/gload/gload/proto/gloadpb"
)

// TestIdleConnsDoNotLockOut (issue 34 item 9): idle TCP connections that
// never send the token used to hold --max-conns and lock token holders out.
// Now a peer's connections are bounded, unauthenticated ones make room for
// new ones, and a token holder still gets every batch.
func TestIdleConnsDoNotLockOut(t *testing.T) {
	dir := t.TempDir()
	writeDataset(t, dir, genLengths(200, 1, 40, 31), 200, 50)
	tok := strings.Repeat("s3cr", 8)
	t.Setenv(access.EnvToken, "")
	t.Setenv(access.EnvTokenFile, "")
	open := &gloadpb.Open{Dataset: "d", Policy: &gloadpb.BatchPolicy{BatchSize: 8}}
	served := func(t *testing.T, ts *testServer) {
		t.Helper()
		c := dial(t, ts.addr, client.WithAuthToken(tok))
		ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
		defer cancel()
		bs, _, _, err := pullAll(ctx, c, open, -1)
		if err != nil || len(bs) != 25 {
			t.Fatalf("token holder: %d batches, %v; want 25", len(bs), err)
		}
	}
	idle := func(t *testing.T, addr string, n int) []net.Conn {
		var cs []net.Conn
		for range n {
			c, err := net.Dial("tcp", addr)
			if err != nil {
				t.Fatalf("connection %d: %v", len(cs), err)
			}
			cs = append(cs, c)
		}
		t.Cleanup(func() {
			for _, c := range cs {
				c.Close()
			}
		})
		return cs
	}

	t.Run("same user", func(t *testing.T) {
		ts := startServer(t, loader.Config{Datasets: map[string]string{"d": dir}, AuthToken: tok, NoGPUWatch: true, MaxConns: 64}, "tcp")
		idle(t, ts.addr, 300)
		served(t, ts)
		if total, _ := ts.srv.Conns(); total > 64 {
			t.Fatalf("%d connections admitted, --max-conns is 64", total)
		}
	})
	t.Run("another user", func(t *testing.T) {
		uid, gid := testuser.Other(t)
		ts := startServer(t, loader.Config{Datasets: map[string]string{"d": dir}, AuthToken: tok, NoGPUWatch: true, MaxConns: 64}, "tcp")
		atk := testuser.Start(t, uid, gid, "connect", ts.addr, "1100")
		// Wait until the server has accepted and admitted what it will of them.
		for {
			total, pending := ts.srv.Conns()
			if total == 16 && pending == 16 { // --max-conns-per-peer: 64/4
				break
			}
			if total > 16 {
				t.Fatalf("%d connections of one other user admitted, want at most 16", total)
			}
			time.Sleep(10 * time.Millisecond)
		}
		served(t, ts)
		atk.Stop()
	})
	t.Run("auth timeout", func(t *testing.T) {
		ts := startServer(t, loader.Config{Datasets: map[string]string{"d": dir}, AuthToken: tok, NoGPUWatch: true,
			AuthTimeout: 100 * time.Millisecond}, "tcp")
		served(t, ts)
		cs := idle(t, ts.addr, 3)
		for i, c := range cs {
			c.SetReadDeadline(time.Now().Add(2 * time.Minute)) // a guard only: the server closes it after 100 ms
			// The server's HTTP/2 settings, then the end of the connection.
			if n, err := io.Copy(io.Discard, c); err != nil {
				t.Fatalf("idle connection %d: read %d bytes, %v; want it closed by the server", i, n, err)
			}
		}
		for {
			if total, pending := ts.srv.Conns(); pending == 0 && total <= 1 {
				break
			}
			time.Sleep(10 * time.Millisecond)
		}
	})
	t.Run("bad limits", func(t *testing.T) {
		for i, cfg := range []loader.Config{{MaxConns: 8, ConnReserve: 8}, {MaxConnsPerPeer: -1}, {AuthTimeout: -time.Second}} {
			cfg.Datasets = map[string]string{"d": dir}
			cfg.NoGPUWatch = true
			if _, err := loader.NewServer(cfg); err == nil {
				t.Errorf("config %d: %+v accepted", i, cfg)
			}
		}
	})
}
