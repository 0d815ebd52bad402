package loader

import (
	"context"
	"errors"
	"fmt"
	"io"
	"runtime"
	"runtime/debug"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/gload/gload/bucket"
	"github.com/gload/gload/loader/dataset"
	"github.com/gload/gload/loader/shm"
	"github.com/gload/gload/proto/gloadpb"
)

// endWait bounds how long a finished stream waits for the client to close
// its side after End, so that the stream's receive goroutine ends first.
const endWait = 5 * time.Second

// errClientDone means the client closed its side of the stream.
var errClientDone = errors.New("client closed the stream")

// Batches streams one consumer's share of an epoch: the first client message
// is Open, the server answers Opened, then sends batches, never more than the
// granted prefetch ahead of the client's acks, then End.
func (s *Server) Batches(stream gloadpb.Loader_BatchesServer) error {
	if s.draining.Load() {
		return status.Error(codes.Unavailable, "server is shutting down")
	}
	msg, err := stream.Recv()
	if errors.Is(err, io.EOF) {
		return status.Error(codes.InvalidArgument, "open: the stream closed before its open message")
	}
	if err != nil {
		return err
	}
	leave, err := enterConn(stream.Context(), s.cfg.MaxStreamsPerConn)
	if err != nil {
		s.metrics.limitRefused.WithLabelValues("max-streams-per-conn").Inc()
		s.log.Warn("stream refused by a limit", "client", msg.GetOpen().GetClientId(), "err", err)
		return err
	}
	defer leave()
	c, err := s.resolve(stream.Context(), msg.GetOpen())
	if err != nil {
		s.log.Info("stream refused", "dataset", msg.GetOpen().GetDataset(), "client", msg.GetOpen().GetClientId(), "err", err)
		return err
	}
	err = s.runStream(stream, c)
	if err != nil {
		code := status.Code(err)
		s.metrics.streamErrors.WithLabelValues(c.ds.name, code.String()).Inc()
		if code != codes.Canceled {
			s.log.Warn("stream failed", "consumer", c.describe(), "client", c.open.ClientId, "err", err)
		}
	}
	return err
}

// credits tracks the batches sent and not yet acknowledged, and keeps the
// queue-depth metrics in step with them. Over shared memory each credit is a
// ring slot; over gRPC every credit is slot -1.
type credits struct {
	mu     sync.Mutex
	out    map[uint64]int32 // seq → slot
	closed bool
	slots  bool
	// doorbell: slots come back through the ring's released word
	// (watchReleases), never through ack messages.
	doorbell bool
	free     chan int32 // one entry per batch the server may still send
	depth    func(delta int)
}

// newCredits returns n credits: slots 0…n-1 when slots, else n times -1.
func newCredits(n int, slots bool, depth func(int)) *credits {
	c := &credits{out: make(map[uint64]int32, n), slots: slots, free: make(chan int32, n), depth: depth}
	for i := range n {
		if slots {
			c.free <- int32(i)
		} else {
			c.free <- slotNone
		}
	}
	return c
}

func (c *credits) sent(seq uint64, slot int32) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.closed {
		c.out[seq] = slot
		c.depth(1)
	}
}

// ack returns seq's credit (and its slot). It fails if seq is not
// outstanding or, over shared memory, names another slot than the batch's;
// acks arriving after close are ignored.
func (c *credits) ack(seq uint64, slot int32) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return nil
	}
	held, ok := c.out[seq]
	if !ok {
		return status.Errorf(codes.InvalidArgument, "ack: batch %d was not sent or is already acknowledged", seq)
	}
	if c.slots && slot != held {
		return status.Errorf(codes.InvalidArgument, "ack: batch %d is in slot %d, the ack names slot %d", seq, held, slot)
	}
	delete(c.out, seq)
	c.depth(-1)
	c.free <- held // never blocks: free + outstanding ≤ cap
	return nil
}

// close forgets the outstanding batches (the stream is over).
func (c *credits) close() {
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.closed {
		c.closed = true
		c.depth(-len(c.out))
		clear(c.out)
	}
}

