package framedio

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"runtime"
	"sync"
	"sync/atomic"

	"github.com/klauspost/compress/gzip"
	"github.com/klauspost/compress/zstd"
	"golang.org/x/sync/semaphore"
)

// Options tune a parallel [Reader]. Zero fields take the defaults.
type Options struct {
	// Decoders is the number of goroutines decoding frames. Default
	// min(GOMAXPROCS, 8): a core decodes zstd at about 1 GB/s but inflates
	// gzip at only 120-300 MB/s while the tokenizer keeps every core busy,
	// and on the GPU machine's 16 cores four inflaters capped a BGZF input
	// at 491 MB/s of JSONL against 601 for the plain file (issue 18). The
	// budget below, not the count, bounds what they hold.
	Decoders int
	// BudgetBytes bounds the decoded bytes held in flight (decoded ahead
	// and not yet read). Default 64 MiB; never below MaxFrameBytes.
	BudgetBytes int64
	// SpanBytes is the compressed size of the frame groups handed to one
	// decoder. Default 512 KiB.
	SpanBytes int64
	// MaxFrameBytes is the largest stated decoded size of a frame decoded in
	// parallel. Default (and at most) [MaxFrameBytes].
	MaxFrameBytes int64
}

func (o Options) withDefaults() Options {
	if o.Decoders <= 0 {
		o.Decoders = min(runtime.GOMAXPROCS(0), 8)
	}
	if o.BudgetBytes <= 0 {
		o.BudgetBytes = 64 << 20
	}
	if o.MaxFrameBytes <= 0 || o.MaxFrameBytes > MaxFrameBytes {
		o.MaxFrameBytes = MaxFrameBytes
	}
	o.BudgetBytes = max(o.BudgetBytes, o.MaxFrameBytes)
	if o.SpanBytes <= 0 {
		o.SpanBytes = 512 << 10
	}
	return o
}

// Splittable reports whether the file's first frame can be decoded apart
// from the rest (a zstd frame of stated content size ≤ MaxFrameBytes, a BGZF
// gzip member). It reads only the first frame's headers. A file that is
// not splittable is best decoded as one stream by an ordinary decoder; a
// malformed first frame is reported as not splittable (the ordinary decoder
// then reports it).
func Splittable(r io.ReaderAt, size int64, codec Codec) bool {
	w := newWalker(r, size, codec, 1, MaxFrameBytes)
	for off := int64(0); off < size; {
		f, kind, err := w.frameAt(off)
		if err != nil || kind == frameSerial {
			return false
		}
		if kind == frameParallel {
			return true
		}
		off += f.n // skippable frames
	}
	return false
}

// Reader decodes a framed file in parallel and returns its bytes in order.
// Read and Close must be called from one goroutine.
type Reader struct {
	r      io.ReaderAt
	size   int64
	codec  Codec
	opt    Options
	order  chan *job // jobs in file order, bounded: the decoders' look-ahead
	stop   context.CancelFunc
	ctx    context.Context
	budget *semaphore.Weighted
	wg     sync.WaitGroup

	cur      *job
	rest     []byte       // unread part of cur's output
	stream   io.Reader    // serial span being decoded on the reading goroutine
	closeStr func()       // releases stream's decoder
	err      error        // sticky
	consumed atomic.Int64 // compressed bytes of the spans read to their end
	pool     sync.Pool    // output buffers
}

type job struct {
	span  span
	out   []byte
	err   error
	held  int64         // budget held for out
	ready chan struct{} // closed when out and err are set
}

// Open starts decoding the framed file r of the given size. Call
// [Splittable] first: Open decodes any layout, but a file of one serial
// frame gains nothing from it.
func Open(r io.ReaderAt, size int64, codec Codec, opt Options) *Reader {
	opt = opt.withDefaults()
	ctx, cancel := context.WithCancel(context.Background())
	d := &Reader{r: r, size: size, codec: codec, opt: opt, ctx: ctx, stop: cancel,
		order:  make(chan *job, 2*opt.Decoders),
		budget: semaphore.NewWeighted(opt.BudgetBytes)}
	jobs := make(chan *job, 2*opt.Decoders)
	d.wg.Add(1 + opt.Decoders)
	go d.walk(newWalker(r, size, codec, opt.SpanBytes, opt.MaxFrameBytes), jobs)
	for range opt.Decoders {
		go d.decode(jobs)
	}
	return d
}

