package bench

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/gload/gload/loader/client"
	"github.com/gload/gload/proto/gloadpb"
)

// Sentinel errors.
var (
	// ErrOptions means options that cannot be run (no dataset, no client
	// count, an unknown transport…).
	ErrOptions = errors.New("bench: bad options")
	// ErrDatasetSmall means a client's share of an epoch holds no batch.
	ErrDatasetSmall = errors.New("bench: dataset too small")
)

// Transports Feed knows.
const (
	TransportGRPC = "grpc"
	TransportSHM  = "shm"
	// TransportSHMMessages is shm with the message hand-off (a batch and an
	// ack message per batch) instead of the doorbell, to compare the two.
	TransportSHMMessages = "shm-messages"
)

func knownTransport(t string) bool {
	return t == TransportGRPC || t == TransportSHM || t == TransportSHMMessages
}

// FeedOptions configure Feed. Zero fields take the defaults named.
type FeedOptions struct {
	// Addr is the server (unix:///path.sock or host:port).
	Addr string
	// Dataset is the name the server serves the dataset under.
	Dataset string
	// Policy is the batch policy (nil: bucketed, BatchSize rows).
	Policy *gloadpb.BatchPolicy
	// BatchSize is the rows per batch when Policy is nil (default 16).
	BatchSize int
	// Transports to measure, in order (default grpc).
	Transports []string
	// Clients lists the numbers of concurrent clients to measure (default 1).
	Clients []int
	// Prefetch is each client's prefetch depth (0: the server's default).
	Prefetch int
	// Duration is how long each configuration runs (default 10 s).
	Duration time.Duration
	// Consume, when > 0, adds a second run per configuration in which every
	// client sleeps Consume after each batch (a simulated training step),
	// and reports the headroom: feed capacity / consumption rate.
	Consume time.Duration
	// Seed of the epoch plans.
	Seed uint64
	// Progress receives one line per finished run (nil: none).
	Progress io.Writer
	// Dial connects a client (default client.Dial).
	Dial func(ctx context.Context, addr string) (*client.Client, error)
}

// FeedResult is one configuration: a transport and a number of clients.
type FeedResult struct {
	Transport string `json:"transport"`
	Clients   int    `json:"clients"`
	// Skipped says why the configuration was not measured ("" when it was).
	Skipped string `json:"skipped,omitempty"`
	// Capacity is the run without a simulated step: the feed rate.
	Capacity FeedRun `json:"capacity"`
	// Consume is the run with a simulated step (nil without one).
	Consume *ConsumeRun `json:"consume,omitempty"`
}

// FeedRun is what one run measured, over all its clients.
type FeedRun struct {
	Seconds float64 `json:"seconds"`
	Batches int64   `json:"batches"`
	// Tokens are real tokens (row lengths); Cells are rows × padded length.
	Tokens int64 `json:"tokens"`
	Cells  int64 `json:"cells"`
	// Bytes are the batch buffers received.
	Bytes       int64   `json:"bytes"`
	BatchesPerS float64 `json:"batches_per_s"`
	TokensPerS  float64 `json:"tokens_per_s"`
	GBPerS      float64 `json:"gb_per_s"`
	// NextP50US, NextP99US and NextMaxUS are the latency of Next, in µs.
	NextP50US float64 `json:"next_p50_us"`
	NextP99US float64 `json:"next_p99_us"`
	NextMaxUS float64 `json:"next_max_us"`
	// Streams counts the streams opened (one per client and epoch).
	Streams int `json:"streams"`
	// waitShare is the time in Next over the time in Next and in steps.
	waitShare float64
}

// ConsumeRun is a run with a simulated step.
type ConsumeRun struct {
	FeedRun
	StepMS float64 `json:"step_ms"`
	// DemandPerS is what the clients would consume with no wait at all:
	// clients / step.
	DemandPerS float64 `json:"demand_batches_per_s"`
	// WaitShare is the clients' time in Next over their time in Next and in
	// steps.
	WaitShare float64 `json:"wait_share"`
	// Headroom is the capacity run's batches/s over DemandPerS: above 1 the
	// server feeds faster than the clients consume.
	Headroom float64 `json:"headroom"`
}