// streamStats are the per-stream handles on client metrics.
type streamStats struct {
	key    clientKey
	client *clientState
	queue  prometheus.Gauge
	wait   prometheus.Observer
	step   prometheus.Observer
	share  prometheus.Gauge
}

func (s *Server) runStream(stream gloadpb.Loader_BatchesServer, c *consumer) (err error) {
	ctx := stream.Context()
	prefetch := int(c.open.Prefetch)
	if prefetch == 0 {
		prefetch = s.cfg.DefaultPrefetch
	}
	prefetch = min(prefetch, s.cfg.MaxPrefetch)
	useShm := c.open.Transport == gloadpb.Transport_TRANSPORT_SHM
	prefetch, res, err := s.reserve(c, prefetch, useShm)
	if err != nil {
		s.metrics.limitRefused.WithLabelValues(limitName(err)).Inc()
		return err
	}
	defer res.release()
	clientID := c.open.ClientId
	label := s.metrics.labels.acquire(clientID)
	defer s.metrics.labels.release(label)
	st := &streamStats{
		key:   clientKey{c.ds.name, clientID},
		queue: s.metrics.queueDepth.WithLabelValues(c.ds.name, label),
		wait:  s.metrics.waitSeconds.WithLabelValues(c.ds.name, label),
		step:  s.metrics.stepSeconds.WithLabelValues(c.ds.name, label),
		share: s.metrics.waitShare.WithLabelValues(c.ds.name, label),
	}
	st.client = s.clients.open(st.key)
	st.client.queue.grant(prefetch) // the watch reports queue occupancy against the granted depth
	defer st.client.queue.grant(-prefetch)
	cr := newCredits(prefetch, useShm, func(d int) {
		st.queue.Add(float64(d))
		st.client.queue.Add(int64(d))
	})
	s.streams.Add(1)
	s.metrics.streams.WithLabelValues(c.ds.name).Inc()
	defer func() {
		cr.close()
		s.clients.close(st.key)
		s.metrics.streams.WithLabelValues(c.ds.name).Dec()
		s.streams.Add(-1)
	}()

	opened := &gloadpb.Opened{
		Fingerprint:   c.ds.info.Fingerprint,
		Batches:       uint64(c.assigned.Len()),
		Start:         c.start,
		Shapes:        wireShapes(c.plan.Shapes()),
		Prefetch:      uint32(prefetch),
		WorldSize:     uint32(c.world),
		NumWorkers:    uint32(c.workers),
		PadId:         c.padID,
		Sources:       c.ds.sourceNames(),
		SourceOffsets: c.ds.sourceOffsets(),
		Shares:        wireShares(c.plan),
	}
	var ring *shm.Ring
	var layout shm.Layout
	if useShm {
		if ring, layout, err = s.createRing(c, prefetch, c.open.GetShmDoorbell()); err != nil {
			return err
		}
		defer func() {
			if cerr := ring.Close(); cerr != nil {
				s.log.Warn("ring not removed", "consumer", c.describe(), "path", ring.Path(), "err", cerr)
			}
		}()
		opened.ShmPath, opened.SlotBytes, opened.Slots = ring.Path(), uint64(layout.SlotBytes), uint32(ring.Slots())
		opened.Layout = &gloadpb.SlotLayout{
			InputIds: uint64(layout.InputIDs), Lengths: uint64(layout.Lengths), Index: uint64(layout.Index),
			PositionIds: uint64(layout.PositionIDs), CuSeqlens: uint64(layout.CuSeqlens), Labels: uint64(layout.Labels),
		}
		if off, n := ring.ControlOffset(); n > 0 {
			opened.ControlOffset, opened.ControlBytes = uint64(off), uint64(n)
		}
	}
	var bell *shm.Doorbell
	if ring != nil {
		bell = ring.Doorbell()
	}
	cr.doorbell = bell != nil
	opened.Labels = storesLabels(c.ds.tokens())
	if err := stream.Send(&gloadpb.ServerMessage{Msg: &gloadpb.ServerMessage_Opened{Opened: opened}}); err != nil {
		return err
	}
	s.log.Info("stream opened", "consumer", c.describe(), "client", clientID, "batches", c.assigned.Len(),
		"prefetch", prefetch, "consumed", c.start.Consumed, "plan_world", c.start.PlanWorld)

	recvDone := make(chan error, 1)
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		recvDone <- s.receive(stream, cr, st)
	}()
	bellDone := make(chan error, 1)
	if bell != nil {
		watchCtx, stopWatch := context.WithCancel(ctx)
		exited := make(chan struct{})
		// Runs before the ring is unmapped (defers run last first): the
		// watcher reads the ring's memory until it has exited.
		defer func() { stopWatch(); <-exited }()
		s.wg.Add(1)
		go func() {
			defer s.wg.Done()
			defer close(exited)
			bellDone <- watchReleases(watchCtx, bell, cr, c.assigned.Len())
		}()
	}
	var recvErr error
	recvEnded := false
	onRecv := func(err error) error {
		recvEnded, recvErr = true, err
		if errors.Is(err, errClientDone) {
			return nil
		}
		return err
	}

	defer debug.SetPanicOnFault(debug.SetPanicOnFault(true))
	asm := newAssembler(c.ds.tokens(), s.pool, s.cfg.MaxBatchBytes)
	mixCount := s.newMixCounter(c.ds)
	feed, err := newRemoteFeed(c) // object storage: shards fetched in this stream's plan order
	if err != nil {
		return s.planPanicked(c, err)
	}
	defer feed.close()
	packed := c.cfg.Policy == bucket.Packed
	batches := s.metrics.batches.WithLabelValues(c.ds.name)
	bytes := s.metrics.bytes.WithLabelValues(c.ds.name)
	for i := range c.assigned.Len() {
		g := c.assigned.At(i)
		var slot int32
		select {
		case slot = <-cr.free:
		case <-ctx.Done():
			return status.FromContextError(ctx.Err()).Err()
		case err := <-recvDone:
			return onRecv(err)
		case err := <-bellDone:
			return err
		case <-s.abort.Done():
			return status.Error(codes.Unavailable, "server is shutting down")
		}
		h := batchHeader{
			seq: uint64(i), global: uint64(g), rankStep: uint64(c.worker + i*c.workers),
			packed: packed, padID: c.padID, posStart: c.open.GetPolicy().GetPositionStart(),
			labels: asm.hasLabels(),
		}
		b, err := s.planBatch(asm, c, g) // once: the feed, the assembly and the mixture counter share it
		if err != nil {
			return err
		}
		release, err := feed.acquire(ctx, i, b, c.ds.waitingForShard)
		if errors.Is(err, errPlanPanicked) {
			return s.planPanicked(c, err)
		}
		if err != nil {
			return status.Errorf(codes.Unavailable, "dataset %s: batch %d: %v", c.ds.name, g, err)
		}
		wb, err := s.build(asm, c, g, b, h, ring, slot, layout)
		release()
		if err != nil {
			return err
		}
		if err := c.ds.lengthsErr(); err != nil { // the batch's rows were planned from a corrupt index block
			wb.release()
			return status.Errorf(codes.DataLoss, "dataset %s: batch %d: %v", c.ds.name, g, err)
		}
		n := wb.len() + wb.inSlot
		cr.sent(h.seq, slot)
		if bell != nil {
			// The batch is announced in the ring itself: no message.
			n = wb.inSlot
			bell.Publish(int(slot), shm.Header{Seq: h.seq, Global: h.global, RankStep: h.rankStep, Rows: wb.rows,
				Length: wb.length, Pieces: wb.pieces, CuLen: wb.cuLen, Trained: wb.trained})
			wb.release()
		} else if err := stream.SendMsg(wb); err != nil {
			wb.release()
			return err
		}
		batches.Inc()
		bytes.Add(float64(n))
		if mixCount != nil {
			mixCount.count(c.ds.mix, b)
		}
	}
	end := &gloadpb.ServerMessage{Msg: &gloadpb.ServerMessage_End{End: &gloadpb.End{Batches: uint64(c.assigned.Len())}}}
	if err := stream.Send(end); err != nil {
		return err
	}
	s.log.Info("stream finished", "consumer", c.describe(), "client", clientID, "batches", c.assigned.Len())
	if !recvEnded {
		timer := time.NewTimer(endWait)
		defer timer.Stop()
		select {
		case err := <-recvDone:
			recvErr = err
		case <-timer.C:
		case <-ctx.Done():
		case <-s.abort.Done():
		}
	}
	if recvErr != nil && !errors.Is(recvErr, errClientDone) && status.Code(recvErr) == codes.InvalidArgument {
		return recvErr
	}
	return nil
}

