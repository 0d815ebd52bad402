package dataset

import (
	"encoding/binary"
	"fmt"
	"math"
)

// This file reads the Arrow IPC stream format: message framing, the Schema
// message and RecordBatch metadata. Offsets are int64 throughout and checked
// against the file size before any slice is taken.

// Arrow flatbuffer enum values (Schema.fbs / Message.fbs).
const (
	msgSchema          = 1
	msgDictionaryBatch = 2
	msgRecordBatch     = 3

	metadataV4 = 3
	metadataV5 = 4

	typeNull            = 1
	typeInt             = 2
	typeFloatingPoint   = 3
	typeBinary          = 4
	typeUtf8            = 5
	typeBool            = 6
	typeDecimal         = 7
	typeDate            = 8
	typeTime            = 9
	typeTimestamp       = 10
	typeInterval        = 11
	typeList            = 12
	typeStruct          = 13
	typeUnion           = 14
	typeFixedSizeBinary = 15
	typeFixedSizeList   = 16
	typeMap             = 17
	typeDuration        = 18
	typeLargeBinary     = 19
	typeLargeUtf8       = 20
	typeLargeList       = 21
	typeRunEndEncoded   = 22
	typeBinaryView      = 23
	typeUtf8View        = 24
	typeListView        = 25
	typeLargeListView   = 26

	continuationMarker = 0xFFFFFFFF
	maxFieldDepth      = 64
)

// arrowField is the part of an Arrow Field this package needs.
type arrowField struct {
	name      string
	typ       uint8
	bitWidth  int32 // Int
	signed    bool  // Int
	listSize  int32 // FixedSizeList
	unionMode int16 // Union: 0 sparse, 1 dense
	dict      bool  // dictionary-encoded: laid out as its index type
	children  []arrowField
}

// arrowSchema is a decoded Schema message plus the record batch layout it implies.
type arrowSchema struct {
	version  int16
	fields   []arrowField
	metadata map[string]string
	// Per top-level field: index of its first FieldNode, first buffer (before
	// variadic buffers), and the number of view-typed nodes before it.
	nodeStart   []int
	bufStart    []int
	viewsBefore []int
	totalNodes  int
	totalBufs   int
	totalViews  int
}

// message is one framed IPC message.
type message struct {
	start     int64 // offset of the message in the file
	bodyStart int64
	bodyLen   int64
	next      int64 // offset of the following message
	eos       bool
	kind      uint8
	version   int16
	fb        *fbuf
	header    fbTable
}

// readMessage decodes the framing and Message table of the message at p.
func readMessage(data []byte, p int64) (message, error) {
	size := int64(len(data))
	m := message{start: p}
	if p < 0 || p > size-4 {
		return m, fmt.Errorf("message at offset %d: truncated, no end-of-stream marker", p)
	}
	hdr := int64(4)
	metaLen := int64(int32(binary.LittleEndian.Uint32(data[p:])))
	if binary.LittleEndian.Uint32(data[p:]) == continuationMarker {
		if p > size-8 {
			return m, fmt.Errorf("message at offset %d: truncated length prefix", p)
		}
		hdr = 8
		metaLen = int64(int32(binary.LittleEndian.Uint32(data[p+4:])))
	}
	if metaLen == 0 {
		m.eos = true
		m.next = p + hdr
		return m, nil
	}
	if metaLen < 0 || metaLen > size-p-hdr {
		return m, fmt.Errorf("message at offset %d: metadata length %d exceeds file size %d", p, metaLen, size)
	}
	f := &fbuf{b: data[p+hdr : p+hdr+metaLen]}
	root := f.root()
	m.version = f.getI16(root, 0, 0)
	m.kind = f.getU8(root, 1, 0)
	m.header = f.table(root, 2)
	m.bodyLen = f.getI64(root, 3, 0)
	if f.err != nil {
		return m, fmt.Errorf("message at offset %d: %w", p, f.err)
	}
	m.fb = f
	m.bodyStart = p + hdr + metaLen
	if m.bodyLen < 0 || m.bodyLen > size-m.bodyStart {
		return m, fmt.Errorf("message at offset %d: body length %d exceeds file size %d", p, m.bodyLen, size)
	}
	if !m.header.ok && (m.kind == msgSchema || m.kind == msgRecordBatch) {
		return m, fmt.Errorf("message at offset %d: missing header", p)
	}
	if m.version < metadataV4 {
		return m, fmt.Errorf("message at offset %d: %w: metadata version %d (Arrow < 0.15)", p, ErrUnsupported, m.version)
	}
	m.next = m.bodyStart + m.bodyLen
	return m, nil
}