func (o FeedOptions) withDefaults() (FeedOptions, error) {
	if o.Addr == "" {
		return o, fmt.Errorf("%w: no server address", ErrOptions)
	}
	if o.Dataset == "" {
		return o, fmt.Errorf("%w: no dataset name", ErrOptions)
	}
	if o.BatchSize == 0 {
		o.BatchSize = 16
	}
	if o.Policy == nil {
		if o.BatchSize < 0 {
			return o, fmt.Errorf("%w: batch size %d", ErrOptions, o.BatchSize)
		}
		o.Policy = &gloadpb.BatchPolicy{BatchSize: uint32(o.BatchSize)}
	}
	if len(o.Transports) == 0 {
		o.Transports = []string{TransportGRPC}
	}
	for _, t := range o.Transports {
		if !knownTransport(t) {
			return o, fmt.Errorf("%w: transport %q: want grpc, shm or shm-messages", ErrOptions, t)
		}
	}
	if len(o.Clients) == 0 {
		o.Clients = []int{1}
	}
	for _, n := range o.Clients {
		if n < 1 || n > 4096 {
			return o, fmt.Errorf("%w: %d clients: want 1 to 4096", ErrOptions, n)
		}
	}
	if o.Prefetch < 0 {
		return o, fmt.Errorf("%w: prefetch %d", ErrOptions, o.Prefetch)
	}
	if o.Duration == 0 {
		o.Duration = 10 * time.Second
	}
	if o.Duration < 0 || o.Consume < 0 {
		return o, fmt.Errorf("%w: negative duration", ErrOptions)
	}
	if o.Dial == nil {
		o.Dial = func(ctx context.Context, addr string) (*client.Client, error) { return client.Dial(ctx, addr) }
	}
	return o, nil
}

// Feed measures every transport × clients configuration of opts in turn.
// A shared-memory configuration the server or the client cannot run (a
// remote server, no /dev/shm) is skipped with the reason; other failures end
// Feed with an error, after the results so far.
func Feed(ctx context.Context, opts FeedOptions) ([]FeedResult, error) {
	o, err := opts.withDefaults()
	if err != nil {
		return nil, err
	}
	var out []FeedResult
	for _, tr := range o.Transports {
		for _, n := range o.Clients {
			r := FeedResult{Transport: tr, Clients: n}
			capRun, err := feedRun(ctx, o, tr, n, 0)
			if err != nil {
				if tr != TransportGRPC && shmUnavailable(err) {
					r.Skipped = "shm: not available here: " + err.Error()
					out = append(out, r)
					progress(o.Progress, "%s × %d: skipped (%s)\n", tr, n, r.Skipped)
					continue
				}
				return out, fmt.Errorf("feed %s with %s: %w", tr, nClients(n), err)
			}
			r.Capacity = capRun
			progress(o.Progress, "%s × %d: %.0f batches/s, %.3g tokens/s, %.2f GB/s, next p50 %s p99 %s\n",
				tr, n, capRun.BatchesPerS, capRun.TokensPerS, capRun.GBPerS, us(capRun.NextP50US), us(capRun.NextP99US))
			if o.Consume > 0 {
				run, err := feedRun(ctx, o, tr, n, o.Consume)
				if err != nil {
					return out, fmt.Errorf("feed %s with %s, %s steps: %w", tr, nClients(n), o.Consume, err)
				}
				r.Consume = consumeResult(run, capRun, n, o.Consume)
				progress(o.Progress, "%s × %d, step %s: %.0f batches/s, wait %.1f%%, headroom %.1f×\n",
					tr, n, o.Consume, run.BatchesPerS, 100*r.Consume.WaitShare, r.Consume.Headroom)
			}
			out = append(out, r)
		}
	}
	return out, nil
}

// shmUnavailable says whether err is the server or client refusing the
// shared-memory transport (rather than a failure of the feed itself).
func shmUnavailable(err error) bool {
	switch status.Code(err) {
	case codes.Unimplemented, codes.FailedPrecondition, codes.ResourceExhausted:
		return true
	}
	return strings.Contains(err.Error(), "shm")
}

func progress(w io.Writer, format string, args ...any) {
	if w != nil {
		fmt.Fprintf(w, format, args...)
	}
}

