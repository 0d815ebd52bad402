package client

import (
	"encoding/binary"
	"fmt"
	"math/bits"
	"sync"
	"unsafe"

	"google.golang.org/grpc/encoding"
	gproto "google.golang.org/grpc/encoding/proto"
	"google.golang.org/grpc/mem"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"

	"github.com/gload/gload/proto/gloadpb"
)

var hostLE = func() bool {
	x := uint16(1)
	return *(*byte)(unsafe.Pointer(&x)) == 1
}()

// serverMsg receives one ServerMessage: a batch decoded into an owned,
// aligned block, or any other message decoded by protobuf.
type serverMsg struct {
	batch *Batch
	other *gloadpb.ServerMessage
}

// clientCodec decodes *serverMsg by hand (batch buffers land in their final,
// aligned place with one copy) and everything else with protobuf.
type clientCodec struct {
	base encoding.CodecV2
	pool *blockPool
}

func newClientCodec(pool *blockPool) clientCodec {
	return clientCodec{base: encoding.GetCodecV2(gproto.Name), pool: pool}
}

func (c clientCodec) Marshal(v any) (mem.BufferSlice, error) { return c.base.Marshal(v) }

func (c clientCodec) Unmarshal(data mem.BufferSlice, v any) error {
	m, ok := v.(*serverMsg)
	if !ok {
		return c.base.Unmarshal(data, v)
	}
	bufs := make([][]byte, len(data))
	for i, b := range data {
		bufs[i] = b.ReadOnlyData()
	}
	return decodeServerMessage(bufs, c.pool, m)
}

func (clientCodec) Name() string { return gproto.Name }

// cursor reads protobuf wire data spread over several buffers.
type cursor struct {
	bufs [][]byte
	left int // bytes left over all buffers
}

func newCursor(bufs [][]byte) *cursor {
	c := &cursor{}
	for _, b := range bufs {
		if len(b) > 0 {
			c.bufs = append(c.bufs, b)
			c.left += len(b)
		}
	}
	return c
}

var errTruncated = fmt.Errorf("%w: message truncated", ErrProtocol)

func (c *cursor) byte() (byte, error) {
	if c.left == 0 {
		return 0, errTruncated
	}
	b := c.bufs[0][0]
	c.advance(1)
	return b, nil
}

func (c *cursor) advance(n int) {
	c.left -= n
	for n > 0 {
		k := min(n, len(c.bufs[0]))
		c.bufs[0] = c.bufs[0][k:]
		n -= k
		if len(c.bufs[0]) == 0 {
			c.bufs = c.bufs[1:]
		}
	}
}

func (c *cursor) varint() (uint64, error) {
	var v uint64
	for shift := uint(0); shift < 70; shift += 7 {
		b, err := c.byte()
		if err != nil {
			return 0, err
		}
		if shift == 63 && b > 1 {
			return 0, fmt.Errorf("%w: varint overflows 64 bits", ErrProtocol)
		}
		v |= uint64(b&0x7f) << shift
		if b < 0x80 {
			return v, nil
		}
	}
	return 0, fmt.Errorf("%w: varint longer than 10 bytes", ErrProtocol)
}

// read copies len(dst) bytes.
func (c *cursor) read(dst []byte) error {
	if len(dst) > c.left {
		return errTruncated
	}
	n := len(dst)
	for len(dst) > 0 {
		k := copy(dst, c.bufs[0])
		dst = dst[k:]
		c.bufs[0] = c.bufs[0][k:]
		if len(c.bufs[0]) == 0 {
			c.bufs = c.bufs[1:]
		}
	}
	c.left -= n
	return nil
}

func (c *cursor) skip(n uint64) error {
	if n > uint64(c.left) {
		return errTruncated
	}
	c.advance(int(n))
	return nil
}

// length reads a length prefix and checks it against what is left.
func (c *cursor) length() (int, error) {
	n, err := c.varint()
	if err != nil {
		return 0, err
	}
	if n > uint64(c.left) {
		return 0, errTruncated
	}
	return int(n), nil
}

// skipField skips a field's value of wire type t.
// fixed32 reads a little-endian 4-byte value.
func (c *cursor) fixed32() (uint32, error) {
	var v uint32
	for i := 0; i < 4; i++ {
		x, err := c.byte()
		if err != nil {
			return 0, err
		}
		v |= uint32(x) << (8 * i)
	}
	return v, nil
}