// walk finds the spans and queues them, in order, for the decoders and the
// reader.
func (d *Reader) walk(w *walker, jobs chan<- *job) {
	defer d.wg.Done()
	defer close(jobs)
	defer close(d.order)
	for {
		sp, err := w.next()
		if errors.Is(err, io.EOF) {
			return
		}
		j := &job{span: sp, err: err, ready: make(chan struct{})}
		if err != nil || sp.serial {
			close(j.ready) // the reader handles it
		} else {
			j.held = min(sp.out, d.opt.BudgetBytes)
			if d.budget.Acquire(d.ctx, j.held) != nil {
				return
			}
		}
		select {
		case d.order <- j:
		case <-d.ctx.Done():
			return
		}
		if err != nil {
			return
		}
		if !sp.serial {
			jobs <- j // never blocks for long: as deep as order
		}
	}
}

// decode runs on a decoder goroutine.
func (d *Reader) decode(jobs <-chan *job) {
	defer d.wg.Done()
	var zd *zstd.Decoder
	var gz *gzip.Reader
	var in []byte
	defer func() {
		if zd != nil {
			zd.Close()
		}
	}()
	for j := range jobs {
		if d.ctx.Err() != nil {
			close(j.ready)
			continue
		}
		sp := j.span
		if int64(cap(in)) < sp.n {
			in = make([]byte, sp.n)
		}
		in = in[:sp.n]
		if k, err := d.r.ReadAt(in, sp.off); k < len(in) {
			j.err = fmt.Errorf("%s: read bytes %d..%d: %w", d.codec, sp.off, sp.off+sp.n, err)
			close(j.ready)
			continue
		}
		out, _ := d.pool.Get().([]byte)
		if int64(cap(out)) < sp.out {
			// A hostile header may state more than the frames hold: grow past 1 MiB only as bytes arrive.
			out = make([]byte, 0, min(sp.out, 1<<20))
		}
		out = out[:0]
		var err error
		if d.codec == Zstd {
			if zd == nil {
				zd, err = zstd.NewReader(nil, zstd.WithDecoderConcurrency(1), zstd.WithDecoderMaxMemory(uint64(d.opt.MaxFrameBytes)+1))
			}
			if err == nil {
				out, err = decodeZstd(zd, in, sp, out)
			}
		} else {
			out, err = decodeGzip(&gz, in, sp, out)
		}
		j.out, j.err = out, err
		close(j.ready)
	}
}

// decodeZstd appends the frames of sp, decoded, to out.
func decodeZstd(zd *zstd.Decoder, in []byte, sp span, out []byte) ([]byte, error) {
	for _, f := range sp.frames {
		before := len(out)
		var err error
		out, err = zd.DecodeAll(in[f.off-sp.off:f.off-sp.off+f.n], out)
		if err != nil {
			return out[:before], decoderError(Zstd, f.off, err)
		}
		if got := int64(len(out) - before); got != f.out {
			return out[:before], &formatError{Zstd, f.off, fmt.Sprintf("decoded %d bytes, the frame header states %d", got, f.out), nil}
		}
	}
	return out, nil
}

