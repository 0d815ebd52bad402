package corpus

import (
	"errors"
	"fmt"
	"io"
	"os"
)

// Kind says how [Extractor.Extract] must read a [Record].
type Kind uint8

// Record kinds.
const (
	// JSONLine: Raw is one JSON Lines line (without its line end).
	JSONLine Kind = iota + 1
	// PlainText: Raw is the document text itself (a text line or file, a
	// Parquet or Arrow cell).
	PlainText
	// Oversized: the line, file or cell was larger than
	// [Options.MaxDocBytes]; Raw is nil and Size tells how large it was.
	Oversized
	// NullText: the Parquet or Arrow text cell is null.
	NullText
)

func (k Kind) String() string {
	switch k {
	case JSONLine:
		return "json-line"
	case PlainText:
		return "plain-text"
	case Oversized:
		return "oversized"
	case NullText:
		return "null-text"
	}
	return fmt.Sprintf("kind(%d)", uint8(k))
}

// Position is a place in a [Plan]'s record stream: File indexes Plan.Files,
// Record counts the records consumed in that file (physical lines for line
// formats, blank lines included; rows for Parquet and Arrow; 1 for a
// whole-file document). The zero Position is the start of the plan.
type Position struct {
	File   int
	Record int64
}

// Record is one framed record, not yet parsed. See the package Caveats for
// the lifetime of Raw.
type Record struct {
	File int    // index into Plan.Files
	Path string // Plan.Files[File].Path, for messages
	// Line is the 1-based line (JSON Lines, text) or row (Parquet, Arrow) of
	// the record; 0 for a whole-file document.
	Line int64
	Raw  []byte // the JSON line, or the text itself; nil for Oversized and NullText
	Kind Kind
	// Size is the record's size in bytes; for Oversized records, the size
	// seen (the whole line or file, or the cell), which exceeds MaxDocBytes.
	Size int64
	// Cols are the kept columns of Parquet and Arrow rows, already
	// extracted, in Options.KeepColumns order; nil for line formats.
	Cols []string
	// Null flags the Cols that were missing or null; nil when none was.
	Null []bool
	// lineBase is the lines of the file before the record's piece: Line counts the whole file, a
	// Position the piece.
	lineBase int64
}

// Pos returns the position after rec: once rec has been written, a run
// resumed at Pos continues with the record after it. It equals what
// [Reader.Pos] returned right after the Next call that gave rec.
func (rec Record) Pos() Position {
	return Position{File: rec.File, Record: max(rec.Line-rec.lineBase, 1)}
}

// ReadError is a failure to read an input (I/O, corrupt or truncated
// compressed data, a broken Parquet or Arrow file). Line is the line or row
// being read when it happened.
type ReadError struct {
	Path string
	Unit string // "line" or "row"; empty when no position applies
	Line int64
	Err  error
}

func (e *ReadError) Error() string {
	if e.Unit == "" {
		return fmt.Sprintf("corpus: %s: %v", e.Path, e.Err)
	}
	return fmt.Sprintf("corpus: %s: %s %d: %v", e.Path, e.Unit, e.Line, e.Err)
}

func (e *ReadError) Unwrap() error { return e.Err }

// source reads the records of one file.
type source interface {
	// next returns the next record of the file (File and Path unset), or
	// io.EOF.
	next() (Record, error)
	// consumed is the number of records (lines, rows) consumed so far.
	consumed() int64
	// bytesRead is the number of input bytes consumed so far, at most the
	// file size.
	bytesRead() int64
	close() error
}

// Reader streams the records of a [Plan] in order. It is not safe for
// concurrent use.
type Reader struct {
	plan      *Plan
	idx       int // current file
	src       source
	pos       Position
	doneBytes int64     // sizes of files before idx
	prevPiece pieceBase // where the last piece read to its end left off
	err       error     // sticky
	closed    bool
}