// decodeSchema decodes a Schema message.
func decodeSchema(m message) (*arrowSchema, error) {
	if m.kind != msgSchema {
		return nil, fmt.Errorf("message at offset %d: first message is type %d, not a schema", m.start, m.kind)
	}
	f, t := m.fb, m.header
	s := &arrowSchema{version: m.version}
	if e := f.getI16(t, 0, 0); e != 0 {
		return nil, fmt.Errorf("schema: %w: big-endian data", ErrUnsupported)
	}
	start, n, _ := f.vector(t, 1, 4)
	for i := 0; i < n && f.err == nil; i++ {
		fd, err := decodeField(f, f.vecTable(start, i), 0)
		if err != nil {
			return nil, fmt.Errorf("schema field %d: %w", i, err)
		}
		s.fields = append(s.fields, fd)
	}
	kstart, kn, _ := f.vector(t, 2, 4)
	for i := 0; i < kn && f.err == nil; i++ {
		kv := f.vecTable(kstart, i)
		if s.metadata == nil {
			s.metadata = make(map[string]string)
		}
		s.metadata[f.str(kv, 0)] = f.str(kv, 1)
	}
	if f.err != nil {
		return nil, fmt.Errorf("schema: %w", f.err)
	}
	for _, fd := range s.fields {
		s.nodeStart = append(s.nodeStart, s.totalNodes)
		s.bufStart = append(s.bufStart, s.totalBufs)
		s.viewsBefore = append(s.viewsBefore, s.totalViews)
		nodes, bufs, views, err := layout(&fd, s.version)
		if err != nil {
			return nil, fmt.Errorf("schema field %q: %w", fd.name, err)
		}
		s.totalNodes += nodes
		s.totalBufs += bufs
		s.totalViews += views
	}
	return s, nil
}

func decodeField(f *fbuf, t fbTable, depth int) (arrowField, error) {
	if depth > maxFieldDepth {
		return arrowField{}, fmt.Errorf("%w: types nested deeper than %d", ErrUnsupported, maxFieldDepth)
	}
	fd := arrowField{
		name: f.str(t, 0),
		typ:  f.getU8(t, 2, 0),
	}
	tt := f.table(t, 3)
	switch fd.typ {
	case typeInt:
		fd.bitWidth = f.getI32(tt, 0, 0)
		fd.signed = f.getU8(tt, 1, 0) != 0
	case typeFixedSizeList:
		fd.listSize = f.getI32(tt, 0, 0)
	case typeUnion:
		fd.unionMode = f.getI16(tt, 0, 0)
	}
	fd.dict = f.table(t, 4).ok
	start, n, _ := f.vector(t, 5, 4)
	for i := 0; i < n && f.err == nil; i++ {
		c, err := decodeField(f, f.vecTable(start, i), depth+1)
		if err != nil {
			return fd, err
		}
		fd.children = append(fd.children, c)
	}
	return fd, f.err
}

// layout returns how many FieldNodes, fixed buffers and view-typed nodes
// (which add variadic buffers) a field occupies in a record batch.
func layout(fd *arrowField, version int16) (nodes, bufs, views int, err error) {
	if fd.dict {
		return 1, 2, 0, nil // indices only; values live in dictionary batches
	}
	nodes = 1
	children := 0
	switch fd.typ {
	case typeNull:
		bufs = 0
	case typeInt, typeFloatingPoint, typeBool, typeDecimal, typeDate, typeTime, typeTimestamp,
		typeInterval, typeFixedSizeBinary, typeDuration:
		bufs = 2
	case typeBinary, typeUtf8, typeLargeBinary, typeLargeUtf8:
		bufs = 3
	case typeList, typeLargeList, typeMap:
		bufs, children = 2, 1
	case typeFixedSizeList:
		bufs, children = 1, 1
	case typeStruct:
		bufs, children = 1, -1
	case typeUnion:
		bufs, children = 1, -1
		if fd.unionMode == 1 {
			bufs = 2
		}
		if version < metadataV5 {
			bufs++ // pre-V5 unions carried a validity bitmap
		}
	case typeRunEndEncoded:
		bufs, children = 0, 2
	case typeBinaryView, typeUtf8View:
		bufs, views = 2, 1
	case typeListView, typeLargeListView:
		bufs, children = 3, 1
	default:
		return 0, 0, 0, fmt.Errorf("%w: arrow type id %d", ErrUnsupported, fd.typ)
	}
	if children >= 0 && len(fd.children) != children {
		return 0, 0, 0, fmt.Errorf("%w: type %d has %d children, want %d", ErrCorrupt, fd.typ, len(fd.children), children)
	}
	for i := range fd.children {
		n, b, v, err := layout(&fd.children[i], version)
		if err != nil {
			return 0, 0, 0, err
		}
		nodes += n
		bufs += b
		views += v
	}
	return nodes, bufs, views, nil
}

