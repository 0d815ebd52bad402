package bench

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"slices"
	"strings"
	"sync"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/gload/gload/loader/access"
	"github.com/gload/gload/loader/client"
	"github.com/gload/gload/loader/gpuwatch"
	"github.com/gload/gload/proto/gloadpb"
)

// Bounds of what a serverWatch keeps.
const (
	maxServerErrors = 5
	maxStepRecords  = 4 << 20
)

// serverWatch reads a server's Watch stream and keeps, per report, the
// clients' figures (cumulative over the server's window).
type serverWatch struct {
	addr     string
	interval time.Duration
	now      func() time.Time
	log      io.Writer

	mu   sync.Mutex
	pts  []watchPoint
	errs []string
	// last is the latest report; lastStepReport the latest one in which a
	// client's step count grew.
	last, lastStepReport *gpuwatch.Report
}

// watchPoint is one report: when it arrived and each client's figures.
type watchPoint struct {
	at      time.Time
	clients map[string]clientFig
}

// clientFig is a client's figures in one report.
type clientFig struct {
	steps, notReady, depth, capacity int
	waitMS, stepMS                   float64
	silent                           bool
}

func newServerWatch(addr string, interval time.Duration, now func() time.Time, log io.Writer) *serverWatch {
	return &serverWatch{addr: addr, interval: interval, now: now, log: log}
}

// grpcTarget turns a gload address into a gRPC target.
func grpcTarget(addr string) (string, error) {
	if strings.HasPrefix(addr, "unix:") {
		if strings.HasPrefix(addr, "unix://") && !strings.HasPrefix(addr, "unix:///") {
			return "", fmt.Errorf("%w: address %q: unix:// needs an absolute path (unix:///path.sock)", ErrOptions, addr)
		}
		return addr, nil
	}
	if addr == "" || strings.Contains(addr, "://") || !strings.Contains(addr, ":") {
		return "", fmt.Errorf("%w: address %q: want unix:///path.sock or host:port", ErrOptions, addr)
	}
	return "passthrough:///" + addr, nil
}

// DialWatch connects to addr's API (plaintext: unix sockets and loopback)
// for the Watch and Report RPCs, which the batch client does not wrap. It
// sends token as the bearer token ("": $GLOAD_AUTH_TOKEN or the content of
// $GLOAD_AUTH_TOKEN_FILE, when set).
func DialWatch(addr, token string) (gloadpb.LoaderClient, io.Closer, error) {
	target, err := grpcTarget(addr)
	if err != nil {
		return nil, nil, err
	}
	if token == "" {
		if token, err = access.EnvTokenValue(); err != nil {
			return nil, nil, fmt.Errorf("%w: %w", ErrOptions, err)
		}
	}
	trust, err := access.TrustFromEnv()
	if err != nil {
		return nil, nil, fmt.Errorf("%w: %w", ErrOptions, err)
	}
	// The same checks as client.Dial: the socket's directory, owner and peer
	// credentials (a loopback TCP server's uid) before anything is sent.
	cc, err := grpc.NewClient(target, grpc.WithTransportCredentials(insecure.NewCredentials()), client.AuthDialOption(token),
		grpc.WithContextDialer(access.NewDialer(trust).Dial))
	if err != nil {
		return nil, nil, fmt.Errorf("dial %s: %w", addr, err)
	}
	return gloadpb.NewLoaderClient(cc), cc, nil
}

// run reads the Watch stream until ctx ends, reconnecting after errors.
func (sw *serverWatch) run(ctx context.Context) {
	api, conn, err := DialWatch(sw.addr, "")
	if err != nil {
		sw.fail(err)
		return
	}
	defer conn.Close()
	for ctx.Err() == nil {
		err := sw.stream(ctx, api, false)
		if ctx.Err() != nil {
			return
		}
		sw.fail(err)
		sleepCtx(ctx, time.Second)
	}
}

// final takes one last report (after the command ended).
func (sw *serverWatch) final(ctx context.Context) {
	api, conn, err := DialWatch(sw.addr, "")
	if err != nil {
		return
	}
	defer conn.Close()
	ctx, cancel := context.WithTimeout(ctx, 3*time.Second)
	defer cancel()
	if err := sw.stream(ctx, api, true); err != nil && ctx.Err() == nil {
		sw.fail(err)
	}
}