// Open returns a Reader positioned at from: the first record it returns is
// the one after from. Open(Position{}) starts at the beginning; a position
// past the last record of its file continues with the next file. A position
// outside the plan, or beyond the records its file holds, is an error
// wrapping [ErrPosition].
func (p *Plan) Open(from Position) (*Reader, error) {
	if from.File < 0 || from.File > len(p.Files) || from.Record < 0 ||
		(from.File == len(p.Files) && from.Record != 0) {
		return nil, fmt.Errorf("%w: %+v (plan has %d files)", ErrPosition, from, len(p.Files))
	}
	r := &Reader{plan: p, idx: from.File, pos: from}
	for i := 0; i < from.File; i++ {
		r.doneBytes += p.Files[i].Size
	}
	if from.File < len(p.Files) && from.Record > 0 {
		src, err := r.openSource(from.File, from.Record)
		if err != nil {
			return nil, err
		}
		r.src = src
	}
	return r, nil
}

// openSource opens file i and skips its first skip records.
func (r *Reader) openSource(i int, skip int64) (source, error) {
	f := r.plan.Files[i]
	o := r.plan.opts
	switch f.Format {
	case FormatJSONL, FormatText:
		fh, err := os.Open(f.Path)
		if err != nil {
			return nil, &ReadError{Path: f.Path, Err: err}
		}
		if f.Format == FormatText && o.DocPer == DocPerFile {
			return newWholeFileSource(fh, f, o, skip)
		}
		return newLineSource(fh, f, o, skip, r.prevPiece)
	case FormatParquet:
		return openParquetSource(f, o, skip)
	case FormatHF:
		return openArrowSource(f, o, skip)
	}
	return nil, &ReadError{Path: f.Path, Err: fmt.Errorf("%w: %q", ErrUnknownFormat, f.Format)}
}

// Next returns the next record, or io.EOF after the last one. After an
// error other than io.EOF, Next keeps returning that error.
func (r *Reader) Next() (Record, error) {
	if r.closed {
		return Record{}, ErrClosed
	}
	if r.err != nil {
		return Record{}, r.err
	}
	for r.idx < len(r.plan.Files) {
		if r.src == nil {
			src, err := r.openSource(r.idx, 0)
			if err != nil {
				r.err = err
				return Record{}, err
			}
			r.src = src
		}
		rec, err := r.src.next()
		if err == nil {
			rec.File = r.idx
			rec.Path = r.plan.Files[r.idx].Path
			r.pos = Position{File: r.idx, Record: r.src.consumed()}
			return rec, nil
		}
		if !errors.Is(err, io.EOF) {
			r.err = err
			return Record{}, err
		}
		if cerr := r.src.close(); cerr != nil {
			r.err = &ReadError{Path: r.plan.Files[r.idx].Path, Err: cerr}
			return Record{}, r.err
		}
		if f := r.plan.Files[r.idx]; f.Piece > 0 {
			if ls, ok := r.src.(*lineSource); ok {
				r.prevPiece = pieceBase{path: f.Path, end: f.Offset + f.Size, lines: ls.linesThrough()}
			}
		}
		r.src = nil
		r.doneBytes += r.plan.Files[r.idx].Size
		r.idx++
	}
	return Record{}, io.EOF
}

// FilesDone returns how many of the plan's files were read to their end.
func (r *Reader) FilesDone() int { return r.idx }

// Pos returns the position after the last record returned by Next (the
// position Open was given before any). Opening the plan at Pos resumes with
// the record after it.
func (r *Reader) Pos() Position { return r.pos }

// BytesRead returns the input bytes consumed so far, compressed, counted
// against Plan.TotalBytes: for progress and ETA. Decoders read ahead, so it
// runs slightly before the records returned.
func (r *Reader) BytesRead() int64 {
	n := r.doneBytes
	if r.src != nil {
		n += r.src.bytesRead()
	}
	return n
}

// Close releases the open file. Records already returned stay valid.
func (r *Reader) Close() error {
	if r.closed {
		return nil
	}
	r.closed = true
	if r.src != nil {
		err := r.src.close()
		r.src = nil
		if err != nil {
			return fmt.Errorf("corpus: close %s: %w", r.plan.Files[r.idx].Path, err)
		}
	}
	return nil
}
