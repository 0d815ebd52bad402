package corpus

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/ipc"
	"github.com/apache/arrow-go/v18/arrow/memory"
)

// arrowFileMagic opens Arrow IPC *file* (Feather v2) data, 8 bytes with
// padding; the stream format that Hugging Face writes has no magic. A file
// holds a stream after its magic, so both are read as streams.
var arrowFileMagic = []byte("ARROW1")

const arrowFileHeader = 8

// arrowReadBuffer is the read buffer under the IPC stream reader.
const arrowReadBuffer = 1 << 20

// arrowReader reads record batches from one Arrow file.
type arrowReader struct {
	stream *ipc.Reader
}

// newArrowReader reads the schema of the Arrow data in fh (size bytes),
// read through rd, which must start at the beginning of fh.
func newArrowReader(fh *os.File, rd io.Reader, size int64) (ar *arrowReader, err error) {
	defer func() {
		if p := recover(); p != nil {
			// The framer checks what drives allocations; anything else
			// arrow-go trips over in a corrupt schema is an error too.
			ar, err = nil, fmt.Errorf("corrupt arrow schema: %v", p)
		}
	}()
	head := make([]byte, arrowFileHeader)
	n, err := io.ReadFull(fh, head)
	if err != nil && err != io.ErrUnexpectedEOF && err != io.EOF {
		return nil, err
	}
	if _, err := fh.Seek(0, io.SeekStart); err != nil {
		return nil, err
	}
	remaining := size
	if bytes.HasPrefix(head[:n], arrowFileMagic) {
		if n < arrowFileHeader {
			return nil, fmt.Errorf("arrow file shorter than its header")
		}
		if _, err := io.ReadFull(rd, head); err != nil {
			return nil, err
		}
		remaining -= arrowFileHeader
	}
	mr := newGuardedMessages(rd, remaining)
	sr, err := ipc.NewReaderFromMessageReader(mr, ipc.WithAllocator(memory.DefaultAllocator))
	// The ipc reader now owns mr and releases it with itself.
	if err != nil {
		return nil, fmt.Errorf("read arrow schema: %w", err)
	}
	return &arrowReader{stream: sr}, nil
}

func (a *arrowReader) schema() *arrow.Schema { return a.stream.Schema() }

// next advances to the next batch; it returns io.EOF at the end.
func (a *arrowReader) next() (arrow.RecordBatch, error) {
	if !a.stream.Next() {
		if err := a.stream.Err(); err != nil {
			return nil, err
		}
		return nil, io.EOF
	}
	return a.stream.RecordBatch(), nil
}

func (a *arrowReader) release() { a.stream.Release() }

// checkArrow reads the schema of an Arrow shard and checks the text column.
func checkArrow(fh *os.File, o Options) (detail string, sentinel error) {
	st, err := fh.Stat()
	if err != nil {
		return err.Error(), ErrUnreadable
	}
	ar, err := newArrowReader(fh, bufio.NewReaderSize(fh, 64<<10), st.Size())
	if err != nil {
		return err.Error(), ErrUnknownFormat
	}
	defer ar.release()
	if o.RowJSON {
		return "", nil
	}
	if d := checkTextField(ar.schema(), o.TextField); d != "" {
		return d, ErrUnknownFormat
	}
	return "", nil
}

// arrowSource streams the rows of one Arrow shard (IPC stream as Hugging
// Face writes it, or IPC file), a record batch at a time.
type arrowSource struct {
	f    File
	fh   *os.File
	cnt  *countingReader
	ar   *arrowReader
	b    *rowBinder
	row  int   // next row in the bound batch
	done int64 // rows consumed
	err  error
}

func openArrowSource(f File, o Options, skip int64) (src source, err error) {
	fh, err := os.Open(f.Path)
	if err != nil {
		return nil, &ReadError{Path: f.Path, Err: err}
	}
	s := &arrowSource{f: f, fh: fh, cnt: &countingReader{r: fh}}
	defer func() {
		if err != nil {
			s.close()
		}
	}()
	if s.ar, err = newArrowReader(fh, bufio.NewReaderSize(s.cnt, arrowReadBuffer), f.Size); err != nil {
		return nil, &ReadError{Path: f.Path, Err: err}
	}
	if s.b, err = newRowBinder(f, o, s.ar.schema()); err != nil {
		return nil, &ReadError{Path: f.Path, Err: err}
	}
	// Skip whole batches, then rows of the batch holding row skip.
	for s.done < skip {
		if err := s.nextBatch(); err != nil {
			if errors.Is(err, io.EOF) {
				return nil, fmt.Errorf("%w: %s has %d rows, cannot skip %d (file changed?)", ErrPosition, f.Path, s.done, skip)
			}
			return nil, err
		}
		n := min(int64(s.b.nrows), skip-s.done)
		s.row = int(n)
		s.done += n
	}
	return s, nil
}

// nextBatch reads and binds the next record batch.
func (s *arrowSource) nextBatch() (err error) {
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("corrupt arrow data: %v", p)
			err = &ReadError{Path: s.f.Path, Unit: "row", Line: s.done + 1, Err: err}
		}
	}()
	rec, err := s.ar.next()
	if err != nil {
		if errors.Is(err, io.EOF) {
			return io.EOF
		}
		return &ReadError{Path: s.f.Path, Unit: "row", Line: s.done + 1, Err: err}
	}
	if err := s.b.bind(rec); err != nil {
		return &ReadError{Path: s.f.Path, Unit: "row", Line: s.done + 1, Err: err}
	}
	s.row = 0
	return nil
}

func (s *arrowSource) next() (rec Record, err error) {
	if s.err != nil {
		return Record{}, s.err
	}
	defer func() {
		if p := recover(); p != nil {
			err = &ReadError{Path: s.f.Path, Unit: "row", Line: s.done + 1, Err: fmt.Errorf("corrupt arrow data: %v", p)}
			s.err = err
		}
	}()
	for s.row >= s.b.nrows {
		if err := s.nextBatch(); err != nil {
			if !errors.Is(err, io.EOF) {
				s.err = err
			}
			return Record{}, err
		}
	}
	rec, err = s.b.record(s.row, s.done+1)
	if err != nil {
		s.err = &ReadError{Path: s.f.Path, Unit: "row", Line: s.done + 1, Err: err}
		return Record{}, s.err
	}
	s.row++
	s.done++
	return rec, nil
}

func (s *arrowSource) consumed() int64 { return s.done }

func (s *arrowSource) bytesRead() int64 { return min(s.cnt.n.Load(), s.f.Size) }

func (s *arrowSource) close() error {
	if s.ar != nil {
		s.ar.release()
		s.ar = nil
	}
	err := s.fh.Close()
	if errors.Is(err, os.ErrClosed) {
		err = nil
	}
	return err
}
