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
	bodyLen, err := checkMessageFB(meta)
	if err != nil {
		return nil, fmt.Errorf("invalid arrow message metadata: %w", err)
	}
	if bodyLen < 0 || bodyLen > g.remaining {
		return nil, fmt.Errorf("invalid arrow message body length %d (%d bytes left)", bodyLen, g.remaining)
	}
	body := make([]byte, bodyLen)
	if err := g.read(body); err != nil {
		return nil, fmt.Errorf("read arrow message body: %w", err)
	}
	// As in arrow-go's own reader, the message stays owned by g and is
	// released on the next call.
	g.msg = ipc.NewMessage(memory.NewBufferBytes(meta), memory.NewBufferBytes(body))
	return g.msg, nil
}

// fbuf reads a flatbuffer with bounds checks.
type fbuf []byte

func (b fbuf) u32(p int) (int, bool) {
	if p < 0 || p+4 > len(b) {
		return 0, false
	}
	return int(binary.LittleEndian.Uint32(b[p:])), true
}

// deref follows the uoffset stored at p.
func (b fbuf) deref(p int) (int, bool) {
	off, ok := b.u32(p)
	if !ok || p+off > len(b) {
		return 0, false
	}
	return p + off, true
}

// field returns the position of field i of the table at t; present is
// false for an absent (default) field.
func (b fbuf) field(t, i int) (pos int, present, ok bool) {
	so, ok := b.u32(t)
	if !ok {
		return 0, false, false
	}
	vt := t - int(int32(so))
	if vt < 0 || vt+4 > len(b) {
		return 0, false, false
	}
	vtSize := int(binary.LittleEndian.Uint16(b[vt:]))
	slot := 4 + 2*i
	if slot+2 > vtSize {
		return 0, false, true
	}
	if vt+slot+2 > len(b) {
		return 0, false, false
	}
	off := int(binary.LittleEndian.Uint16(b[vt+slot:]))
	if off == 0 {
		return 0, false, true
	}
	if t+off > len(b) {
		return 0, false, false
	}
	return t + off, true, true
}

// vector checks the vector referenced by field i of table t: its n elements
// of elem bytes must lie inside the buffer. It returns the first element's
// position and n (0 for an absent field).
func (b fbuf) vector(t, i, elem int) (start, n int, err error) {
	p, present, ok := b.field(t, i)
	if !ok {
		return 0, 0, errors.New("field outside the buffer")
	}
	if !present {
		return 0, 0, nil
	}
	v, ok := b.deref(p)
	if !ok {
		return 0, 0, errors.New("vector offset outside the buffer")
	}
	n, ok = b.u32(v)
	if !ok || n > (len(b)-v-4)/elem {
		return 0, 0, fmt.Errorf("vector of %d elements does not fit in %d bytes", n, len(b))
	}
	return v + 4, n, nil
}

// table returns the table referenced by field i of table t.
func (b fbuf) table(t, i int) (tab int, present bool, err error) {
	p, present, ok := b.field(t, i)
	if !ok {
		return 0, false, errors.New("field outside the buffer")
	}
	if !present {
		return 0, false, nil
	}
	tab, ok = b.deref(p)
	if !ok {
		return 0, false, errors.New("table offset outside the buffer")
	}
	return tab, true, nil
}

// Flatbuffer field indices of Arrow's Message.fbs and Schema.fbs.
const (
	msgHeaderType, msgHeader, msgBodyLength, msgCustomMeta = 1, 2, 3, 4
	hdrSchema, hdrDictionary, hdrRecordBatch               = 1, 2, 3
	schemaFields, schemaCustomMeta, schemaFeatures         = 1, 2, 3
	fieldName, fieldChildren, fieldCustomMeta              = 0, 5, 6
	rbNodes, rbBuffers, rbVariadic                         = 1, 2, 4
	dictData                                               = 1
	kvKey, kvValue                                         = 0, 1
	maxFieldDepth                                          = 64
)

// checkMessageFB checks the vectors of an IPC message's metadata and
// returns its body length.
func checkMessageFB(meta []byte) (int64, error) {
	b := fbuf(meta)
	root, ok := b.deref(0)
	if !ok {
		return 0, errors.New("root offset outside the buffer")
	}
	if err := b.checkKeyValues(root, msgCustomMeta); err != nil {
		return 0, err
	}
	var bodyLen int64
	if p, present, ok := b.field(root, msgBodyLength); !ok || (present && p+8 > len(b)) {
		return 0, errors.New("body length outside the buffer")
	} else if present {
		bodyLen = int64(binary.LittleEndian.Uint64(b[p:]))
	}
	var headerType byte
	if p, present, ok := b.field(root, msgHeaderType); !ok {
		return 0, errors.New("header type outside the buffer")
	} else if present {
		headerType = b[p]
	}
	hdr, present, err := b.table(root, msgHeader)
	if err != nil || !present {
		if err == nil {
			err = errors.New("message has no header")
		}
		return 0, err
	}
	switch headerType {
	case hdrSchema:
		err = b.checkSchema(hdr)
	case hdrRecordBatch:
		err = b.checkRecordBatch(hdr)
	case hdrDictionary:
		var rb int
		if rb, present, err = b.table(hdr, dictData); err == nil && present {
			err = b.checkRecordBatch(rb)
		}
	default:
		err = fmt.Errorf("unsupported message type %d", headerType)
	}
	return bodyLen, err
}

func (b fbuf) checkSchema(s int) error {
	if err := b.checkKeyValues(s, schemaCustomMeta); err != nil {
		return err
	}
	if _, _, err := b.vector(s, schemaFeatures, 8); err != nil {
		return err
	}
	return b.checkFields(s, schemaFields, 0)
}

// checkFields checks the vector of Field tables at field i of table t.
func (b fbuf) checkFields(t, i, depth int) error {
	if depth > maxFieldDepth {
		return fmt.Errorf("fields nested deeper than %d", maxFieldDepth)
	}
	start, n, err := b.vector(t, i, 4)
	if err != nil {
		return err
	}
	for k := 0; k < n; k++ {
		f, ok := b.deref(start + 4*k)
		if !ok {
			return errors.New("field offset outside the buffer")
		}
		if _, _, err := b.vector(f, fieldName, 1); err != nil {
			return err
		}
		if err := b.checkKeyValues(f, fieldCustomMeta); err != nil {
			return err
		}
		if err := b.checkFields(f, fieldChildren, depth+1); err != nil {
			return err
		}
	}
	return nil
}

// checkKeyValues checks a custom_metadata vector of KeyValue tables.
func (b fbuf) checkKeyValues(t, i int) error {
	start, n, err := b.vector(t, i, 4)
	if err != nil {
		return err
	}
	for k := 0; k < n; k++ {
		kv, ok := b.deref(start + 4*k)
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

func (b fbuf) checkRecordBatch(rb int) error {
	if _, _, err := b.vector(rb, rbNodes, 16); err != nil {
		return err
	}
	if _, _, err := b.vector(rb, rbBuffers, 16); err != nil {
		return err
	}
	_, _, err := b.vector(rb, rbVariadic, 8)
	return err
}
