package framedio

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"strings"
)

// Codec names a compressed format.
type Codec string

// Codecs with a frame layout this package can walk.
const (
	Zstd Codec = "zstd"
	Gzip Codec = "gzip"
)

// MaxFrameBytes is the default largest stated content size of a frame
// decoded in parallel; larger frames (and frames of unknown size) are
// decoded as a stream, in order.
const MaxFrameBytes = 16 << 20

// span is a run of consecutive frames decoded as one job.
type span struct {
	off, n int64   // compressed extent in the file
	out    int64   // decoded size (sum of the frames' stated sizes); 0 for a serial span
	frames []frame // parallel spans: the frames, in order
	serial bool    // decode as a stream: a frame whose end or size is unknown until decoded
}

// frame is one zstd frame or gzip member inside a span.
type frame struct {
	off, n int64 // compressed extent in the file
	out    int64 // stated decoded size
}

// walker finds the frames of a file in order by reading their headers.
type walker struct {
	codec   Codec
	src     *window
	size    int64
	off     int64 // next frame starts here
	target  int64 // compressed bytes gathered into one parallel span
	max     int64 // largest stated decoded size of a frame (and a span) decoded in parallel
	done    bool
	pending error // an error found after a span's good frames
	// A frame parsed but left for the next span (a serial frame after parallel ones, or one past the span's
	// bound), so that its headers, which may be a big frame's thousands of block headers, are walked once.
	peeked     frame
	peekedKind int
	hasPeek    bool
	parsed     int // frames parsed (frameAt calls), for tests
}

func newWalker(r io.ReaderAt, size int64, codec Codec, target, max int64) *walker {
	return &walker{codec: codec, src: newWindow(r, size), size: size, target: target, max: max}
}

// formatError reports a malformed frame at a byte offset.
type formatError struct {
	codec Codec
	off   int64
	what  string
	cause error // the decoder's error, when a decoder found it (gzip.ErrChecksum, ...)
}

func (e *formatError) Error() string {
	return fmt.Sprintf("%s: frame at byte %d: %s", e.codec, e.off, e.what)
}

func (e *formatError) Unwrap() error { return e.cause }

// decoderError is a decoder's error about the frame at off (without the codec's name repeated).
func decoderError(codec Codec, off int64, err error) error {
	return &formatError{codec, off, strings.TrimPrefix(err.Error(), string(codec)+": "), err}
}

// truncated is what a formatError says for a frame that runs past the end of the file.
const truncated = "truncated (the file ends inside it)"

// short describes a failed header read: the file ended, or reading failed.
func short(err error) string {
	if errors.Is(err, io.ErrUnexpectedEOF) {
		return truncated
	}
	return "read: " + err.Error()
}

// next returns the next span, or io.EOF after the last one. An error found
// after some good frames is returned by the call after the span of those.
func (w *walker) next() (span, error) {
	if w.pending != nil {
		err := w.pending
		w.pending, w.done = nil, true
		return span{}, err
	}
	if w.done || w.off >= w.size {
		w.done = true
		return span{}, io.EOF
	}
	var sp span
	for w.off < w.size && (len(sp.frames) == 0 || sp.n < w.target) {
		f, kind, err := w.nextFrame()
		if err != nil {
			if len(sp.frames) > 0 {
				w.pending = err
				return sp, nil
			}
			w.done = true
			return span{}, err
		}
		switch kind {
		case frameSkip:
			w.off += f.n
			continue
		case frameSerial:
			if len(sp.frames) > 0 {
				w.keep(f, kind)
				return sp, nil // the serial frame opens the next span
			}
			w.off += f.n
			return span{off: f.off, n: f.n, serial: true}, nil
		}
		if len(sp.frames) > 0 && sp.out+f.out > w.max {
			w.keep(f, kind)
			return sp, nil // keep a span's output within one frame's bound
		}
		if len(sp.frames) == 0 {
			sp.off = f.off
		}
		sp.frames = append(sp.frames, f)
		sp.n = f.off + f.n - sp.off
		sp.out += f.out
		w.off += f.n
	}
	if len(sp.frames) == 0 {
		w.done = true
		return span{}, io.EOF // only skippable frames were left
	}
	return sp, nil
}

