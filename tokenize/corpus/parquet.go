package corpus

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/apache/arrow-go/v18/parquet"
	"github.com/apache/arrow-go/v18/parquet/file"
	"github.com/apache/arrow-go/v18/parquet/pqarrow"
)

// parquetStreamBuffer is the read buffer of each column chunk stream: with
// buffered streams on, a column chunk is read in pieces of this size
// instead of all at once.
const parquetStreamBuffer = 1 << 20

func openParquetReader(fh *os.File) (*file.Reader, *pqarrow.FileReader, error) {
	props := parquet.NewReaderProperties(memory.DefaultAllocator)
	props.BufferedStreamEnabled = true
	props.BufferSize = parquetStreamBuffer
	pf, err := file.NewParquetReader(fh, file.WithReadProps(props))
	if err != nil {
		return nil, nil, fmt.Errorf("read parquet footer: %w", err)
	}
	fr, err := pqarrow.NewFileReader(pf, pqarrow.ArrowReadProperties{BatchSize: defaultBatchRows}, memory.DefaultAllocator)
	if err != nil {
		pf.Close()
		return nil, nil, fmt.Errorf("read parquet schema: %w", err)
	}
	return pf, fr, nil
}

// checkParquet reads the footer and checks the text column.
func checkParquet(fh *os.File, o Options) (detail string, sentinel error) {
	pf, fr, err := openParquetReader(fh)
	if err != nil {
		return err.Error(), ErrUnknownFormat
	}
	defer pf.Close()
	sc, err := fr.Schema()
	if err != nil {
		return fmt.Sprintf("read parquet schema: %v", err), ErrUnknownFormat
	}
	if o.RowJSON {
		return "", nil
	}
	if d := checkTextField(sc, o.TextField); d != "" {
		return d, ErrUnknownFormat
	}
	return "", nil
}

// leavesOf returns the parquet leaf column indices under the field at the
// path (a top-level field named with the dots first, else a struct walk).
func leavesOf(fields []pqarrow.SchemaField, path string) []int {
	chainFields := func() *pqarrow.SchemaField {
		for i := range fields {
			if fields[i].Field.Name == path {
				return &fields[i]
			}
		}
		level := fields
		var cur *pqarrow.SchemaField
		for _, part := range strings.Split(path, ".") {
			cur = nil
			for i := range level {
				if level[i].Field.Name == part {
					cur = &level[i]
					break
				}
			}
			if cur == nil {
				return nil
			}
			level = cur.Children
		}
		return cur
	}()
	if chainFields == nil {
		return nil
	}
	var out []int
	var walk func(f *pqarrow.SchemaField)
	walk = func(f *pqarrow.SchemaField) {
		if f.IsLeaf() {
			out = append(out, f.ColIndex)
		}
		for i := range f.Children {
			walk(&f.Children[i])
		}
	}
	walk(chainFields)
	return out
}

// parquetBatchBytes is the decoded size aimed at for one batch of rows.
const parquetBatchBytes = 16 << 20

// parquetBatchRows picks how many rows to decode at once so that a batch of
// the wanted columns holds about parquetBatchBytes (books-sized documents
// must not be decoded a thousand at a time).
func parquetBatchRows(pf *file.Reader, leaves []int) int64 {
	var bytes, rows int64
	md := pf.MetaData()
	for g := 0; g < pf.NumRowGroups(); g++ {
		rg := md.RowGroup(g)
		rows += rg.NumRows()
		for _, l := range leaves {
			if cc, err := rg.ColumnChunk(l); err == nil {
				bytes += cc.TotalUncompressedSize()
			}
		}
	}
	if rows == 0 || bytes <= 0 {
		return defaultBatchRows
	}
	perRow := max(bytes/rows, 1)
	return min(max(parquetBatchBytes/perRow, 1), defaultBatchRows)
}

// parquetSource streams the wanted columns of a Parquet file, a batch of
// rows at a time within each row group.
type parquetSource struct {
	f     File
	pf    *file.Reader
	rr    pqarrow.RecordReader
	b     *rowBinder
	total int64 // rows in the file
	done  int64 // rows consumed
	row   int   // next row in the bound batch
	err   error
}

