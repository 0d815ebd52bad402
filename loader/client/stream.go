package client

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sync"
	"sync/atomic"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/protobuf/proto"

	"github.com/gload/gload/loader/shm"
	"github.com/gload/gload/proto/gloadpb"
)

// Batch is one batch of Rows sequences padded to Length tokens.
type Batch struct {
	Seq         uint64 // position in the stream, from 0
	GlobalIndex uint64 // index in the epoch plan
	RankStep    uint64 // position in the rank's sequence of batches
	Rows        int
	Length      int
	Pieces      int   // sequences (packed: documents or pieces; otherwise Rows)
	CuLen       int   // entries in CuSeqlens (packed)
	Slot        int32 // shared-memory slot (-1 over gRPC)
	Trained     int   // labels other than -100 (SFT datasets; 0 without labels)

	inputIDs, lengths, index, positionIDs, cuSeqlens []byte
	labels                                           []byte

	block    *block
	pool     *blockPool
	stream   *Stream
	acked    atomic.Bool
	released atomic.Bool
}

// Shape returns (rows, length).
func (b *Batch) Shape() (rows, length int) { return b.Rows, b.Length }

// InputIDs returns the token ids, [Rows×Length] row-major, padded with the
// policy's pad_id.
func (b *Batch) InputIDs() []int32 { return int32s(b.inputIDs) }

// InputIDsBytes returns InputIDs as little-endian bytes.
func (b *Batch) InputIDsBytes() []byte { return b.inputIDs }

// Lengths returns the real tokens of each row (attention mask: position <
// length).
func (b *Batch) Lengths() []int32 { return int32s(b.lengths) }

// Index returns the dataset row of each sequence ([Pieces]).
func (b *Batch) Index() []int64 { return int64s(b.index) }

// PositionIDs returns packed batches' position ids ([Rows×Length]; nil for
// other policies).
func (b *Batch) PositionIDs() []int32 { return int32s(b.positionIDs) }

// Labels returns the stored SFT labels, [Rows×Length] row-major: -100 at padding and (packed) at each document's
// first token; nil when the dataset has no labels column.
func (b *Batch) Labels() []int32 { return int32s(b.labels) }

// LabelsBytes returns Labels as little-endian bytes.
func (b *Batch) LabelsBytes() []byte { return b.labels }

// CuSeqlens returns packed batches' cumulative sequence lengths over the
// flattened batch ([CuLen]; nil for other policies).
func (b *Batch) CuSeqlens() []int32 { return int32s(b.cuSeqlens) }

// Release acknowledges the batch (if Next has not already) and hands its
// memory back for reuse: the slices it returned become invalid. Calling it
// more than once is harmless.
func (b *Batch) Release() {
	b.ack()
	if b.released.Swap(true) {
		return
	}
	b.inputIDs, b.lengths, b.index, b.positionIDs, b.cuSeqlens = nil, nil, nil, nil, nil
	if b.pool != nil {
		b.pool.put(b.block)
	}
	b.block = nil
}

func (b *Batch) ack() {
	if b.stream != nil && b.stream.bell != nil {
		if !b.acked.Swap(true) {
			b.stream.releaseSlot(b.Seq)
		}
		return
	}
	if b.stream != nil && !b.acked.Swap(true) {
		b.stream.send(&gloadpb.ClientMessage{Msg: &gloadpb.ClientMessage_Ack{Ack: &gloadpb.Ack{Seq: b.Seq, Slot: b.Slot}}}, true)
	}
}

type streamOptions struct {
	ackOnNext bool
	reports   bool
	doorbell  bool
	now       func() time.Time
}

// Doorbell says whether a shm stream asks for the doorbell hand-off (default
// true): batches announced in the ring and slots returned through it, no
// message per batch. Servers that do not offer it send batch messages.
func Doorbell(on bool) StreamOption { return func(o *streamOptions) { o.doorbell = on } }

// StreamOption configures Stream.
type StreamOption func(*streamOptions)

// AckOnNext says whether Next acknowledges the batch it returned before
// (default true). With false, every batch must be Released, or the server
// stops after the prefetch depth.
func AckOnNext(on bool) StreamOption { return func(o *streamOptions) { o.ackOnNext = on } }

// Reports says whether Next sends a step report (wait and step time) to the
// server (default true).
func Reports(on bool) StreamOption { return func(o *streamOptions) { o.reports = on } }

type received struct {
	batch *Batch
	end   *gloadpb.End
	err   error
}