// nextFrame returns the frame at w.off: the one kept by the last call, or a newly parsed one.
func (w *walker) nextFrame() (frame, int, error) {
	if w.hasPeek {
		w.hasPeek = false
		return w.peeked, w.peekedKind, nil
	}
	return w.frameAt(w.off)
}

// keep leaves f (at w.off) for the next call of next.
func (w *walker) keep(f frame, kind int) {
	w.peeked, w.peekedKind, w.hasPeek = f, kind, true
}

// Kinds of frames.
const (
	frameParallel = iota // end and decoded size known: decode anywhere
	frameSerial          // decode as a stream, in order
	frameSkip            // zstd skippable frame: no data
)

// frameAt reads the header of the frame at off.
func (w *walker) frameAt(off int64) (frame, int, error) {
	w.parsed++
	if w.codec == Gzip {
		return w.gzipMemberAt(off)
	}
	return w.zstdFrameAt(off)
}

const (
	zstdMagic         = 0xFD2FB528
	zstdSkipMagicMask = 0xFFFFFFF0
	zstdSkipMagic     = 0x184D2A50
	zstdMaxBlock      = 128 << 10
)

// zstdFrameAt parses the zstd frame (RFC 8878 section 3.1) at off, walking
// its block headers to find its end.
func (w *walker) zstdFrameAt(off int64) (frame, int, error) {
	bad := func(what string) (frame, int, error) { return frame{}, 0, &formatError{Zstd, off, what, nil} }
	b, err := w.src.at(off, 4)
	if err != nil {
		return bad(short(err))
	}
	magic := binary.LittleEndian.Uint32(b)
	if magic&zstdSkipMagicMask == zstdSkipMagic {
		b, err := w.src.at(off+4, 4)
		if err != nil {
			return bad(short(err))
		}
		n := 8 + int64(binary.LittleEndian.Uint32(b))
		if off+n > w.size {
			return bad(truncated)
		}
		return frame{off: off, n: n}, frameSkip, nil
	}
	if magic != zstdMagic {
		return bad(fmt.Sprintf("not a zstd frame (magic number %#08x)", magic))
	}
	b, err = w.src.at(off+4, 1)
	if err != nil {
		return bad(short(err))
	}
	fhd := b[0]
	if fhd&0x08 != 0 {
		return bad("reserved bit set in the frame header descriptor")
	}
	single := fhd&0x20 != 0
	checksum := fhd&0x04 != 0
	dictBytes := [4]int64{0, 1, 2, 4}[fhd&0x03]
	fcsBytes := [4]int64{0, 2, 4, 8}[fhd>>6]
	if fhd>>6 == 0 && single {
		fcsBytes = 1
	}
	pos := off + 5
	if !single {
		pos++ // window descriptor
	}
	pos += dictBytes
	out := int64(-1)
	if fcsBytes > 0 {
		b, err := w.src.at(pos, int(fcsBytes))
		if err != nil {
			return bad(short(err))
		}
		switch fcsBytes {
		case 1:
			out = int64(b[0])
		case 2:
			out = int64(binary.LittleEndian.Uint16(b)) + 256
		case 4:
			out = int64(binary.LittleEndian.Uint32(b))
		case 8:
			v := binary.LittleEndian.Uint64(b)
			if v > 1<<62 {
				v = 1 << 62
			}
			out = int64(v)
		}
	}
	pos += fcsBytes
	for {
		b, err := w.src.at(pos, 3)
		if err != nil {
			return bad(short(err))
		}
		h := uint32(b[0]) | uint32(b[1])<<8 | uint32(b[2])<<16
		last, typ, size := h&1 != 0, (h>>1)&3, int64(h>>3)
		switch typ {
		case 0, 2: // raw, compressed: size bytes follow
			if size > zstdMaxBlock {
				return bad(fmt.Sprintf("block at byte %d states %d bytes (at most %d)", pos, size, zstdMaxBlock))
			}
			pos += 3 + size
		case 1: // RLE: one byte follows
			pos += 3 + 1
		default:
			return bad(fmt.Sprintf("block at byte %d has the reserved block type", pos))
		}
		if pos > w.size {
			return bad(truncated)
		}
		if last {
			break
		}
	}
	if checksum {
		pos += 4
	}
	if pos > w.size {
		return bad(truncated)
	}
	f := frame{off: off, n: pos - off, out: out}
	if out < 0 || out > w.max {
		f.out = 0
		return f, frameSerial, nil
	}
	return f, frameParallel, nil
}

