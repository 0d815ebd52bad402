package corpus

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/parquet-go/parquet-go"
	"github.com/parquet-go/parquet-go/deprecated"
	"github.com/parquet-go/parquet-go/format"
)

// This file reads Parquet files with parquet-go's column readers (not
// arrow-go's, whose encoders pull arrow-go's compute kernels into the build
// and whose Arrow reader decodes columns in goroutines where a panic on a
// corrupt file cannot be recovered). Every wanted column is read on its own,
// page by page, in the caller's goroutine, and rows are assembled from the
// values' repetition and definition levels. Before parquet-go sees a file,
// its footer length and every column chunk's byte range are checked against
// the file, so that a forged size cannot make it allocate more than the
// file holds; what parquet-go still trips over is recovered as an error
// naming the file and row.

// parquetValueBuffer is how many values each column reader decodes at once.
const parquetValueBuffer = 256

// maxParquetFooter bounds the footer parquet-go is asked to decode.
const maxParquetFooter = 256 << 20

// openParquetFile checks the footer's framing and opens fh with parquet-go.
func openParquetFile(fh *os.File) (pf *parquet.File, err error) {
	defer func() {
		if p := recover(); p != nil {
			pf, err = nil, fmt.Errorf("corrupt parquet footer: %v", p)
		}
	}()
	st, err := fh.Stat()
	if err != nil {
		return nil, err
	}
	size := st.Size()
	if size < 12 {
		return nil, fmt.Errorf("not a parquet file: %d bytes", size)
	}
	var tail [8]byte
	if _, err := fh.ReadAt(tail[:], size-8); err != nil {
		return nil, fmt.Errorf("read parquet footer: %w", err)
	}
	if string(tail[4:]) != "PAR1" {
		return nil, fmt.Errorf("not a parquet file: no PAR1 magic at the end (encrypted footers are not supported)")
	}
	footer := int64(binary.LittleEndian.Uint32(tail[:4]))
	if footer > size-12 || footer > maxParquetFooter {
		return nil, fmt.Errorf("parquet footer of %d bytes does not fit in a %d-byte file", footer, size)
	}
	pf, err = parquet.OpenFile(fh, size, parquet.SkipPageIndex(true), parquet.SkipBloomFilters(true), parquet.ReadBufferSize(64<<10))
	if err != nil {
		return nil, fmt.Errorf("read parquet footer: %w", err)
	}
	if err := checkParquetLayout(pf, size); err != nil {
		return nil, err
	}
	return pf, nil
}

// checkParquetLayout checks the footer's row counts and the byte range of
// every column chunk against the file.
func checkParquetLayout(pf *parquet.File, size int64) error {
	md := pf.Metadata()
	var rows int64
	for g, rg := range md.RowGroups {
		if rg.NumRows < 0 {
			return fmt.Errorf("row group %d has %d rows", g, rg.NumRows)
		}
		rows += rg.NumRows
		for c, cc := range rg.Columns {
			m := cc.MetaData
			start := m.DataPageOffset
			if m.DictionaryPageOffset > 0 && m.DictionaryPageOffset < start {
				start = m.DictionaryPageOffset
			}
			if start < 4 || m.TotalCompressedSize < 0 || start > size || m.TotalCompressedSize > size-start {
				return fmt.Errorf("row group %d column chunk %d (%s): bytes %d..+%d outside the %d-byte file",
					g, c, strings.Join(m.PathInSchema, "."), start, m.TotalCompressedSize, size)
			}
			if m.NumValues < 0 {
				return fmt.Errorf("row group %d column chunk %d: %d values", g, c, m.NumValues)
			}
		}
	}
	if rows != md.NumRows {
		return fmt.Errorf("row groups hold %d rows, the footer says %d", rows, md.NumRows)
	}
	return nil
}

// findParquetColumn finds a dotted path among the columns under root: a
// field spelled with the dots first, else a walk through groups (never
// into a repeated field or a list or map).
func findParquetColumn(root *parquet.Column, path string) *parquet.Column {
	for _, c := range root.Columns() {
		if c.Name() == path {
			return c
		}
	}
	cur := root
	for _, part := range strings.Split(path, ".") {
		if cur != root && (cur.Leaf() || cur.Repeated() || isParquetList(cur)) {
			return nil
		}
		cur = cur.Column(part)
		if cur == nil {
			return nil
		}
	}
	return cur
}

