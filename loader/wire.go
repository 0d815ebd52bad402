package loader

import (
	"errors"
	"math/bits"
	"sync"
	"unsafe"

	"google.golang.org/grpc/encoding"
	"google.golang.org/grpc/encoding/proto"
	"google.golang.org/grpc/mem"
)

// hostLE reports whether in-memory integers are little-endian, so that int32
// token slices can be copied into wire buffers byte for byte.
var hostLE = func() bool {
	x := uint16(1)
	return *(*byte)(unsafe.Pointer(&x)) == 1
}()

// Buffer size classes: powers of two from 4 KiB up to the largest message.
const (
	minClassBits = 12
	maxClassBits = 31
)

// bufPool recycles batch buffers by power-of-two size class. It implements
// mem.BufferPool so that gRPC hands a buffer back once it has been written.
type bufPool struct {
	classes [maxClassBits + 1]sync.Pool
}

var _ mem.BufferPool = (*bufPool)(nil)

func classOf(n int) int {
	if n <= 1<<minClassBits {
		return minClassBits
	}
	return bits.Len(uint(n - 1))
}

// Get returns a buffer of length n (capacity: n rounded up to a power of two).
func (p *bufPool) Get(n int) *[]byte {
	c := classOf(n)
	if c > maxClassBits {
		b := make([]byte, n)
		return &b
	}
	if v, ok := p.classes[c].Get().(*[]byte); ok {
		*v = (*v)[:n]
		return v
	}
	b := make([]byte, n, 1<<c)
	return &b
}

// Put takes back a buffer obtained from Get.
func (p *bufPool) Put(b *[]byte) {
	c := cap(*b)
	if c < 1<<minClassBits || c&(c-1) != 0 {
		return
	}
	k := bits.Len(uint(c)) - 1
	if k > maxClassBits {
		return
	}
	*b = (*b)[:0]
	p.classes[k].Put(b)
}

// wireBatch is one ServerMessage{batch} already encoded in protobuf wire
// format in a pooled buffer. serverCodec hands the buffer to gRPC as is.
type wireBatch struct {
	buf  *[]byte
	pool *bufPool
	// payload is the byte count of input_ids (for metrics).
	payload int
	// inSlot is the byte count written to a shared-memory slot (for metrics).
	inSlot int
	// The shape of a slot batch, for the ring's doorbell header.
	rows, length, pieces, cuLen, trained uint32
}

// errSpent means a wireBatch was marshalled twice.
var errSpent = errors.New("loader: batch buffer already sent")

// take moves the buffer into a gRPC buffer slice; the pool gets it back when
// gRPC frees it.
func (w *wireBatch) take() (mem.BufferSlice, error) {
	if w.buf == nil {
		return nil, errSpent
	}
	b := mem.NewBuffer(w.buf, w.pool)
	w.buf = nil
	return mem.BufferSlice{b}, nil
}

// release returns an unsent buffer to the pool.
func (w *wireBatch) release() {
	if w.buf != nil {
		w.pool.Put(w.buf)
		w.buf = nil
	}
}

// len is the encoded size.
func (w *wireBatch) len() int {
	if w.buf == nil {
		return 0
	}
	return len(*w.buf)
}

// serverCodec is the protobuf codec with one addition: a *wireBatch is sent
// as the bytes it already holds, so batch data is copied once, from the
// mapped shard into the buffer gRPC writes to the socket.
type serverCodec struct {
	base encoding.CodecV2
}

func newServerCodec() serverCodec {
	base := encoding.GetCodecV2(proto.Name)
	if base == nil {
		panic("loader: gRPC proto codec not registered")
	}
	return serverCodec{base: base}
}

func (c serverCodec) Marshal(v any) (mem.BufferSlice, error) {
	if w, ok := v.(*wireBatch); ok {
		return w.take()
	}
	return c.base.Marshal(v)
}

func (c serverCodec) Unmarshal(data mem.BufferSlice, v any) error { return c.base.Unmarshal(data, v) }

func (serverCodec) Name() string { return proto.Name }
