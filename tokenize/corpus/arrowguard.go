package corpus

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"sync/atomic"

	"github.com/apache/arrow-go/v18/arrow/ipc"
	"github.com/apache/arrow-go/v18/arrow/memory"
)

// This file frames Arrow IPC messages for arrow-go's stream reader and
// checks each message's flatbuffer metadata before arrow-go decodes it.
// arrow-go sizes slices by counts read from the metadata without checking
// them against the buffer (a corrupt schema can ask for billions of fields
// and exhaust memory), so every vector length that drives an allocation is
// checked here against the bytes that hold it, and message and body sizes
// against the bytes left in the file.

// errArrowTruncated reports a stream that ends without its end-of-stream
// marker.
var errArrowTruncated = errors.New("arrow stream ends without an end-of-stream marker (truncated file?)")

// guardedMessages implements ipc.MessageReader over an IPC stream (or the
// stream inside an IPC file, after its 8-byte magic).
type guardedMessages struct {
	r         io.Reader
	remaining int64 // bytes of the file not yet read
	msg       *ipc.Message
	refs      atomic.Int64
}

var _ ipc.MessageReader = (*guardedMessages)(nil)

func newGuardedMessages(r io.Reader, remaining int64) *guardedMessages {
	g := &guardedMessages{r: r, remaining: remaining}
	g.refs.Add(1)
	return g
}

func (g *guardedMessages) Retain() { g.refs.Add(1) }

func (g *guardedMessages) Release() {
	if g.refs.Add(-1) == 0 && g.msg != nil {
		g.msg.Release()
		g.msg = nil
	}
}

func (g *guardedMessages) read(p []byte) error {
	if int64(len(p)) > g.remaining {
		return fmt.Errorf("arrow message of %d bytes runs past the end of the file", len(p))
	}
	if _, err := io.ReadFull(g.r, p); err != nil {
		if err == io.EOF {
			err = io.ErrUnexpectedEOF
		}
		return err
	}
	g.remaining -= int64(len(p))
	return nil
}

// Message returns the next message, or io.EOF at the end-of-stream marker.
func (g *guardedMessages) Message() (*ipc.Message, error) {
	if g.msg != nil {
		g.msg.Release()
		g.msg = nil
	}
	var hdr [4]byte
	if g.remaining == 0 {
		return nil, errArrowTruncated
	}
	if err := g.read(hdr[:]); err != nil {
		if errors.Is(err, io.ErrUnexpectedEOF) {
			return nil, errArrowTruncated
		}
		return nil, err
	}
	n := binary.LittleEndian.Uint32(hdr[:])
	if n == 0xFFFFFFFF { // continuation marker, then the length
		if err := g.read(hdr[:]); err != nil {
			return nil, fmt.Errorf("read arrow message length: %w", err)
		}
		n = binary.LittleEndian.Uint32(hdr[:])
	}
	if n == 0 {
		return nil, io.EOF
	}
	if n < 8 || int64(n) > g.remaining {
		return nil, fmt.Errorf("invalid arrow message metadata length %d (%d bytes left)", n, g.remaining)
	}
	meta := make([]byte, n)
	if err := g.read(meta); err != nil {
		return nil, fmt.Errorf("read arrow message metadata: %w", err)
	}
	layout, err := checkMessageFB(meta)
	if err != nil {
		return nil, fmt.Errorf("invalid arrow message metadata: %w", err)
	}
	if layout.bodyLen < 0 || layout.bodyLen > g.remaining {
		return nil, fmt.Errorf("invalid arrow message body length %d (%d bytes left)", layout.bodyLen, g.remaining)
	}
	body := make([]byte, layout.bodyLen)
	if err := g.read(body); err != nil {
		return nil, fmt.Errorf("read arrow message body: %w", err)
	}
	if err := layout.checkBody(body); err != nil {
		return nil, fmt.Errorf("invalid arrow record batch: %w", err)
	}
	// As in arrow-go's own reader, the message stays owned by g and is
	// released on the next call.
	g.msg = ipc.NewMessage(memory.NewBufferBytes(meta), memory.NewBufferBytes(body))
	return g.msg, nil
}

// fbuf reads a flatbuffer with bounds checks. Positions are computed
// exactly as the flatbuffers Go runtime computes them (uint32 arithmetic
// that wraps), so that the checks look at the bytes arrow-go will read, not
// at what a well-formed buffer would hold.
type fbuf []byte

func (b fbuf) in(p uint32, n uint64) bool { return uint64(p)+n <= uint64(len(b)) }

func (b fbuf) u32(p uint32) (uint32, bool) {
	if !b.in(p, 4) {
		return 0, false
	}
	return binary.LittleEndian.Uint32(b[p:]), true
}

func (b fbuf) u16(p uint32) (uint16, bool) {
	if !b.in(p, 2) {
		return 0, false
	}
	return binary.LittleEndian.Uint16(b[p:]), true
}

// indirect follows the uoffset stored at p (flatbuffers' Table.Indirect).
func (b fbuf) indirect(p uint32) (uint32, bool) {
	off, ok := b.u32(p)
	if !ok {
		return 0, false
	}
	q := p + off
	return q, b.in(q, 4)
}