func parquetColumnNames(root *parquet.Column) string {
	var names []string
	for _, c := range root.Columns() {
		names = append(names, c.Name())
	}
	return strings.Join(names, ", ")
}

// isParquetList reports a group annotated LIST or MAP: its repeated child
// holds the elements.
func isParquetList(c *parquet.Column) bool {
	if c.Leaf() || len(c.Columns()) != 1 || !c.Columns()[0].Repeated() {
		return false
	}
	if lt := c.Type().LogicalType(); lt != nil {
		switch lt.Value.(type) {
		case *format.ListType, *format.MapType:
			return true
		}
	}
	ct := c.Type().ConvertedType()
	return ct != nil && (*ct == deprecated.List || *ct == deprecated.Map || *ct == deprecated.MapKeyValue)
}

// textColumn resolves the text column: a byte array leaf outside any
// repeated field.
func textColumn(pf *parquet.File, field string) (*parquet.Column, error) {
	root := pf.Root()
	c := findParquetColumn(root, field)
	if c == nil {
		return nil, fmt.Errorf("no text column %q (columns: %s)", field, parquetColumnNames(root))
	}
	if !c.Leaf() || c.Type().Kind() != parquet.ByteArray || c.MaxRepetitionLevel() > 0 {
		return nil, fmt.Errorf("text column %q has type %s, not string", field, parquetTypeName(c))
	}
	return c, nil
}

func parquetTypeName(c *parquet.Column) string {
	if !c.Leaf() {
		if isParquetList(c) {
			return "list"
		}
		return "group"
	}
	s := strings.ToLower(c.Type().Kind().String())
	if lt := c.Type().LogicalType(); lt != nil {
		switch v := lt.Value.(type) {
		case *format.IntType:
			s = fmt.Sprintf("int%d", v.BitWidth)
			if !v.IsSigned {
				s = "u" + s
			}
		case nil:
		default:
			s = strings.ToLower(v.String())
		}
	}
	if c.MaxRepetitionLevel() > 0 {
		s = "repeated " + s
	}
	return s
}

// checkParquet reads the footer and checks the text column.
func checkParquet(fh *os.File, o Options) (detail string, sentinel error) {
	pf, err := openParquetFile(fh)
	if err != nil {
		return err.Error(), ErrUnknownFormat
	}
	if o.RowJSON {
		return "", nil
	}
	if _, err := textColumn(pf, o.TextField); err != nil {
		return err.Error(), ErrUnknownFormat
	}
	return "", nil
}

// pqLeaf reads the values of one leaf column, page by page.
type pqLeaf struct {
	col   *parquet.Column
	pages parquet.Pages
	vals  parquet.ValueReader
	buf   []parquet.Value
	i     int
	eof   bool
}

func newPQLeaf(c *parquet.Column) *pqLeaf {
	return &pqLeaf{col: c, pages: c.Pages(), buf: make([]parquet.Value, 0, parquetValueBuffer)}
}

// peek returns the next value (io.EOF after the last one).
func (l *pqLeaf) peek() (*parquet.Value, error) {
	for l.i >= len(l.buf) {
		if l.eof {
			return nil, io.EOF
		}
		if l.vals == nil {
			p, err := l.pages.ReadPage()
			if err != nil {
				if errors.Is(err, io.EOF) {
					l.eof = true
					continue
				}
				return nil, err
			}
			l.vals = p.Values()
		}
		n, err := l.vals.ReadValues(l.buf[:cap(l.buf)])
		l.buf, l.i = l.buf[:n], 0
		if err != nil {
			if !errors.Is(err, io.EOF) {
				return nil, err
			}
			l.vals = nil
		}
	}
	v := &l.buf[l.i]
	if v.DefinitionLevel() > l.col.MaxDefinitionLevel() || v.RepetitionLevel() > l.col.MaxRepetitionLevel() {
		return nil, fmt.Errorf("column %s: levels %d/%d above the schema's %d/%d", strings.Join(l.col.Path(), "."),
			v.RepetitionLevel(), v.DefinitionLevel(), l.col.MaxRepetitionLevel(), l.col.MaxDefinitionLevel())
	}
	return v, nil
}