// Stream is one consumer's batch stream.
type Stream struct {
	opts   streamOptions
	cs     grpc.ClientStream
	cancel context.CancelFunc
	ctx    context.Context
	opened *gloadpb.Opened
	pool   *blockPool
	// ring is the shared-memory ring (shm transport), mapped read-only.
	ring *shm.Mapping
	// bell is the ring's control region on doorbell streams (nil otherwise):
	// Next reads batches from it; acks advance its released word in order.
	bell    *shm.ClientDoorbell
	nextSeq uint64
	relMu   sync.Mutex
	relNext uint64
	relDone []bool // by seq mod slots: released out of order, waiting for earlier ones
	// ended is the end message when it came while Next waited for a
	// batch in the ring (the server announces every batch before it).
	ended *received

	in         chan received
	out        chan *gloadpb.ClientMessage
	senderDone chan struct{}
	wg         sync.WaitGroup

	// Caller-goroutine state.
	last       *Batch
	lastStep   uint64
	haveLast   bool
	prevReturn time.Time
	done       error // sticky end: io.EOF or the stream's error
	closed     bool
}

// Stream opens a batch stream for open and waits for the server's Opened.
// ctx governs the stream's whole life; Close ends it early.
func (c *Client) Stream(ctx context.Context, open *gloadpb.Open, opts ...StreamOption) (*Stream, error) {
	o := streamOptions{ackOnNext: true, reports: true, doorbell: true, now: time.Now}
	for _, f := range opts {
		f(&o)
	}
	if o.doorbell && open.GetTransport() == gloadpb.Transport_TRANSPORT_SHM && !open.GetShmDoorbell() {
		open = proto.Clone(open).(*gloadpb.Open)
		open.ShmDoorbell = true
	}
	sctx, cancel := context.WithCancel(ctx)
	pool := &blockPool{}
	cs, err := c.cc.NewStream(sctx, &gloadpb.Loader_ServiceDesc.Streams[0], gloadpb.Loader_Batches_FullMethodName,
		grpc.ForceCodecV2(newClientCodec(pool)), grpc.MaxCallRecvMsgSize(c.maxMsg))
	if err != nil {
		cancel()
		return nil, err
	}
	if err := cs.SendMsg(&gloadpb.ClientMessage{Msg: &gloadpb.ClientMessage_Open{Open: open}}); err != nil {
		cancel()
		return nil, recvStatus(cs, err)
	}
	var first serverMsg
	if err := cs.RecvMsg(&first); err != nil {
		cancel()
		return nil, err
	}
	opened := first.other.GetOpened()
	if opened == nil {
		cancel()
		return nil, fmt.Errorf("%w: first message is not opened", ErrProtocol)
	}
	var ring *shm.Mapping
	var bell *shm.ClientDoorbell
	if opened.ShmPath != "" {
		if ring, bell, err = mapRing(opened, c.dialer.Last().UID); err != nil {
			cancel()
			return nil, err
		}
	}
	depth := int(max(opened.Prefetch, 1))
	s := &Stream{
		opts: o, cs: cs, cancel: cancel, ctx: sctx, opened: opened, pool: pool, ring: ring, bell: bell,
		in:         make(chan received, depth+2),
		out:        make(chan *gloadpb.ClientMessage, 2*depth+8),
		senderDone: make(chan struct{}),
	}
	if bell != nil {
		s.relDone = make([]bool, bell.Slots())
	}
	s.wg.Add(2)
	go s.receive()
	go s.sender()
	return s, nil
}

// recvStatus returns the stream's real status after a failed send.
func recvStatus(cs grpc.ClientStream, err error) error {
	if !errors.Is(err, io.EOF) {
		return err
	}
	var m serverMsg
	if rerr := cs.RecvMsg(&m); rerr != nil {
		return rerr
	}
	return err
}

// Opened returns the server's answer to the open message.
func (s *Stream) Opened() *gloadpb.Opened { return s.opened }

func (s *Stream) receive() {
	defer s.wg.Done()
	for {
		var m serverMsg
		err := s.cs.RecvMsg(&m)
		var r received
		switch {
		case err != nil:
			r.err = err
		case m.batch != nil:
			m.batch.stream, m.batch.pool = s, s.pool
			r.batch = m.batch
			if m.batch.Slot >= 0 {
				r.err = s.viewSlot(m.batch)
			}
		case m.other.GetEnd() != nil:
			r.end = m.other.GetEnd()
		default:
			r.err = fmt.Errorf("%w: unexpected message after opened", ErrProtocol)
		}
		select {
		case s.in <- r:
		case <-s.ctx.Done():
			return
		}
		if r.err != nil {
			return
		}
	}
}

// sender is the only goroutine that sends on the stream; a nil message
// closes the client's side.
func (s *Stream) sender() {
	defer s.wg.Done()
	defer close(s.senderDone)
	for {
		select {
		case m := <-s.out:
			if m == nil {
				_ = s.cs.CloseSend()
				return
			}
			if err := s.cs.SendMsg(m); err != nil {
				return
			}
		case <-s.ctx.Done():
			return
		}
	}
}

