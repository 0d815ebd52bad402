package corpus

// Pieces of large line files: a plain (uncompressed) JSON Lines or
// text-per-line file larger than Options.SplitBytes is planned as several
// [File] entries, so `gload tokenize --task I/N` can share one huge file
// among tasks. The cut points depend only on the file's bytes and the piece
// size, never on the number of tasks: piece k+1 starts right after the first
// '\n' at or after byte (k+1)*SplitBytes-1, so a record straddling a multiple
// belongs to the earlier piece, and a record longer than the piece size
// spans several multiples and makes one piece of its own (no piece is empty).
//
// Line numbers stay those of the whole file: a piece read from its start
// after the previous piece of the same file continues that piece's count;
// a piece opened on its own (a task's first piece, a resume) counts the line
// ends before its offset first, reading that prefix of the file once.

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
)

// splitPieces returns f as one File, or as its pieces when it is a plain
// line file larger than o.SplitBytes.
func splitPieces(f File, o Options) ([]File, error) {
	if f.Compression != CompressNone || (f.Format != FormatJSONL && f.Format != FormatText) ||
		(f.Format == FormatText && o.DocPer == DocPerFile) || f.Size <= o.SplitBytes {
		return []File{f}, nil
	}
	fh, err := os.Open(f.Path)
	if err != nil {
		return nil, err
	}
	defer fh.Close()
	var out []File
	start := int64(0)
	for k := int64(1); ; k++ {
		mult := k * o.SplitBytes
		if mult <= start {
			continue // a long record already spans this multiple
		}
		if mult >= f.Size {
			break
		}
		cut, err := lineEndAtOrAfter(fh, mult-1, f.Size)
		if err != nil {
			return nil, fmt.Errorf("split into pieces: %w", err)
		}
		if cut >= f.Size {
			break
		}
		out = append(out, File{Path: f.Path, Size: cut - start, Format: f.Format, Compression: f.Compression,
			Offset: start, Piece: len(out) + 1})
		start = cut
		if k*o.SplitBytes < start { // jump to the first multiple past the cut
			k = start / o.SplitBytes
		}
	}
	out = append(out, File{Path: f.Path, Size: f.Size - start, Format: f.Format, Compression: f.Compression,
		Offset: start, Piece: len(out) + 1})
	return out, nil
}

// lineEndAtOrAfter returns the offset just past the first '\n' at or after
// from, or size when there is none.
func lineEndAtOrAfter(fh *os.File, from, size int64) (int64, error) {
	buf := make([]byte, 64<<10)
	for off := from; off < size; {
		n, err := fh.ReadAt(buf[:min(int64(len(buf)), size-off)], off)
		if i := bytes.IndexByte(buf[:n], '\n'); i >= 0 {
			return off + int64(i) + 1, nil
		}
		off += int64(n)
		if err != nil && !errors.Is(err, io.EOF) {
			return 0, err
		}
		if n == 0 {
			return 0, fmt.Errorf("%s: file shorter than planned (changed while reading?)", fh.Name())
		}
	}
	return size, nil
}

// pieceBase is where the line count of a piece that just ended leaves off.
type pieceBase struct {
	path  string
	end   int64 // offset after the piece
	lines int64 // line ends up to end
}

// openPiece opens piece f positioned at its offset, limited to its bytes, and
// returns the number of lines before it: carried from the previous piece of
// the same file when it ended right there, else counted.
func openPiece(fh *os.File, f File, prev pieceBase) (io.Reader, int64, error) {
	rd := io.NewSectionReader(fh, f.Offset, f.Size)
	if f.Offset == 0 {
		return rd, 0, nil
	}
	if prev.path == f.Path && prev.end == f.Offset {
		return rd, prev.lines, nil
	}
	n, err := linesBefore(fh, f.Offset)
	return rd, n, err
}

// linesBefore counts the line ends in the first n bytes of fh.
func linesBefore(fh *os.File, n int64) (int64, error) {
	buf := make([]byte, 1<<20)
	var lines int64
	for off := int64(0); off < n; {
		m, err := fh.ReadAt(buf[:min(int64(len(buf)), n-off)], off)
		lines += int64(bytes.Count(buf[:m], []byte{'\n'}))
		off += int64(m)
		if err != nil && !errors.Is(err, io.EOF) {
			return 0, err
		}
		if m == 0 {
			return 0, fmt.Errorf("%s: file shorter than planned (changed while reading?)", fh.Name())
		}
	}
	return lines, nil
}
