package main

import (
	"bytes"
	"context"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gload/gload/loader/client"
	"github.com/gload/gload/loader/dataset"
	"github.com/gload/gload/proto/gloadpb"
)

// writeServeDataset writes a small dataset of n rows.
func writeServeDataset(t *testing.T, dir string, n int) {
	t.Helper()
	opts := dataset.WriterOptions{RowsPerBatch: 16}
	w, err := dataset.CreateShard(dir, 0, opts)
	if err != nil {
		t.Fatal(err)
	}
	for i := range n {
		ids := make([]int32, 1+i%40)
		for j := range ids {
			ids[j] = int32(i + j)
		}
		if err := w.Append(ids, nil); err != nil {
			t.Fatal(err)
		}
	}
	info, err := w.Close()
	if err != nil {
		t.Fatal(err)
	}
	if err := dataset.Finalize(dir, []dataset.ShardInfo{info}, opts); err != nil {
		t.Fatal(err)
	}
}

// syncBuffer is a bytes.Buffer safe for the server's log writer and the test.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

func freePort(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}

func TestServe(t *testing.T) {
	data := filepath.Join(t.TempDir(), "wiki")
	if err := os.Mkdir(data, 0o755); err != nil {
		t.Fatal(err)
	}
	writeServeDataset(t, data, 200)
	sock := "unix://" + filepath.Join(t.TempDir(), "gload.sock")
	metrics := freePort(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var stderr syncBuffer
	done := make(chan int, 1)
	go func() {
		done <- run(ctx, []string{"serve", "--dataset", "wiki=" + data, "--dataset", "copy=" + data, "--listen", sock,
			"--metrics", metrics, "--max-prefetch", "4", "--drain-timeout", "2s"}, strings.NewReader(""), io.Discard, &stderr)
	}()
	dctx, dcancel := context.WithTimeout(ctx, 20*time.Second)
	defer dcancel()
	var c *client.Client
	for c == nil {
		var err error
		if c, err = client.Dial(dctx, sock); err != nil {
			select {
			case code := <-done:
				t.Fatalf("serve exited %d: %s", code, stderr.String())
			case <-dctx.Done():
				t.Fatalf("no server: %v\n%s", err, stderr.String())
			case <-time.After(20 * time.Millisecond):
			}
		}
	}
	defer c.Close()
	infos, err := c.Datasets(dctx)
	if err != nil || len(infos) != 2 || infos[0].Name != "copy" || infos[1].Name != "wiki" || infos[1].Rows != 200 {
		t.Fatalf("datasets %v, %v", infos, err)
	}
	s, err := c.Stream(dctx, &gloadpb.Open{Dataset: "wiki", Policy: &gloadpb.BatchPolicy{BatchSize: 10}, Prefetch: 100})
	if err != nil {
		t.Fatal(err)
	}
	if s.Opened().Prefetch != 4 {
		t.Fatalf("granted prefetch %d, want the --max-prefetch 4", s.Opened().Prefetch)
	}
	n := 0
	for {
		b, err := s.Next(dctx)
		if err != nil {
			break
		}
		b.Release()
		n++
	}
	s.Close()
	if n != 20 {
		t.Fatalf("%d batches, want 20", n)
	}
	resp, err := http.Get("http://" + metrics + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if !strings.Contains(string(body), `gload_batches_sent_total{dataset="wiki"} 20`) {
		t.Fatalf("metrics:\n%s", body)
	}
	cancel() // SIGINT/SIGTERM in main cancel this context
	select {
	case code := <-done:
		if code != 0 {
			t.Fatalf("serve exited %d: %s", code, stderr.String())
		}
	case <-time.After(20 * time.Second):
		t.Fatal("serve did not stop")
	}
	log := stderr.String()
	for _, w := range []string{"msg=serving", "addr=" + sock, "msg=\"serving metrics\"", "msg=stopped"} {
		if !strings.Contains(log, w) {
			t.Errorf("log lacks %q:\n%s", w, log)
		}
	}
}

func TestServeErrors(t *testing.T) {
	data := t.TempDir()
	writeServeDataset(t, data, 20)
	broken := t.TempDir()
	writeServeDataset(t, broken, 20)
	if err := os.Truncate(filepath.Join(broken, dataset.DataFileName(0, 1)), 100); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		args []string
		want string
	}{
		{"no dataset", []string{"serve"}, "dataset"},
		{"dataset without dir", []string{"serve", "--dataset", "wiki"}, "NAME=DIR"},
		{"dataset twice", []string{"serve", "--dataset", "a=" + data, "--dataset", "a=" + data}, "twice"},
		{"bad name", []string{"serve", "--dataset", "a b=" + data}, "dataset name"},
		{"remote without flag", []string{"serve", "--dataset", "a=" + data, "--listen", "0.0.0.0:0"}, "--allow-remote"},
		{"bad listen", []string{"serve", "--dataset", "a=" + data, "--listen", "nowhere"}, "--listen"},
		{"remote metrics", []string{"serve", "--dataset", "a=" + data, "--listen", "127.0.0.1:0", "--metrics", "0.0.0.0:0"}, "--metrics"},
		{"corrupt shard", []string{"serve", "--dataset", "a=" + broken}, dataset.DataFileName(0, 1)},
		{"tls cert only", []string{"serve", "--dataset", "a=" + data, "--tls-cert", "x.pem"}, "TLS"},
		{"bad prefetch", []string{"serve", "--dataset", "a=" + data, "--max-prefetch", "-1"}, "prefetch"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, stderr, code := gload(t, "", tc.args...)
			if code == 0 || !strings.Contains(stderr, tc.want) {
				t.Fatalf("exit %d, stderr %q; want an error mentioning %q", code, stderr, tc.want)
			}
		})
	}
	out, _, code := gload(t, "", "serve", "--help")
	if code != 0 || !strings.Contains(out, "--allow-remote") || !strings.Contains(out, "--drain-timeout") {
		t.Fatalf("help: %d %q", code, out)
	}
}
