package loader_test

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/gload/gload/proto/gloadpb"
)

// rssBytes reads a process's resident set size from /proc.
func rssBytes(t *testing.T, pid int) int64 {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(l, "VmRSS:"); ok {
			kb, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
			if err != nil {
				t.Fatal(err)
			}
			return kb << 10
		}
	}
	t.Fatal("no VmRSS")
	return 0
}

// TestHostileStreamsBounded: 500 streams (batch 64, prefetch 64, ~1k-token
// rows) that never read their batches keep the server's RSS within 200 MB
// plus --max-buffer-bytes: the streams that fit get the prefetch that fits,
// the rest are refused. The server runs in its own process (TestMain) so its
// memory is measured apart from the clients'. GLOAD_HOSTILE_BUDGET overrides
// the 256 MiB budget of the test (0: the server's default), to measure the
// default by hand.
func TestHostileStreamsBounded(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: skipping the 500-stream memory test")
	}
	budget := int64(256 << 20)
	if v := os.Getenv("GLOAD_HOSTILE_BUDGET"); v != "" {
		budget, _ = strconv.ParseInt(v, 10, 64)
	}
	dir := t.TempDir()
	writeDataset(t, dir, genLengths(4000, 900, 1024, 71), 2000, 100)
	sock := "unix://" + filepath.Join(t.TempDir(), "s.sock")
	cmd := exec.Command(os.Args[0])
	cmd.Env = append(os.Environ(), "GLOAD_TEST_SERVE="+sock, "GLOAD_TEST_DATASET="+dir,
		"GLOAD_TEST_MAX_BUFFER_BYTES="+strconv.FormatInt(budget, 10))
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() {
		cmd.Process.Signal(syscall.SIGTERM)
		cmd.Wait()
	}()
	if l, err := bufio.NewReader(out).ReadString('\n'); err != nil || l != "serving\n" {
		t.Fatalf("server helper: %q, %v", l, err)
	}
	base := rssBytes(t, cmd.Process.Pid)

	const streams, conns = 500, 4
	var ccs []*grpc.ClientConn
	for range conns {
		cc, err := grpc.NewClient(sock, grpc.WithTransportCredentials(insecure.NewCredentials()))
		if err != nil {
			t.Fatal(err)
		}
		defer cc.Close()
		ccs = append(ccs, cc)
	}
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	admitted, refused := 0, 0
	for i := range streams {
		bs, err := gloadpb.NewLoaderClient(ccs[i%conns]).Batches(ctx)
		if err != nil {
			t.Fatal(err)
		}
		open := &gloadpb.Open{Dataset: "d", Seed: uint64(i), Policy: &gloadpb.BatchPolicy{BatchSize: 64}, Prefetch: 64,
			ClientId: fmt.Sprintf("hostile-%d", i)}
		if err := bs.Send(&gloadpb.ClientMessage{Msg: &gloadpb.ClientMessage_Open{Open: open}}); err != nil {
			t.Fatal(err)
		}
		// Read the answer to open only (Opened or the refusal); never a batch.
		m, err := bs.Recv()
		switch {
		case err == nil && m.GetOpened() != nil:
			admitted++
		case err != nil && strings.Contains(err.Error(), "--max-buffer-bytes"):
			refused++
		default:
			t.Fatalf("stream %d: %v, %v", i, m, err)
		}
	}
	// Let the server fill what it may, and take the largest RSS seen.
	peak := int64(0)
	for range 20 {
		time.Sleep(100 * time.Millisecond)
		peak = max(peak, rssBytes(t, cmd.Process.Pid))
	}
	bound := int64(200<<20) + budget
	if budget == 0 {
		bound = 200<<20 + 2<<30
	}
	t.Logf("hostile streams: %d admitted, %d refused; server RSS %.1f MiB before, peak %.1f MiB (bound %.0f MiB)",
		admitted, refused, float64(base)/(1<<20), float64(peak)/(1<<20), float64(bound)/(1<<20))
	if admitted == 0 || admitted+refused != streams {
		t.Fatalf("%d admitted, %d refused", admitted, refused)
	}
	if peak > bound {
		t.Fatalf("server RSS %d bytes under %d hostile streams, above the bound %d", peak, streams, bound)
	}
}