// next returns the next value and moves past it.
func (l *pqLeaf) next() (*parquet.Value, error) {
	v, err := l.peek()
	if err == nil {
		l.i++
	}
	return v, err
}

func (l *pqLeaf) close() {
	if l.pages != nil {
		l.pages.Close()
		l.pages = nil
	}
}

// pqNode is a wanted column or one of its descendants, with the levels its
// values carry when it is present.
type pqNode struct {
	col   *parquet.Column
	kids  []*pqNode
	leaf  *pqLeaf // leaves only
	first *pqLeaf // the first leaf under the node
	all   []*pqLeaf
	def   int // definition level of a value of this node
	rep   int // repetition level of this node's instances
}

// newPQNode builds the node tree of c, whose parent's levels are def and rep.
func newPQNode(c *parquet.Column, def, rep int) *pqNode {
	n := &pqNode{col: c, def: def, rep: rep}
	if !c.Required() {
		n.def++
	}
	if c.Repeated() {
		n.rep++
	}
	if c.Leaf() {
		n.leaf = newPQLeaf(c)
		n.first, n.all = n.leaf, []*pqLeaf{n.leaf}
		return n
	}
	for _, k := range c.Columns() {
		kn := newPQNode(k, n.def, n.rep)
		n.kids = append(n.kids, kn)
		n.all = append(n.all, kn.all...)
	}
	for _, kn := range n.kids {
		if n.first == nil {
			n.first = kn.first
		}
	}
	return n
}

// levelsOf returns the levels of c's parent.
func levelsOf(root, c *parquet.Column) (def, rep int) {
	cur := root
	for _, name := range c.Path()[:len(c.Path())-1] {
		cur = cur.Column(name)
		if !cur.Required() {
			def++
		}
		if cur.Repeated() {
			rep++
		}
	}
	return def, rep
}

var errParquetLevels = errors.New("repetition and definition levels do not match the schema")

// skipAbsent consumes the one placeholder value that each leaf under n holds
// for an absent (null or empty) instance.
func (n *pqNode) skipAbsent() error {
	for _, l := range n.all {
		if _, err := l.next(); err != nil {
			return noEOF(err)
		}
	}
	return nil
}

// noEOF turns an end of values inside a row into an error.
func noEOF(err error) error {
	if errors.Is(err, io.EOF) {
		return fmt.Errorf("column ends inside a row: %w", errParquetLevels)
	}
	return err
}

// pqJSON writes values as compact JSON (see appendArrowJSON); limit bounds
// the bytes of one value.
type pqJSON struct{ limit int }

// value appends the value of n (present or not) at the current row.
func (w pqJSON) value(dst []byte, n *pqNode) ([]byte, error) {
	if n.first == nil {
		return append(dst, "null"...), nil // a group without leaves
	}
	if n.col.Repeated() {
		return w.repeated(dst, n)
	}
	v, err := n.first.peek()
	if err != nil {
		return nil, noEOF(err)
	}
	if v.DefinitionLevel() < n.def {
		return append(dst, "null"...), n.skipAbsent()
	}
	return w.content(dst, n)
}

// content appends one present instance of n.
func (w pqJSON) content(dst []byte, n *pqNode) ([]byte, error) {
	if len(dst) > w.limit {
		return nil, fmt.Errorf("kept value longer than %d bytes", w.limit)
	}
	if n.leaf != nil {
		v, err := n.leaf.next()
		if err != nil {
			return nil, noEOF(err)
		}
		return appendParquetJSON(dst, n.col, v)
	}
	if isParquetList(n.col) {
		return w.repeated(dst, n.kids[0])
	}
	dst = append(dst, '{')
	for k, kid := range n.kids {
		if k > 0 {
			dst = append(dst, ',')
		}
		dst = appendJSONString(dst, kid.col.Name())
		dst = append(dst, ':')
		var err error
		if dst, err = w.value(dst, kid); err != nil {
			return nil, err
		}
	}
	return append(dst, '}'), nil
}

