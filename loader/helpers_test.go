package loader_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/gload/gload/loader"
	"github.com/gload/gload/loader/client"
	"github.com/gload/gload/loader/dataset"
	"github.com/gload/gload/proto/gloadpb"
)

// tokenOf is the id of token j of row i in test datasets: every token says
// where it comes from, so a test can check each batch cell.
func tokenOf(i, j int) int32 { return int32(i*4096 + j + 1) }

// genLengths makes n lengths in [lo, hi].
func genLengths(n, lo, hi int, seed uint64) []int {
	rng := rand.New(rand.NewPCG(seed, 7))
	out := make([]int, n)
	for i := range out {
		out[i] = lo + rng.IntN(hi-lo+1)
	}
	return out
}

// writeDataset writes a dataset whose row i has lengths[i] tokens
// tokenOf(i, 0..), in shards of perShard rows and record batches of
// rowsPerBatch rows.
func writeDataset(t testing.TB, dir string, lengths []int, perShard, rowsPerBatch int) {
	t.Helper()
	opts := dataset.WriterOptions{RowsPerBatch: rowsPerBatch, TokenizerHash: "test"}
	var infos []dataset.ShardInfo
	ids := make([]int32, 0, 4096)
	for start := 0; start < len(lengths); start += perShard {
		w, err := dataset.CreateShard(dir, len(infos), opts)
		if err != nil {
			t.Fatal(err)
		}
		for i := start; i < min(start+perShard, len(lengths)); i++ {
			ids = ids[:0]
			for j := range lengths[i] {
				ids = append(ids, tokenOf(i, j))
			}
			if err := w.Append(ids, nil); err != nil {
				t.Fatal(err)
			}
		}
		info, err := w.Close()
		if err != nil {
			t.Fatal(err)
		}
		infos = append(infos, info)
	}
	if err := dataset.Finalize(dir, infos, opts); err != nil {
		t.Fatal(err)
	}
}

// testServer is a running server on a real socket.
type testServer struct {
	srv    *loader.Server
	addr   string
	cancel context.CancelFunc
	done   chan error
}

// startServer serves cfg on a unix socket in a temporary directory
// (network "unix") or on 127.0.0.1:0 ("tcp"), stopped at cleanup.
func startServer(t testing.TB, cfg loader.Config, network string) *testServer {
	t.Helper()
	srv, err := loader.NewServer(cfg)
	if err != nil {
		t.Fatal(err)
	}
	addr := "127.0.0.1:0"
	if network == "unix" {
		addr = "unix://" + filepath.Join(t.TempDir(), "gload.sock")
	}
	lis, err := loader.Listen(addr, loader.ListenOptions{})
	if err != nil {
		srv.Close()
		t.Fatal(err)
	}
	if network != "unix" {
		addr = lis.Addr().(*net.TCPAddr).String()
	}
	ctx, cancel := context.WithCancel(context.Background())
	ts := &testServer{srv: srv, addr: addr, cancel: cancel, done: make(chan error, 1)}
	go func() { ts.done <- srv.Serve(ctx, lis) }()
	t.Cleanup(func() { ts.stop(t) })
	return ts
}

func (ts *testServer) stop(t testing.TB) {
	t.Helper()
	if ts.cancel == nil {
		return
	}
	ts.cancel()
	ts.cancel = nil
	if err := <-ts.done; err != nil {
		t.Errorf("Serve: %v", err)
	}
}