type fieldNode struct{ length, nulls int64 }

// bufRef is a buffer as absolute offset and length in the file.
type bufRef struct{ off, len int64 }

// recordBatch is decoded RecordBatch metadata, every buffer checked to lie
// inside the message body.
type recordBatch struct {
	start    int64
	rows     int64
	nodes    []fieldNode
	bufs     []bufRef
	bufStart []int // per top-level field, including variadic buffers before it
}

func decodeRecordBatch(m message, s *arrowSchema) (*recordBatch, error) {
	if m.kind != msgRecordBatch {
		return nil, fmt.Errorf("message at offset %d: type %d, want a record batch", m.start, m.kind)
	}
	f, t := m.fb, m.header
	rb := &recordBatch{start: m.start, rows: f.getI64(t, 0, 0)}
	nstart, nn, nok := f.vector(t, 1, 16)
	bstart, bn, bok := f.vector(t, 2, 16)
	if f.table(t, 3).ok {
		return nil, fmt.Errorf("record batch at offset %d: %w: compressed body", m.start, ErrUnsupported)
	}
	vstart, vn, _ := f.vector(t, 4, 8)
	if f.err != nil {
		return nil, fmt.Errorf("record batch at offset %d: %w", m.start, f.err)
	}
	if !nok || !bok {
		return nil, fmt.Errorf("record batch at offset %d: missing nodes or buffers", m.start)
	}
	if rb.rows < 0 {
		return nil, fmt.Errorf("record batch at offset %d: negative length %d", m.start, rb.rows)
	}
	if nn != s.totalNodes {
		return nil, fmt.Errorf("record batch at offset %d: %d field nodes, schema needs %d", m.start, nn, s.totalNodes)
	}
	if vn != s.totalViews {
		return nil, fmt.Errorf("record batch at offset %d: %d variadic counts, schema needs %d", m.start, vn, s.totalViews)
	}
	variadic := make([]int64, vn)
	var extra int64
	for i := range variadic {
		variadic[i] = int64(f.u64(vstart + 8*i))
		if variadic[i] < 0 || variadic[i] > int64(bn) {
			return nil, fmt.Errorf("record batch at offset %d: bad variadic buffer count %d", m.start, variadic[i])
		}
		extra += variadic[i]
	}
	if int64(bn) != int64(s.totalBufs)+extra {
		return nil, fmt.Errorf("record batch at offset %d: %d buffers, schema needs %d", m.start, bn, int64(s.totalBufs)+extra)
	}
	rb.nodes = make([]fieldNode, nn)
	for i := range rb.nodes {
		p := nstart + 16*i
		rb.nodes[i] = fieldNode{int64(f.u64(p)), int64(f.u64(p + 8))}
		if rb.nodes[i].length < 0 || rb.nodes[i].nulls < 0 || rb.nodes[i].nulls > rb.nodes[i].length {
			return nil, fmt.Errorf("record batch at offset %d: field node %d has length %d, null count %d",
				m.start, i, rb.nodes[i].length, rb.nodes[i].nulls)
		}
	}
	rb.bufs = make([]bufRef, bn)
	for i := range rb.bufs {
		p := bstart + 16*i
		off, n := int64(f.u64(p)), int64(f.u64(p+8))
		if off < 0 || n < 0 || off > m.bodyLen || n > m.bodyLen-off {
			return nil, fmt.Errorf("record batch at offset %d: buffer %d (offset %d, length %d) outside %d-byte body",
				m.start, i, off, n, m.bodyLen)
		}
		rb.bufs[i] = bufRef{m.bodyStart + off, n}
	}
	rb.bufStart = make([]int, len(s.fields))
	for k := range s.fields {
		b := int64(s.bufStart[k])
		for _, v := range variadic[:s.viewsBefore[k]] {
			b += v
		}
		rb.bufStart[k] = int(b)
	}
	return rb, nil
}