// repeated appends the instances of the repeated node r as a JSON array.
func (w pqJSON) repeated(dst []byte, r *pqNode) ([]byte, error) {
	if r.first == nil {
		return append(dst, "[]"...), nil
	}
	v, err := r.first.peek()
	if err != nil {
		return nil, noEOF(err)
	}
	if v.DefinitionLevel() < r.def {
		return append(dst, "[]"...), r.skipAbsent()
	}
	// The elements of a three-level list are the repeated group's only
	// field; a legacy two-level list's are the repeated node itself.
	elem := func(dst []byte) ([]byte, error) {
		if len(r.kids) == 1 && r.col.Name() != "array" && !strings.HasSuffix(r.col.Name(), "_tuple") {
			return w.value(dst, r.kids[0])
		}
		return w.content(dst, r)
	}
	// Every element consumes at least one value of r.first, so the loop
	// ends with the values.
	dst = append(dst, '[')
	for k := 0; ; k++ {
		if k > 0 {
			dst = append(dst, ',')
		}
		if dst, err = elem(dst); err != nil {
			return nil, err
		}
		v, err := r.first.peek()
		if errors.Is(err, io.EOF) || (err == nil && v.RepetitionLevel() < r.rep) {
			break
		}
		if err != nil {
			return nil, err
		}
		if v.RepetitionLevel() > r.rep {
			return nil, errParquetLevels
		}
	}
	return append(dst, ']'), nil
}

// appendParquetJSON appends a present leaf value as JSON: byte arrays as
// strings, numbers as numbers, dates and timestamps as ISO 8601 strings,
// fixed-length byte arrays (UUIDs aside) as base64 like encoding/json.
func appendParquetJSON(dst []byte, c *parquet.Column, v *parquet.Value) ([]byte, error) {
	var lt format.LogicalTypeValue
	if l := c.Type().LogicalType(); l != nil {
		lt = l.Value
	}
	unsigned := false
	if it, ok := lt.(*format.IntType); ok {
		unsigned = !it.IsSigned
	}
	switch v.Kind() {
	case parquet.Boolean:
		return strconv.AppendBool(dst, v.Boolean()), nil
	case parquet.Int32:
		if _, ok := lt.(*format.DateType); ok {
			return appendJSONString(dst, time.Unix(int64(v.Int32())*86400, 0).UTC().Format("2006-01-02")), nil
		}
		if unsigned {
			return strconv.AppendUint(dst, uint64(uint32(v.Int32())), 10), nil
		}
		return strconv.AppendInt(dst, int64(v.Int32()), 10), nil
	case parquet.Int64:
		if ts, ok := lt.(*format.TimestampType); ok {
			return appendJSONString(dst, parquetTimestamp(v.Int64(), ts)), nil
		}
		if unsigned {
			return strconv.AppendUint(dst, uint64(v.Int64()), 10), nil
		}
		return strconv.AppendInt(dst, v.Int64(), 10), nil
	case parquet.Float:
		return appendJSONFloat(dst, float64(v.Float()), 32), nil
	case parquet.Double:
		return appendJSONFloat(dst, v.Double(), 64), nil
	case parquet.ByteArray:
		return appendJSONString(dst, string(v.ByteArray())), nil
	case parquet.FixedLenByteArray:
		b := v.ByteArray()
		if _, ok := lt.(*format.UUIDType); ok && len(b) == 16 {
			return appendJSONString(dst, fmt.Sprintf("%x-%x-%x-%x-%x", b[0:4], b[4:6], b[6:8], b[8:10], b[10:])), nil
		}
		return appendBase64JSON(dst, b), nil
	case parquet.Int96:
		return appendJSONString(dst, v.Int96().String()), nil
	}
	return nil, fmt.Errorf("column %s: unsupported value kind %v", strings.Join(c.Path(), "."), v.Kind())
}

// appendJSONFloat writes a finite float as a JSON number, NaN and the
// infinities as null (JSON has no spelling for them).
func appendJSONFloat(dst []byte, f float64, bits int) []byte {
	if math.IsNaN(f) || math.IsInf(f, 0) {
		return append(dst, "null"...)
	}
	return strconv.AppendFloat(dst, f, 'g', -1, bits)
}

func appendBase64JSON(dst, b []byte) []byte {
	const enc = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/"
	dst = append(dst, '"')
	for i := 0; i < len(b); i += 3 {
		var n uint32
		k := min(3, len(b)-i)
		for j := 0; j < 3; j++ {
			n <<= 8
			if j < k {
				n |= uint32(b[i+j])
			}
		}
		out := [4]byte{enc[n>>18&63], enc[n>>12&63], enc[n>>6&63], enc[n&63]}
		for j := k + 1; j < 4; j++ {
			out[j] = '='
		}
		dst = append(dst, out[:]...)
	}
	return append(dst, '"')
}

