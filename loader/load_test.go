package loader_test

import (
	"context"
	"fmt"
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/gload/gload/loader"
	"github.com/gload/gload/loader/client"
	"github.com/gload/gload/proto/gloadpb"
)

// waitFor polls cond until it holds or 20 s pass (goroutines of closed
// connections end asynchronously).
func waitFor(t *testing.T, what string, cond func() (bool, string)) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		ok, state := cond()
		if ok {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: still %s", what, state)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestConnectDisconnectNoLeak: 1000 streams opened and dropped at random
// points (half on fresh connections) leave no goroutine, stream or queue
// behind.
func TestConnectDisconnectNoLeak(t *testing.T) {
	dir := t.TempDir()
	writeDataset(t, dir, genLengths(2000, 10, 200, 13), 1000, 100)
	ts := startServer(t, loader.Config{Datasets: map[string]string{"d": dir}}, "unix")
	shared := dial(t, ts.addr)
	open := &gloadpb.Open{Dataset: "d", Policy: &gloadpb.BatchPolicy{BatchSize: 8}, Prefetch: 4, ClientId: "leaky"}
	// Warm up: one full stream, so lazily started goroutines exist.
	if _, _, _, err := pullAll(t.Context(), shared, open, -1); err != nil {
		t.Fatal(err)
	}
	runtime.GC()
	base := runtime.NumGoroutine()
	cycles := 1000
	if testing.Short() {
		cycles = 200
	}
	for i := range cycles {
		c := shared
		if i%2 == 1 {
			ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
			var err error
			c, err = client.Dial(ctx, ts.addr)
			cancel()
			if err != nil {
				t.Fatal(err)
			}
		}
		ctx, cancel := context.WithCancel(t.Context())
		s, err := c.Stream(ctx, open)
		if err != nil {
			t.Fatal(err)
		}
		for range i % 4 { // read 0-3 batches, keep the rest in flight
			b, err := s.Next(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if i%3 == 0 {
				b.Release()
			}
		}
		switch i % 3 {
		case 0:
			s.Close()
		case 1:
			cancel()
			s.Close()
		case 2: // drop the connection under the stream
			if c != shared {
				c.Close()
			}
			s.Close()
		}
		cancel()
		if c != shared {
			c.Close()
		}
	}
	waitFor(t, "server streams", func() (bool, string) {
		n := ts.srv.Streams()
		return n == 0, fmt.Sprintf("%d open", n)
	})
	waitFor(t, "client table", func() (bool, string) {
		for _, cs := range ts.srv.Clients() {
			if cs.Streams != 0 || cs.QueueDepth != 0 {
				return false, fmt.Sprintf("%+v", cs)
			}
		}
		return true, ""
	})
	waitFor(t, "goroutines", func() (bool, string) {
		runtime.GC()
		n := runtime.NumGoroutine()
		return n <= base+2, fmt.Sprintf("%d goroutines, baseline %d", n, base)
	})
}

// TestManyClients: 64 clients on their own connections pull whole epochs at
// the same time.
func TestManyClients(t *testing.T) {
	dir := t.TempDir()
	lengths := genLengths(4000, 1, 256, 14)
	writeDataset(t, dir, lengths, 2000, 200)
	ts := startServer(t, loader.Config{Datasets: map[string]string{"d": dir}}, "tcp")
	const n = 64
	var wg sync.WaitGroup
	errs := make(chan error, n)
	counts := make([]int, n)
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c := dial(t, ts.addr)
			open := &gloadpb.Open{Dataset: "d", Seed: uint64(i % 4), Policy: &gloadpb.BatchPolicy{BatchSize: 32},
				Rank: uint32(i % 8), WorldSize: 8, ClientId: fmt.Sprintf("c%d", i), Prefetch: uint32(1 + i%16)}
			bs, _, opened, err := pullAll(t.Context(), c, open, -1)
			if err == nil && uint64(len(bs)) != opened.Batches {
				err = fmt.Errorf("%d batches, opened said %d", len(bs), opened.Batches)
			}
			for _, g := range bs {
				if err == nil {
					err = checkBatch(g, lengths, 0, 0)
				}
			}
			counts[i] = len(bs)
			if err != nil {
				errs <- fmt.Errorf("client %d: %w", i, err)
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	for i := range n {
		if counts[i] != counts[0] {
			t.Fatalf("client %d got %d batches, client 0 %d", i, counts[i], counts[0])
		}
	}
}