// idsLayout says where and how input_ids is stored in a shard's schema.
type idsLayout struct {
	name     string // column name: input_ids or labels
	field    int    // top-level field index
	list     uint8  // typeList, typeLargeList or typeFixedSizeList
	fixed    int64  // list size for fixed-size lists
	width    int    // bytes per token id: 1, 2, 4 or 8
	signed   bool
	typeName string // e.g. "list<int64>"
}

// findIDs locates input_ids in the schema.
func findIDs(s *arrowSchema) (idsLayout, error) { return findIntList(s, "input_ids") }

// findIntList locates a list-of-integers column (input_ids, labels) in the schema.
func findIntList(s *arrowSchema, name string) (idsLayout, error) {
	for k := range s.fields {
		fd := &s.fields[k]
		if fd.name != name {
			continue
		}
		l := idsLayout{name: name, field: k, list: fd.typ}
		switch fd.typ {
		case typeList, typeLargeList:
		case typeFixedSizeList:
			if fd.listSize <= 0 {
				return l, fmt.Errorf("%s: %w: fixed-size list of size %d", name, ErrUnsupported, fd.listSize)
			}
			l.fixed = int64(fd.listSize)
		default:
			return l, fmt.Errorf("%s: %w: arrow type id %d, want a list of integers", name, ErrUnsupported, fd.typ)
		}
		if fd.dict || len(fd.children) != 1 {
			return l, fmt.Errorf("%s: %w: dictionary-encoded list", name, ErrUnsupported)
		}
		c := &fd.children[0]
		if c.typ != typeInt || c.dict {
			return l, fmt.Errorf("%s: %w: list of arrow type id %d, want integers", name, ErrUnsupported, c.typ)
		}
		switch c.bitWidth {
		case 8, 16, 32, 64:
		default:
			return l, fmt.Errorf("%s: %w: %d-bit integers", name, ErrUnsupported, c.bitWidth)
		}
		l.width = int(c.bitWidth / 8)
		l.signed = c.signed
		elem := fmt.Sprintf("int%d", c.bitWidth)
		if !c.signed {
			elem = "u" + elem
		}
		switch fd.typ {
		case typeList:
			l.typeName = "list<" + elem + ">"
		case typeLargeList:
			l.typeName = "large_list<" + elem + ">"
		default:
			l.typeName = fmt.Sprintf("fixed_size_list<%s, %d>", elem, l.fixed)
		}
		return l, nil
	}
	return idsLayout{}, fmt.Errorf("%w: no %s column", ErrUnsupported, name)
}

// idsBatch is one record batch's input_ids column, validated: every offset is
// monotonic and within the values buffer.
type idsBatch struct {
	rb     *recordBatch
	rows   int64
	valid  []byte // validity bitmap, nil when there are no nulls
	offs   []byte // list offsets (width offWidth), nil for fixed-size lists
	offW   int
	fixed  int64
	vals   []byte  // values, exactly childLen*width bytes
	i32    []int32 // zero-copy view of vals when they are aligned int32
	width  int
	signed bool
}

// decodeIDs decodes and validates input_ids of the record batch in m.
func decodeIDs(data []byte, m message, s *arrowSchema, l idsLayout) (*idsBatch, error) {
	rb, err := decodeRecordBatch(m, s)
	if err != nil {
		return nil, err
	}
	return decodeIntList(data, m, rb, s, l)
}

