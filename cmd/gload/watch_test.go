package main

import (
	"context"
	"encoding/json"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/gload/gload/loader/client"
	"github.com/gload/gload/loader/gpuwatch"
	"github.com/gload/gload/proto/gloadpb"
)

// startServe runs `gload serve` in-process over a small dataset (flags
// added to its command line) and returns its unix socket address.
func startServe(t *testing.T, extra ...string) string {
	t.Helper()
	data := filepath.Join(t.TempDir(), "wiki")
	if err := os.Mkdir(data, 0o755); err != nil {
		t.Fatal(err)
	}
	writeServeDataset(t, data, 200)
	sock := "unix://" + filepath.Join(t.TempDir(), "gload.sock")
	ctx, cancel := context.WithCancel(context.Background())
	var stderr syncBuffer
	done := make(chan int, 1)
	args := append([]string{"serve", "--dataset", "wiki=" + data, "--listen", sock, "--drain-timeout", "1s"}, extra...)
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
		c, err := client.Dial(dctx, sock)
		if err == nil {
			c.Close()
			return sock
		}
		select {
		case code := <-done:
			done <- code
			t.Fatalf("serve exited %d: %s", code, stderr.String())
		case <-dctx.Done():
			t.Fatalf("no server: %v\n%s", err, stderr.String())
		case <-time.After(20 * time.Millisecond):
		}
	}
}

func TestWatchOnce(t *testing.T) {
	sock := startServe(t, "--no-gpu-watch", "--watch-window", "30s")
	// A client that streams a few batches, so the report has one.
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	c, err := client.Dial(ctx, sock)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	s, err := c.Stream(ctx, &gloadpb.Open{Dataset: "wiki", Policy: &gloadpb.BatchPolicy{BatchSize: 10}, ClientId: "trainer"})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	for range 5 {
		b, err := s.Next(ctx)
		if err != nil {
			t.Fatal(err)
		}
		b.Release()
	}

	var r gpuwatch.Report
	for ctx.Err() == nil { // the client's reports travel asynchronously
		out, errOut, code := gload(t, "", "watch", "--addr", sock, "--once", "--json")
		if code != 0 {
			t.Fatalf("watch --once --json: exit %d: %s", code, errOut)
		}
		if err := json.Unmarshal([]byte(out), &r); err != nil {
			t.Fatalf("not JSON: %v\n%s", err, out)
		}
		if len(r.Clients) == 1 && r.Clients[0].Steps >= 4 {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	if r.Verdict.State != gpuwatch.StateNoGPU || !strings.Contains(r.NoGPU, "--no-gpu-watch") || r.WindowS != 30 ||
		len(r.Clients) != 1 || r.Clients[0].Client != "trainer" {
		t.Fatalf("report: %+v", r)
	}

	out, errOut, code := gload(t, "", "watch", "--addr", sock, "--once")
	if code != 0 || !strings.Contains(out, "verdict: no GPU visible") || !strings.Contains(out, "trainer") {
		t.Fatalf("watch --once: exit %d %q\n%s", code, errOut, out)
	}
}

// TestWatchPiped: piped, the live view prints one line per report until
// interrupted.
func TestWatchPiped(t *testing.T) {
	sock := startServe(t, "--no-gpu-watch")
	ctx, cancel := context.WithCancel(context.Background())
	var out syncBuffer
	done := make(chan int, 1)
	go func() {
		done <- run(ctx, []string{"watch", "--addr", sock, "--interval", "100ms"}, strings.NewReader(""), &out, io.Discard)
	}()
	for strings.Count(out.String(), "\n") < 3 {
		time.Sleep(10 * time.Millisecond)
	}
	cancel()
	if code := <-done; code != 0 {
		t.Fatalf("watch exited %d", code)
	}
	for i, line := range strings.Split(strings.TrimSpace(out.String()), "\n") {
		if !strings.Contains(line, "no GPU visible") || strings.Contains(line, "\x1b") {
			t.Errorf("line %d: %q", i, line)
		}
	}
}

func TestWatchErrors(t *testing.T) {
	for _, tc := range []struct {
		name string
		args []string
		want string
	}{
		{"no server", []string{"watch", "--addr", "unix://" + filepath.Join(t.TempDir(), "none.sock"), "--once"}, "is gload serve running"},
		{"bad address", []string{"watch", "--addr", "nowhere", "--once"}, "--addr"},
		{"bad interval", []string{"watch", "--interval", "0s"}, "--interval"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, stderr, code := gload(t, "", tc.args...)
			if code == 0 || !strings.Contains(stderr, tc.want) {
				t.Fatalf("exit %d, stderr %q; want an error mentioning %q", code, stderr, tc.want)
			}
		})
	}
}
