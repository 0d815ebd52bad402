package corpus

import (
	"encoding/json"
	"fmt"
	"strings"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
)

// This file reads the text and kept columns out of Arrow record batches,
// shared by the Parquet and the Hugging Face (Arrow stream) sources.

// resolveField finds a dotted path in fields: a field spelled with the dots
// first, else a walk through struct fields. It returns the index chain.
func resolveField(fields []arrow.Field, path string) ([]int, arrow.DataType, bool) {
	for i, f := range fields {
		if f.Name == path {
			return []int{i}, f.Type, true
		}
	}
	var chain []int
	var typ arrow.DataType
	for depth, part := range strings.Split(path, ".") {
		if depth > 0 {
			st, ok := typ.(*arrow.StructType)
			if !ok {
				return nil, nil, false
			}
			fields = st.Fields()
		}
		found := -1
		for i, f := range fields {
			if f.Name == part {
				found = i
				break
			}
		}
		if found < 0 {
			return nil, nil, false
		}
		chain = append(chain, found)
		typ = fields[found].Type
	}
	return chain, typ, true
}

// isTextType reports whether t can hold document text.
func isTextType(t arrow.DataType) bool {
	switch t.ID() {
	case arrow.STRING, arrow.LARGE_STRING, arrow.STRING_VIEW, arrow.BINARY, arrow.LARGE_BINARY, arrow.BINARY_VIEW:
		return true
	case arrow.DICTIONARY:
		return isTextType(t.(*arrow.DictionaryType).ValueType)
	}
	return false
}

// checkTextField reports (as a plan problem detail) a missing or non-text
// text column.
func checkTextField(sc *arrow.Schema, field string) string {
	_, typ, ok := resolveField(sc.Fields(), field)
	if !ok {
		return fmt.Sprintf("no text column %q (columns: %s)", field, fieldNames(sc))
	}
	if !isTextType(typ) {
		return fmt.Sprintf("text column %q has type %s, not string", field, typ)
	}
	return ""
}

func fieldNames(sc *arrow.Schema) string {
	names := make([]string, sc.NumFields())
	for i, f := range sc.Fields() {
		names[i] = f.Name
	}
	return strings.Join(names, ", ")
}

// column is one wanted column bound to a record batch.
type column struct {
	parents []arrow.Array // struct arrays along the path (a null parent makes the value null)
	leaf    arrow.Array
}

// bind resolves chain in rec. A nil leaf means the column is absent.
func bindColumn(rec arrow.RecordBatch, chain []int) (column, error) {
	var c column
	if chain == nil {
		return c, nil
	}
	arr := rec.Column(chain[0])
	for _, idx := range chain[1:] {
		st, ok := arr.(*array.Struct)
		if !ok || idx >= st.NumField() {
			return column{}, fmt.Errorf("column path does not match the batch's schema")
		}
		c.parents = append(c.parents, arr)
		arr = st.Field(idx)
	}
	if err := validateArray(arr); err != nil {
		return column{}, err
	}
	c.leaf = arr
	return c, nil
}

// validateArray checks the offsets of the arrays we index into, so that
// corrupt files give errors, not out-of-range panics. (ValidateFull would
// also reject ill-formed UTF-8, which Extract repairs instead.)
func validateArray(arr arrow.Array) error {
	if v, ok := arr.(interface{ Validate() error }); ok {
		if err := v.Validate(); err != nil {
			return fmt.Errorf("invalid column data: %w", err)
		}
	}
	var ok bool
	switch a := arr.(type) {
	case *array.String:
		ok = monotonic(a.ValueOffsets())
	case *array.LargeString:
		ok = monotonic(a.ValueOffsets())
	case *array.Binary:
		ok = monotonic(a.ValueOffsets())
	case *array.LargeBinary:
		ok = monotonic(a.ValueOffsets())
	default:
		return nil
	}
	if !ok {
		return fmt.Errorf("invalid column data: offsets out of order")
	}
	return nil
}

// monotonic reports whether the offsets (already sliced to the array, and
// long enough once Validate passed) are non-negative and non-decreasing.
func monotonic[T int32 | int64](offs []T) bool {
	if len(offs) == 0 {
		return true
	}
	if offs[0] < 0 {
		return false
	}
	for i := 1; i < len(offs); i++ {
		if offs[i] < offs[i-1] {
			return false
		}
	}
	return true
}

func (c column) isNull(i int) bool {
	if c.leaf == nil || c.leaf.IsNull(i) {
		return true
	}
	for _, p := range c.parents {
		if p.IsNull(i) {
			return true
		}
	}
	return false
}