func parquetTimestamp(v int64, ts *format.TimestampType) string {
	var t time.Time
	switch ts.Unit.Value.(type) {
	case *format.MilliSeconds:
		t = time.UnixMilli(v)
	case *format.MicroSeconds:
		t = time.UnixMicro(v)
	default:
		t = time.Unix(0, v)
	}
	if ts.IsAdjustedToUTC {
		return t.UTC().Format(time.RFC3339Nano)
	}
	return t.UTC().Format("2006-01-02T15:04:05.999999999")
}

// parquetSource streams the text and kept columns of a Parquet file, a row
// at a time, each column read page by page.
type parquetSource struct {
	f     File
	fh    *os.File
	pf    *parquet.File
	text  *pqNode   // nil with Options.RowJSON
	keep  []*pqNode // nil: column absent in this file
	row   []*pqNode // Options.RowJSON: every top-level column
	json  pqJSON
	max   int64
	chunk int
	arena []byte
	total int64 // rows in the file
	done  int64 // rows consumed
	err   error
}

func openParquetSource(f File, o Options, skip int64) (src source, err error) {
	fh, err := os.Open(f.Path)
	if err != nil {
		return nil, &ReadError{Path: f.Path, Err: err}
	}
	s := &parquetSource{f: f, fh: fh, max: o.MaxDocBytes, chunk: o.ChunkBytes, json: pqJSON{limit: int(max(o.MaxDocBytes, 1<<20))}}
	defer func() {
		if p := recover(); p != nil {
			err = &ReadError{Path: f.Path, Err: fmt.Errorf("corrupt parquet data: %v", p)}
		}
		if err != nil {
			s.close()
		}
	}()
	if s.pf, err = openParquetFile(fh); err != nil {
		return nil, &ReadError{Path: f.Path, Err: err}
	}
	s.total, s.done = s.pf.NumRows(), skip
	if skip > s.total {
		return nil, fmt.Errorf("%w: %s has %d rows, cannot skip %d (file changed?)", ErrPosition, f.Path, s.total, skip)
	}
	root := s.pf.Root()
	if o.RowJSON {
		// A whole row is assembled before its size is judged (Oversized):
		// no per-value bound, the values are bounded by the file.
		s.json.limit = math.MaxInt
		for _, c := range root.Columns() {
			s.row = append(s.row, newPQNode(c, 0, 0))
		}
	} else {
		tc, err := textColumn(s.pf, o.TextField)
		if err != nil {
			return nil, &ReadError{Path: f.Path, Err: err}
		}
		def, rep := levelsOf(root, tc)
		s.text = newPQNode(tc, def, rep)
	}
	for _, k := range o.KeepColumns {
		if o.RowJSON {
			break
		}
		c := findParquetColumn(root, k)
		if c == nil {
			s.keep = append(s.keep, nil)
			continue
		}
		def, rep := levelsOf(root, c)
		s.keep = append(s.keep, newPQNode(c, def, rep))
	}
	if skip > 0 {
		for _, n := range s.nodes() {
			for _, l := range n.all {
				if err := l.pages.SeekToRow(skip); err != nil {
					return nil, &ReadError{Path: f.Path, Unit: "row", Line: skip + 1, Err: err}
				}
			}
		}
	}
	return s, nil
}

func (s *parquetSource) nodes() []*pqNode {
	if s.text == nil {
		return s.row
	}
	out := []*pqNode{s.text}
	for _, k := range s.keep {
		if k != nil {
			out = append(out, k)
		}
	}
	return out
}

