package loader_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/gload/gload/loader"
	"github.com/gload/gload/loader/client"
	"github.com/gload/gload/loader/gpuwatch"
	"github.com/gload/gload/proto/gloadpb"
)

// TestWatchMarksClosedClients: a client whose connection dies under a full
// queue (as a client killed with -9 leaves it) is shown closed, not as
// "queue 16/16", as soon as the server has ended its stream; the same after
// a normal end of the stream.
func TestWatchMarksClosedClients(t *testing.T) {
	dir := t.TempDir()
	writeDataset(t, dir, genLengths(2000, 1, 50, 51), 2000, 100)
	ts := startServer(t, loader.Config{Datasets: map[string]string{"d": dir}, NoGPUWatch: true}, "unix")
	find := func(name string) (gpuwatch.ClientReport, bool) {
		for _, c := range ts.srv.Watcher().Report().Clients {
			if c.Client == name {
				return c, true
			}
		}
		return gpuwatch.ClientReport{}, false
	}
	for _, tc := range []struct {
		name string
		end  func(c *client.Client, s *client.Stream)
	}{
		{"connection dropped", func(c *client.Client, _ *client.Stream) { c.Close() }},
		{"stream closed", func(_ *client.Client, s *client.Stream) { s.Close() }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			id := "trainer-" + strings.ReplaceAll(tc.name, " ", "-")
			c := dial(t, ts.addr)
			s, err := c.Stream(t.Context(), &gloadpb.Open{Dataset: "d", Policy: &gloadpb.BatchPolicy{BatchSize: 4}, Prefetch: 16, ClientId: id},
				client.AckOnNext(false))
			if err != nil {
				t.Fatal(err)
			}
			for range 3 {
				if _, err := s.Next(t.Context()); err != nil { // step reports, no acks: the queue fills
					t.Fatal(err)
				}
			}
			waitFor(t, "full queue in the watch", func() (bool, string) {
				r, ok := find(id)
				return ok && r.QueueDepth == 16 && r.QueueCapacity == 16 && r.Steps > 0, fmt.Sprintf("%+v", r)
			})
			tc.end(c, s)
			waitFor(t, "closed client in the watch", func() (bool, string) {
				r, ok := find(id)
				return ok && r.Closed && r.QueueDepth == 0 && r.QueueCapacity == 0, fmt.Sprintf("%+v", r)
			})
			if text := gpuwatch.Format(ts.srv.Watcher().Report()); strings.Contains(text, "16/16") {
				t.Fatalf("report still shows a full queue:\n%s", text)
			}
		})
	}
}