// text returns the string value at row i, aliasing Arrow memory; ok is
// false when the leaf is not a text type.
func (c column) text(i int) (string, bool) {
	return textAt(c.leaf, i)
}

func textAt(arr arrow.Array, i int) (string, bool) {
	switch a := arr.(type) {
	case *array.String:
		return a.Value(i), true
	case *array.LargeString:
		return a.Value(i), true
	case *array.StringView:
		return a.Value(i), true
	case *array.Binary:
		return a.ValueString(i), true
	case *array.LargeBinary:
		return a.ValueString(i), true
	case *array.BinaryView:
		return a.ValueString(i), true
	case *array.Dictionary:
		return textAt(a.Dictionary(), a.GetValueIndex(i))
	}
	return "", false
}

// keptValue returns row i of a kept column as a string: text as is (copied),
// anything else as compact JSON (struct fields in schema order).
func (c column) keptValue(i int) (string, error) {
	if s, ok := c.text(i); ok {
		return strings.Clone(s), nil
	}
	b, err := appendArrowJSON(nil, c.leaf, i)
	if err != nil {
		return "", err
	}
	return string(b), nil
}

// listLike is what list arrays (list, large list, fixed-size list, list
// view) have in common.
type listLike interface {
	ListValues() arrow.Array
	ValueOffsets(i int) (start, end int64)
}

// appendArrowJSON appends value i of arr as compact JSON. Strings are
// written as Python's json.dumps(ensure_ascii=False) would, without HTML
// escaping.
func appendArrowJSON(dst []byte, arr arrow.Array, i int) ([]byte, error) {
	if arr.IsNull(i) {
		return append(dst, "null"...), nil
	}
	if s, ok := textAt(arr, i); ok {
		return appendJSONString(dst, s), nil
	}
	switch a := arr.(type) {
	case *array.Struct:
		st := a.DataType().(*arrow.StructType)
		dst = append(dst, '{')
		for k := 0; k < a.NumField(); k++ {
			if k > 0 {
				dst = append(dst, ',')
			}
			dst = appendJSONString(dst, st.Field(k).Name)
			dst = append(dst, ':')
			var err error
			if dst, err = appendArrowJSON(dst, a.Field(k), i); err != nil {
				return nil, err
			}
		}
		return append(dst, '}'), nil
	case listLike:
		vals := a.ListValues()
		start, end := a.ValueOffsets(i)
		if start < 0 || end < start || end > int64(vals.Len()) {
			return nil, fmt.Errorf("list offsets %d..%d out of range (%d values)", start, end, vals.Len())
		}
		dst = append(dst, '[')
		for j := start; j < end; j++ {
			if j > start {
				dst = append(dst, ',')
			}
			var err error
			if dst, err = appendArrowJSON(dst, vals, int(j)); err != nil {
				return nil, err
			}
		}
		return append(dst, ']'), nil
	}
	b, err := json.Marshal(arr.GetOneForMarshal(i))
	if err != nil {
		return nil, fmt.Errorf("encode %s value as JSON: %w", arr.DataType(), err)
	}
	return append(dst, b...), nil
}

// appendJSONString appends s as a JSON string literal: quotes, backslashes
// and control characters escaped, everything else (non-ASCII included) as
// is.
func appendJSONString(dst []byte, s string) []byte {
	const hex = "0123456789abcdef"
	dst = append(dst, '"')
	start := 0
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c >= 0x20 && c != '"' && c != '\\' {
			continue
		}
		dst = append(dst, s[start:i]...)
		switch c {
		case '"', '\\':
			dst = append(dst, '\\', c)
		case '\n':
			dst = append(dst, '\\', 'n')
		case '\r':
			dst = append(dst, '\\', 'r')
		case '\t':
			dst = append(dst, '\\', 't')
		case '\b':
			dst = append(dst, '\\', 'b')
		case '\f':
			dst = append(dst, '\\', 'f')
		default:
			dst = append(dst, '\\', 'u', '0', '0', hex[c>>4], hex[c&0xf])
		}
		start = i + 1
	}
	dst = append(dst, s[start:]...)
	return append(dst, '"')
}

// rowBinder holds the wanted column paths of one source and turns Arrow
// rows into Records.
type rowBinder struct {
	path      string
	textField string
	textChain []int
	keep      [][]int // nil chain: column absent in this file
	max       int64
	chunk     int
	arena     []byte

	rowJSON bool // Options.RowJSON: each row as one JSON object

	// bound to the current batch
	batch arrow.RecordBatch
	text  column
	cols  []column
	nrows int
}