func (s *parquetSource) next() (rec Record, err error) {
	if s.err != nil {
		return Record{}, s.err
	}
	defer func() {
		if p := recover(); p != nil {
			// parquet-go can panic on some corrupt inputs; a corrupt file
			// is an error, not a crash.
			err = fmt.Errorf("corrupt parquet data: %v", p)
		}
		if err != nil && !errors.Is(err, io.EOF) {
			if _, ok := err.(*ReadError); !ok {
				err = &ReadError{Path: s.f.Path, Unit: "row", Line: s.done + 1, Err: err}
			}
			s.err = err
		}
	}()
	if s.done >= s.total {
		for _, n := range s.nodes() {
			for _, l := range n.all {
				if _, err := l.peek(); !errors.Is(err, io.EOF) {
					if err == nil {
						err = fmt.Errorf("column %s holds values past the file's %d rows", strings.Join(l.col.Path(), "."), s.total)
					}
					return Record{}, err
				}
			}
		}
		return Record{}, io.EOF
	}
	for _, n := range s.nodes() {
		for _, l := range n.all {
			v, err := l.peek()
			if err != nil {
				if errors.Is(err, io.EOF) {
					err = fmt.Errorf("column %s ends after %d of %d rows", strings.Join(l.col.Path(), "."), s.done, s.total)
				}
				return Record{}, err
			}
			if v.RepetitionLevel() != 0 {
				return Record{}, errParquetLevels
			}
		}
	}
	if s.text == nil {
		return s.rowRecord()
	}
	rec = Record{Line: s.done + 1}
	v, err := s.text.leaf.next()
	if err != nil {
		return Record{}, noEOF(err)
	}
	if v.DefinitionLevel() < s.text.def {
		rec.Kind = NullText
	} else {
		b := v.ByteArray()
		rec.Size = int64(len(b))
		if rec.Size > s.max {
			rec.Kind = Oversized
		} else {
			rec.Kind = PlainText
			rec.Raw = s.copyText(b)
		}
	}
	if len(s.keep) > 0 {
		rec.Cols = make([]string, len(s.keep))
		for k, n := range s.keep {
			val, null, err := s.keptValue(n)
			if err != nil {
				return Record{}, fmt.Errorf("keep column %d: %w", k, err)
			}
			if null {
				if rec.Null == nil {
					rec.Null = make([]bool, len(s.keep))
				}
				rec.Null[k] = true
			}
			rec.Cols[k] = val
		}
	}
	s.done++
	return rec, nil
}

// rowRecord reads the next row as one JSON object of all its columns
// (Options.RowJSON), struct fields in schema order.
func (s *parquetSource) rowRecord() (Record, error) {
	line := s.done + 1
	out := []byte{'{'}
	for k, n := range s.row {
		if k > 0 {
			out = append(out, ',')
		}
		out = appendJSONString(out, n.col.Name())
		out = append(out, ':')
		var err error
		if out, err = s.json.value(out, n); err != nil {
			return Record{}, fmt.Errorf("column %q: %w", n.col.Name(), err)
		}
	}
	out = append(out, '}')
	s.done++
	if int64(len(out)) > s.max {
		return Record{Line: line, Kind: Oversized, Size: int64(len(out))}, nil
	}
	return Record{Line: line, Kind: JSONLine, Raw: out, Size: int64(len(out))}, nil
}

// keptValue reads one row of a kept column: text as is, anything else as
// compact JSON.
func (s *parquetSource) keptValue(n *pqNode) (string, bool, error) {
	if n == nil {
		return "", true, nil
	}
	if !n.col.Repeated() {
		v, err := n.first.peek()
		if err != nil {
			return "", false, noEOF(err)
		}
		if v.DefinitionLevel() < n.def {
			return "", true, n.skipAbsent()
		}
		if n.leaf != nil && v.Kind() == parquet.ByteArray {
			n.leaf.i++
			return string(v.ByteArray()), false, nil
		}
	}
	b, err := s.json.value(nil, n)
	return string(b), false, err
}

// copyText copies b into the arena (see the package Caveats): small texts
// share chunks, large ones get their own slice.
func (s *parquetSource) copyText(b []byte) []byte {
	n := len(b)
	if n > s.chunk/4 {
		return append([]byte(nil), b...)
	}
	if len(s.arena)+n > cap(s.arena) {
		s.arena = make([]byte, 0, s.chunk)
	}
	start := len(s.arena)
	s.arena = append(s.arena, b...)
	return s.arena[start : start+n : start+n]
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
	for _, n := range s.nodes() {
		for _, l := range n.all {
			l.close()
		}
	}
	s.text, s.keep, s.row = nil, nil, nil
	var err error
	if s.fh != nil {
		err = s.fh.Close()
		s.fh = nil
	}
	if errors.Is(err, os.ErrClosed) {
		err = nil
	}
	return err
}
