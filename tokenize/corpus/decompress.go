package corpus

import (
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"sync/atomic"

	"github.com/gload/gload/internal/framedio"
	"github.com/klauspost/compress/gzip"
	"github.com/klauspost/compress/zstd"
)

// zstdConcurrency is the number of blocks the zstd decoder works on at once.
// Values above 1 decode ahead in goroutines owned by the decoder (stopped by
// Close), which keeps the single reader goroutine busy framing instead of
// waiting on decompression.
const zstdConcurrency = 2

// openFramed returns a parallel decoder of f when f is made of independent
// frames (zstd frames stating their size, BGZF gzip blocks; package
// framedio), or nil when f is one stream (then one decoder reads it).
func openFramed(fh *os.File, f File) *framedio.Reader {
	codec := framedio.Zstd
	if f.Compression == CompressGzip {
		codec = framedio.Gzip
	}
	st, err := fh.Stat()
	if err != nil || !framedio.Splittable(fh, st.Size(), codec) {
		return nil // a stat error shows up again when the stream decoder reads
	}
	return framedio.Open(fh, st.Size(), codec, framedio.Options{})
}

// decompressor wraps r in the decoder for comp. The returned close function
// releases the decoder (not r).
func decompressor(r io.Reader, comp Compression) (io.Reader, func() error, error) {
	return decompressorN(r, comp, zstdConcurrency)
}

// decompressorN is decompressor with the zstd concurrency given.
func decompressorN(r io.Reader, comp Compression, zstdConc int) (io.Reader, func() error, error) {
	switch comp {
	case CompressNone, "":
		return r, func() error { return nil }, nil
	case CompressGzip:
		zr, err := gzip.NewReader(r)
		if err != nil {
			return nil, nil, codecError{"gzip", err}
		}
		// gzip's Close only repeats the last read error, which Next has
		// already reported.
		return codecReader{zr, "gzip"}, func() error { zr.Close(); return nil }, nil
	case CompressZstd:
		zr, err := zstd.NewReader(r, zstd.WithDecoderConcurrency(zstdConc))
		if err != nil {
			return nil, nil, codecError{"zstd", err}
		}
		return codecReader{zr, "zstd"}, func() error { zr.Close(); return nil }, nil
	}
	return nil, nil, fmt.Errorf("%w: compression %q", ErrUnknownFormat, comp)
}

// codecReader labels the errors of a decoder with the codec's name.
type codecReader struct {
	r     io.Reader
	codec string
}

func (c codecReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	if err != nil && err != io.EOF {
		err = codecError{c.codec, err}
	}
	return n, err
}

// codecError prefixes a decoder error with the codec's name unless the
// message already carries it ("gzip: invalid checksum", "zstd: CRC check
// failed", "gzip: unexpected EOF").
type codecError struct {
	codec string
	err   error
}

func (e codecError) Error() string {
	msg := e.err.Error()
	if strings.HasPrefix(msg, e.codec+":") {
		return msg
	}
	if errors.Is(e.err, io.ErrUnexpectedEOF) {
		return e.codec + ": unexpected EOF (truncated file?)"
	}
	return e.codec + ": " + msg
}

func (e codecError) Unwrap() error { return e.err }

// countingReader counts the bytes read from r. The count may be read from
// another goroutine than the one reading.
type countingReader struct {
	r io.Reader
	n atomic.Int64
}

func (c *countingReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n.Add(int64(n))
	return n, err
}

// Read-ahead of decompressed data: decoding runs in a goroutine of its own,
// so that the reader goroutine only frames records. Memory is bounded by
// (readAheadBlocks+2) blocks.
const (
	readAheadBlock  = 256 << 10
	readAheadBlocks = 4
)

type block struct {
	buf []byte
	err error
}

// readAhead reads src in a goroutine it owns; stop ends it.
type readAhead struct {
	full  chan block
	free  chan []byte // holds every buffer when idle: sends never block
	done  chan struct{}
	ended chan struct{}
	blk   []byte // block being consumed
	cur   []byte // its unread part
	err   error
}

func newReadAhead(src io.Reader) *readAhead {
	ra := &readAhead{
		full:  make(chan block, readAheadBlocks),
		free:  make(chan []byte, readAheadBlocks+2),
		done:  make(chan struct{}),
		ended: make(chan struct{}),
	}
	for range readAheadBlocks + 2 {
		ra.free <- make([]byte, readAheadBlock)
	}
	go ra.run(src)
	return ra
}

func (ra *readAhead) run(src io.Reader) {
	defer close(ra.ended)
	for {
		var buf []byte
		select {
		case buf = <-ra.free:
		case <-ra.done:
			return
		}
		// Fill the block, keeping the error that ends it (io.ReadFull
		// would drop an error returned together with the last bytes).
		n, empty := 0, 0
		var err error
		for n < len(buf) && err == nil {
			var k int
			k, err = src.Read(buf[n:])
			n += k
			if k == 0 && err == nil {
				if empty++; empty > maxEmptyReads {
					err = io.ErrNoProgress
				}
			}
		}
		select {
		case ra.full <- block{buf: buf[:n], err: err}:
		case <-ra.done:
			return
		}
		if err != nil {
			return
		}
	}
}

func (ra *readAhead) Read(p []byte) (int, error) {
	for len(ra.cur) == 0 {
		if ra.blk != nil {
			ra.free <- ra.blk[:cap(ra.blk)]
			ra.blk = nil
		}
		if ra.err != nil {
			return 0, ra.err
		}
		b := <-ra.full
		ra.blk, ra.cur, ra.err = b.buf, b.buf, b.err
	}
	n := copy(p, ra.cur)
	ra.cur = ra.cur[n:]
	return n, nil
}

// stop ends the goroutine and waits for it, so that the source can be
// closed safely afterwards.
func (ra *readAhead) stop() {
	select {
	case <-ra.done:
	default:
		close(ra.done)
	}
	<-ra.ended
}
