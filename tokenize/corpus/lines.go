package corpus

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
)

// discardBytes is the size of the scratch buffer used to skip oversized
// lines and resume positions.
const discardBytes = 64 << 10

// maxEmptyReads bounds consecutive (0, nil) reads before giving up.
const maxEmptyReads = 100

// lineFramer splits a byte stream into lines. Lines are sub-slices of
// chunks that are never written again once a line of them has been handed
// out: when a chunk is full, the unfinished line is copied into a fresh one.
// A chunk grows (doubling, up to max+1 bytes) only to hold one long line.
type lineFramer struct {
	rd    io.Reader
	path  string
	chunk int   // normal chunk size
	max   int64 // longest line kept
	buf   []byte
	start int // first byte of the unconsumed region buf[start:end]
	end   int
	// scanned is the index in buf below which buf[start:] holds no '\n'.
	scanned int
	eof     bool
	rerr    error // read error, reported once buffered lines are consumed
	line    int64 // lines consumed
	base    int64 // lines of the file before this piece (pieces.go)
	scratch []byte
}

func newLineFramer(rd io.Reader, path string, o Options) *lineFramer {
	return &lineFramer{rd: rd, path: path, chunk: o.ChunkBytes, max: o.MaxDocBytes}
}

func (l *lineFramer) readError() error {
	return &ReadError{Path: l.path, Unit: "line", Line: l.base + l.line + 1, Err: l.rerr}
}

// read reads once into p, recording EOF and errors.
func (l *lineFramer) read(p []byte) int {
	for empty := 0; ; empty++ {
		n, err := l.rd.Read(p)
		if err == io.EOF {
			l.eof = true
		} else if err != nil {
			l.rerr = err
		}
		if n > 0 || err != nil {
			return n
		}
		if empty >= maxEmptyReads {
			l.rerr = io.ErrNoProgress
			return 0
		}
	}
}

// fill reads more data after buf[end], making room first if buf is full.
func (l *lineFramer) fill() {
	if l.end == len(l.buf) {
		partial := l.end - l.start
		size := l.chunk
		if 2*partial > size {
			size = int(min(int64(2*partial), l.max+1))
			size = max(size, l.chunk, partial+1)
		}
		nb := make([]byte, size)
		copy(nb, l.buf[l.start:l.end])
		l.scanned = max(l.scanned-l.start, 0)
		l.buf, l.start, l.end = nb, 0, partial
	}
	l.end += l.read(l.buf[l.end:])
}

// next returns the next line without its '\n', or io.EOF. A line longer
// than max is consumed without being kept: next returns over=true and its
// size. Errors are *ReadError naming the line being read.
func (l *lineFramer) next() (line []byte, size int64, over bool, err error) {
	for {
		from := max(l.start, l.scanned)
		if i := bytes.IndexByte(l.buf[from:l.end], '\n'); i >= 0 {
			e := from + i
			line = l.buf[l.start:e:e]
			l.start, l.scanned = e+1, e+1
			l.line++
			if int64(len(line)) > l.max {
				return nil, int64(len(line)), true, nil
			}
			return line, int64(len(line)), false, nil
		}
		l.scanned = l.end
		partial := l.end - l.start
		if int64(partial) > l.max {
			size, err := l.discardLine()
			return nil, size, true, err
		}
		if l.rerr != nil {
			return nil, 0, false, l.readError()
		}
		if l.eof {
			if partial == 0 {
				return nil, 0, false, io.EOF
			}
			line = l.buf[l.start:l.end:l.end]
			l.start = l.end
			l.line++
			return line, int64(len(line)), false, nil
		}
		l.fill()
	}
}

