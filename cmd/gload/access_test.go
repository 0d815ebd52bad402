package main

import (
	"context"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/gload/gload/loader/access"
	"github.com/gload/gload/loader/client"
)

// serveAt runs `gload serve args...` in-process and waits until addr answers
// (dialled with opts), stopping it at cleanup.
func serveAt(t *testing.T, addr string, args []string, opts ...client.Option) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	var stderr syncBuffer
	done := make(chan int, 1)
	go func() { done <- run(ctx, args, strings.NewReader(""), io.Discard, &stderr) }()
	t.Cleanup(func() {
		cancel()
		if code := <-done; code != 0 {
			t.Errorf("serve exited %d: %s", code, stderr.String())
		}
	})
	dctx, dcancel := context.WithTimeout(ctx, 20*time.Second)
	defer dcancel()
	for {
		c, err := client.Dial(dctx, addr, opts...)
		if err == nil {
			_, err = c.Health(dctx)
			c.Close()
			if err == nil {
				return
			}
		}
		select {
		case code := <-done:
			done <- code
			t.Fatalf("serve exited %d: %s", code, stderr.String())
		case <-dctx.Done():
			t.Fatalf("no server at %s: %v\n%s", addr, err, stderr.String())
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// TestServeDefaultAddress: without --listen, serve listens on the user's
// private unix socket (mode 0600), and watch finds it without --addr.
func TestServeDefaultAddress(t *testing.T) {
	run := filepath.Join(t.TempDir(), "xdg")
	t.Setenv("XDG_RUNTIME_DIR", run)
	t.Setenv(access.EnvAddr, "")
	t.Setenv(access.EnvToken, "")
	data := t.TempDir()
	writeServeDataset(t, data, 50)
	sock := filepath.Join(run, "gload.sock")
	serveAt(t, "unix://"+sock, []string{"serve", "--dataset", "wiki=" + data, "--no-gpu-watch", "--drain-timeout", "1s"})
	st, err := os.Lstat(sock)
	if err != nil {
		t.Fatal(err)
	}
	if st.Mode()&os.ModeSocket == 0 || st.Mode().Perm() != 0o600 {
		t.Fatalf("default socket %s: mode %v, want a socket with 0600", sock, st.Mode())
	}
	out, stderr, code := gload(t, "", "watch", "--once", "--json")
	if code != 0 || !strings.Contains(out, `"verdict"`) {
		t.Fatalf("watch without --addr: exit %d, %q, %s", code, out, stderr)
	}
}

// TestServeAuthTokenFile: over TCP with --auth-token-file, clients without
// the token are refused; watch with --auth-token-file (or GLOAD_AUTH_TOKEN)
// gets in.
func TestServeAuthTokenFile(t *testing.T) {
	t.Setenv(access.EnvToken, "")
	t.Setenv(access.EnvTokenFile, "")
	data := t.TempDir()
	writeServeDataset(t, data, 50)
	tok := "0123456789abcdef0123456789abcdef"
	tokFile := filepath.Join(t.TempDir(), "token")
	if err := os.WriteFile(tokFile, []byte(tok+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	addr := freePort(t)
	serveAt(t, addr, []string{"serve", "--dataset", "wiki=" + data, "--listen", addr, "--auth-token-file", tokFile,
		"--no-gpu-watch", "--drain-timeout", "1s"}, client.WithAuthToken(tok))

	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c, err := client.Dial(ctx, addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if _, err := c.Datasets(ctx); err == nil || !strings.Contains(err.Error(), "bearer token") {
		t.Fatalf("no token: %v, want a refusal naming the bearer token", err)
	}
	if _, stderr, code := gload(t, "", "watch", "--addr", addr, "--once"); code == 0 || !strings.Contains(stderr, "Unauthenticated") {
		t.Fatalf("watch without a token: exit %d, %s", code, stderr)
	}
	if out, stderr, code := gload(t, "", "watch", "--addr", addr, "--once", "--json", "--auth-token-file", tokFile); code != 0 || !strings.Contains(out, `"verdict"`) {
		t.Fatalf("watch --auth-token-file: exit %d, %q, %s", code, out, stderr)
	}
	t.Setenv(access.EnvToken, tok)
	if out, stderr, code := gload(t, "", "watch", "--addr", addr, "--once", "--json"); code != 0 || !strings.Contains(out, `"verdict"`) {
		t.Fatalf("watch with GLOAD_AUTH_TOKEN: exit %d, %q, %s", code, out, stderr)
	}
}

func TestServeAccessErrors(t *testing.T) {
	data := t.TempDir()
	writeServeDataset(t, data, 10)
	dir := t.TempDir()
	open := filepath.Join(dir, "open-token")
	if err := os.WriteFile(open, []byte("0123456789abcdef0123"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		args []string
		want string
	}{
		{"token file readable by others", []string{"--auth-token-file", open}, "chmod 600"},
		{"missing token file", []string{"--auth-token-file", filepath.Join(dir, "none")}, "--auth-token-file"},
		{"socket group on TCP", []string{"--listen", "127.0.0.1:0", "--socket-group", "0"}, "unix sockets only"},
		{"tiny buffer budget", []string{"--max-buffer-bytes", "1000"}, "max buffer bytes"},
		{"negative max streams", []string{"--max-streams", "-1"}, "max streams"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			args := append([]string{"serve", "--dataset", "a=" + data, "--no-gpu-watch"}, tc.args...)
			_, stderr, code := gload(t, "", args...)
			if code == 0 || !strings.Contains(stderr, tc.want) {
				t.Fatalf("exit %d, stderr %q; want an error mentioning %q", code, stderr, tc.want)
			}
		})
	}
}
