package main

import (
	"bytes"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// TestServeStartupFIFO (issue 34 item 14): a FIFO as --auth-token-file is
// refused at once (it used to block start-up in open), and a start-up step
// that blocks all the same (here reading a FIFO as --mixture-file) ends on
// SIGTERM. Real `gload serve` processes; the waits are for events (the
// process's exit, the FIFO's reader), with a generous limit only as a guard.
func TestServeStartupFIFO(t *testing.T) {
	bin := buildBinary(t)
	data := t.TempDir()
	writeServeDataset(t, data, 20)
	dir := t.TempDir()
	fifo := filepath.Join(dir, "fifo")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Skipf("mkfifo: %v", err)
	}
	start := func(args ...string) (*exec.Cmd, *bytes.Buffer, chan error) {
		cmd := exec.Command(bin, append([]string{"serve", "--dataset", "d=" + data, "--no-gpu-watch",
			"--listen", "unix://" + filepath.Join(dir, "s.sock")}, args...)...)
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		done := make(chan error, 1)
		go func() { done <- cmd.Wait() }()
		t.Cleanup(func() { cmd.Process.Kill() })
		return cmd, &stderr, done
	}
	wait := func(done chan error, what string) error {
		select {
		case err := <-done:
			return err
		case <-time.After(2 * time.Minute):
			t.Fatalf("%s: gload serve still running after 2 minutes", what)
			return nil
		}
	}

	t.Run("token file is a FIFO", func(t *testing.T) {
		_, stderr, done := start("--auth-token-file", fifo)
		err := wait(done, "FIFO token file")
		var ee *exec.ExitError
		if !errors.As(err, &ee) || !strings.Contains(stderr.String(), "named pipe, not a regular file") {
			t.Fatalf("exit %v, stderr %q; want a refusal naming the FIFO", err, stderr)
		}
	})
	t.Run("SIGTERM during a blocked start-up step", func(t *testing.T) {
		cmd, stderr, done := start("--mixture-file", fifo)
		// Wait until gload has the FIFO open for reading (a writer can open it
		// then), and keep the writer open so that its read blocks.
		var w int
		for {
			var err error
			if w, err = unix.Open(fifo, unix.O_WRONLY|unix.O_NONBLOCK, 0); err == nil {
				break
			}
			select {
			case err := <-done:
				t.Fatalf("gload serve exited before reading the FIFO: %v, %s", err, stderr)
			case <-time.After(10 * time.Millisecond):
			}
		}
		defer unix.Close(w)
		if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
			t.Fatal(err)
		}
		err := wait(done, "SIGTERM")
		var ee *exec.ExitError
		if !errors.As(err, &ee) || !strings.Contains(stderr.String(), "start-up interrupted") {
			t.Fatalf("exit %v, stderr %q; want the interrupted start-up named", err, stderr)
		}
	})
	if _, err := os.Stat(filepath.Join(dir, "s.sock")); err == nil {
		t.Fatal("a socket was left behind")
	}
}
