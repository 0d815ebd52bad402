package loader_test

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"

	"github.com/gload/gload/loader"
	"github.com/gload/gload/loader/gpuwatch"
	"github.com/gload/gload/proto/gloadpb"
)

// fakeClock is a settable clock safe for the server's goroutines.
type fakeClock struct{ ns atomic.Int64 }

func (c *fakeClock) set(t time.Time)      { c.ns.Store(t.UnixNano()) }
func (c *fakeClock) now() time.Time       { return time.Unix(0, c.ns.Load()).UTC() }
func newFakeClock(t time.Time) *fakeClock { c := &fakeClock{}; c.set(t); return c }

func readTrace(t testing.TB, name string) gpuwatch.Trace {
	t.Helper()
	f, err := os.Open(filepath.Join("gpuwatch", "testdata", name+".jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	tr, err := gpuwatch.ReadTrace(f)
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	return tr
}

// rawConn is a plain gRPC connection for the RPCs the Go client does not
// wrap (Watch, Report).
func rawConn(t testing.TB, addr string) gloadpb.LoaderClient {
	t.Helper()
	target := addr
	if !strings.HasPrefix(addr, "unix:") {
		target = "passthrough:///" + addr
	}
	cc, err := grpc.NewClient(target, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cc.Close() })
	return gloadpb.NewLoaderClient(cc)
}

// reportedSteps is how many step reports the server has recorded from the
// report-stream client id.
func reportedSteps(srv *loader.Server, id string) uint64 {
	for _, c := range srv.Clients() {
		if c.Dataset == "" && c.ClientID == id {
			return c.Reports
		}
	}
	return 0
}

// replayThroughServer replays tr the way gpuwatch.Simulate does, but sends
// every step record over the Report RPC of a real server (one stream per
// client) and waits until the server recorded it before going on; queue,
// not-ready and assignment records, which the server learns from batch
// streams, go to the watcher directly. It returns the server, the watcher's
// options and the clock.
func replayThroughServer(t *testing.T, tr gpuwatch.Trace, opts gpuwatch.Options) (*testServer, gloadpb.LoaderClient) {
	t.Helper()
	start, end := traceBounds(tr)
	clock := newFakeClock(start)
	src := gpuwatch.NewTraceSource(tr)
	src.Now = clock.now
	opts.Now = clock.now
	w := gpuwatch.New(src, opts)
	dir := t.TempDir()
	writeDataset(t, dir, genLengths(20, 1, 10, 1), 20, 10)
	ts := startServer(t, loader.Config{Datasets: map[string]string{"d": dir}, Watch: w}, "unix")
	api := rawConn(t, ts.addr)

	streams := map[string]gloadpb.Loader_ReportClient{}
	sent := map[string]uint64{}
	report := func(s gpuwatch.TraceStep) {
		rs, ok := streams[s.Client]
		if !ok {
			var err error
			if rs, err = api.Report(t.Context()); err != nil {
				t.Fatal(err)
			}
			if err := rs.Send(&gloadpb.ClientReport{ClientId: s.Client}); err != nil {
				t.Fatal(err)
			}
			streams[s.Client] = rs
		}
		var ct int64
		if !s.ClientTime.IsZero() {
			ct = s.ClientTime.UnixMicro()
		}
		if err := rs.Send(&gloadpb.ClientReport{Step: &gloadpb.StepReport{WaitUs: s.WaitUS, StepUs: s.StepUS, ClientTimeUnixUs: ct}}); err != nil {
			t.Fatal(err)
		}
		sent[s.Client]++
		for reportedSteps(ts.srv, s.Client) < sent[s.Client] {
			time.Sleep(50 * time.Microsecond)
		}
	}

	type event struct {
		t  time.Time
		do func()
	}
	var events []event
	for _, a := range tr.Assignments {
		events = append(events, event{a.Time, func() { w.SetClientDevice(a.Client, a.Device) }})
	}
	for _, q := range tr.Queues {
		events = append(events, event{q.Time, func() { w.SetQueue(q.Client, q.Depth, q.Capacity) }})
	}
	for _, n := range tr.NotReady {
		events = append(events, event{n.Time, func() { w.NotReady(n.Client) }})
	}
	for _, s := range tr.Steps {
		events = append(events, event{s.Time, func() { report(s) }})
	}
	// Same order as the trace's: by time, then assignments, queues,
	// not-ready, steps (each list is already in time order).
	sortEvents(events, func(e event) time.Time { return e.t })

	interval := time.Second
	next := 0
	for tick := start; ; tick = tick.Add(interval) {
		if tick.After(end) {
			tick = end
		}
		for ; next < len(events) && !events[next].t.After(tick); next++ {
			clock.set(events[next].t)
			events[next].do()
		}
		clock.set(tick)
		w.Poll()
		if !tick.Before(end) {
			break
		}
	}
	for name, rs := range streams {
		sum, err := rs.CloseAndRecv()
		if err != nil {
			t.Fatalf("report %s: %v", name, err)
		}
		if sum.Steps != sent[name] {
			t.Fatalf("report %s: summary says %d steps, %d sent", name, sum.Steps, sent[name])
		}
	}
	return ts, api
}

// sortEvents is a stable sort by time (the lists were appended in rank order).
func sortEvents[E any](es []E, at func(E) time.Time) {
	for i := 1; i < len(es); i++ {
		for j := i; j > 0 && at(es[j]).Before(at(es[j-1])); j-- {
			es[j], es[j-1] = es[j-1], es[j]
		}
	}
}

// traceBounds returns the times of a trace's first and last records.
func traceBounds(tr gpuwatch.Trace) (time.Time, time.Time) {
	start, end := tr.Recorded, tr.Recorded
	see := func(t time.Time) {
		if t.Before(start) {
			start = t
		}
		if t.After(end) {
			end = t
		}
	}
	for _, s := range tr.Samples {
		see(s.Sample.Time)
	}
	for _, f := range tr.Failures {
		see(f.Time)
	}
	for _, s := range tr.Steps {
		see(s.Time)
	}
	for _, q := range tr.Queues {
		see(q.Time)
	}
	for _, n := range tr.NotReady {
		see(n.Time)
	}
	for _, a := range tr.Assignments {
		see(a.Time)
	}
	return start, end
}

// TestWatchReplay replays recorded traces through a real server — steps
// over the Report RPC — and reads the verdict back over the Watch RPC: the
// report must be the one gpuwatch.Simulate computes from the trace alone.
func TestWatchReplay(t *testing.T) {
	tests := []struct {
		trace string
		state gpuwatch.State
	}{
		{"fed", gpuwatch.StateFed},
		{"starved_data", gpuwatch.StateStarvedData},
		{"launch_overhead", gpuwatch.StateStarvedNotLoader},
		{"multi2", gpuwatch.StateStarvedData},
		{"lost", gpuwatch.StateFed},
		{"nogpu", gpuwatch.StateNoGPU},
	}
	for _, tc := range tests {
		t.Run(tc.trace, func(t *testing.T) {
			tr := readTrace(t, tc.trace)
			want, err := gpuwatch.Simulate(tr, gpuwatch.Options{})
			if err != nil {
				t.Fatal(err)
			}
			if want.Verdict.State != tc.state {
				t.Fatalf("simulate: verdict %q, want %q", want.Verdict.State, tc.state)
			}
			_, api := replayThroughServer(t, tr, gpuwatch.Options{})
			ws, err := api.Watch(t.Context(), &gloadpb.WatchRequest{Once: true})
			if err != nil {
				t.Fatal(err)
			}
			m, err := ws.Recv()
			if err != nil {
				t.Fatal(err)
			}
			if _, err := ws.Recv(); !errors.Is(err, io.EOF) {
				t.Fatalf("once: second receive %v, want EOF", err)
			}
			if m.Verdict != string(tc.state) {
				t.Errorf("verdict %q, want %q", m.Verdict, tc.state)
			}
			wantJSON, _ := json.Marshal(want)
			if m.Json != string(wantJSON) {
				t.Errorf("report differs from the simulation:\n got %s\nwant %s", m.Json, wantJSON)
			}
			if m.Text != gpuwatch.Format(want) {
				t.Errorf("text:\n%s\nwant\n%s", m.Text, gpuwatch.Format(want))
			}
			if m.TimeUnixMs != want.Time.UnixMilli() {
				t.Errorf("time %d, want %d", m.TimeUnixMs, want.Time.UnixMilli())
			}
			var back gpuwatch.Report
			if err := json.Unmarshal([]byte(m.Json), &back); err != nil || back.Verdict.State != tc.state {
				t.Errorf("json does not decode into gpuwatch.Report: %v, %q", err, back.Verdict.State)
			}
		})
	}
}

// TestWatchMetrics checks the GPU gauges on /metrics after a replay.
func TestWatchMetrics(t *testing.T) {
	ts, _ := replayThroughServer(t, readTrace(t, "fed"), gpuwatch.Options{})
	rec := httptest.NewRecorder()
	ts.srv.MetricsHandler().ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
	text := rec.Body.String()
	for _, w := range []string{
		`gload_gpu_sm_utilization_ratio{gpu="0",quantile="0.5"`,
		`gload_gpu_sm_utilization_ratio{gpu="0",quantile="0.1"`,
		`gload_gpu_sm_low_time_ratio{gpu="0"`,
		`gload_gpu_memory_controller_utilization_ratio{gpu="0"`,
		`gload_gpu_power_watts{gpu="0"`,
		`gload_gpu_pcie_throughput_bytes_per_second{direction="rx",gpu="0"`,
		`gload_watch_verdict{verdict="fed"} 1`,
		`gload_watch_verdict{verdict="starved: data"} 0`,
		`gload_watch_client_wait_ratio{client="rank0"}`,
		`gload_open_streams{dataset="d"} 0`, // the server's own series are still there
	} {
		if !strings.Contains(text, w) {
			t.Errorf("metrics lack %q", w)
		}
	}
}

// TestWatchStream checks the streaming Watch RPC: reports keep coming at
// the asked interval, bad intervals are refused, and the stream ends when
// the server stops.
func TestWatchStream(t *testing.T) {
	dir := t.TempDir()
	writeDataset(t, dir, genLengths(20, 1, 10, 1), 20, 10)
	ts := startServer(t, loader.Config{Datasets: map[string]string{"d": dir}, NoGPUWatch: true}, "tcp")
	api := rawConn(t, ts.addr)

	bad, err := api.Watch(t.Context(), &gloadpb.WatchRequest{IntervalS: -1})
	if err == nil {
		_, err = bad.Recv()
	}
	if status.Code(err) != codes.InvalidArgument || !strings.Contains(err.Error(), "interval_s") {
		t.Fatalf("negative interval: %v", err)
	}

	ws, err := api.Watch(t.Context(), &gloadpb.WatchRequest{IntervalS: 0.1})
	if err != nil {
		t.Fatal(err)
	}
	for i := range 3 {
		m, err := ws.Recv()
		if err != nil {
			t.Fatalf("report %d: %v", i, err)
		}
		if m.Verdict != string(gpuwatch.StateNoGPU) || !strings.Contains(m.Text, "no GPU visible") {
			t.Fatalf("report %d: %q\n%s", i, m.Verdict, m.Text)
		}
		var r gpuwatch.Report
		if err := json.Unmarshal([]byte(m.Json), &r); err != nil || !strings.Contains(r.NoGPU, "--no-gpu-watch") {
			t.Fatalf("report %d json: %v, no_gpu %q", i, err, r.NoGPU)
		}
	}
	ts.stop(t)
	for {
		_, err := ws.Recv()
		if err == nil {
			continue
		}
		if status.Code(err) != codes.Unavailable {
			t.Fatalf("after stop: %v, want Unavailable", err)
		}
		break
	}
}

// TestReportErrors covers the Report RPC's refusals and its summary.
func TestReportErrors(t *testing.T) {
	dir := t.TempDir()
	writeDataset(t, dir, genLengths(20, 1, 10, 1), 20, 10)
	ts := startServer(t, loader.Config{Datasets: map[string]string{"d": dir}, NoGPUWatch: true}, "unix")
	api := rawConn(t, ts.addr)
	step := &gloadpb.StepReport{WaitUs: 10, StepUs: 90}
	tests := []struct {
		name string
		msgs []*gloadpb.ClientReport
		code codes.Code
		want string
	}{
		{"empty stream", nil, codes.InvalidArgument, "client_id"},
		{"no client id", []*gloadpb.ClientReport{{Step: step}}, codes.InvalidArgument, "client_id: required"},
		{"client id changes", []*gloadpb.ClientReport{{ClientId: "a", Step: step}, {ClientId: "b", Step: step}}, codes.InvalidArgument, "one report stream is one client"},
		{"too long", []*gloadpb.ClientReport{{ClientId: strings.Repeat("x", 2000)}}, codes.InvalidArgument, "client_id"},
		{"fine", []*gloadpb.ClientReport{{ClientId: "ok", Step: step}, {Step: step}, {}, {ClientId: "ok", Step: &gloadpb.StepReport{WaitUs: 1 << 62}}}, codes.OK, ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			rs, err := api.Report(t.Context())
			if err != nil {
				t.Fatal(err)
			}
			for _, m := range tc.msgs {
				if err := rs.Send(m); err != nil {
					break // the server already refused; CloseAndRecv says why
				}
			}
			sum, err := rs.CloseAndRecv()
			if status.Code(err) != tc.code || (tc.want != "" && !strings.Contains(err.Error(), tc.want)) {
				t.Fatalf("got %v, want %s with %q", err, tc.code, tc.want)
			}
			if tc.code == codes.OK && sum.Steps != 3 {
				t.Fatalf("summary: %d steps, want 3", sum.Steps)
			}
		})
	}
	var r gpuwatch.Report
	m := watchOnce(t, api)
	if err := json.Unmarshal([]byte(m.Json), &r); err != nil {
		t.Fatal(err)
	}
	var ok *gpuwatch.ClientReport
	for i := range r.Clients {
		if r.Clients[i].Client == "ok" {
			ok = &r.Clients[i]
		}
	}
	if ok == nil || ok.Steps != 3 || ok.WaitMS < 1e6 {
		t.Fatalf("watch clients: %+v", r.Clients)
	}
}