// us formats microseconds.
func us(v float64) string {
	switch {
	case v >= 1e6:
		return fmt.Sprintf("%.2f s", v/1e6)
	case v >= 1e3:
		return fmt.Sprintf("%.2f ms", v/1e3)
	}
	return fmt.Sprintf("%.1f µs", v)
}

// clientRun is one client's tally.
type clientRun struct {
	batches, tokens, cells, bytes int64
	next                          latencyHist
	inNext, inStep                time.Duration
	streams                       int
}

func (c *clientRun) batch(b *client.Batch) {
	c.batches++
	c.cells += int64(b.Rows) * int64(b.Length)
	for _, l := range b.Lengths() {
		c.tokens += int64(l)
	}
	c.bytes += int64(len(b.InputIDsBytes())) + 4*int64(len(b.Lengths())) + 8*int64(len(b.Index())) +
		4*int64(len(b.PositionIDs())) + 4*int64(len(b.CuSeqlens()))
}

// feedRun runs n clients for o.Duration: each opens its first stream (the
// plan is computed then), the clock starts once all have, and every client
// pulls batches — stepping `step` after each — reopening the next epoch at
// the end of one, until the duration is over.
func feedRun(ctx context.Context, o FeedOptions, transport string, n int, step time.Duration) (FeedRun, error) {
	tr := gloadpb.Transport_TRANSPORT_GRPC
	if transport == TransportSHM || transport == TransportSHMMessages {
		tr = gloadpb.Transport_TRANSPORT_SHM
	}
	sopts := []client.StreamOption{client.Doorbell(transport == TransportSHM)}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	clients := make([]*client.Client, n)
	streams := make([]*client.Stream, n)
	defer func() {
		for i := range n {
			if streams[i] != nil {
				streams[i].Close()
			}
			if clients[i] != nil {
				clients[i].Close()
			}
		}
	}()
	open := func(i int, epoch uint32) *gloadpb.Open {
		return &gloadpb.Open{
			Dataset: o.Dataset, Worker: uint32(i), NumWorkers: uint32(n), Seed: o.Seed, Epoch: epoch,
			Policy: o.Policy, Transport: tr, Prefetch: uint32(o.Prefetch),
			ClientId: "bench-" + transport + "-" + strconv.Itoa(n) + "-" + strconv.Itoa(i),
		}
	}
	// Connect and open every client's first stream before the clock starts.
	var mu sync.Mutex
	var firstErr error
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			c, err := o.Dial(ctx, o.Addr)
			if err == nil {
				clients[i] = c
				streams[i], err = c.Stream(ctx, open(i, 0), sopts...)
			}
			if err != nil {
				mu.Lock()
				if firstErr == nil {
					firstErr = fmt.Errorf("client %d: %w", i, err)
				}
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	if firstErr != nil {
		return FeedRun{}, firstErr
	}

	start := time.Now()
	deadline := start.Add(o.Duration)
	// Cancelled at the deadline rather than given one: a deadline would
	// travel to the server as grpc-timeout, whose expiry there can reach
	// the client as an error before its own timer fires.
	runCtx, stop := context.WithCancel(ctx)
	defer stop()
	timer := time.AfterFunc(o.Duration, stop)
	defer timer.Stop()
	tallies := make([]clientRun, n)
	errs := make([]error, n)
	for i := range n {
		wg.Go(func() { errs[i] = pull(runCtx, clients[i], &streams[i], open, i, step, &tallies[i], sopts...) })
	}
	wg.Wait()
	end := time.Now()
	if end.After(deadline) {
		end = deadline
	}
	if err := ctx.Err(); err != nil {
		return FeedRun{}, err
	}
	if err := errors.Join(errs...); err != nil {
		return FeedRun{}, err
	}

	var total clientRun
	for i := range tallies {
		t := &tallies[i]
		total.batches += t.batches
		total.tokens += t.tokens
		total.cells += t.cells
		total.bytes += t.bytes
		total.inNext += t.inNext
		total.inStep += t.inStep
		total.streams += t.streams
		total.next.merge(&t.next)
	}
	secs := max(end.Sub(start).Seconds(), 1e-9)
	return FeedRun{
		Seconds: secs, Batches: total.batches, Tokens: total.tokens, Cells: total.cells, Bytes: total.bytes,
		BatchesPerS: float64(total.batches) / secs, TokensPerS: float64(total.tokens) / secs,
		GBPerS:    float64(total.bytes) / secs / 1e9,
		NextP50US: micros(total.next.quantile(0.5)), NextP99US: micros(total.next.quantile(0.99)),
		NextMaxUS: micros(total.next.max), Streams: total.streams + n,
		waitShare: share(total.inNext, total.inNext+total.inStep),
	}, nil
}

func share(part, whole time.Duration) float64 {
	if whole <= 0 {
		return 0
	}
	return float64(part) / float64(whole)
}

func micros(d time.Duration) float64 { return float64(d) / float64(time.Microsecond) }

// pull is one client's loop; *s is its open stream (replaced at each new
// epoch, closed by the caller). It returns nil when ctx ends it.
func pull(ctx context.Context, c *client.Client, s **client.Stream, open func(int, uint32) *gloadpb.Open, i int, step time.Duration, t *clientRun, sopts ...client.StreamOption) error {
	epoch := uint32(0)
	got := 0
	for {
		t0 := time.Now()
		b, err := (*s).Next(ctx)
		t1 := time.Now()
		switch {
		case ctx.Err() != nil:
			if b != nil {
				b.Release()
			}
			return nil
		case errors.Is(err, io.EOF):
			if got == 0 {
				return fmt.Errorf("%w: client %d's share of epoch %d holds no batch", ErrDatasetSmall, i, epoch)
			}
			(*s).Close()
			*s = nil
			epoch, got = epoch+1, 0
			ns, err := c.Stream(ctx, open(i, epoch), sopts...)
			if ctx.Err() != nil {
				if ns != nil {
					ns.Close()
				}
				return nil
			}
			if err != nil {
				return fmt.Errorf("client %d: open epoch %d: %w", i, epoch, err)
			}
			*s = ns
			t.streams++
			continue
		case err != nil:
			return fmt.Errorf("client %d: next: %w", i, err)
		}
		got++
		t.next.add(t1.Sub(t0))
		t.inNext += t1.Sub(t0)
		t.batch(b)
		if step > 0 {
			s0 := time.Now()
			sleepCtx(ctx, step)
			t.inStep += time.Since(s0)
		}
		b.Release()
	}
}

// sleepCtx sleeps d or until ctx ends.
func sleepCtx(ctx context.Context, d time.Duration) {
	tm := time.NewTimer(d)
	defer tm.Stop()
	select {
	case <-tm.C:
	case <-ctx.Done():
	}
}

// consumeResult derives the consumption figures of a run with steps.
func consumeResult(run, capacity FeedRun, n int, step time.Duration) *ConsumeRun {
	c := &ConsumeRun{FeedRun: run, StepMS: float64(step) / float64(time.Millisecond), WaitShare: run.waitShare}
	c.DemandPerS = float64(n) / step.Seconds()
	if c.DemandPerS > 0 {
		c.Headroom = capacity.BatchesPerS / c.DemandPerS
	}
	return c
}

// ParseClients reads a comma-separated list of client counts ("1,4,8").
func ParseClients(s string) ([]int, error) {
	var out []int
	for _, f := range strings.Split(s, ",") {
		f = strings.TrimSpace(f)
		n, err := strconv.Atoi(f)
		if err != nil || n < 1 || n > 4096 {
			return nil, fmt.Errorf("%w: clients %q: want a comma-separated list of counts from 1 to 4096", ErrOptions, s)
		}
		out = append(out, n)
	}
	return out, nil
}

// ParseTransports reads a comma-separated list of transports ("grpc,shm").
func ParseTransports(s string) ([]string, error) {
	var out []string
	for _, f := range strings.Split(s, ",") {
		f = strings.ToLower(strings.TrimSpace(f))
		if !knownTransport(f) {
			return nil, fmt.Errorf("%w: transport %q in %q: want grpc, shm or shm-messages", ErrOptions, f, s)
		}
		if !slices.Contains(out, f) {
			out = append(out, f)
		}
	}
	return out, nil
}

// nClients says "1 client", "4 clients".
func nClients(n int) string {
	if n == 1 {
		return "1 client"
	}
	return fmt.Sprintf("%d clients", n)
}