func (sw *serverWatch) stream(ctx context.Context, api gloadpb.LoaderClient, once bool) error {
	ws, err := api.Watch(ctx, &gloadpb.WatchRequest{IntervalS: sw.interval.Seconds(), Once: once})
	if err != nil {
		return fmt.Errorf("watch %s: %w", sw.addr, err)
	}
	for {
		m, err := ws.Recv()
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return fmt.Errorf("watch %s: %w", sw.addr, err)
		}
		var r gpuwatch.Report
		if err := json.Unmarshal([]byte(m.GetJson()), &r); err != nil {
			return fmt.Errorf("watch %s: decode report: %w", sw.addr, err)
		}
		sw.add(sw.now(), &r)
	}
}

// fail records a distinct error (the first few).
func (sw *serverWatch) fail(err error) {
	sw.mu.Lock()
	defer sw.mu.Unlock()
	msg := err.Error()
	if slices.Contains(sw.errs, msg) {
		return
	}
	if len(sw.errs) < maxServerErrors {
		sw.errs = append(sw.errs, msg)
		logf(sw.log, "gload bench run: server watch: %s\n", msg)
	}
}

func (sw *serverWatch) errors() []string {
	sw.mu.Lock()
	defer sw.mu.Unlock()
	return slices.Clone(sw.errs)
}

// add records one report received at `at`.
func (sw *serverWatch) add(at time.Time, r *gpuwatch.Report) {
	p := watchPoint{at: at, clients: make(map[string]clientFig, len(r.Clients))}
	for _, c := range r.Clients {
		p.clients[c.Client] = clientFig{
			steps: c.Steps, notReady: c.NotReady, depth: c.QueueDepth, capacity: c.QueueCapacity,
			waitMS: c.WaitMS, stepMS: c.StepMS, silent: c.Silent,
		}
	}
	sw.mu.Lock()
	defer sw.mu.Unlock()
	if n := len(sw.pts); n > 0 {
		prev := sw.pts[n-1].clients
		for name, f := range p.clients {
			if f.steps > prev[name].steps {
				sw.lastStepReport = r
				break
			}
		}
	}
	sw.last = r
	sw.pts = append(sw.pts, p)
}

// clientSteps are the clients' step records rebuilt from the reports.
type clientSteps struct {
	steps    []gpuwatch.TraceStep
	notReady []gpuwatch.TraceNotReady
	queues   []gpuwatch.TraceQueue
	// stepped lists the times of reports with new steps and the run's
	// cumulative step count at each.
	stepped []stepMark
	notes   []string
}

type stepMark struct {
	prev, at time.Time // the previous report and this one
	total    int
}