// field returns the position of field i of the table at t (flatbuffers'
// Table.Offset plus the table's position); present is false for an absent
// (default) field.
func (b fbuf) field(t uint32, i int) (pos uint32, present, ok bool) {
	so, ok := b.u32(t)
	if !ok {
		return 0, false, false
	}
	vt := uint32(int32(t) - int32(so))
	vtSize, ok := b.u16(vt)
	if !ok {
		return 0, false, false
	}
	slot := uint16(4 + 2*i)
	if slot >= vtSize {
		return 0, false, true
	}
	off, ok := b.u16(vt + uint32(slot))
	if !ok {
		return 0, false, false
	}
	if off == 0 {
		return 0, false, true
	}
	return t + uint32(off), true, true
}

// vector checks the vector referenced by field i of table t: its n elements
// of elem bytes must lie inside the buffer. It returns the first element's
// position and n (0 for an absent field).
func (b fbuf) vector(t uint32, i int, elem uint64) (start uint32, n int, err error) {
	p, present, ok := b.field(t, i)
	if !ok {
		return 0, 0, errors.New("field outside the buffer")
	}
	if !present {
		return 0, 0, nil
	}
	v, ok := b.indirect(p)
	if !ok {
		return 0, 0, errors.New("vector offset outside the buffer")
	}
	cnt, _ := b.u32(v)
	if !b.in(v+4, uint64(cnt)*elem) || v+4 < v {
		return 0, 0, fmt.Errorf("vector of %d elements does not fit in %d bytes", cnt, len(b))
	}
	return v + 4, int(cnt), nil
}

// table returns the table referenced by field i of table t (a sub-table or
// a union's value).
func (b fbuf) table(t uint32, i int) (tab uint32, present bool, err error) {
	p, present, ok := b.field(t, i)
	if !ok {
		return 0, false, errors.New("field outside the buffer")
	}
	if !present {
		return 0, false, nil
	}
	tab, ok = b.indirect(p)
	if !ok {
		return 0, false, errors.New("table offset outside the buffer")
	}
	return tab, true, nil
}

// scalar returns the position of the size-byte scalar field i of table t,
// checked to lie inside the buffer; present is false for a default value.
func (b fbuf) scalar(t uint32, i int, size uint64) (pos uint32, present bool, err error) {
	p, present, ok := b.field(t, i)
	if !ok || (present && !b.in(p, size)) {
		return 0, false, errors.New("scalar field outside the buffer")
	}
	return p, present, nil
}

// Flatbuffer field indices of Arrow's Message.fbs and Schema.fbs.
const (
	msgHeaderType, msgHeader, msgBodyLength, msgCustomMeta        = 1, 2, 3, 4
	hdrSchema, hdrDictionary, hdrRecordBatch                      = 1, 2, 3
	schemaFields, schemaCustomMeta, schemaFeatures                = 1, 2, 3
	fieldName, fieldTypeType, fieldType, fieldDict, fieldChildren = 0, 2, 3, 4, 5
	fieldCustomMeta                                               = 6
	dictEncIndexType                                              = 1
	typeTimestamp, typeUnion                                      = 10, 14
	timestampTimezone, unionTypeIDs                               = 1, 1
	rbLength, rbNodes, rbBuffers, rbCompression, rbVariadic       = 0, 1, 2, 3, 4
	dictData                                                      = 1
	kvKey, kvValue                                                = 0, 1
	maxFieldDepth                                                 = 64
	maxFields                                                     = 1 << 16
)

// Limits on what one message may make arrow-go allocate beyond its own
// bytes. A compressed buffer states its uncompressed size up front and
// arrow-go allocates it before decompressing, so a small file can ask for
// terabytes: a stated size must be at most maxExpansion times the
// compressed bytes (plus a MiB) and at most maxUncompressedBuffer.
const (
	maxExpansion          = 4096
	maxUncompressedBuffer = 4 << 30
)

// msgLayout is what Message needs from a message's metadata to check its
// body: the body length and, for record batches, the buffers.
type msgLayout struct {
	bodyLen    int64
	compressed bool
	buffers    [][2]int64 // offset, length within the body
}

// checkMessageFB checks the vectors of an IPC message's metadata and
// returns its body layout.
func checkMessageFB(meta []byte) (msgLayout, error) {
	var l msgLayout
	b := fbuf(meta)
	root, ok := b.indirect(0)
	if !ok {
		return l, errors.New("root offset outside the buffer")
	}
	if err := b.checkKeyValues(root, msgCustomMeta); err != nil {
		return l, err
	}
	if p, present, err := b.scalar(root, msgBodyLength, 8); err != nil {
		return l, errors.New("body length outside the buffer")
	} else if present {
		l.bodyLen = int64(binary.LittleEndian.Uint64(b[p:]))
	}
	var headerType byte
	if p, present, err := b.scalar(root, msgHeaderType, 1); err != nil {
		return l, errors.New("header type outside the buffer")
	} else if present {
		headerType = b[p]
	}
	hdr, present, err := b.table(root, msgHeader)
	if err != nil || !present {
		if err == nil {
			err = errors.New("message has no header")
		}
		return l, err
	}
	switch headerType {
	case hdrSchema:
		err = b.checkSchema(hdr)
	case hdrRecordBatch:
		err = b.checkRecordBatch(hdr, &l)
	case hdrDictionary:
		var rb uint32
		if rb, present, err = b.table(hdr, dictData); err == nil && present {
			err = b.checkRecordBatch(rb, &l)
		}
	default:
		err = fmt.Errorf("unsupported message type %d", headerType)
	}
	return l, err
}

