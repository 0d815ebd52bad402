package main

import (
	"context"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/gload/gload/loader/client"
)

// startLifetimeServe runs `gload serve` with args on a socket in a temporary
// directory (no datasets: clients open them by path) and waits until it
// answers. It returns the socket address, the lock file (created) and the
// channel of serve's exit status.
func startLifetimeServe(t *testing.T, args ...string) (sock, lock string, done chan int, stderr *syncBuffer) {
	t.Helper()
	dir := t.TempDir()
	sock = "unix://" + filepath.Join(dir, "gload.sock")
	lock = filepath.Join(dir, "gload.lock")
	if err := os.WriteFile(lock, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	stderr = &syncBuffer{}
	done = make(chan int, 1)
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(func() {
		cancel()
		select {
		case <-done:
		case <-time.After(time.Minute):
			t.Error("serve did not stop at cleanup")
		}
	})
	all := append([]string{"serve", "--listen", sock, "--lock-file", lock, "--paths-only", "--no-gpu-watch", "--no-write-index"}, args...)
	go func() { done <- run(ctx, all, strings.NewReader(""), io.Discard, stderr) }()
	c := dialServe(t, sock, done, stderr)
	c.Close()
	return sock, lock, done, stderr
}

func dialServe(t *testing.T, sock string, done chan int, stderr *syncBuffer) *client.Client {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	for {
		c, err := client.Dial(ctx, sock)
		if err == nil {
			return c
		}
		select {
		case code := <-done:
			done <- code
			t.Fatalf("serve exited %d before answering: %s", code, stderr.String())
		case <-ctx.Done():
			t.Fatalf("serve does not answer: %v\n%s", err, stderr.String())
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// waitExit waits (a minute at most: a failure guard, not a timing) for serve
// to exit and checks it left neither socket nor lock file.
func waitExit(t *testing.T, sock, lock string, done chan int, stderr *syncBuffer) {
	t.Helper()
	select {
	case code := <-done:
		done <- code
		if code != 0 {
			t.Fatalf("serve exited %d: %s", code, stderr.String())
		}
	case <-time.After(time.Minute):
		t.Fatalf("serve did not exit:\n%s", stderr.String())
	}
	for _, p := range []string{strings.TrimPrefix(sock, "unix://"), lock} {
		if _, err := os.Lstat(p); !os.IsNotExist(err) {
			t.Errorf("%s left behind (%v)", p, err)
		}
	}
	if !strings.Contains(stderr.String(), "msg=exiting") {
		t.Errorf("log does not say why it exited:\n%s", stderr.String())
	}
}

func TestServeIdleExit(t *testing.T) {
	data := t.TempDir()
	writeServeDataset(t, data, 50)
	sock, lock, done, stderr := startLifetimeServe(t, "--idle-exit", "300ms")
	c := dialServe(t, sock, done, stderr)
	info, _, err := c.OpenPath(context.Background(), data)
	if err != nil || info.Rows != 50 {
		t.Fatalf("OpenPath: %v, %v", info, err)
	}
	c.Close()
	waitExit(t, sock, lock, done, stderr)
}

func TestServeIdleExitWaitsForTheLock(t *testing.T) {
	sock, lock, done, stderr := startLifetimeServe(t, "--idle-exit", "100ms")
	// A client holds the start lock (it is attaching): the server stays.
	f, err := os.OpenFile(lock, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	if err := unix.Flock(int(f.Fd()), unix.LOCK_EX); err != nil {
		t.Fatal(err)
	}
	select {
	case code := <-done:
		t.Fatalf("serve exited %d while a client held the lock: %s", code, stderr.String())
	case <-time.After(time.Second):
	}
	f.Close()
	waitExit(t, sock, lock, done, stderr)
}

func TestServeOwnerExit(t *testing.T) {
	owner := exec.Command("sleep", "600")
	if err := owner.Start(); err != nil {
		t.Skipf("no sleep command: %v", err)
	}
	defer owner.Process.Kill()
	// No idle exit: only the owner's death ends it.
	sock, lock, done, stderr := startLifetimeServe(t, "--owner-pid", strconv.Itoa(owner.Process.Pid))
	c := dialServe(t, sock, done, stderr)
	if err := owner.Process.Signal(unix.SIGKILL); err != nil {
		t.Fatal(err)
	}
	// Not reaped yet: a zombie, which kill(pid, 0) would take for alive; the pidfd says it exited.
	select {
	case code := <-done:
		t.Fatalf("serve exited %d with a client connected: %s", code, stderr.String())
	case <-time.After(500 * time.Millisecond):
	}
	c.Close()
	waitExit(t, sock, lock, done, stderr)
	owner.Wait()
}