// receive handles the client's acks and step reports until the stream ends.
func (s *Server) receive(stream gloadpb.Loader_BatchesServer, cr *credits, st *streamStats) error {
	for {
		m, err := stream.Recv()
		if errors.Is(err, io.EOF) {
			return errClientDone
		}
		if err != nil {
			return err
		}
		switch v := m.Msg.(type) {
		case *gloadpb.ClientMessage_Ack:
			if cr.doorbell {
				return status.Error(codes.InvalidArgument, "ack: this stream returns slots through the ring's released word (shm_doorbell), not ack messages")
			}
			if err := cr.ack(v.Ack.GetSeq(), v.Ack.GetSlot()); err != nil {
				return err
			}
		case *gloadpb.ClientMessage_Report:
			r := v.Report
			wait := time.Duration(r.GetWaitUs()) * time.Microsecond
			step := time.Duration(r.GetStepUs()) * time.Microsecond
			steps := max(int(r.GetSteps()), 1)
			var ct time.Time
			if r.GetClientTimeUnixUs() != 0 {
				ct = time.UnixMicro(r.GetClientTimeUnixUs())
			}
			share := s.clients.report(st.key, wait, step, ct, steps)
			st.wait.Observe(wait.Seconds())
			st.step.Observe(step.Seconds())
			st.share.Set(share)
		case *gloadpb.ClientMessage_Open:
			return status.Error(codes.InvalidArgument, "open: sent twice on one stream")
		default:
			return status.Error(codes.InvalidArgument, "message: empty or unknown client message")
		}
	}
}