// gzipMemberAt parses the gzip member (RFC 1952) at off. A member with a
// BGZF "BC" extra subfield states its compressed size; any other member
// makes the rest of the file one serial span (its end is known only by
// decoding it).
func (w *walker) gzipMemberAt(off int64) (frame, int, error) {
	bad := func(what string) (frame, int, error) { return frame{}, 0, &formatError{Gzip, off, what, nil} }
	b, err := w.src.at(off, 10)
	if err != nil {
		return bad(short(err))
	}
	if b[0] != 0x1f || b[1] != 0x8b || b[2] != 8 {
		return bad(fmt.Sprintf("not a gzip member (header % x)", b[:3]))
	}
	rest := frame{off: off, n: w.size - off}
	if b[3]&0x04 == 0 { // no FEXTRA: not BGZF
		return rest, frameSerial, nil
	}
	b, err = w.src.at(off+10, 2)
	if err != nil {
		return bad(short(err))
	}
	xlen := int(binary.LittleEndian.Uint16(b))
	extra, err := w.src.at(off+12, xlen)
	if err != nil {
		return bad(short(err))
	}
	for len(extra) >= 4 {
		slen := int(binary.LittleEndian.Uint16(extra[2:4]))
		if 4+slen > len(extra) {
			break // malformed subfields: let the decoder judge the member
		}
		if extra[0] == 'B' && extra[1] == 'C' && slen == 2 {
			n := int64(binary.LittleEndian.Uint16(extra[4:6])) + 1
			if n < int64(12+xlen+8) {
				return bad(fmt.Sprintf("BGZF block size %d is smaller than its own header and trailer", n))
			}
			if off+n > w.size {
				return bad(truncated)
			}
			t, err := w.src.at(off+n-4, 4)
			if err != nil {
				return bad(short(err))
			}
			out := int64(binary.LittleEndian.Uint32(t))
			if out > w.max {
				return rest, frameSerial, nil
			}
			return frame{off: off, n: n, out: out}, frameParallel, nil
		}
		extra = extra[4+slen:]
	}
	return rest, frameSerial, nil
}

// window serves small reads of a file from a cached window, so that walking
// headers costs one read per window rather than one per header.
type window struct {
	r     io.ReaderAt
	size  int64
	buf   []byte
	start int64
	n     int
}

const windowBytes = 32 << 10

func newWindow(r io.ReaderAt, size int64) *window {
	return &window{r: r, size: size, buf: make([]byte, windowBytes), start: -1}
}

// at returns n bytes at off (valid until the next call), or an error when
// they lie past the end of the file or cannot be read.
func (w *window) at(off int64, n int) ([]byte, error) {
	if off < 0 || n < 0 || off+int64(n) > w.size {
		return nil, io.ErrUnexpectedEOF
	}
	if w.start >= 0 && off >= w.start && off+int64(n) <= w.start+int64(w.n) {
		return w.buf[off-w.start : off-w.start+int64(n)], nil
	}
	if n > len(w.buf) {
		w.buf = make([]byte, n)
	}
	want := min(int64(len(w.buf)), w.size-off)
	k, err := w.r.ReadAt(w.buf[:want], off)
	if k < n {
		w.start = -1
		if err == nil || errors.Is(err, io.EOF) {
			err = io.ErrUnexpectedEOF
		}
		return nil, err
	}
	w.start, w.n = off, k
	return w.buf[:n], nil
}