func newRowBinder(f File, o Options, sc *arrow.Schema) (*rowBinder, error) {
	b := &rowBinder{path: f.Path, textField: o.TextField, max: o.MaxDocBytes, chunk: o.ChunkBytes, rowJSON: o.RowJSON}
	if o.RowJSON {
		return b, nil
	}
	chain, typ, ok := resolveField(sc.Fields(), o.TextField)
	if !ok {
		return nil, fmt.Errorf("no text column %q (columns: %s)", o.TextField, fieldNames(sc))
	}
	if !isTextType(typ) {
		return nil, fmt.Errorf("text column %q has type %s, not string", o.TextField, typ)
	}
	b.textChain = chain
	for _, k := range o.KeepColumns {
		chain, _, _ := resolveField(sc.Fields(), k)
		b.keep = append(b.keep, chain)
	}
	return b, nil
}

// bind binds the wanted columns to rec.
func (b *rowBinder) bind(rec arrow.RecordBatch) error {
	var err error
	if b.rowJSON {
		for k := 0; k < int(rec.NumCols()); k++ {
			if err := validateArray(rec.Column(k)); err != nil {
				return fmt.Errorf("column %q: %w", rec.ColumnName(k), err)
			}
		}
		b.batch, b.nrows = rec, int(rec.NumRows())
		return nil
	}
	if b.text, err = bindColumn(rec, b.textChain); err != nil {
		return fmt.Errorf("text column %q: %w", b.textField, err)
	}
	b.cols = b.cols[:0]
	for _, chain := range b.keep {
		c, err := bindColumn(rec, chain)
		if err != nil {
			return err
		}
		b.cols = append(b.cols, c)
	}
	b.nrows = int(rec.NumRows())
	return nil
}

// record builds the Record of row i of the bound batch; line is its 1-based
// row number in the file.
func (b *rowBinder) record(i int, line int64) (Record, error) {
	if b.rowJSON {
		return b.rowRecord(i, line)
	}
	rec := Record{Line: line}
	if b.text.isNull(i) {
		rec.Kind = NullText
	} else {
		s, ok := b.text.text(i)
		if !ok {
			return Record{}, fmt.Errorf("text column %q has type %s, not string", b.textField, b.text.leaf.DataType())
		}
		rec.Size = int64(len(s))
		if rec.Size > b.max {
			rec.Kind = Oversized
		} else {
			rec.Kind = PlainText
			rec.Raw = b.copyText(s)
		}
	}
	if len(b.cols) > 0 {
		rec.Cols = make([]string, len(b.cols))
		for k, c := range b.cols {
			if c.isNull(i) {
				if rec.Null == nil {
					rec.Null = make([]bool, len(b.cols))
				}
				rec.Null[k] = true
				continue
			}
			v, err := c.keptValue(i)
			if err != nil {
				return Record{}, fmt.Errorf("keep column %d: %w", k, err)
			}
			rec.Cols[k] = v
		}
	}
	return rec, nil
}

// rowRecord is row i of the bound batch as one JSON object (Options.RowJSON). A nested array whose offsets do not
// hold is an error naming the row, not a panic.
func (b *rowBinder) rowRecord(i int, line int64) (rec Record, err error) {
	defer func() {
		if r := recover(); r != nil {
			rec, err = Record{}, fmt.Errorf("row %d: corrupt nested column: %v", line, r)
		}
	}()
	out := []byte{'{'}
	for k := 0; k < int(b.batch.NumCols()); k++ {
		if k > 0 {
			out = append(out, ',')
		}
		out = appendJSONString(out, b.batch.ColumnName(k))
		out = append(out, ':')
		if out, err = appendArrowJSON(out, b.batch.Column(k), i); err != nil {
			return Record{}, fmt.Errorf("row %d column %q: %w", line, b.batch.ColumnName(k), err)
		}
		if int64(len(out)) > b.max {
			return Record{Line: line, Kind: Oversized, Size: int64(len(out))}, nil
		}
	}
	out = append(out, '}')
	return Record{Line: line, Kind: JSONLine, Raw: out, Size: int64(len(out))}, nil
}

// copyText copies s into the arena (see the package Caveats): small texts
// share chunks, large ones get their own slice.
func (b *rowBinder) copyText(s string) []byte {
	n := len(s)
	if n > b.chunk/4 {
		out := make([]byte, n)
		copy(out, s)
		return out
	}
	if len(b.arena)+n > cap(b.arena) {
		b.arena = make([]byte, 0, b.chunk)
	}
	start := len(b.arena)
	b.arena = append(b.arena, s...)
	return b.arena[start : start+n : start+n]
}