// discardLine consumes the rest of an oversized line in constant memory and
// returns its total size. The bytes after its '\n' go to a fresh chunk.
func (l *lineFramer) discardLine() (int64, error) {
	size := int64(l.end - l.start)
	l.buf, l.start, l.end, l.scanned = nil, 0, 0, 0 // drop the big chunk
	if l.scratch == nil {
		l.scratch = make([]byte, discardBytes)
	}
	for {
		if l.rerr != nil {
			return size, l.readError()
		}
		if l.eof {
			l.line++
			return size, nil
		}
		n := l.read(l.scratch)
		if i := bytes.IndexByte(l.scratch[:n], '\n'); i >= 0 {
			size += int64(i)
			rest := l.scratch[i+1 : n]
			if len(rest) > 0 {
				l.buf = make([]byte, max(l.chunk, len(rest)))
				l.end = copy(l.buf, rest)
			}
			l.line++
			return size, nil
		}
		size += int64(n)
	}
}

// skip consumes n lines without keeping them. It returns an error wrapping
// ErrPosition when the stream holds fewer lines.
func (l *lineFramer) skip(n int64) error {
	pending := false // inside a line whose start was dropped
	for l.line < n {
		if l.start < l.end {
			if i := bytes.IndexByte(l.buf[l.start:l.end], '\n'); i >= 0 {
				l.start += i + 1
				l.line++
				pending = false
				continue
			}
			pending = true
			l.start = l.end
		}
		if l.rerr != nil {
			return l.readError()
		}
		if l.eof {
			if pending {
				l.line++
			}
			break
		}
		if l.buf == nil {
			l.buf = make([]byte, l.chunk)
		}
		// Nothing of buf has been handed out yet: reuse it.
		l.start, l.end = 0, 0
		l.end = l.read(l.buf)
	}
	l.scanned = l.start
	if l.line < n {
		return fmt.Errorf("%w: %s has %d lines, cannot skip %d (file changed?)", ErrPosition, l.path, l.line, n)
	}
	return nil
}

// lineSource reads JSON Lines or text with one document per line.
type lineSource struct {
	f        io.Closer
	progress func() int64 // compressed (or plain) input bytes consumed
	closeFn  func() error
	fr       *lineFramer
	kind     Kind
	size     int64
}

func newLineSource(fh *os.File, f File, o Options, skip int64, prev pieceBase) (source, error) {
	var in io.Reader = fh
	var base int64
	if f.Piece > 0 {
		var err error
		if in, base, err = openPiece(fh, f, prev); err != nil {
			fh.Close()
			return nil, &ReadError{Path: f.Path, Err: fmt.Errorf("count lines before byte %d: %w", f.Offset, err)}
		}
	}
	if f.Compression != CompressNone {
		if fr := openFramed(fh, f); fr != nil {
			// Independent frames (multi-frame zstd, BGZF): decoded on several goroutines, in order.
			s := &lineSource{f: fh, progress: fr.Consumed, closeFn: fr.Close, kind: JSONLine, size: f.Size}
			return s.start(fr, f, o, skip, base)
		}
	}
	cnt := &countingReader{r: in}
	rd, closeFn, err := decompressor(cnt, f.Compression)
	if err != nil {
		fh.Close()
		return nil, &ReadError{Path: f.Path, Unit: "line", Line: 1, Err: err}
	}
	s := &lineSource{f: fh, progress: cnt.n.Load, closeFn: closeFn, kind: JSONLine, size: f.Size}
	if f.Compression != CompressNone {
		// Decompress in a goroutine of its own, ahead of the framing.
		ra := newReadAhead(rd)
		s.closeFn = func() error {
			ra.stop()
			return closeFn()
		}
		rd = ra
	}
	return s.start(rd, f, o, skip, base)
}

// start frames rd's lines and skips the first skip.
func (s *lineSource) start(rd io.Reader, f File, o Options, skip, base int64) (source, error) {
	s.fr = newLineFramer(rd, f.Path, o)
	s.fr.base = base
	if f.Format == FormatText {
		s.kind = PlainText
	}
	if skip > 0 {
		if err := s.fr.skip(skip); err != nil {
			s.close()
			return nil, err
		}
	}
	return s, nil
}

