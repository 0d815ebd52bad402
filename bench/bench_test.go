package bench_test

import (
	"bytes"
	"context"
	"encoding/xml"
	"errors"
	"fmt"
	"image/png"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gload/gload/bench"
	"github.com/gload/gload/loader"
	"github.com/gload/gload/loader/dataset"
	"github.com/gload/gload/loader/gpuwatch"
	"github.com/gload/gload/proto/gloadpb"
)

// helperEnv makes the test binary a step-reporting "training command":
// GLOAD_BENCH_HELPER=ADDR,CLIENT,STEPS,WAIT_US,STEP_US,EXIT.
const helperEnv = "GLOAD_BENCH_HELPER"

func TestMain(m *testing.M) {
	if spec := os.Getenv(helperEnv); spec != "" {
		os.Exit(helper(spec))
	}
	os.Exit(m.Run())
}

// helper reports STEPS steps over the Report RPC, sleeping each step's
// wait+step time, prints a line, and exits with EXIT.
func helper(spec string) int {
	f := strings.Split(spec, ",")
	if len(f) != 6 {
		fmt.Fprintln(os.Stderr, "helper: bad spec", spec)
		return 2
	}
	steps, _ := strconv.Atoi(f[2])
	wait, _ := strconv.Atoi(f[3])
	step, _ := strconv.Atoi(f[4])
	code, _ := strconv.Atoi(f[5])
	api, conn, err := bench.DialWatch(f[0], "")
	if err != nil {
		fmt.Fprintln(os.Stderr, "helper:", err)
		return 2
	}
	defer conn.Close()
	rs, err := api.Report(context.Background())
	if err == nil {
		err = rs.Send(&gloadpb.ClientReport{ClientId: f[1]})
	}
	for i := 0; err == nil && i < steps; i++ {
		time.Sleep(time.Duration(wait+step) * time.Microsecond)
		err = rs.Send(&gloadpb.ClientReport{Step: &gloadpb.StepReport{Seq: uint64(i), WaitUs: uint64(wait), StepUs: uint64(step)}})
	}
	if err == nil {
		_, err = rs.CloseAndRecv()
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "helper:", err)
		return 2
	}
	fmt.Println("helper: trained", steps, "steps")
	return code
}

// writeDataset writes n rows of 1..60 tokens.
func writeDataset(t testing.TB, dir string, n int) {
	t.Helper()
	opts := dataset.WriterOptions{RowsPerBatch: 64}
	w, err := dataset.CreateShard(dir, 0, opts)
	if err != nil {
		t.Fatal(err)
	}
	for i := range n {
		ids := make([]int32, 1+i%60)
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

// serve starts an in-process server on a unix socket and returns its
// address.
func serve(t testing.TB, cfg loader.Config) (string, *loader.Server) {
	t.Helper()
	if cfg.Datasets == nil {
		dir := t.TempDir()
		writeDataset(t, dir, 2000)
		cfg.Datasets = map[string]string{"d": dir}
	}
	if cfg.ShmDir == "" {
		cfg.ShmDir = t.TempDir()
	}
	cfg.NoGPUWatch = cfg.NoGPUWatch || cfg.Watch == nil
	srv, err := loader.NewServer(cfg)
	if err != nil {
		t.Fatal(err)
	}
	addr := "unix://" + filepath.Join(t.TempDir(), "s.sock")
	lis, err := loader.Listen(addr, loader.ListenOptions{})
	if err != nil {
		srv.Close()
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ctx, lis) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("serve: %v", err)
		}
	})
	return addr, srv
}

