package loader

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/stats"
	"google.golang.org/grpc/status"
)

// Server-wide limits (DESIGN.md: server RSS bounded by server-wide limits
// whatever the number of clients). Every batch stream reserves, before it
// sends anything, the memory its in-flight batches can hold: over gRPC
// prefetch × the buffer of its largest batch (the pool rounds buffers up to a
// power of two), over shared memory its ring (slots × slot size), plus a
// constant for the stream's gRPC state. The reservations of open streams
// never exceed MaxBufferBytes: a stream whose asked depth does not fit gets
// the largest depth that does (Opened.prefetch says which), and one for which
// not even one batch fits is refused with RESOURCE_EXHAUSTED naming the
// limit, as is a stream beyond MaxStreams, and a batch stream beyond
// MaxStreamsPerConn on one connection (counted per connection by connCounts;
// gRPC's MAX_CONCURRENT_STREAMS is set a little above it, so that Watch and
// Health still get through). MaxConns bounds the connections (Serve wraps
// the listener).

// Defaults of the limits: a 16 GB host keeps most of its memory for the
// training processes.
const (
	DefaultMaxStreams        = 1024
	DefaultMaxBufferBytes    = 2 << 30
	DefaultMaxStreamsPerConn = 256
	DefaultMaxConns          = 1024
	// streamOverhead is reserved per stream on top of its batches: gRPC's
	// per-stream state and flow-control accounting, the stream's goroutines,
	// its assembler's scratch space.
	streamOverhead = 256 << 10
)

// bufferBudget accounts the reservations of open streams.
type bufferBudget struct {
	mu         sync.Mutex
	maxBytes   int64
	maxStreams int
	reserved   int64
	streams    int
	gauge      func(int64)
}

// reservation is what one admitted stream holds; release it when the
// stream ends.
type reservation struct {
	b     *bufferBudget
	bytes int64
}

// admit reserves room for a stream asking for depth in-flight batches of
// perBatch bytes each. It returns the depth granted (≤ depth, ≥ 1) or a
// RESOURCE_EXHAUSTED status naming the limit hit.
func (b *bufferBudget) admit(depth int, perBatch int64, what string) (int, *reservation, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.streams >= b.maxStreams {
		return 0, nil, status.Errorf(codes.ResourceExhausted,
			"--max-streams: this server already has %d open batch streams, its limit; close some or raise --max-streams", b.streams)
	}
	free := b.maxBytes - b.reserved - streamOverhead
	grant := depth
	if perBatch > 0 {
		grant = int(min(int64(depth), max(free, 0)/perBatch))
	}
	if grant < 1 {
		return 0, nil, status.Errorf(codes.ResourceExhausted,
			"--max-buffer-bytes: %s needs %d bytes for one batch in flight (%d with prefetch %d); %d of this server's %d bytes are reserved by %d open streams",
			what, perBatch+streamOverhead, int64(depth)*perBatch+streamOverhead, depth, b.reserved, b.maxBytes, b.streams)
	}
	r := &reservation{b: b, bytes: int64(grant)*perBatch + streamOverhead}
	b.reserved += r.bytes
	b.streams++
	if b.gauge != nil {
		b.gauge(b.reserved)
	}
	return grant, r, nil
}

// release gives a reservation back (once).
func (r *reservation) release() {
	if r == nil || r.b == nil {
		return
	}
	b := r.b
	r.b = nil
	b.mu.Lock()
	defer b.mu.Unlock()
	b.reserved -= r.bytes
	b.streams--
	if b.gauge != nil {
		b.gauge(b.reserved)
	}
}

// usage returns the bytes reserved and the streams holding them.
func (b *bufferBudget) usage() (int64, int) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.reserved, b.streams
}

// wireBufferBytes is the pooled buffer behind an encoded message of n bytes.
func wireBufferBytes(n int64) int64 {
	c := classOf(int(min(n, maxMessageBytes)))
	if c > maxClassBits {
		return n
	}
	return 1 << c
}

// grpcBatchBytes bounds the encoded size of the consumer's largest batch:
// input_ids (and position_ids when packed, labels when the dataset stores
// them), lengths, index and cu_seqlens, plus headers.
func grpcBatchBytes(c *consumer) int64 {
	n := ringNeed(c)
	b := 4*n.Cells + 4*n.Rows + 8*n.Pieces + 4*n.CuLen + 256
	if n.Positions {
		b += 4 * n.Cells
	}
	if n.Labels {
		b += 4*n.Cells + 8
	}
	return b
}

func (b *bufferBudget) String() string {
	r, n := b.usage()
	return fmt.Sprintf("%d of %d bytes reserved by %d streams (at most %d)", r, b.maxBytes, n, b.maxStreams)
}

// connSlack is how many streams of other RPCs (Watch, Report, Health) a
// connection may have open beyond MaxStreamsPerConn batch streams.
const connSlack = 16

// connKey holds a connection's *connCount in the contexts of its streams.
type connKey struct{}

// connCount is the number of batch streams open on one connection.
type connCount struct{ n atomic.Int64 }

// connCounts is a stats.Handler that gives each connection its counter.
type connCounts struct{}

var _ stats.Handler = connCounts{}

func (connCounts) TagConn(ctx context.Context, info *stats.ConnTagInfo) context.Context {
	return context.WithValue(tagAdmitted(ctx, info), connKey{}, &connCount{})
}
func (connCounts) HandleConn(context.Context, stats.ConnStats)                     {}
func (connCounts) TagRPC(ctx context.Context, _ *stats.RPCTagInfo) context.Context { return ctx }
func (connCounts) HandleRPC(context.Context, stats.RPCStats)                       {}

// enterConn counts a batch stream on its connection; it refuses one beyond
// max. The returned function ends it.
func enterConn(ctx context.Context, max int) (func(), error) {
	cc, ok := ctx.Value(connKey{}).(*connCount)
	if !ok {
		return func() {}, nil
	}
	if n := cc.n.Add(1); n > int64(max) {
		cc.n.Add(-1)
		return nil, status.Errorf(codes.ResourceExhausted,
			"--max-streams-per-conn: this connection already has %d batch streams open, the limit; open more connections (one per process) or raise it", max)
	}
	return func() { cc.n.Add(-1) }, nil
}