func openParquetSource(f File, o Options, skip int64) (src source, err error) {
	fh, err := os.Open(f.Path)
	if err != nil {
		return nil, &ReadError{Path: f.Path, Err: err}
	}
	pf, fr, err := openParquetReader(fh)
	if err != nil {
		fh.Close()
		return nil, &ReadError{Path: f.Path, Err: err}
	}
	s := &parquetSource{f: f, pf: pf, total: pf.NumRows(), done: skip}
	defer func() {
		if err != nil {
			s.close()
		}
	}()
	if skip > s.total {
		return nil, fmt.Errorf("%w: %s has %d rows, cannot skip %d (file changed?)", ErrPosition, f.Path, s.total, skip)
	}
	sc, err := fr.Schema()
	if err != nil {
		return nil, &ReadError{Path: f.Path, Err: fmt.Errorf("read parquet schema: %w", err)}
	}
	if s.b, err = newRowBinder(f, o, sc); err != nil {
		return nil, &ReadError{Path: f.Path, Err: err}
	}
	if skip == s.total {
		return s, nil // nothing left: next returns io.EOF
	}
	// Read only the wanted columns, from the row group holding row skip on.
	var leaves []int
	seen := map[int]bool{}
	for _, p := range append([]string{o.TextField}, o.KeepColumns...) {
		for _, l := range leavesOf(fr.Manifest.Fields, p) {
			if !seen[l] {
				seen[l] = true
				leaves = append(leaves, l)
			}
		}
	}
	var groups []int
	var before int64 // rows in groups before the first one read
	for g := 0; g < pf.NumRowGroups(); g++ {
		n := pf.MetaData().RowGroup(g).NumRows()
		if len(groups) == 0 && before+n <= skip {
			before += n
			continue
		}
		groups = append(groups, g)
	}
	if o.RowJSON {
		leaves = leaves[:0]
		for l := 0; l < pf.MetaData().Schema.NumColumns(); l++ {
			leaves = append(leaves, l)
		}
	}
	fr.Props.BatchSize = parquetBatchRows(pf, leaves)
	rr, err := fr.GetRecordReader(context.Background(), leaves, groups)
	if err != nil {
		return nil, &ReadError{Path: f.Path, Unit: "row", Line: skip + 1, Err: err}
	}
	s.rr = rr
	if skip > before {
		if err := rr.SeekToRow(skip - before); err != nil {
			return nil, &ReadError{Path: f.Path, Unit: "row", Line: skip + 1, Err: err}
		}
	}
	// Names in the pruned batch schema differ in position from the file's:
	// resolve the paths again against it.
	if s.b, err = newRowBinder(f, o, rr.Schema()); err != nil {
		return nil, &ReadError{Path: f.Path, Err: err}
	}
	return s, nil
}

func (s *parquetSource) next() (rec Record, err error) {
	if s.err != nil {
		return Record{}, s.err
	}
	defer func() {
		if p := recover(); p != nil {
			// arrow-go can panic on some corrupt inputs; a corrupt file is an
			// error, not a crash.
			err = &ReadError{Path: s.f.Path, Unit: "row", Line: s.done + 1, Err: fmt.Errorf("corrupt parquet data: %v", p)}
			s.err = err
		}
	}()
	for s.rr == nil || s.row >= s.b.nrows {
		if s.rr == nil || s.done >= s.total {
			return Record{}, io.EOF
		}
		if !s.rr.Next() {
			err := s.rr.Err()
			if err == nil {
				err = fmt.Errorf("file ended after %d of %d rows", s.done, s.total)
			}
			s.err = &ReadError{Path: s.f.Path, Unit: "row", Line: s.done + 1, Err: err}
			return Record{}, s.err
		}
		if err := s.b.bind(s.rr.RecordBatch()); err != nil {
			s.err = &ReadError{Path: s.f.Path, Unit: "row", Line: s.done + 1, Err: err}
			return Record{}, s.err
		}
		s.row = 0
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

func (s *parquetSource) consumed() int64 { return s.done }

// bytesRead prorates the file size by rows: only the wanted columns are
// read, so bytes actually read would undercount.
func (s *parquetSource) bytesRead() int64 {
	if s.total == 0 {
		return s.f.Size
	}
	return int64(float64(s.f.Size) * float64(s.done) / float64(s.total))
}

func (s *parquetSource) close() error {
	var err error
	if s.rr != nil {
		s.rr.Release()
		s.rr = nil
	}
	if s.pf != nil {
		err = s.pf.Close()
		s.pf = nil
	}
	if errors.Is(err, os.ErrClosed) {
		err = nil
	}
	return err
}