func watchOnce(t *testing.T, api gloadpb.LoaderClient) *gloadpb.WatchReport {
	t.Helper()
	ws, err := api.Watch(t.Context(), &gloadpb.WatchRequest{Once: true})
	if err != nil {
		t.Fatal(err)
	}
	m, err := ws.Recv()
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// TestWatchBatchStreams checks that batch streams feed the watch: their
// step reports, and their queues (sampled by the server).
func TestWatchBatchStreams(t *testing.T) {
	for _, tr := range transports {
		t.Run(tr.name+"-"+tr.network, func(t *testing.T) {
			dir := t.TempDir()
			writeDataset(t, dir, genLengths(400, 1, 60, 3), 400, 50)
			ts := startServer(t, loader.Config{Datasets: map[string]string{"d": dir}, NoGPUWatch: true, ShmDir: tr.shmDir(t)}, tr.network)
			c := dial(t, ts.addr)
			open := &gloadpb.Open{Dataset: "d", Policy: &gloadpb.BatchPolicy{BatchSize: 4}, Transport: tr.transport, ClientId: "trainer", Prefetch: 4}
			ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
			defer cancel()
			s, err := c.Stream(ctx, open)
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			api := rawConn(t, ts.addr)
			// Read a few batches, then hold the stream open until the watch
			// has seen the steps and a queue sample.
			for range 10 {
				b, err := s.Next(ctx)
				if err != nil {
					t.Fatal(err)
				}
				b.Release()
			}
			var cr gpuwatch.ClientReport
			for ctx.Err() == nil {
				var r gpuwatch.Report
				if err := json.Unmarshal([]byte(watchOnce(t, api).Json), &r); err != nil {
					t.Fatal(err)
				}
				if len(r.Clients) == 1 {
					cr = r.Clients[0]
				}
				if cr.Steps >= 5 && cr.QueueCapacity > 0 {
					break
				}
				time.Sleep(20 * time.Millisecond)
			}
			if cr.Client != "trainer" || cr.Steps < 5 || cr.QueueCapacity <= 0 || cr.QueueCapacity > 4 {
				t.Fatalf("watch client: %+v", cr)
			}
		})
	}
}