// decodeIntList decodes and validates the list-of-integers column l of the decoded record batch rb.
func decodeIntList(data []byte, m message, rb *recordBatch, s *arrowSchema, l idsLayout) (*idsBatch, error) {
	n0, b0 := s.nodeStart[l.field], rb.bufStart[l.field]
	list, child := rb.nodes[n0], rb.nodes[n0+1]
	at := func(format string, args ...any) error {
		return fmt.Errorf("record batch at offset %d: %s: "+format, append([]any{m.start, l.name}, args...)...)
	}
	if list.length != rb.rows {
		return nil, at("%d rows in a %d-row batch", list.length, rb.rows)
	}
	// Every row needs at least one byte of offsets or values, so this bound
	// holds for valid data and keeps row arithmetic below far from overflow.
	if rb.rows > m.bodyLen {
		return nil, at("%d rows in a %d-byte body", rb.rows, m.bodyLen)
	}
	b := &idsBatch{rb: rb, rows: rb.rows, width: l.width, signed: l.signed, fixed: l.fixed}
	bytesOf := func(i int) []byte { r := rb.bufs[i]; return data[r.off : r.off+r.len] }
	if list.nulls > 0 {
		b.valid = bytesOf(b0)
		if int64(len(b.valid)) < (rb.rows+7)/8 {
			return nil, at("validity bitmap of %d bytes for %d rows", len(b.valid), rb.rows)
		}
	}
	var valBuf int
	switch l.list {
	case typeList, typeLargeList:
		b.offW = 4
		if l.list == typeLargeList {
			b.offW = 8
		}
		valBuf = b0 + 3
		if rb.rows > 0 {
			b.offs = bytesOf(b0 + 1)
			if int64(len(b.offs))/int64(b.offW) < rb.rows+1 {
				return nil, at("offsets buffer of %d bytes for %d rows", len(b.offs), rb.rows)
			}
		}
	default:
		valBuf = b0 + 2
		if rb.rows > child.length/l.fixed {
			return nil, at("%d values for %d rows of %d", child.length, rb.rows, l.fixed)
		}
	}
	if child.nulls > 0 {
		return nil, at("%d null token ids", child.nulls)
	}
	vb := bytesOf(valBuf)
	if child.length > int64(len(vb))/int64(l.width) {
		return nil, at("%d values in a %d-byte buffer", child.length, len(vb))
	}
	b.vals = vb[:child.length*int64(l.width)]
	if b.offs != nil {
		prev := b.offset(0)
		if prev < 0 {
			return nil, at("row 0 starts at negative offset %d", prev)
		}
		for r := int64(1); r <= rb.rows; r++ {
			o := b.offset(r)
			if o < prev {
				return nil, at("offsets decrease at row %d (%d < %d)", r, o, prev)
			}
			prev = o
		}
		if prev > child.length {
			return nil, at("last offset %d beyond %d values", prev, child.length)
		}
	}
	if l.width == 4 && l.signed {
		b.i32 = int32View(b.vals)
	}
	return b, nil
}

func (b *idsBatch) offset(r int64) int64 {
	if b.offW == 4 {
		return int64(int32(binary.LittleEndian.Uint32(b.offs[4*r:])))
	}
	return int64(binary.LittleEndian.Uint64(b.offs[8*r:]))
}

func (b *idsBatch) isNull(r int64) bool {
	return b.valid != nil && b.valid[r>>3]&(1<<(r&7)) == 0
}

// span returns the value range of row r. The offsets were validated at
// decode time, but they are read from the mapping again on every call and a
// shard rewritten in place under the reader changes them: each span is
// checked against the values buffer again (a few compares) so that a bad one
// is an error wrapping ErrCorrupt, never an out-of-range slice.
func (b *idsBatch) span(r int64) (start, end int64, err error) {
	if r < 0 || r >= b.rows {
		return 0, 0, fmt.Errorf("%w: batch row %d of %d", ErrCorrupt, r, b.rows)
	}
	if b.isNull(r) {
		return 0, 0, nil
	}
	if b.offs == nil {
		return r * b.fixed, (r + 1) * b.fixed, nil
	}
	start, end = b.offset(r), b.offset(r+1)
	if n := int64(len(b.vals)) / int64(b.width); start < 0 || end < start || end > n {
		return 0, 0, fmt.Errorf("%w: batch row %d: input_ids offsets %d..%d outside its %d values (was the file rewritten under the reader?)",
			ErrCorrupt, r, start, end, n)
	}
	return start, end, nil
}

// firstWideID finds the first row holding an id outside int32 (only ids
// stored in 4 unsigned or 8 bytes can be) and returns it with the id.
func (b *idsBatch) firstWideID() (row int64, id string, bad bool) {
	if b.width < 4 || (b.width == 4 && b.signed) {
		return 0, "", false
	}
	w := int64(b.width)
	for r := range b.rows {
		start, end, err := b.span(r)
		if err != nil {
			continue // reported by the read of that row
		}
		for j := start; j < end; j++ {
			p := b.vals[j*w:]
			switch {
			case w == 4:
				if u := binary.LittleEndian.Uint32(p); u > math.MaxInt32 {
					return r, fmt.Sprint(u), true
				}
			case b.signed:
				if v := int64(binary.LittleEndian.Uint64(p)); v < math.MinInt32 || v > math.MaxInt32 {
					return r, fmt.Sprint(v), true
				}
			default:
				if u := binary.LittleEndian.Uint64(p); u > math.MaxInt32 {
					return r, fmt.Sprint(u), true
				}
			}
		}
	}
	return 0, "", false
}