// steps rebuilds step records from the reports: between two reports a
// client's step count, summed wait and summed step time (count × mean) grew
// by some amount — that many steps, each with the mean wait and step time of
// the growth, received at the later report. The first report is the
// baseline (steps before the run are not the run's). When the server's
// window drops steps the growth is understated; that is noted. Reports
// received after `end` (the last one, taken once the command ended) count
// at `end`; a zero end clamps nothing.
func (sw *serverWatch) steps(end time.Time) clientSteps {
	sw.mu.Lock()
	pts := slices.Clone(sw.pts)
	sw.mu.Unlock()
	for i := range pts {
		if !end.IsZero() && pts[i].at.After(end) {
			pts[i].at = end
		}
	}
	var cs clientSteps
	if len(pts) == 0 {
		return cs
	}
	total := 0
	aged := map[string]bool{}
	// Queue and not-ready records are kept for the clients that step during
	// the run, while they are not silent: a server remembers the last queue
	// of a client whose stream ended, which says nothing about this run.
	active := map[string]bool{}
	for i := 1; i < len(pts); i++ {
		prev, cur := pts[i-1], pts[i]
		grew := 0
		for _, name := range sortedKeys(cur.clients) {
			f, p := cur.clients[name], prev.clients[name]
			dSteps := f.steps - p.steps
			dWait := f.waitMS*float64(f.steps) - p.waitMS*float64(p.steps)
			dStep := f.stepMS*float64(f.steps) - p.stepMS*float64(p.steps)
			if dSteps > 0 && (dWait < -1e-6 || dStep < -1e-6) || dSteps < 0 {
				aged[name] = true
			}
			active[name] = active[name] || dSteps > 0
			if active[name] && !f.silent {
				if f.capacity > 0 {
					cs.queues = append(cs.queues, gpuwatch.TraceQueue{Time: cur.at, Client: name, Depth: f.depth, Capacity: f.capacity})
				}
				for range max(f.notReady-p.notReady, 0) {
					cs.notReady = append(cs.notReady, gpuwatch.TraceNotReady{Time: cur.at, Client: name})
				}
			}
			if dSteps <= 0 {
				continue
			}
			waitUS, stepUS := f.waitMS*1000, f.stepMS*1000 // the window's means, if the growth is unusable
			if dWait >= 0 && dStep >= 0 {
				waitUS, stepUS = dWait*1000/float64(dSteps), dStep*1000/float64(dSteps)
			}
			for range dSteps {
				if len(cs.steps) >= maxStepRecords {
					break
				}
				cs.steps = append(cs.steps, gpuwatch.TraceStep{
					Time: cur.at, Client: name, WaitUS: uint64(math.Round(waitUS)), StepUS: uint64(math.Round(stepUS)),
				})
			}
			grew += dSteps
		}
		if grew > 0 {
			total += grew
			cs.stepped = append(cs.stepped, stepMark{prev: prev.at, at: cur.at, total: total})
		}
	}
	if len(aged) > 0 {
		cs.notes = append(cs.notes, fmt.Sprintf("the server's watch window dropped steps of %s during the run: "+
			"their figures are understated (serve with a --watch-window longer than the run)", strings.Join(sortedKeys(aged), ", ")))
	}
	if len(cs.steps) >= maxStepRecords {
		cs.notes = append(cs.notes, fmt.Sprintf("only the first %d step reports were kept", maxStepRecords))
	}
	return cs
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

// span returns the judged span: from the report before the one in which the
// run's step count first exceeded skip, to the last report with new steps;
// the whole run [start, end] when no client stepped (past skip).
func (cs clientSteps) span(start, end time.Time, skip int) Span {
	sp := Span{Basis: SpanWholeRun, Start: start, End: end}
	for i, m := range cs.stepped {
		if m.total <= skip {
			continue
		}
		last := cs.stepped[len(cs.stepped)-1]
		sp = Span{Basis: SpanClientSteps, Start: m.prev, End: last.at, Steps: last.total}
		if i > 0 {
			sp.Skipped = cs.stepped[i-1].total
			sp.Steps -= sp.Skipped
		}
		break
	}
	sp.FromS = sp.Start.Sub(start).Seconds()
	sp.ToS = sp.End.Sub(start).Seconds()
	sp.Seconds = sp.End.Sub(sp.Start).Seconds()
	return sp
}

// in returns the records received in (from, to] (all of them for a zero
// from).
func (cs clientSteps) in(from, to time.Time) ([]gpuwatch.TraceStep, []gpuwatch.TraceNotReady, []gpuwatch.TraceQueue) {
	ok := func(t time.Time) bool { return (from.IsZero() || t.After(from)) && !t.After(to) }
	var steps []gpuwatch.TraceStep
	for _, s := range cs.steps {
		if ok(s.Time) {
			steps = append(steps, s)
		}
	}
	var nr []gpuwatch.TraceNotReady
	for _, n := range cs.notReady {
		if ok(n.Time) {
			nr = append(nr, n)
		}
	}
	var qs []gpuwatch.TraceQueue
	for _, q := range cs.queues {
		if ok(q.Time) {
			qs = append(qs, q)
		}
	}
	return steps, nr, qs
}

// series returns the steps per bin (batches consumed per second), in
// seconds since start; bins without reports are left out.
func (cs clientSteps) series(start time.Time, bin time.Duration) []SeriesPoint {
	out := []SeriesPoint{}
	if len(cs.stepped) == 0 {
		return out
	}
	counts := map[int64]int{}
	for _, s := range cs.steps {
		counts[int64(math.Floor(float64(s.Time.Sub(start))/float64(bin)))]++
	}
	first := int64(math.Floor(float64(cs.stepped[0].prev.Sub(start)) / float64(bin)))
	last := int64(math.Floor(float64(cs.stepped[len(cs.stepped)-1].at.Sub(start)) / float64(bin)))
	for k := first; k <= last; k++ {
		out = append(out, SeriesPoint{T: (float64(k) + 0.5) * bin.Seconds(), V: float64(counts[k]) / bin.Seconds()})
	}
	return out
}