// build assembles global batch g (into a slot of ring when ring is not nil)
// with memory faults on the mapped shards turned into errors
// (debug.SetPanicOnFault is on for the stream goroutine). No panic of batch
// assembly leaves build: a fault or a runtime error while reading a shard
// that changed on disk is DATA_LOSS naming it, anything else INTERNAL (with
// the stack logged), so that one bad stream never takes the server down.
func (s *Server) build(asm *assembler, c *consumer, g int, b bucket.Batch, h batchHeader, ring *shm.Ring, slot int32, layout shm.Layout) (wb *wireBatch, err error) {
	defer func() {
		r := recover()
		if r == nil {
			return
		}
		wb, err = nil, s.buildPanic(r, asm, c, g, ring)
	}()
	if ring != nil {
		wb, err = asm.assembleSlot(b, h, slot, ring.Slot(int(slot)), layout)
	} else {
		wb, err = asm.assemble(b, h)
	}
	if err != nil {
		if errors.Is(err, dataset.ErrCorrupt) || errors.Is(err, dataset.ErrStaleIndex) || errors.Is(err, dataset.ErrClosed) {
			c.ds.markBroken(fmt.Sprintf("dataset %s: %v", c.ds.name, err))
			return nil, status.Errorf(codes.DataLoss, "%v: dataset %s: batch %d: %v", ErrDataLoss, c.ds.name, g, err)
		}
		if errors.Is(err, dataset.ErrUnsupported) {
			c.ds.markBroken(fmt.Sprintf("dataset %s: %v", c.ds.name, err))
			return nil, status.Errorf(codes.FailedPrecondition, "dataset %s: batch %d: %v", c.ds.name, g, err)
		}
		return nil, status.Errorf(codes.Internal, "dataset %s: batch %d: %v", c.ds.name, g, err)
	}
	return wb, nil
}

