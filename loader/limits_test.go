package loader_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"google.golang.org/grpc/codes"

	"github.com/gload/gload/loader"
	"github.com/gload/gload/loader/client"
	"github.com/gload/gload/proto/gloadpb"
)

// TestMaxStreams: beyond --max-streams a stream is refused with
// RESOURCE_EXHAUSTED naming the limit; a closed stream frees its place.
func TestMaxStreams(t *testing.T) {
	dir := t.TempDir()
	writeDataset(t, dir, genLengths(500, 1, 40, 61), 500, 100)
	ts := startServer(t, loader.Config{Datasets: map[string]string{"d": dir}, MaxStreams: 3, NoGPUWatch: true}, "unix")
	c := dial(t, ts.addr)
	open := &gloadpb.Open{Dataset: "d", Policy: &gloadpb.BatchPolicy{BatchSize: 4}, Prefetch: 2}
	var held []*client.Stream
	for range 3 {
		s, err := c.Stream(t.Context(), open)
		if err != nil {
			t.Fatal(err)
		}
		held = append(held, s)
	}
	_, err := c.Stream(t.Context(), open)
	checkStatus(t, "Batches", err, codes.ResourceExhausted, []string{"--max-streams", "3 open batch streams"})
	held[0].Close()
	waitFor(t, "a place freed", func() (bool, string) { return ts.srv.Streams() == 2, fmt.Sprint(ts.srv.Streams(), " streams") })
	s, err := c.Stream(t.Context(), open)
	if err != nil {
		t.Fatalf("after a close: %v", err)
	}
	s.Close()
	for _, s := range held[1:] {
		s.Close()
	}
}

// TestMaxBufferBytes: streams reserve prefetch × batch bytes (gRPC) or their
// ring (shm); one that does not fit gets a smaller prefetch, one for which not
// a single batch fits is refused naming --max-buffer-bytes, and closing
// streams gives the bytes back.
func TestMaxBufferBytes(t *testing.T) {
	dir := t.TempDir()
	writeDataset(t, dir, genLengths(3000, 1000, 1024, 62), 3000, 100)
	for _, tr := range transports {
		t.Run(tr.name+"-"+tr.network, func(t *testing.T) {
			// One 16×1024 batch is 64 KiB of ids, a 128 KiB buffer (or slot) at most;
			// 4 MiB holds about 30 batches in flight.
			ts := startServer(t, loader.Config{Datasets: map[string]string{"d": dir}, MaxBufferBytes: 4 << 20,
				ShmDir: tr.shmDir(t), NoGPUWatch: true}, tr.network)
			c := dial(t, ts.addr)
			open := &gloadpb.Open{Dataset: "d", Policy: &gloadpb.BatchPolicy{BatchSize: 16}, Prefetch: 64, Transport: tr.transport}
			ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
			defer cancel()
			var held []*client.Stream
			granted := 0
			for {
				s, err := c.Stream(ctx, open, client.AckOnNext(false), client.Reports(false))
				if err != nil {
					checkStatus(t, "Batches", err, codes.ResourceExhausted, []string{"--max-buffer-bytes", "4194304"})
					break
				}
				held = append(held, s)
				p := int(s.Opened().Prefetch)
				if p < 1 || p > 64 {
					t.Fatalf("granted prefetch %d", p)
				}
				granted += p
				if len(held) > 40 {
					t.Fatal("more than 40 streams admitted under a 4 MiB budget")
				}
			}
			if held[0].Opened().Prefetch == 64 || granted < 16 {
				t.Fatalf("first stream granted %d of 64, %d batches in %d streams: the budget should cut at about 30",
					held[0].Opened().Prefetch, granted, len(held))
			}
			t.Logf("%d streams admitted, %d batches in flight granted", len(held), granted)
			for _, s := range held {
				s.Close()
			}
			waitFor(t, "reservations given back", func() (bool, string) { return ts.srv.Streams() == 0, fmt.Sprint(ts.srv.Streams()) })
			s, err := c.Stream(ctx, open)
			if err != nil || s.Opened().Prefetch != held[0].Opened().Prefetch {
				t.Fatalf("after closing: %v, %v", s, err)
			}
			s.Close()
		})
	}
}

// TestMaxStreamsPerConn: a connection's batch streams beyond
// --max-streams-per-conn are refused naming the limit; another connection
// still gets its own, and Health still answers on the full one.
func TestMaxStreamsPerConn(t *testing.T) {
	dir := t.TempDir()
	writeDataset(t, dir, genLengths(500, 1, 40, 63), 500, 100)
	ts := startServer(t, loader.Config{Datasets: map[string]string{"d": dir}, MaxStreamsPerConn: 2, NoGPUWatch: true}, "unix")
	c := dial(t, ts.addr)
	open := &gloadpb.Open{Dataset: "d", Policy: &gloadpb.BatchPolicy{BatchSize: 4}, Prefetch: 2}
	for range 2 {
		s, err := c.Stream(t.Context(), open)
		if err != nil {
			t.Fatal(err)
		}
		defer s.Close()
	}
	_, err := c.Stream(t.Context(), open)
	checkStatus(t, "Batches", err, codes.ResourceExhausted, []string{"--max-streams-per-conn", "2 batch streams"})
	if _, err := c.Health(t.Context()); err != nil {
		t.Fatalf("health on a full connection: %v", err)
	}
	other := dial(t, ts.addr)
	s, err := other.Stream(t.Context(), open)
	if err != nil {
		t.Fatalf("another connection: %v", err)
	}
	s.Close()
}