// appendRange appends values [start, end) converted to int32. It fails on ids
// that do not fit in int32.
func (b *idsBatch) appendRange(dst []int32, start, end int64) ([]int32, error) {
	if b.i32 != nil {
		return append(dst, b.i32[start:end]...), nil
	}
	v := b.vals
	w := int64(b.width)
	for j := start; j < end; j++ {
		var x int64
		p := v[j*w:]
		switch {
		case w == 1 && b.signed:
			x = int64(int8(p[0]))
		case w == 1:
			x = int64(p[0])
		case w == 2 && b.signed:
			x = int64(int16(binary.LittleEndian.Uint16(p)))
		case w == 2:
			x = int64(binary.LittleEndian.Uint16(p))
		case w == 4 && b.signed:
			x = int64(int32(binary.LittleEndian.Uint32(p)))
		case w == 4:
			x = int64(binary.LittleEndian.Uint32(p))
		case b.signed:
			x = int64(binary.LittleEndian.Uint64(p))
		default:
			u := binary.LittleEndian.Uint64(p)
			if u > math.MaxInt32 {
				return dst, fmt.Errorf("%w: token id %d does not fit in int32", ErrUnsupported, u)
			}
			x = int64(u)
		}
		if x < math.MinInt32 || x > math.MaxInt32 {
			return dst, fmt.Errorf("%w: token id %d does not fit in int32", ErrUnsupported, x)
		}
		dst = append(dst, int32(x))
	}
	return dst, nil
}

// stringAt reads row r of the string/binary top-level field k of rb.
func stringAt(data []byte, s *arrowSchema, rb *recordBatch, k int, r int64) (string, bool, error) {
	fd := &s.fields[k]
	var offW int64
	switch {
	case fd.dict:
		return "", false, fmt.Errorf("column %q: %w: dictionary-encoded", fd.name, ErrNoColumn)
	case fd.typ == typeUtf8 || fd.typ == typeBinary:
		offW = 4
	case fd.typ == typeLargeUtf8 || fd.typ == typeLargeBinary:
		offW = 8
	default:
		return "", false, fmt.Errorf("column %q: %w: arrow type id %d", fd.name, ErrNoColumn, fd.typ)
	}
	node := rb.nodes[s.nodeStart[k]]
	b0 := rb.bufStart[k]
	bytesOf := func(i int) []byte { x := rb.bufs[i]; return data[x.off : x.off+x.len] }
	if r >= node.length {
		return "", false, fmt.Errorf("record batch at offset %d: column %q has %d rows, want row %d", rb.start, fd.name, node.length, r)
	}
	if node.nulls > 0 {
		valid := bytesOf(b0)
		if int64(len(valid)) <= r>>3 {
			return "", false, fmt.Errorf("record batch at offset %d: column %q: %w: short validity bitmap", rb.start, fd.name, ErrCorrupt)
		}
		if valid[r>>3]&(1<<(r&7)) == 0 {
			return "", false, nil
		}
	}
	offs, vals := bytesOf(b0+1), bytesOf(b0+2)
	if int64(len(offs))/offW < r+2 {
		return "", false, fmt.Errorf("record batch at offset %d: column %q: %w: short offsets buffer", rb.start, fd.name, ErrCorrupt)
	}
	var start, end int64
	if offW == 4 {
		start = int64(int32(binary.LittleEndian.Uint32(offs[4*r:])))
		end = int64(int32(binary.LittleEndian.Uint32(offs[4*r+4:])))
	} else {
		start = int64(binary.LittleEndian.Uint64(offs[8*r:]))
		end = int64(binary.LittleEndian.Uint64(offs[8*r+8:]))
	}
	if start < 0 || end < start || end > int64(len(vals)) {
		return "", false, fmt.Errorf("record batch at offset %d: column %q row %d: %w: offsets %d..%d outside %d-byte data",
			rb.start, fd.name, r, ErrCorrupt, start, end, len(vals))
	}
	return string(vals[start:end]), true, nil
}