func (s *lineSource) next() (Record, error) {
	for {
		line, size, over, err := s.fr.next()
		if err != nil {
			return Record{}, err
		}
		no := s.fr.base + s.fr.line
		if over {
			return Record{Line: no, Kind: Oversized, Size: size, lineBase: s.fr.base}, nil
		}
		if no == 1 {
			line = bytes.TrimPrefix(line, bom)
		}
		if n := len(line); n > 0 && line[n-1] == '\r' {
			line = line[: n-1 : n-1]
		}
		if s.kind == JSONLine {
			if isBlank(line) {
				continue
			}
		} else if len(line) == 0 {
			continue
		}
		return Record{Line: no, Raw: line, Kind: s.kind, Size: int64(len(line)), lineBase: s.fr.base}, nil
	}
}

// isBlank reports whether line holds only JSON whitespace.
func isBlank(line []byte) bool {
	for _, c := range line {
		if c != ' ' && c != '\t' && c != '\r' && c != '\n' {
			return false
		}
	}
	return true
}

func (s *lineSource) consumed() int64 { return s.fr.line }

// linesThrough is the file's line count at the end of what was read.
func (s *lineSource) linesThrough() int64 { return s.fr.base + s.fr.line }

func (s *lineSource) bytesRead() int64 { return min(s.progress(), s.size) }

func (s *lineSource) close() error {
	return errors.Join(s.closeFn(), s.f.Close())
}

// wholeFileSource reads a text file as one document.
type wholeFileSource struct {
	f    File
	fh   *os.File
	cnt  *countingReader
	rd   io.Reader
	cl   func() error
	max  int64
	done bool
}

func newWholeFileSource(fh *os.File, f File, o Options, skip int64) (source, error) {
	if skip > 1 {
		fh.Close()
		return nil, fmt.Errorf("%w: %s is one document, cannot skip %d", ErrPosition, f.Path, skip)
	}
	cnt := &countingReader{r: fh}
	rd, closeFn, err := decompressor(cnt, f.Compression)
	if err != nil {
		fh.Close()
		return nil, &ReadError{Path: f.Path, Err: err}
	}
	return &wholeFileSource{f: f, fh: fh, cnt: cnt, rd: rd, cl: closeFn, max: o.MaxDocBytes, done: skip == 1}, nil
}

func (s *wholeFileSource) next() (Record, error) {
	if s.done {
		return Record{}, io.EOF
	}
	s.done = true
	// Read up to max+1 bytes: one more than allowed tells an oversized file.
	capHint := int64(64 << 10)
	if s.f.Compression == CompressNone {
		capHint = s.f.Size + 1
	}
	capHint = min(capHint, s.max+1)
	buf := make([]byte, 0, capHint)
	lim := &io.LimitedReader{R: s.rd, N: s.max + 1}
	for {
		if len(buf) == cap(buf) {
			buf = append(buf, 0)[:len(buf)]
		}
		n, err := lim.Read(buf[len(buf):cap(buf)])
		buf = buf[:len(buf)+n]
		if err == io.EOF {
			break
		}
		if err != nil {
			return Record{}, &ReadError{Path: s.f.Path, Err: err}
		}
	}
	if int64(len(buf)) > s.max {
		size := int64(len(buf))
		n, err := io.CopyBuffer(io.Discard, s.rd, make([]byte, discardBytes))
		if err != nil {
			return Record{}, &ReadError{Path: s.f.Path, Err: err}
		}
		return Record{Kind: Oversized, Size: size + n}, nil
	}
	buf = bytes.TrimPrefix(buf, bom)
	return Record{Raw: buf[:len(buf):len(buf)], Kind: PlainText, Size: int64(len(buf))}, nil
}

func (s *wholeFileSource) consumed() int64 {
	if s.done {
		return 1
	}
	return 0
}

func (s *wholeFileSource) bytesRead() int64 { return min(s.cnt.n.Load(), s.f.Size) }

func (s *wholeFileSource) close() error { return errors.Join(s.cl(), s.fh.Close()) }