func (c *cursor) skipField(t protowire.Type) error {
	switch t {
	case protowire.VarintType:
		_, err := c.varint()
		return err
	case protowire.Fixed32Type:
		return c.skip(4)
	case protowire.Fixed64Type:
		return c.skip(8)
	case protowire.BytesType:
		n, err := c.length()
		if err != nil {
			return err
		}
		return c.skip(uint64(n))
	}
	return fmt.Errorf("%w: unsupported wire type %d", ErrProtocol, t)
}

func (c *cursor) tag() (protowire.Number, protowire.Type, error) {
	v, err := c.varint()
	if err != nil {
		return 0, 0, err
	}
	// Compare before narrowing: protowire.Number is an int32, and a tag's
	// number can be any 61-bit value (protobuf rejects those ≥ 2^29).
	if n := v >> 3; n < uint64(protowire.MinValidNumber) || n > uint64(protowire.MaxValidNumber) {
		return 0, 0, fmt.Errorf("%w: invalid field number %d", ErrProtocol, n)
	}
	return protowire.Number(v >> 3), protowire.Type(v & 7), nil
}

// Field numbers (proto/gload.proto).
const (
	fServerOpened = 1
	fServerBatch  = 2
	fServerEnd    = 3

	fSeq         = 1
	fGlobalIndex = 2
	fRankStep    = 3
	fRows        = 4
	fLength      = 5
	fPieces      = 6
	fInputIDs    = 7
	fLengths     = 8
	fIndex       = 9
	fPositionIDs = 10
	fCuSeqlens   = 11
	fSlot        = 12
	fCuLen       = 13
	fLabels      = 40 // bytes, SFT datasets
	fTrained     = 41 // fixed32, with labels

	// iLabels is where fLabels sits in the per-field arrays below (after the contiguous fields 7..13).
	iLabels = fCuLen + 1
	nFields = iLabels + 1
)

// bufIndex maps a bytes field number of Batch to its index in the per-field arrays (-1: not a buffer).
func bufIndex(num protowire.Number) int {
	switch {
	case num >= fInputIDs && num <= fCuSeqlens:
		return int(num)
	case num == fLabels:
		return iLabels
	}
	return -1
}

// bufFields are the per-field array indexes of every buffer, in block order.
var bufFields = [...]int{fInputIDs, fLengths, fIndex, fPositionIDs, fCuSeqlens, iLabels}

// decodeServerMessage decodes one ServerMessage from bufs into m. A message
// that is exactly one batch field is decoded by hand; anything else (opened,
// end, or a batch mixed with other fields) goes through protobuf.
func decodeServerMessage(bufs [][]byte, pool *blockPool, m *serverMsg) error {
	c := newCursor(bufs)
	total := c.left
	num, typ, err := c.tag()
	if err == nil && num == fServerBatch && typ == protowire.BytesType {
		n, err := c.length()
		if err == nil && c.left == n {
			b, err := decodeBatch(c, n, pool)
			if err != nil {
				return err
			}
			m.batch, m.other = b, nil
			return nil
		}
	}
	// General path: protobuf over the whole message.
	flat := make([]byte, 0, total)
	for _, b := range bufs {
		flat = append(flat, b...)
	}
	var sm gloadpb.ServerMessage
	if err := proto.Unmarshal(flat, &sm); err != nil {
		return fmt.Errorf("%w: %w", ErrProtocol, err)
	}
	if pb := sm.GetBatch(); pb != nil {
		b, err := batchFromProto(pb, pool)
		if err != nil {
			return err
		}
		m.batch, m.other = b, nil
		return nil
	}
	m.batch, m.other = nil, &sm
	return nil
}

// region is where one bytes field sits inside a batch's block.
type region struct{ off, n int }