func TestFeed(t *testing.T) {
	addr, _ := serve(t, loader.Config{})
	var progress bytes.Buffer
	res, err := bench.Feed(t.Context(), bench.FeedOptions{
		Addr: addr, Dataset: "d", BatchSize: 8, Transports: []string{"grpc", "shm"}, Clients: []int{1, 2},
		Prefetch: 4, Duration: 200 * time.Millisecond, Consume: time.Millisecond, Progress: &progress,
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(res) != 4 {
		t.Fatalf("%d results, want 4", len(res))
	}
	for _, r := range res {
		name := fmt.Sprintf("%s×%d", r.Transport, r.Clients)
		c := r.Capacity
		if r.Skipped != "" || c.Batches == 0 || c.Tokens == 0 || c.Cells < c.Tokens || c.Bytes < 4*c.Cells ||
			c.BatchesPerS <= 0 || c.GBPerS <= 0 || c.NextP50US <= 0 || c.NextP99US < c.NextP50US || c.NextMaxUS < c.NextP99US {
			t.Errorf("%s: capacity %+v (skipped %q)", name, c, r.Skipped)
		}
		cr := r.Consume
		if cr == nil || cr.Batches == 0 || cr.StepMS != 1 || cr.DemandPerS != float64(r.Clients)*1000 ||
			cr.Headroom <= 0 || cr.WaitShare < 0 || cr.WaitShare > 1 {
			t.Errorf("%s: consume %+v", name, cr)
		}
		// The consuming run cannot go faster than its steps allow.
		if cr != nil && cr.BatchesPerS > cr.DemandPerS*1.05 {
			t.Errorf("%s: consumed %.0f batches/s with a demand of %.0f", name, cr.BatchesPerS, cr.DemandPerS)
		}
	}
	if !strings.Contains(progress.String(), "grpc × 2") || !strings.Contains(progress.String(), "headroom") {
		t.Errorf("progress:\n%s", progress.String())
	}
}

func TestFeedEpochs(t *testing.T) {
	// 40 rows in batches of 8: each client's epoch is a handful of batches,
	// so a run goes through many epochs (streams).
	dir := t.TempDir()
	writeDataset(t, dir, 40)
	addr, _ := serve(t, loader.Config{Datasets: map[string]string{"d": dir}})
	res, err := bench.Feed(t.Context(), bench.FeedOptions{Addr: addr, Dataset: "d", BatchSize: 8, Duration: 150 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	if res[0].Capacity.Streams < 3 {
		t.Fatalf("streams %d, want several epochs", res[0].Capacity.Streams)
	}
	// More clients than batches in an epoch: a client's share is empty.
	_, err = bench.Feed(t.Context(), bench.FeedOptions{Addr: addr, Dataset: "d", BatchSize: 8, Clients: []int{64}, Duration: 100 * time.Millisecond})
	if !errors.Is(err, bench.ErrDatasetSmall) {
		t.Fatalf("64 clients on 5 batches: %v", err)
	}
}

func TestFeedOptions(t *testing.T) {
	tests := []struct {
		name string
		o    bench.FeedOptions
	}{
		{"no addr", bench.FeedOptions{Dataset: "d"}},
		{"no dataset", bench.FeedOptions{Addr: "unix:///x"}},
		{"transport", bench.FeedOptions{Addr: "unix:///x", Dataset: "d", Transports: []string{"udp"}}},
		{"clients", bench.FeedOptions{Addr: "unix:///x", Dataset: "d", Clients: []int{0}}},
		{"duration", bench.FeedOptions{Addr: "unix:///x", Dataset: "d", Duration: -time.Second}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := bench.Feed(t.Context(), tc.o); !errors.Is(err, bench.ErrOptions) {
				t.Fatalf("got %v, want ErrOptions", err)
			}
		})
	}
}

func TestParseLists(t *testing.T) {
	tests := []struct {
		in      string
		clients []int
		ok      bool
	}{
		{"1,4,8", []int{1, 4, 8}, true},
		{" 2 ", []int{2}, true},
		{"0", nil, false},
		{"1,,2", nil, false},
		{"x", nil, false},
		{"5000", nil, false},
	}
	for _, tc := range tests {
		got, err := bench.ParseClients(tc.in)
		if (err == nil) != tc.ok || fmt.Sprint(got) != fmt.Sprint(tc.clients) {
			t.Errorf("ParseClients(%q) = %v, %v", tc.in, got, err)
		}
	}
	tr, err := bench.ParseTransports("SHM, grpc,shm")
	if err != nil || fmt.Sprint(tr) != "[shm grpc]" {
		t.Errorf("ParseTransports: %v, %v", tr, err)
	}
	if _, err := bench.ParseTransports("grpc,tcp"); !errors.Is(err, bench.ErrOptions) {
		t.Errorf("ParseTransports(tcp): %v", err)
	}
}

func FuzzParseLists(f *testing.F) {
	for _, s := range []string{"1,4,8", "grpc,shm", "", ",", "99999999999999999999", "-1"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		if ns, err := bench.ParseClients(s); err == nil {
			for _, n := range ns {
				if n < 1 || n > 4096 {
					t.Fatalf("ParseClients(%q) gave %d", s, n)
				}
			}
		}
		if ts, err := bench.ParseTransports(s); err == nil && len(ts) == 0 {
			t.Fatalf("ParseTransports(%q): empty without error", s)
		}
	})
}

// fakeGPU is a Source with one device whose SM utilisation is `sm` and
// memory-controller utilisation 10%, sampled every 50 ms of real time.
type fakeGPU struct {
	mu    sync.Mutex
	sm    float64
	polls int
}

func (f *fakeGPU) Devices() ([]gpuwatch.DeviceInfo, error) {
	return []gpuwatch.DeviceInfo{{Index: 0, Name: "Fake GPU", UUID: "GPU-fake", MemoryTotal: 1 << 30}}, nil
}

func (f *fakeGPU) Sample(i int, since time.Time) (gpuwatch.DeviceSample, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.polls++
	now := time.Now()
	s := gpuwatch.DeviceSample{Time: now, MemUsed: 1 << 20, PCIeRx: 1e6, PCIeTx: 2e6, PowerW: 300, SMClockMHz: 1980}
	from := now.Add(-2 * time.Second).Truncate(50 * time.Millisecond)
	for t := from; !t.After(now); t = t.Add(50 * time.Millisecond) {
		if t.After(since) {
			s.SM = append(s.SM, gpuwatch.Point{Time: t, Value: f.sm})
			s.MemCtl = append(s.MemCtl, gpuwatch.Point{Time: t, Value: 10})
		}
	}
	return s, nil
}

func (f *fakeGPU) Close() error { return nil }

// TestRunFailingCommand: without a GPU the command still runs, its exit
// status comes back, and the report says "no GPU visible".
func TestRunFailingCommand(t *testing.T) {
	var out, log bytes.Buffer
	res, err := bench.Run(t.Context(), bench.RunOptions{
		Command: []string{"sh", "-c", "echo hello; exit 3"}, Stdout: &out, Stderr: &out, Log: &log,
		Source: gpuwatch.Unavailable(errors.New("no driver here")), Interval: 50 * time.Millisecond,
	})
	if err != nil {
		t.Fatal(err)
	}
	if res.ExitCode != 3 || res.Error != "" || out.String() != "hello\n" {
		t.Fatalf("exit %d (%q), output %q", res.ExitCode, res.Error, out.String())
	}
	if res.Report.Verdict.State != gpuwatch.StateNoGPU || !strings.Contains(res.NoGPU, "no driver here") ||
		res.Span.Basis != bench.SpanWholeRun {
		t.Fatalf("verdict %q, no GPU %q, span %+v", res.Report.Verdict.State, res.NoGPU, res.Span)
	}
	text := res.Format()
	for _, w := range []string{"exit 3", "no GPU visible", "whole run", "sh -c echo hello; exit 3"} {
		if !strings.Contains(text, w) {
			t.Errorf("report lacks %q:\n%s", w, text)
		}
	}
	if !strings.Contains(log.String(), "no GPU visible") {
		t.Errorf("log: %q", log.String())
	}

	res, err = bench.Run(t.Context(), bench.RunOptions{Command: []string{"/nonexistent/train"}, Source: gpuwatch.Unavailable(nil)})
	if err != nil || res.ExitCode != 127 || !strings.Contains(res.Error, "nonexistent") {
		t.Fatalf("missing command: %+v, %v", res, err)
	}
	res, err = bench.Run(t.Context(), bench.RunOptions{Command: []string{"sh", "-c", "kill -TERM $$"}, Source: gpuwatch.Unavailable(nil)})
	if err != nil || res.ExitCode != 128+15 {
		t.Fatalf("killed command: exit %d, %v", res.ExitCode, err)
	}
	if _, err := bench.Run(t.Context(), bench.RunOptions{}); !errors.Is(err, bench.ErrOptions) {
		t.Fatalf("no command: %v", err)
	}
}

// TestRunCancel: when ctx ends the command gets SIGINT.
func TestRunCancel(t *testing.T) {
	ctx, cancel := context.WithCancel(t.Context())
	var out syncBuffer
	go func() {
		for !strings.Contains(out.String(), "ready") {
			time.Sleep(5 * time.Millisecond)
		}
		cancel()
	}()
	res, err := bench.Run(ctx, bench.RunOptions{
		Command: []string{"sh", "-c", "trap 'exit 42' INT; echo ready; while :; do sleep 0.01; done"},
		Stdout:  &out, Source: gpuwatch.Unavailable(nil), KillAfter: 5 * time.Second,
	})
	if err != nil || res.ExitCode != 42 {
		t.Fatalf("exit %d, %v", res.ExitCode, err)
	}
}

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

// TestRunWithServer wraps a "training command" that reports its steps to a
// real server; bench run reads them back over the Watch RPC and judges the
// span in which they came.
func TestRunWithServer(t *testing.T) {
	if testing.Short() {
		t.Skip("runs a 2 s helper process")
	}
	tests := []struct {
		name           string
		sm             float64
		waitUS, stepUS int
		state          gpuwatch.State
	}{
		{"starved", 20, 8000, 12000, gpuwatch.StateStarvedData},
		{"fed", 95, 100, 19900, gpuwatch.StateFed},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			addr, _ := serve(t, loader.Config{WatchOptions: gpuwatch.Options{Window: 10 * time.Minute}})
			exe, err := os.Executable()
			if err != nil {
				t.Fatal(err)
			}
			t.Setenv(helperEnv, fmt.Sprintf("%s,trainer,60,%d,%d,0", addr, tc.waitUS, tc.stepUS))
			var out bytes.Buffer
			var trace bytes.Buffer
			gpu := &fakeGPU{sm: tc.sm}
			res, err := bench.Run(t.Context(), bench.RunOptions{
				Command: []string{exe, "-test.run=^$"}, Stdout: &out, Stderr: &out, Addr: addr, Source: gpu,
				Interval: 200 * time.Millisecond, WatchInterval: 100 * time.Millisecond, SkipSteps: 5, Trace: &trace,
			})
			if err != nil {
				t.Fatal(err)
			}
			if res.ExitCode != 0 || !strings.Contains(out.String(), "trained 60 steps") {
				t.Fatalf("exit %d, output %q", res.ExitCode, out.String())
			}
			sp := res.Span
			if sp.Basis != bench.SpanClientSteps || sp.Steps+sp.Skipped != 60 || sp.Skipped > 5 || sp.Seconds <= 0 ||
				sp.FromS < 0 || sp.ToS > res.Seconds {
				t.Fatalf("span %+v (run %.2f s)", sp, res.Seconds)
			}
			if res.Report.Verdict.State != tc.state {
				t.Fatalf("verdict %q, want %q\n%s", res.Report.Verdict.State, tc.state, res.Format())
			}
			if len(res.Report.Clients) != 1 {
				t.Fatalf("clients %+v", res.Report.Clients)
			}
			c := res.Report.Clients[0]
			wantShare := float64(tc.waitUS) / float64(tc.waitUS+tc.stepUS)
			if c.Client != "trainer" || c.Steps != sp.Steps || c.WaitShare < wantShare-0.01 || c.WaitShare > wantShare+0.01 {
				t.Fatalf("client %+v, want wait share %.3f over %d steps", c, wantShare, sp.Steps)
			}
			d := res.Report.Devices[0]
			if d.SMMedian != tc.sm || d.PowerW != 300 || d.Samples == 0 {
				t.Fatalf("device %+v", d)
			}
			if len(res.SM) != 1 || len(res.SM[0].Points) == 0 || len(res.Feed) == 0 {
				t.Fatalf("series: %d GPUs, feed %d points", len(res.SM), len(res.Feed))
			}
			if _, err := gpuwatch.ReadTrace(&trace); err != nil {
				t.Fatalf("trace: %v", err)
			}
			for _, w := range []string{"judged: the clients' steps", "trainer", string(tc.state), "the server's own verdict"} {
				if !strings.Contains(res.Format(), w) {
					t.Errorf("report lacks %q:\n%s", w, res.Format())
				}
			}
		})
	}
}