func (b fbuf) checkSchema(s uint32) error {
	if err := b.checkKeyValues(s, schemaCustomMeta); err != nil {
		return err
	}
	if _, _, err := b.vector(s, schemaFeatures, 8); err != nil {
		return err
	}
	fields := 0
	return b.checkFields(s, schemaFields, 0, &fields)
}

// checkFields checks the vector of Field tables at field i of table t.
func (b fbuf) checkFields(t uint32, i, depth int, total *int) error {
	if depth > maxFieldDepth {
		return fmt.Errorf("fields nested deeper than %d", maxFieldDepth)
	}
	start, n, err := b.vector(t, i, 4)
	if err != nil {
		return err
	}
	if *total += n; *total > maxFields {
		return fmt.Errorf("schema has more than %d fields", maxFields)
	}
	for k := 0; k < n; k++ {
		f, ok := b.indirect(start + 4*uint32(k))
		if !ok {
			return errors.New("field offset outside the buffer")
		}
		if _, _, err := b.vector(f, fieldName, 1); err != nil {
			return err
		}
		if err := b.checkKeyValues(f, fieldCustomMeta); err != nil {
			return err
		}
		if err := b.checkType(f); err != nil {
			return err
		}
		if d, present, err := b.table(f, fieldDict); err != nil {
			return err
		} else if present {
			if _, _, err := b.table(d, dictEncIndexType); err != nil {
				return err
			}
		}
		if err := b.checkFields(f, fieldChildren, depth+1, total); err != nil {
			return err
		}
	}
	return nil
}

// checkType checks the vectors of a field's type table (a Timestamp's time
// zone, a Union's type ids).
func (b fbuf) checkType(f uint32) error {
	var typ byte
	if p, present, err := b.scalar(f, fieldTypeType, 1); err != nil {
		return err
	} else if present {
		typ = b[p]
	}
	tt, present, err := b.table(f, fieldType)
	if err != nil || !present {
		return err
	}
	switch typ {
	case typeTimestamp:
		_, _, err = b.vector(tt, timestampTimezone, 1)
	case typeUnion:
		_, _, err = b.vector(tt, unionTypeIDs, 4)
	}
	return err
}

// checkKeyValues checks a custom_metadata vector of KeyValue tables.
func (b fbuf) checkKeyValues(t uint32, i int) error {
	start, n, err := b.vector(t, i, 4)
	if err != nil {
		return err
	}
	for k := 0; k < n; k++ {
		kv, ok := b.indirect(start + 4*uint32(k))
		if !ok {
			return errors.New("key-value offset outside the buffer")
		}
		if _, _, err := b.vector(kv, kvKey, 1); err != nil {
			return err
		}
		if _, _, err := b.vector(kv, kvValue, 1); err != nil {
			return err
		}
	}
	return nil
}

func (b fbuf) checkRecordBatch(rb uint32, l *msgLayout) error {
	if _, _, err := b.scalar(rb, rbLength, 8); err != nil {
		return err
	}
	if _, _, err := b.vector(rb, rbNodes, 16); err != nil {
		return err
	}
	start, n, err := b.vector(rb, rbBuffers, 16)
	if err != nil {
		return err
	}
	for k := 0; k < n; k++ {
		p := start + 16*uint32(k)
		l.buffers = append(l.buffers, [2]int64{int64(binary.LittleEndian.Uint64(b[p:])), int64(binary.LittleEndian.Uint64(b[p+8:]))})
	}
	_, l.compressed, err = b.table(rb, rbCompression)
	if err != nil {
		return err
	}
	_, _, err = b.vector(rb, rbVariadic, 8)
	return err
}

// checkBody checks a record batch's buffers against its body: each inside
// it, and each compressed buffer's stated size within the limits.
func (l msgLayout) checkBody(body []byte) error {
	for k, buf := range l.buffers {
		off, n := buf[0], buf[1]
		if off < 0 || n < 0 || off > int64(len(body)) || n > int64(len(body))-off {
			return fmt.Errorf("buffer %d (offset %d, length %d) outside the %d-byte body", k, off, n, len(body))
		}
		if !l.compressed || n < 8 {
			continue
		}
		size := int64(binary.LittleEndian.Uint64(body[off:]))
		if size == -1 {
			continue // stored uncompressed
		}
		if size < 0 || size > maxUncompressedBuffer || size > n*maxExpansion+1<<20 {
			return fmt.Errorf("compressed buffer %d of %d bytes claims %d bytes uncompressed", k, n, size)
		}
	}
	return nil
}