// decodeBatch decodes the n-byte Batch message at c.
func decodeBatch(c *cursor, n int, pool *blockPool) (*Batch, error) {
	// First pass over a copy of the cursor: scalars and the sizes of the
	// bytes fields, so that one block holds them all.
	probe := &cursor{bufs: append([][]byte(nil), c.bufs...), left: c.left}
	b := &Batch{}
	var sizes [nFields]int
	for probe.left > 0 {
		num, typ, err := probe.tag()
		if err != nil {
			return nil, err
		}
		if num == fTrained && typ == protowire.Fixed32Type {
			v, err := probe.fixed32()
			if err != nil {
				return nil, err
			}
			b.Trained = int(v)
			continue
		}
		if k := bufIndex(num); k >= 0 {
			if typ != protowire.BytesType {
				return nil, fmt.Errorf("%w: batch field %d has wire type %d", ErrProtocol, num, typ)
			}
			l, err := probe.length()
			if err != nil {
				return nil, err
			}
			sizes[k] = l // the last occurrence wins, as in protobuf
			if err := probe.skip(uint64(l)); err != nil {
				return nil, err
			}
			continue
		}
		if typ != protowire.VarintType || num > fCuLen {
			if err := probe.skipField(typ); err != nil {
				return nil, err
			}
			continue
		}
		v, err := probe.varint()
		if err != nil {
			return nil, err
		}
		switch num {
		case fSeq:
			b.Seq = v
		case fGlobalIndex:
			b.GlobalIndex = v
		case fRankStep:
			b.RankStep = v
		case fRows:
			b.Rows = int(uint32(v))
		case fLength:
			b.Length = int(uint32(v))
		case fPieces:
			b.Pieces = int(uint32(v))
		case fSlot:
			b.Slot = int32(v)
		case fCuLen:
			b.CuLen = int(uint32(v))
		}
	}
	if b.Slot >= 0 {
		// Shared memory: the buffers are in a ring slot (see Stream.viewSlot).
		for _, f := range bufFields {
			if sizes[f] != 0 {
				return nil, fmt.Errorf("%w: batch %d names slot %d and carries field %d", ErrProtocol, b.Seq, b.Slot, f)
			}
		}
		return b, c.skip(uint64(c.left))
	}
	if err := b.checkSizes(sizes[fInputIDs], sizes[fLengths], sizes[fIndex], sizes[fPositionIDs], sizes[fCuSeqlens], sizes[iLabels]); err != nil {
		return nil, err
	}
	var regs [nFields]region
	blockLen := 0
	for _, f := range bufFields {
		regs[f] = region{blockLen, sizes[f]}
		blockLen += (sizes[f] + 7) &^ 7
	}
	b.block = pool.get(blockLen)
	raw := b.block.bytes()
	// Second pass: copy each bytes field into its region.
	for c.left > 0 {
		num, typ, err := c.tag()
		if err != nil {
			return nil, err
		}
		if k := bufIndex(num); k >= 0 && typ == protowire.BytesType {
			l, err := c.length()
			if err != nil {
				return nil, err
			}
			r := regs[k]
			if l != r.n { // an earlier duplicate: skip it
				if err := c.skip(uint64(l)); err != nil {
					return nil, err
				}
				continue
			}
			if err := c.read(raw[r.off : r.off+r.n]); err != nil {
				return nil, err
			}
			continue
		}
		if err := c.skipField(typ); err != nil {
			return nil, err
		}
	}
	b.setViews(raw, regs)
	return b, nil
}

func (b *Batch) setViews(raw []byte, regs [nFields]region) {
	view := func(f int) []byte { r := regs[f]; return raw[r.off : r.off+r.n : r.off+r.n] }
	b.inputIDs, b.lengths, b.index = view(fInputIDs), view(fLengths), view(fIndex)
	b.positionIDs, b.cuSeqlens = view(fPositionIDs), view(fCuSeqlens)
	b.labels = view(iLabels)
}

// checkSizes validates the bytes fields against the batch's shape.
func (b *Batch) checkSizes(ids, lengths, index, pos, cu, labels int) error {
	cells := uint64(b.Rows) * uint64(b.Length)
	switch {
	case uint64(ids) != 4*cells:
		return fmt.Errorf("%w: batch %d: input_ids has %d bytes, want %d×%d×4", ErrProtocol, b.Seq, ids, b.Rows, b.Length)
	case lengths != 4*b.Rows:
		return fmt.Errorf("%w: batch %d: lengths has %d bytes, want %d×4", ErrProtocol, b.Seq, lengths, b.Rows)
	case index != 8*b.Pieces:
		return fmt.Errorf("%w: batch %d: index has %d bytes, want %d×8", ErrProtocol, b.Seq, index, b.Pieces)
	case pos != 0 && uint64(pos) != 4*cells:
		return fmt.Errorf("%w: batch %d: position_ids has %d bytes, want 0 or %d×%d×4", ErrProtocol, b.Seq, pos, b.Rows, b.Length)
	case cu != 4*b.CuLen:
		return fmt.Errorf("%w: batch %d: cu_seqlens has %d bytes, want cu_len %d × 4", ErrProtocol, b.Seq, cu, b.CuLen)
	case labels != 0 && uint64(labels) != 4*cells:
		return fmt.Errorf("%w: batch %d: labels has %d bytes, want 0 or %d×%d×4", ErrProtocol, b.Seq, labels, b.Rows, b.Length)
	}
	return nil
}