// TestRunServerDown: an --addr nobody answers at is reported, the command
// still runs and the whole run is judged.
func TestRunServerDown(t *testing.T) {
	res, err := bench.Run(t.Context(), bench.RunOptions{
		Command: []string{"sh", "-c", "sleep 1.2"}, Addr: "unix://" + filepath.Join(t.TempDir(), "none.sock"),
		Source: &fakeGPU{sm: 50}, Interval: 100 * time.Millisecond,
	})
	if err != nil || res.ExitCode != 0 {
		t.Fatal(res, err)
	}
	if len(res.ServerErrors) == 0 || res.Span.Basis != bench.SpanWholeRun {
		t.Fatalf("server errors %q, span %+v", res.ServerErrors, res.Span)
	}
	if res.Report.Verdict.State != gpuwatch.StateStarvedNotLoader {
		t.Fatalf("verdict %q", res.Report.Verdict.State)
	}
}

func TestPlots(t *testing.T) {
	res := &bench.RunResult{
		Command: []string{"python", "train.py", "--x", "<&>"}, Seconds: 12,
		Span: bench.Span{Basis: bench.SpanClientSteps, FromS: 2, ToS: 10},
		SM: []bench.Series{
			{GPU: 0, Points: []bench.SeriesPoint{{T: 0.5, V: 10}, {T: 1.5, V: 90}, {T: 2.5, V: 95}, {T: 11.5, V: 20}}},
			{GPU: 1, Points: []bench.SeriesPoint{{T: 0.5, V: 50}}},
		},
		Feed: []bench.SeriesPoint{{T: 2.5, V: 20}, {T: 3.5, V: 21.5}, {T: 9.5, V: 0}},
	}
	res.Report.Verdict.State = gpuwatch.StateFed
	var svg bytes.Buffer
	if err := bench.WriteSVG(&svg, res); err != nil {
		t.Fatal(err)
	}
	dec := xml.NewDecoder(bytes.NewReader(svg.Bytes()))
	polylines := 0
	for {
		tok, err := dec.Token()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatalf("svg is not well-formed XML: %v\n%s", err, svg.String())
		}
		if se, ok := tok.(xml.StartElement); ok && se.Name.Local == "polyline" {
			polylines++
		}
	}
	if polylines != 3 || !strings.Contains(svg.String(), "&lt;&amp;&gt;") || !strings.Contains(svg.String(), "judged span") {
		t.Fatalf("svg: %d polylines\n%s", polylines, svg.String())
	}
	var pngBuf bytes.Buffer
	if err := bench.WritePNG(&pngBuf, res); err != nil {
		t.Fatal(err)
	}
	img, err := png.Decode(&pngBuf)
	if err != nil {
		t.Fatal(err)
	}
	if b := img.Bounds(); b.Dx() != 960 || b.Dy() != 420 {
		t.Fatalf("png %v", b)
	}
	// Empty results draw too.
	empty := &bench.RunResult{Command: []string{"true"}}
	if err := bench.WriteSVG(io.Discard, empty); err != nil {
		t.Fatal(err)
	}
	if err := bench.WritePNG(io.Discard, empty); err != nil {
		t.Fatal(err)
	}
}