// planPanicked ends a stream whose plan panicked outside planBatch (the object-storage feed's look-ahead): INTERNAL,
// logged with the stack.
func (s *Server) planPanicked(c *consumer, err error) error {
	var stack []byte
	if p, ok := err.(*planPanic); ok {
		stack = p.stack
	}
	s.log.Error("panic computing batches of a plan", "consumer", c.describe(), "err", err, "stack", string(stack))
	return status.Errorf(codes.Internal, "dataset %s: internal error: %v (the server logged it; please report it)", c.ds.name, err)
}

// planBatch is global batch g of c's plan, computed once per streamed batch. Like build, it lets no panic out: a
// lazy plan reads the index's mapped lengths (a fault there is data loss) and a lazy tokens or packed plan started
// from kept counts that do not match the lengths panics; either ends this stream, never the server.
func (s *Server) planBatch(asm *assembler, c *consumer, g int) (b bucket.Batch, err error) {
	defer func() {
		if r := recover(); r != nil {
			b, err = bucket.Batch{}, s.buildPanic(r, asm, c, g, nil)
		}
	}()
	return c.plan.Batch(g), nil
}

// buildPanic turns a panic recovered in build (or planBatch) into the stream's error.
func (s *Server) buildPanic(r any, asm *assembler, c *consumer, g int, ring *shm.Ring) error {
	if fault, ok := r.(interface{ Addr() uintptr }); ok {
		if ring != nil && ring.Contains(fault.Addr()) {
			s.log.Error("ring fault", "consumer", c.describe(), "path", ring.Path(), "addr", fault.Addr())
			return status.Errorf(codes.Internal, "transport: shm: memory fault at %#x writing ring %s", fault.Addr(), ring.Path())
		}
		reason := fmt.Sprintf("dataset %s: memory fault at %#x reading %s: a shard was truncated or rewritten under the server",
			c.ds.name, fault.Addr(), c.ds.shardOf(asm.cur))
		c.ds.markBroken(reason)
		s.log.Error("data loss", "dataset", c.ds.name, "err", reason)
		return status.Errorf(codes.DataLoss, "%v: %s", ErrDataLoss, reason)
	}
	// A runtime error (an index out of range, say) while a shard changed on
	// disk is that change showing; otherwise it is a defect of ours.
	if _, isRT := r.(runtime.Error); isRT {
		if cerr := c.ds.check(); cerr != nil {
			reason := fmt.Sprintf("%v while reading %s (%v)", r, c.ds.shardOf(asm.cur), cerr)
			s.log.Error("data loss", "dataset", c.ds.name, "err", reason)
			return status.Errorf(codes.DataLoss, "%v: dataset %s: batch %d: %s", ErrDataLoss, c.ds.name, g, reason)
		}
	}
	s.log.Error("panic assembling a batch", "consumer", c.describe(), "batch", g, "panic", fmt.Sprint(r), "stack", string(debug.Stack()))
	return status.Errorf(codes.Internal, "dataset %s: batch %d: internal error assembling the batch: %v (the server logged the stack; please report it)",
		c.ds.name, g, r)
}

