package framedio

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"io"
	"runtime"

	"github.com/klauspost/compress/flate"
	"github.com/klauspost/compress/zstd"
	"golang.org/x/sync/errgroup"
)

// BGZF is the Codec name the writer takes for gzip in BGZF blocks.
const BGZF Codec = "bgzf"

// bgzfBlockInput is the input per BGZF block: htslib's limit, so that a
// block of incompressible input still fits the 16-bit block size.
const bgzfBlockInput = 0xff00

// bgzfEOF is the empty block that ends a BGZF file (SAM/BAM spec 4.1.2).
var bgzfEOF = []byte{0x1f, 0x8b, 8, 4, 0, 0, 0, 0, 0, 0xff, 6, 0, 'B', 'C', 2, 0, 0x1b, 0, 3, 0, 0, 0, 0, 0, 0, 0, 0, 0}

// WriterOptions choose the layout a [Writer] produces.
type WriterOptions struct {
	// Codec is Zstd (frames of FrameBytes input, each stating its size) or
	// BGZF (gzip members of at most 65,280 input bytes).
	Codec Codec
	// Level is the codec's level: zstd 1 (fastest) to 4 (best), default 2;
	// gzip 1 to 9, default 6.
	Level int
	// FrameBytes is the input per zstd frame. Default 4 MiB, at most
	// MaxFrameBytes (so that the reader decodes every frame in parallel).
	FrameBytes int
	// Workers compress frames at once. Default GOMAXPROCS.
	Workers int
}

// Writer compresses what is written to it into independent frames, in
// parallel, writing them to the destination in order. Write and Close must
// be called from one goroutine; Close writes the last frame (and BGZF's end
// marker) and does not close the destination.
type Writer struct {
	dst   io.Writer
	opt   WriterOptions
	frame int
	buf   []byte   // input not yet in a frame
	batch [][]byte // full frames' input waiting to be compressed
	zenc  []*zstd.Encoder
	err   error
}

// NewWriter returns a Writer to dst, or an error for bad options.
func NewWriter(dst io.Writer, opt WriterOptions) (*Writer, error) {
	if opt.Workers <= 0 {
		opt.Workers = runtime.GOMAXPROCS(0)
	}
	w := &Writer{dst: dst, opt: opt}
	switch opt.Codec {
	case Zstd:
		if opt.Level == 0 {
			opt.Level = 2
		}
		if opt.Level < 1 || opt.Level > 4 {
			return nil, fmt.Errorf("zstd level %d: want 1 (fastest) to 4 (best)", opt.Level)
		}
		if opt.FrameBytes == 0 {
			opt.FrameBytes = 4 << 20
		}
		if opt.FrameBytes < 1 || opt.FrameBytes > MaxFrameBytes {
			return nil, fmt.Errorf("frame size %d: want 1 to %d bytes", opt.FrameBytes, MaxFrameBytes)
		}
		w.frame = opt.FrameBytes
		for range opt.Workers {
			enc, err := zstd.NewWriter(nil, zstd.WithEncoderLevel(zstd.EncoderLevel(opt.Level)),
				zstd.WithEncoderConcurrency(1), zstd.WithEncoderCRC(true))
			if err != nil {
				return nil, err
			}
			w.zenc = append(w.zenc, enc)
		}
	case BGZF, Gzip:
		opt.Codec = BGZF
		if opt.Level == 0 {
			opt.Level = 6
		}
		if opt.Level < 1 || opt.Level > 9 {
			return nil, fmt.Errorf("gzip level %d: want 1 to 9", opt.Level)
		}
		w.frame = bgzfBlockInput
	default:
		return nil, fmt.Errorf("codec %q: want zstd or bgzf", opt.Codec)
	}
	w.opt = opt
	return w, nil
}

// Write buffers p, compressing and writing whole batches of frames.
func (w *Writer) Write(p []byte) (int, error) {
	if w.err != nil {
		return 0, w.err
	}
	n := len(p)
	for len(p) > 0 {
		if w.buf == nil {
			w.buf = make([]byte, 0, w.frame)
		}
		k := min(len(p), w.frame-len(w.buf))
		w.buf = append(w.buf, p[:k]...)
		p = p[k:]
		if len(w.buf) == w.frame {
			w.batch = append(w.batch, w.buf)
			w.buf = nil
			if len(w.batch) == 2*w.opt.Workers {
				if w.err = w.flush(); w.err != nil {
					return n - len(p), w.err
				}
			}
		}
	}
	return n, nil
}

// flush compresses the waiting frames on the workers and writes them in order.
func (w *Writer) flush() error {
	out := make([][]byte, len(w.batch))
	var g errgroup.Group
	per := (len(w.batch) + w.opt.Workers - 1) / w.opt.Workers
	for k := 0; k*per < len(w.batch); k++ {
		g.Go(func() error {
			for i := k * per; i < min(len(w.batch), (k+1)*per); i++ {
				var err error
				if w.opt.Codec == Zstd {
					out[i] = w.zenc[k].EncodeAll(w.batch[i], nil)
				} else if out[i], err = bgzfBlock(w.batch[i], w.opt.Level); err != nil {
					return err
				}
			}
			return nil
		})
	}
	if err := g.Wait(); err != nil {
		return err
	}
	for _, b := range out {
		if _, err := w.dst.Write(b); err != nil {
			return err
		}
	}
	w.batch = w.batch[:0]
	return nil
}

// Close compresses and writes what is left. It does not close the destination.
func (w *Writer) Close() error {
	if w.err != nil {
		return w.err
	}
	if len(w.buf) > 0 {
		w.batch = append(w.batch, w.buf)
		w.buf = nil
	}
	w.err = w.flush()
	if w.err == nil && w.opt.Codec == BGZF {
		_, w.err = w.dst.Write(bgzfEOF)
	}
	for _, e := range w.zenc {
		e.Close()
	}
	w.zenc = nil
	if w.err == nil {
		w.err = errClosed
		return nil
	}
	return w.err
}

var errClosed = fmt.Errorf("framedio: write after Close")

// bgzfBlock compresses in (at most bgzfBlockInput bytes) into one BGZF member.
func bgzfBlock(in []byte, level int) ([]byte, error) {
	var body bytes.Buffer
	fw, err := flate.NewWriter(&body, level)
	if err != nil {
		return nil, err
	}
	if _, err := fw.Write(in); err != nil {
		return nil, err
	}
	if err := fw.Close(); err != nil {
		return nil, err
	}
	total := 18 + body.Len() + 8
	if total > 1<<16 {
		return nil, fmt.Errorf("bgzf: a block of %d input bytes compressed to %d bytes (more than 64 KiB)", len(in), total)
	}
	out := make([]byte, 0, total)
	// ID1 ID2 CM=deflate FLG=FEXTRA MTIME=0 XFL=0 OS=255 XLEN=6, subfield 'B' 'C' SLEN=2 BSIZE.
	out = append(out, 0x1f, 0x8b, 8, 4, 0, 0, 0, 0, 0, 0xff, 6, 0, 'B', 'C', 2, 0)
	out = binary.LittleEndian.AppendUint16(out, uint16(total-1))
	out = append(out, body.Bytes()...)
	out = binary.LittleEndian.AppendUint32(out, crc32.ChecksumIEEE(in))
	out = binary.LittleEndian.AppendUint32(out, uint32(len(in)))
	return out, nil
}

var _ io.WriteCloser = (*Writer)(nil)