// batchFromProto copies a protobuf-decoded batch into a block.
func batchFromProto(pb *gloadpb.Batch, pool *blockPool) (*Batch, error) {
	b := &Batch{
		Seq: pb.Seq, GlobalIndex: pb.GlobalIndex, RankStep: pb.RankStep, Rows: int(pb.Rows), Length: int(pb.Length),
		Pieces: int(pb.Pieces), Slot: pb.Slot, CuLen: int(pb.CuLen), Trained: int(pb.TrainedTokens),
	}
	fields := [nFields][]byte{fInputIDs: pb.InputIds, fLengths: pb.Lengths, fIndex: pb.Index, fPositionIDs: pb.PositionIds, fCuSeqlens: pb.CuSeqlens, iLabels: pb.Labels}
	if b.Slot >= 0 {
		for _, f := range bufFields {
			if len(fields[f]) != 0 {
				return nil, fmt.Errorf("%w: batch %d names slot %d and carries field %d", ErrProtocol, b.Seq, b.Slot, f)
			}
		}
		return b, nil
	}
	if err := b.checkSizes(len(pb.InputIds), len(pb.Lengths), len(pb.Index), len(pb.PositionIds), len(pb.CuSeqlens), len(pb.Labels)); err != nil {
		return nil, err
	}
	var regs [nFields]region
	n := 0
	for _, f := range bufFields {
		regs[f] = region{n, len(fields[f])}
		n += (len(fields[f]) + 7) &^ 7
	}
	b.block = pool.get(n)
	raw := b.block.bytes()
	for _, f := range bufFields {
		copy(raw[regs[f].off:], fields[f])
	}
	b.setViews(raw, regs)
	return b, nil
}

// block is 8-byte-aligned memory for one batch's buffers.
type block struct {
	words []uint64
	n     int
}

func (k *block) bytes() []byte {
	if k.n == 0 {
		return nil
	}
	return unsafe.Slice((*byte)(unsafe.Pointer(unsafe.SliceData(k.words))), k.n)
}

// blockPool recycles blocks by power-of-two size class.
type blockPool struct {
	classes [64]sync.Pool
}

const minBlockBits = 10

func (p *blockPool) get(n int) *block {
	words := (n + 7) / 8
	c := minBlockBits
	if words > 1<<minBlockBits {
		c = bits.Len(uint(words - 1))
	}
	if v, ok := p.classes[c].Get().(*block); ok {
		v.n = n
		return v
	}
	return &block{words: make([]uint64, 1<<c), n: n}
}

func (p *blockPool) put(k *block) {
	if k == nil {
		return
	}
	c := bits.Len(uint(len(k.words))) - 1
	if len(k.words) != 1<<c || c < minBlockBits {
		return
	}
	p.classes[c].Put(k)
}

// int32s views b as []int32 (little-endian hosts), or decodes a copy.
func int32s(b []byte) []int32 {
	if len(b) == 0 {
		return nil
	}
	if hostLE {
		return unsafe.Slice((*int32)(unsafe.Pointer(unsafe.SliceData(b))), len(b)/4)
	}
	out := make([]int32, len(b)/4)
	for i := range out {
		out[i] = int32(binary.LittleEndian.Uint32(b[4*i:]))
	}
	return out
}

// int64s views b as []int64 (little-endian hosts), or decodes a copy.
func int64s(b []byte) []int64 {
	if len(b) == 0 {
		return nil
	}
	if hostLE {
		return unsafe.Slice((*int64)(unsafe.Pointer(unsafe.SliceData(b))), len(b)/8)
	}
	out := make([]int64, len(b)/8)
	for i := range out {
		out[i] = int64(binary.LittleEndian.Uint64(b[8*i:]))
	}
	return out
}