// decodeGzip appends the members of sp, decoded, to out.
func decodeGzip(gz **gzip.Reader, in []byte, sp span, out []byte) ([]byte, error) {
	for _, f := range sp.frames {
		m := bytes.NewReader(in[f.off-sp.off : f.off-sp.off+f.n])
		var err error
		if *gz == nil {
			*gz, err = gzip.NewReader(m)
		} else {
			err = (*gz).Reset(m)
		}
		if err != nil {
			return out, decoderError(Gzip, f.off, err)
		}
		(*gz).Multistream(false)
		before := len(out)
		buf := bytes.NewBuffer(out)
		// One byte more than stated: a member that decodes to more is an error, not a memory blow-up.
		_, err = io.CopyN(buf, *gz, f.out+1)
		out = buf.Bytes()
		if err != nil && !errors.Is(err, io.EOF) {
			return out[:before], decoderError(Gzip, f.off, err)
		}
		if got := int64(len(out) - before); got != f.out {
			return out[:before], &formatError{Gzip, f.off, fmt.Sprintf("decoded %d bytes, the member's trailer states %d", got, f.out), nil}
		}
		if m.Len() != 0 {
			return out[:before], &formatError{Gzip, f.off, fmt.Sprintf("%d bytes left after the member's trailer, inside its BGZF block size", m.Len()), nil}
		}
	}
	return out, nil
}

var errReadAfterClose = errors.New("framedio: read after Close")

// Read returns the file's decoded bytes in order.
func (d *Reader) Read(p []byte) (int, error) {
	for len(d.rest) == 0 {
		if d.stream != nil {
			n, err := d.stream.Read(p)
			if errors.Is(err, io.EOF) {
				d.endStream()
				if n > 0 {
					return n, nil
				}
				continue
			}
			if err != nil {
				d.err = err
				d.endStream()
			}
			return n, err
		}
		d.release()
		if d.err != nil {
			return 0, d.err
		}
		j, ok := <-d.order
		if !ok {
			d.err = io.EOF
			d.consumed.Store(d.size) // skippable frames between spans included
			continue
		}
		<-j.ready
		d.cur = j
		switch {
		case j.err != nil:
			d.rest, d.err = j.out, j.err // the good frames' bytes, then the error
		case j.span.serial:
			d.startStream(j.span)
		default:
			d.rest = j.out
		}
	}
	n := copy(p, d.rest)
	d.rest = d.rest[n:]
	return n, nil
}

// release gives back the budget and buffer of the job read to its end.
func (d *Reader) release() {
	j := d.cur
	if j == nil {
		return
	}
	d.cur = nil
	if j.err == nil {
		d.consumed.Add(j.span.n)
	}
	if j.held > 0 {
		d.budget.Release(j.held)
	}
	if j.out != nil {
		d.pool.Put(j.out[:0]) //nolint:staticcheck // SA6002: one small allocation per span is fine
	}
}

// startStream decodes a serial span on the reading goroutine.
func (d *Reader) startStream(sp span) {
	sec := io.NewSectionReader(d.r, sp.off, sp.n)
	switch d.codec {
	case Zstd:
		zr, err := zstd.NewReader(sec, zstd.WithDecoderConcurrency(2))
		if err != nil {
			d.err = decoderError(Zstd, sp.off, err)
			return
		}
		d.stream, d.closeStr = offsetErrors{zr, Zstd, sp.off}, zr.Close
	default:
		zr, err := gzip.NewReader(sec)
		if err != nil {
			d.err = decoderError(Gzip, sp.off, err)
			return
		}
		d.stream, d.closeStr = offsetErrors{zr, Gzip, sp.off}, func() { zr.Close() }
	}
}

func (d *Reader) endStream() {
	if d.closeStr != nil {
		d.closeStr()
	}
	d.stream, d.closeStr = nil, nil
}

// offsetErrors names the start of a serial span in its decoder's errors.
type offsetErrors struct {
	r     io.Reader
	codec Codec
	off   int64
}

func (o offsetErrors) Read(p []byte) (int, error) {
	n, err := o.r.Read(p)
	if err != nil && !errors.Is(err, io.EOF) {
		err = decoderError(o.codec, o.off, err)
	}
	return n, err
}

// Consumed returns the compressed bytes of the frames read to their end:
// progress against the file's size. It may be called from any goroutine.
func (d *Reader) Consumed() int64 { return d.consumed.Load() }

// Close stops the decoders and waits for them; the file may be closed
// afterwards. Close is idempotent.
func (d *Reader) Close() error {
	d.stop()
	d.endStream()
	d.release()
	d.rest, d.err = nil, errReadAfterClose
	for range d.order { // unblock and drain the walker
	}
	d.wg.Wait()
	return nil
}