// send queues m; acks wait for room, reports are dropped when the queue is full.
func (s *Stream) send(m *gloadpb.ClientMessage, mustDeliver bool) {
	if !mustDeliver {
		select {
		case s.out <- m:
		default:
		}
		return
	}
	select {
	case s.out <- m:
	case <-s.senderDone:
	case <-s.ctx.Done():
	}
}

// Next returns the next batch, or io.EOF after the last one. With AckOnNext
// (the default) it first acknowledges the batch it returned before.
func (s *Stream) Next(ctx context.Context) (*Batch, error) {
	if s.done != nil {
		return nil, s.done
	}
	t0 := s.opts.now()
	if s.last != nil && s.opts.ackOnNext {
		s.last.ack()
	}
	var r received
	if s.bell != nil && s.nextSeq >= s.opened.Batches && s.ended != nil {
		r = *s.ended
	} else if s.bell != nil && s.nextSeq < s.opened.Batches {
		b, rr, err := s.fromRing(ctx)
		if err != nil {
			return nil, err
		}
		if b != nil {
			return s.handOut(b, t0), nil
		}
		r = rr
	} else {
		select {
		case r = <-s.in:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	switch {
	case r.err != nil:
		if errors.Is(r.err, io.EOF) {
			r.err = fmt.Errorf("%w: stream ended without end message", ErrProtocol)
		}
		s.done = r.err
		return nil, r.err
	case r.end != nil:
		s.done = io.EOF
		s.send(nil, true)
		return nil, io.EOF
	}
	return s.handOut(r.batch, t0), nil
}

// handOut sends the step report and records b as the last batch returned.
func (s *Stream) handOut(b *Batch, t0 time.Time) *Batch {
	t1 := s.opts.now()
	if s.opts.reports {
		var step time.Duration
		if !s.prevReturn.IsZero() {
			step = t0.Sub(s.prevReturn)
		}
		s.send(&gloadpb.ClientMessage{Msg: &gloadpb.ClientMessage_Report{Report: &gloadpb.StepReport{
			Seq: b.Seq, WaitUs: uint64(t1.Sub(t0).Microseconds()), StepUs: uint64(step.Microseconds()),
			ClientTimeUnixUs: t1.UnixMicro(),
		}}}, false)
	}
	s.prevReturn = t1
	s.last, s.lastStep, s.haveLast = b, b.RankStep, true
	return b
}

// Doorbell waits: a short spin, then futex sleeps on the slot's word (the
// server wakes the client when it publishes) whose timeout doubles to
// ringPollMax; the stream's messages and context are looked at in between.
const (
	ringSpin    = 200
	ringPollMin = 5 * time.Microsecond
	ringPollMax = 200 * time.Microsecond
)

// fromRing waits for batch nextSeq to be announced in its slot. It returns
// the batch, or what the stream received meanwhile (an error, or an end that
// came before the batch: a protocol error).
func (s *Stream) fromRing(ctx context.Context) (*Batch, received, error) {
	seq := s.nextSeq
	slot := int(seq % uint64(s.bell.Slots()))
	pause := ringPollMin
	ended := s.ended != nil // the end came already: every batch is in the ring
	for i := 0; ; i++ {
		if h, ok := s.bell.Ready(slot, seq); ok {
			b := &Batch{Seq: seq, GlobalIndex: h.Global, RankStep: h.RankStep, Rows: int(h.Rows), Length: int(h.Length),
				Pieces: int(h.Pieces), CuLen: int(h.CuLen), Slot: int32(slot), Trained: int(h.Trained), stream: s}
			if err := s.viewSlot(b); err != nil {
				s.done = err
				return nil, received{}, err
			}
			s.nextSeq++
			return b, received{}, nil
		}
		if ended {
			return nil, received{err: fmt.Errorf("%w: the stream ended after %d of %d batches announced in the ring", ErrProtocol, seq, s.opened.Batches)}, nil
		}
		select {
		case r := <-s.in:
			if r.err != nil || r.end == nil {
				if r.err == nil {
					r.err = fmt.Errorf("%w: a batch message on a doorbell stream", ErrProtocol)
				}
				return nil, r, nil
			}
			// The end follows the last batch's announcement: look at the ring once more.
			s.ended, ended = &r, true
			continue
		case <-ctx.Done():
			return nil, received{}, ctx.Err()
		default:
		}
		if i < ringSpin {
			continue
		}
		s.bell.WaitReady(slot, seq, pause)
		pause = min(2*pause, ringPollMax)
	}
}

// releaseSlot hands batch seq's slot back: the released word advances over
// every batch released so far without a gap (Release may come in any order).
func (s *Stream) releaseSlot(seq uint64) {
	s.relMu.Lock()
	defer s.relMu.Unlock()
	n := uint64(len(s.relDone))
	if seq < s.relNext || seq >= s.relNext+n {
		return // already released, or not announced: nothing to hand back
	}
	s.relDone[seq%n] = true
	for s.relDone[s.relNext%n] {
		s.relDone[s.relNext%n] = false
		s.relNext++
	}
	if !s.closed {
		s.bell.Release(s.relNext)
	}
}

// State returns the resume state matching the last batch Next returned:
// consumed = start.consumed + (rank_step+1) × world_size.
func (s *Stream) State() *gloadpb.ResumeState {
	st := &gloadpb.ResumeState{}
	if start := s.opened.GetStart(); start != nil {
		st = proto.Clone(start).(*gloadpb.ResumeState)
	}
	if s.haveLast {
		st.Consumed += (s.lastStep + 1) * uint64(max(s.opened.WorldSize, 1))
	}
	return st
}

// Close ends the stream and waits for its goroutines. Batches not yet
// released stay valid.
func (s *Stream) Close() error {
	if s.closed {
		return nil
	}
	s.relMu.Lock() // no release writes the ring's word once it is unmapped
	s.closed = true
	s.relMu.Unlock()
	if s.done == nil {
		s.done = ErrClosed
	}
	s.cancel()
	s.wg.Wait()
	if s.ring != nil {
		return s.ring.Close()
	}
	return nil
}

// mapRing maps the ring an Opened names, checking its layout (and its
// control region on doorbell streams).
func mapRing(o *gloadpb.Opened, owner int) (*shm.Mapping, *shm.ClientDoorbell, error) {
	if o.Slots == 0 || o.Slots < o.Prefetch || o.SlotBytes == 0 || o.SlotBytes > shm.MaxSlotBytes || o.Layout == nil {
		return nil, nil, fmt.Errorf("%w: opened: ring %s of %d slots of %d bytes (prefetch %d, layout %v)",
			ErrProtocol, o.ShmPath, o.Slots, o.SlotBytes, o.Prefetch, o.Layout)
	}
	if o.ControlBytes > 0 {
		if o.ControlOffset != uint64(o.Slots)*o.SlotBytes || int64(o.ControlBytes) != shm.ControlBytes(int(o.Slots)) {
			return nil, nil, fmt.Errorf("%w: opened: control region of %d bytes at %d after %d slots of %d bytes",
				ErrProtocol, o.ControlBytes, o.ControlOffset, o.Slots, o.SlotBytes)
		}
		m, bell, err := shm.MapDoorbell(o.ShmPath, int(o.Slots), int64(o.SlotBytes), shm.Owner(owner))
		if err != nil {
			return nil, nil, fmt.Errorf("shm transport (the client must run on the server's host, else use grpc): %w", err)
		}
		return m, bell, nil
	}
	m, err := shm.Map(o.ShmPath, int(o.Slots), int64(o.SlotBytes), shm.Owner(owner))
	if err != nil {
		return nil, nil, fmt.Errorf("shm transport (the client must run on the server's host, else use grpc): %w", err)
	}
	return m, nil, nil
}

// viewSlot points b's buffers into its ring slot, checking that they fit.
func (s *Stream) viewSlot(b *Batch) error {
	if s.ring == nil {
		return fmt.Errorf("%w: batch %d names slot %d on a stream without a ring", ErrProtocol, b.Seq, b.Slot)
	}
	mem := s.ring.Slot(int(b.Slot))
	if mem == nil {
		return fmt.Errorf("%w: batch %d names slot %d of %d", ErrProtocol, b.Seq, b.Slot, s.opened.Slots)
	}
	cells := uint64(b.Rows) * uint64(b.Length)
	var pos uint64
	if b.CuLen > 0 {
		pos = 4 * cells // packed batches carry position_ids
	}
	l := s.opened.Layout
	var err error
	view := func(off, n uint64) []byte {
		if err != nil {
			return nil
		}
		if off > uint64(len(mem)) || n > uint64(len(mem))-off {
			err = fmt.Errorf("%w: batch %d (%d×%d, %d pieces) does not fit slot %d of %d bytes",
				ErrProtocol, b.Seq, b.Rows, b.Length, b.Pieces, b.Slot, len(mem))
			return nil
		}
		return mem[off : off+n : off+n]
	}
	b.inputIDs = view(l.InputIds, 4*cells)
	b.lengths = view(l.Lengths, 4*uint64(b.Rows))
	b.index = view(l.Index, 8*uint64(b.Pieces))
	b.positionIDs = view(l.PositionIds, pos)
	b.cuSeqlens = view(l.CuSeqlens, 4*uint64(b.CuLen))
	if s.opened.Labels {
		b.labels = view(l.Labels, 4*cells)
	}
	if err != nil {
		b.inputIDs, b.lengths, b.index, b.positionIDs, b.cuSeqlens, b.labels = nil, nil, nil, nil, nil, nil
	}
	return err
}
