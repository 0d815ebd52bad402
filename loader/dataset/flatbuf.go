package dataset

import (
	"encoding/binary"
	"fmt"
)

// This file holds a minimal flatbuffer reader and writer, enough for the Arrow
// IPC Message, Schema and RecordBatch tables. The reader bounds-checks every
// access and records the first failure in fbuf.err, so decoding code can read
// a whole table and check the error once.

// fbuf is a bounds-checked reader over one flatbuffer.
type fbuf struct {
	b   []byte
	err error
}

// fbTable is a decoded table position: pos is the table start, vt the vtable.
type fbTable struct {
	ok    bool
	pos   int
	vt    int
	vtLen int
	tLen  int
}

func (f *fbuf) fail(format string, args ...any) {
	if f.err == nil {
		f.err = fmt.Errorf(format, args...)
	}
}

func (f *fbuf) in(p, n int) bool {
	if f.err != nil {
		return false
	}
	if p < 0 || n < 0 || p > len(f.b) || n > len(f.b)-p {
		f.fail("flatbuffer: %d bytes at offset %d outside %d-byte buffer", n, p, len(f.b))
		return false
	}
	return true
}

func (f *fbuf) u8(p int) uint8 {
	if !f.in(p, 1) {
		return 0
	}
	return f.b[p]
}

func (f *fbuf) u16(p int) uint16 {
	if !f.in(p, 2) {
		return 0
	}
	return binary.LittleEndian.Uint16(f.b[p:])
}

func (f *fbuf) u32(p int) uint32 {
	if !f.in(p, 4) {
		return 0
	}
	return binary.LittleEndian.Uint32(f.b[p:])
}

func (f *fbuf) u64(p int) uint64 {
	if !f.in(p, 8) {
		return 0
	}
	return binary.LittleEndian.Uint64(f.b[p:])
}

// root returns the root table.
func (f *fbuf) root() fbTable {
	return f.tableAt(int(f.u32(0)))
}

// tableAt decodes the table starting at p.
func (f *fbuf) tableAt(p int) fbTable {
	so := int64(int32(f.u32(p)))
	if f.err != nil {
		return fbTable{}
	}
	vt := int64(p) - so
	if vt < 0 || vt > int64(len(f.b))-4 {
		f.fail("flatbuffer: vtable offset %d of table at %d outside buffer", vt, p)
		return fbTable{}
	}
	t := fbTable{ok: true, pos: p, vt: int(vt)}
	t.vtLen = int(f.u16(t.vt))
	t.tLen = int(f.u16(t.vt + 2))
	if t.vtLen < 4 || t.vtLen%2 != 0 || !f.in(t.vt, t.vtLen) {
		f.fail("flatbuffer: bad vtable length %d at %d", t.vtLen, t.vt)
		return fbTable{}
	}
	if t.tLen < 4 || !f.in(p, t.tLen) {
		f.fail("flatbuffer: bad table length %d at %d", t.tLen, p)
		return fbTable{}
	}
	return t
}

// field returns the absolute position of field id (size bytes), or -1 when absent.
func (f *fbuf) field(t fbTable, id, size int) int {
	if f.err != nil || !t.ok {
		return -1
	}
	slot := 4 + 2*id
	if slot+2 > t.vtLen {
		return -1
	}
	o := int(f.u16(t.vt + slot))
	if o == 0 {
		return -1
	}
	if o < 4 || o+size > t.tLen {
		f.fail("flatbuffer: field %d (offset %d, %d bytes) outside %d-byte table at %d", id, o, size, t.tLen, t.pos)
		return -1
	}
	return t.pos + o
}

func (f *fbuf) getU8(t fbTable, id int, def uint8) uint8 {
	if p := f.field(t, id, 1); p >= 0 {
		return f.u8(p)
	}
	return def
}

func (f *fbuf) getI16(t fbTable, id int, def int16) int16 {
	if p := f.field(t, id, 2); p >= 0 {
		return int16(f.u16(p))
	}
	return def
}

func (f *fbuf) getI32(t fbTable, id int, def int32) int32 {
	if p := f.field(t, id, 4); p >= 0 {
		return int32(f.u32(p))
	}
	return def
}

func (f *fbuf) getI64(t fbTable, id int, def int64) int64 {
	if p := f.field(t, id, 8); p >= 0 {
		return int64(f.u64(p))
	}
	return def
}

// ref follows the uoffset stored in field id and returns the target, or -1.
func (f *fbuf) ref(t fbTable, id int) int {
	p := f.field(t, id, 4)
	if p < 0 {
		return -1
	}
	target := int64(p) + int64(f.u32(p))
	if f.err != nil {
		return -1
	}
	if target > int64(len(f.b))-4 {
		f.fail("flatbuffer: offset field %d of table at %d points outside buffer", id, t.pos)
		return -1
	}
	return int(target)
}

// table returns the sub-table in field id; ok is false when absent.
func (f *fbuf) table(t fbTable, id int) fbTable {
	p := f.ref(t, id)
	if p < 0 {
		return fbTable{}
	}
	return f.tableAt(p)
}

// vector returns the element start and count of the vector in field id.
// An absent vector reads as empty with present false.
func (f *fbuf) vector(t fbTable, id, elemSize int) (start, n int, present bool) {
	p := f.ref(t, id)
	if p < 0 {
		return 0, 0, false
	}
	n64 := int64(f.u32(p))
	start = p + 4
	if f.err != nil {
		return 0, 0, false
	}
	if n64*int64(elemSize) > int64(len(f.b)-start) {
		f.fail("flatbuffer: vector of %d×%d bytes at %d outside buffer", n64, elemSize, p)
		return 0, 0, false
	}
	return start, int(n64), true
}