// reserve takes the stream's share of the server-wide limits (limits.go):
// its in-flight batches at the largest depth up to prefetch that fits.
func (s *Server) reserve(c *consumer, prefetch int, useShm bool) (int, *reservation, error) {
	per := wireBufferBytes(grpcBatchBytes(c))
	what := fmt.Sprintf("a gRPC stream of %s", c.describe())
	if useShm {
		layout, err := shm.NewLayout(ringNeed(c))
		if err != nil {
			return 0, nil, status.Errorf(codes.InvalidArgument, "transport: shm: %v", err)
		}
		per, what = layout.SlotBytes, fmt.Sprintf("a shared-memory ring of %s", c.describe())
	}
	granted, res, err := s.budget.admit(prefetch, per, what)
	if err != nil {
		s.log.Warn("stream refused by a limit", "consumer", c.describe(), "client", c.open.ClientId, "err", err)
		return 0, nil, err
	}
	if granted < prefetch {
		s.log.Info("prefetch reduced to fit --max-buffer-bytes", "consumer", c.describe(), "asked", prefetch,
			"granted", granted, "batch_bytes", per)
	}
	return granted, res, nil
}

// limitName is the flag a RESOURCE_EXHAUSTED refusal names (for metrics).
func limitName(err error) string {
	msg := status.Convert(err).Message()
	for _, l := range []string{"--max-streams", "--max-buffer-bytes"} {
		if strings.HasPrefix(msg, l) {
			return strings.TrimPrefix(l, "--")
		}
	}
	return "other"
}

// createRing makes the shared-memory ring of a stream: slots = the granted
// prefetch depth, each sized for the largest batch the consumer can get.
func (s *Server) createRing(c *consumer, slots int, doorbell bool) (*shm.Ring, shm.Layout, error) {
	need := ringNeed(c)
	layout, err := shm.NewLayout(need)
	if err != nil {
		return nil, shm.Layout{}, status.Errorf(codes.InvalidArgument, "transport: shm: %v", err)
	}
	create := shm.Create
	if doorbell {
		create = shm.CreateWithDoorbell
	}
	ring, err := create(s.cfg.ShmDir, slots, layout.SlotBytes)
	if err != nil {
		code := codes.FailedPrecondition
		if errors.Is(err, syscall.ENOSPC) || errors.Is(err, syscall.ENOMEM) {
			code = codes.ResourceExhausted
		}
		s.log.Warn("ring refused", "consumer", c.describe(), "dir", s.cfg.ShmDir, "slots", slots, "slot_bytes", layout.SlotBytes, "err", err)
		return nil, shm.Layout{}, status.Errorf(code, "transport: shm: %v (use the grpc transport)", err)
	}
	return ring, layout, nil
}

// ringNeed returns the largest buffers of the consumer's batches: from the
// plan's shapes, and for packed plans (whose piece count varies) from a scan
// of the consumer's batches.
func ringNeed(c *consumer) shm.Need {
	var n shm.Need
	n.Labels = storesLabels(c.ds.tokens())
	b := planBound(c.plan)
	n.Cells, n.Rows = b.Cells, int64(b.Rows)
	if c.cfg.Policy != bucket.Packed {
		n.Pieces = n.Rows
		return n
	}
	n.Positions = true
	if b.Pieces > 0 { // a lazy packed plan bounds its pieces per batch (its counting pass): no scan of the batches
		n.Pieces = int64(b.Pieces)
		n.CuLen = 1 + int64(b.Pieces) + int64(b.Rows)
		return n
	}
	for i := range c.assigned.Len() {
		b := c.plan.Batch(c.assigned.At(i))
		n.Pieces = max(n.Pieces, int64(len(b.Pieces)))
		// One entry to open, one per non-empty piece and one per padding tail.
		n.CuLen = max(n.CuLen, 1+int64(len(b.Pieces))+int64(b.Rows))
	}
	return n
}

// shardOf names the shard holding row (for error messages).
func (d *served) shardOf(row int) string {
	if row < 0 {
		return "a shard"
	}
	if d.mix != nil {
		s, r := d.mix.locate(row)
		return "source " + d.mix.parts[s].name + " " + d.mix.parts[s].shardOf(r)
	}
	n := int64(row)
	for _, sh := range d.ds.Shards() {
		if n < sh.Rows {
			return fmt.Sprintf("shard %s (row %d)", sh.Name, row)
		}
		n -= sh.Rows
	}
	return fmt.Sprintf("row %d", row)
}