func dial(t testing.TB, addr string, opts ...client.Option) *client.Client {
	t.Helper()
	// A guard, not an expectation: under -race and load a server busy admitting another user's 1100 connections
	// (TestIdleConnsDoNotLockOut) took more than 10 s to accept this one.
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	c, err := client.Dial(ctx, addr, opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// got is one received batch, copied.
type got struct {
	seq, global, rankStep uint64
	rows, length          int
	ids                   []int32
	lengths               []int32
	index                 []int64
	pos, cu               []int32
}

func copyBatch(b *client.Batch) got {
	return got{
		seq: b.Seq, global: b.GlobalIndex, rankStep: b.RankStep, rows: b.Rows, length: b.Length,
		ids: slices.Clone(b.InputIDs()), lengths: slices.Clone(b.Lengths()), index: slices.Clone(b.Index()),
		pos: slices.Clone(b.PositionIDs()), cu: slices.Clone(b.CuSeqlens()),
	}
}

// pullAll opens a stream and reads it to the end (or limit batches when
// limit >= 0), releasing every batch.
func pullAll(ctx context.Context, c *client.Client, open *gloadpb.Open, limit int) ([]got, *gloadpb.ResumeState, *gloadpb.Opened, error) {
	s, err := c.Stream(ctx, open)
	if err != nil {
		return nil, nil, nil, err
	}
	defer s.Close()
	var out []got
	for limit < 0 || len(out) < limit {
		b, err := s.Next(ctx)
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return out, s.State(), s.Opened(), err
		}
		out = append(out, copyBatch(b))
		b.Release()
	}
	return out, s.State(), s.Opened(), nil
}

// checkBatch verifies every cell of a non-packed batch against tokenOf.
func checkBatch(g got, lengths []int, maxLen int, pad int32) error {
	if len(g.ids) != g.rows*g.length || len(g.lengths) != g.rows || len(g.index) != g.rows {
		return fmt.Errorf("batch %d: buffer sizes %d/%d/%d for %d×%d", g.global, len(g.ids), len(g.lengths), len(g.index), g.rows, g.length)
	}
	for r := range g.rows {
		row := int(g.index[r])
		want := lengths[row]
		if maxLen > 0 {
			want = min(want, maxLen)
		}
		want = min(want, g.length)
		if int(g.lengths[r]) != want {
			return fmt.Errorf("batch %d row %d (dataset row %d): length %d, want %d", g.global, r, row, g.lengths[r], want)
		}
		for j := range g.length {
			v := g.ids[r*g.length+j]
			w := pad
			if j < want {
				w = tokenOf(row, j)
			}
			if v != w {
				return fmt.Errorf("batch %d row %d col %d: token %d, want %d", g.global, r, j, v, w)
			}
		}
	}
	return nil
}

// consumers runs world×workers streams concurrently and returns each
// rank's batches in rank order (worker round-robin, as torch reads them).
func consumers(t *testing.T, c *client.Client, base *gloadpb.Open, world, workers int) [][]got {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	per := make([][][]got, world)
	var mu sync.Mutex
	var wg sync.WaitGroup
	errs := make(chan error, world*workers)
	for r := range world {
		per[r] = make([][]got, workers)
		for w := range workers {
			wg.Add(1)
			go func() {
				defer wg.Done()
				open := cloneOpen(base)
				open.Rank, open.WorldSize, open.Worker, open.NumWorkers = uint32(r), uint32(world), uint32(w), uint32(workers)
				open.ClientId = fmt.Sprintf("rank%d-w%d", r, w)
				bs, _, _, err := pullAll(ctx, c, open, -1)
				if err != nil {
					errs <- fmt.Errorf("rank %d worker %d: %w", r, w, err)
					return
				}
				mu.Lock()
				per[r][w] = bs
				mu.Unlock()
			}()
		}
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	out := make([][]got, world)
	for r := range world {
		for i := 0; ; i++ {
			w := i % workers
			k := i / workers
			if k >= len(per[r][w]) {
				break
			}
			out[r] = append(out[r], per[r][w][k])
		}
	}
	return out
}

func cloneOpen(o *gloadpb.Open) *gloadpb.Open { return proto.Clone(o).(*gloadpb.Open) }

// transport is one way of running the integration suite: a listener network
// and a batch transport.
type transport struct {
	name      string
	network   string // "unix" or "tcp"
	transport gloadpb.Transport
}

// transports are the combinations the integration suite runs against.
var transports = []transport{
	{"grpc", "unix", gloadpb.Transport_TRANSPORT_GRPC},
	{"grpc", "tcp", gloadpb.Transport_TRANSPORT_GRPC},
	{"shm", "unix", gloadpb.Transport_TRANSPORT_SHM},
}

// shmDir returns a fresh ring directory for shm runs (checked empty at
// cleanup: every stream removes its ring) and "" otherwise.
func (tr transport) shmDir(t testing.TB) string {
	t.Helper()
	if tr.transport != gloadpb.Transport_TRANSPORT_SHM {
		return ""
	}
	dir := t.TempDir()
	t.Cleanup(func() { checkNoRings(t, dir) })
	return dir
}

// checkNoRings fails if dir holds any file (a ring left behind).
func checkNoRings(t testing.TB, dir string) {
	t.Helper()
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range ents {
		t.Errorf("ring left behind: %s", filepath.Join(dir, e.Name()))
	}
}