// str returns the string in field id ("" when absent).
func (f *fbuf) str(t fbTable, id int) string {
	start, n, _ := f.vector(t, id, 1)
	if f.err != nil || n == 0 {
		return ""
	}
	return string(f.b[start : start+n])
}

// vecTable returns element i of a vector of tables starting at start.
func (f *fbuf) vecTable(start, i int) fbTable {
	p := start + 4*i
	target := int64(p) + int64(f.u32(p))
	if f.err != nil {
		return fbTable{}
	}
	if target > int64(len(f.b))-4 {
		f.fail("flatbuffer: vector element %d points outside buffer", i)
		return fbTable{}
	}
	return f.tableAt(int(target))
}

// ---- writer ----

// fbObj is something that can be written into a flatbuffer; write returns the
// position that a uoffset referring to it must point at.
type fbObj interface {
	write(b *fbBuilder) int
}

// fbBuilder writes a flatbuffer front to back: a table is followed by the
// objects it refers to, so every uoffset points forward as the format requires.
type fbBuilder struct{ b []byte }

func (b *fbBuilder) pad(align int) {
	for len(b.b)%align != 0 {
		b.b = append(b.b, 0)
	}
}

// buildFlatbuffer writes root as a buffer's root object, padded to a multiple of 8.
func buildFlatbuffer(root fbObj) []byte {
	b := &fbBuilder{b: make([]byte, 4, 512)}
	pos := root.write(b)
	binary.LittleEndian.PutUint32(b.b[0:], uint32(pos))
	b.pad(8)
	return b.b
}

// fbField is one table field: a scalar of size 1, 2, 4 or 8 bytes, or (obj
// non-nil) a uoffset to another object.
type fbField struct {
	id   int
	size int
	val  uint64
	obj  fbObj
}

func fbScalar(id, size int, v uint64) fbField { return fbField{id: id, size: size, val: v} }
func fbRef(id int, o fbObj) fbField           { return fbField{id: id, size: 4, obj: o} }

// fbTab is a table; fields may come in any order.
type fbTab []fbField

func (t fbTab) write(b *fbBuilder) int {
	maxID := -1
	for _, f := range t {
		maxID = max(maxID, f.id)
	}
	// vtable first (the table's soffset points back at it).
	b.pad(2)
	vt := len(b.b)
	vtLen := 4 + 2*(maxID+1)
	b.b = append(b.b, make([]byte, vtLen)...)
	b.pad(8)
	tp := len(b.b)
	// Lay fields out largest first so each is naturally aligned.
	rel := make([]int, len(t))
	cur := 4
	for _, size := range []int{8, 4, 2, 1} {
		for i, f := range t {
			if f.size != size {
				continue
			}
			cur = (cur + size - 1) / size * size
			rel[i] = cur
			cur += size
		}
	}
	tLen := cur
	b.b = append(b.b, make([]byte, tLen)...)
	binary.LittleEndian.PutUint32(b.b[tp:], uint32(int32(tp-vt)))
	binary.LittleEndian.PutUint16(b.b[vt:], uint16(vtLen))
	binary.LittleEndian.PutUint16(b.b[vt+2:], uint16(tLen))
	for i, f := range t {
		binary.LittleEndian.PutUint16(b.b[vt+4+2*f.id:], uint16(rel[i]))
		p := tp + rel[i]
		switch f.size {
		case 1:
			b.b[p] = byte(f.val)
		case 2:
			binary.LittleEndian.PutUint16(b.b[p:], uint16(f.val))
		case 4:
			binary.LittleEndian.PutUint32(b.b[p:], uint32(f.val))
		case 8:
			binary.LittleEndian.PutUint64(b.b[p:], f.val)
		}
	}
	for i, f := range t {
		if f.obj == nil {
			continue
		}
		p := tp + rel[i]
		target := f.obj.write(b)
		binary.LittleEndian.PutUint32(b.b[p:], uint32(target-p))
	}
	return tp
}

// fbString is a flatbuffer string (length, bytes, NUL).
type fbString string

func (s fbString) write(b *fbBuilder) int {
	b.pad(4)
	p := len(b.b)
	b.b = binary.LittleEndian.AppendUint32(b.b, uint32(len(s)))
	b.b = append(b.b, s...)
	b.b = append(b.b, 0)
	return p
}

// fbTables is a vector of tables.
type fbTables []fbObj

func (v fbTables) write(b *fbBuilder) int {
	b.pad(4)
	p := len(b.b)
	b.b = binary.LittleEndian.AppendUint32(b.b, uint32(len(v)))
	b.b = append(b.b, make([]byte, 4*len(v))...)
	for i, o := range v {
		ep := p + 4 + 4*i
		target := o.write(b)
		binary.LittleEndian.PutUint32(b.b[ep:], uint32(target-ep))
	}
	return p
}

// fbStructs is a vector of structs made of `per` int64 fields each, with the
// element data 8-byte aligned.
type fbStructs struct {
	per  int
	vals []int64
}

func (v fbStructs) write(b *fbBuilder) int {
	b.pad(4)
	if len(b.b)%8 == 0 {
		b.b = append(b.b, 0, 0, 0, 0)
	}
	p := len(b.b)
	b.b = binary.LittleEndian.AppendUint32(b.b, uint32(len(v.vals)/v.per))
	for _, x := range v.vals {
		b.b = binary.LittleEndian.AppendUint64(b.b, uint64(x))
	}
	return p
}
