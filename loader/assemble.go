package loader

import (
	"encoding/binary"
	"fmt"
	"unsafe"

	"google.golang.org/protobuf/encoding/protowire"

	"github.com/gload/gload/bucket"
)

// tokenSource is what batch assembly reads rows from (a *dataset.Dataset).
type tokenSource interface {
	ZeroCopy() bool
	Tokens(i int) ([]int32, error)
	AppendTokens(dst []int32, i int) ([]int32, error)
}

// batchHeader holds the per-batch fields that do not come from the data.
type batchHeader struct {
	seq, global, rankStep uint64
	packed                bool
	padID                 int32
	posStart              int32
}

// Field numbers of gload.v1.ServerMessage and gload.v1.Batch.
const (
	fieldServerBatch   = 2
	fieldSeq           = 1
	fieldGlobalIndex   = 2
	fieldRankStep      = 3
	fieldRows          = 4
	fieldLength        = 5
	fieldPieces        = 6
	fieldInputIDs      = 7
	fieldLengths       = 8
	fieldIndex         = 9
	fieldPositionIDs   = 10
	fieldCuSeqlens     = 11
	fieldSlot          = 12
	fieldCuLen         = 13
	slotNone           = -1
	slotNoneWireUint64 = uint64(1<<64 - 1) // int32 -1 as a protobuf varint
)

// assembler builds wire batches for one stream. It is not safe for
// concurrent use; it keeps scratch space between batches.
type assembler struct {
	src      tokenSource
	zeroCopy bool
	pool     *bufPool
	maxBytes int64
	scratch  []int32
	rowLen   []int32
	// cur is the dataset row being read (for fault reports), -1 between batches.
	cur int
	// ramp holds position ids rampStart, rampStart+1, … little-endian.
	ramp      []byte
	rampStart int32
}

func newAssembler(src tokenSource, pool *bufPool, maxBytes int64) *assembler {
	return &assembler{src: src, zeroCopy: src.ZeroCopy() && hostLE, pool: pool, maxBytes: maxBytes, cur: -1}
}

func sizeVarintField(num protowire.Number, v uint64) int {
	if v == 0 {
		return 0
	}
	return protowire.SizeTag(num) + protowire.SizeVarint(v)
}

func sizeBytesField(num protowire.Number, n int) int {
	if n == 0 {
		return 0
	}
	return protowire.SizeTag(num) + protowire.SizeBytes(n)
}

func appendVarintField(b []byte, num protowire.Number, v uint64) []byte {
	if v == 0 {
		return b
	}
	b = protowire.AppendTag(b, num, protowire.VarintType)
	return protowire.AppendVarint(b, v)
}

// appendRegion appends the header of a bytes field of n bytes and returns the
// extended slice and the n-byte region to fill. b must have the capacity.
func appendRegion(b []byte, num protowire.Number, n int) ([]byte, []byte) {
	if n == 0 {
		return b, nil
	}
	b = protowire.AppendTag(b, num, protowire.BytesType)
	b = protowire.AppendVarint(b, uint64(n))
	return b[:len(b)+n], b[len(b) : len(b)+n]
}

// assemble encodes batch b as a ServerMessage{batch}: every piece's tokens
// are copied from the source into the outgoing buffer once. The buffer comes
// from the pool; the caller sends or releases it.
func (a *assembler) assemble(b bucket.Batch, h batchHeader) (*wireBatch, error) {
	rows, L := b.Rows, b.Length
	if rows < 0 || L < 0 || (h.packed && len(b.RowStart) != rows+1) || (!h.packed && len(b.Pieces) != rows) {
		return nil, fmt.Errorf("batch %d: inconsistent plan batch (rows %d, length %d, pieces %d)", h.global, rows, L, len(b.Pieces))
	}
	// Sizes, row lengths, and the number of cu_seqlens entries.
	if cap(a.rowLen) < rows {
		a.rowLen = make([]int32, rows)
	}
	a.rowLen = a.rowLen[:rows]
	cuLen := 0
	if h.packed {
		cuLen = 1
		for r := range rows {
			s := 0
			for _, p := range b.Pieces[b.RowStart[r]:b.RowStart[r+1]] {
				s += p.Len
				if p.Len > 0 {
					cuLen++
				}
			}
			if s > L {
				return nil, fmt.Errorf("batch %d row %d: %d tokens exceed length %d", h.global, r, s, L)
			}
			if s < L {
				cuLen++
			}
			a.rowLen[r] = int32(s)
		}
	} else {
		for r, p := range b.Pieces {
			if p.Len < 0 || p.Len > L {
				return nil, fmt.Errorf("batch %d row %d: %d tokens exceed length %d", h.global, r, p.Len, L)
			}
			a.rowLen[r] = int32(p.Len)
		}
	}
	cells := int64(rows) * int64(L)
	idsBytes := cells * 4
	est := idsBytes + int64(rows)*4 + int64(len(b.Pieces))*8 + int64(cuLen)*4 + 128
	if h.packed {
		est += idsBytes
	}
	if est > a.maxBytes {
		return nil, fmt.Errorf("batch %d: %d×%d needs %d bytes, more than the server's limit of %d", h.global, rows, L, est, a.maxBytes)
	}
	posBytes := 0
	if h.packed {
		posBytes = int(idsBytes)
	}
	body := sizeVarintField(fieldSeq, h.seq) + sizeVarintField(fieldGlobalIndex, h.global) +
		sizeVarintField(fieldRankStep, h.rankStep) + sizeVarintField(fieldRows, uint64(rows)) +
		sizeVarintField(fieldLength, uint64(L)) + sizeVarintField(fieldPieces, uint64(len(b.Pieces))) +
		sizeBytesField(fieldInputIDs, int(idsBytes)) + sizeBytesField(fieldLengths, rows*4) +
		sizeBytesField(fieldIndex, len(b.Pieces)*8) + sizeBytesField(fieldPositionIDs, posBytes) +
		sizeBytesField(fieldCuSeqlens, cuLen*4) + sizeVarintField(fieldSlot, slotNoneWireUint64) +
		sizeVarintField(fieldCuLen, uint64(cuLen))
	total := protowire.SizeTag(fieldServerBatch) + protowire.SizeBytes(body)

	w := &wireBatch{buf: a.pool.Get(total), pool: a.pool, payload: int(idsBytes)}
	out := (*w.buf)[:0]
	out = protowire.AppendTag(out, fieldServerBatch, protowire.BytesType)
	out = protowire.AppendVarint(out, uint64(body))
	out = appendVarintField(out, fieldSeq, h.seq)
	out = appendVarintField(out, fieldGlobalIndex, h.global)
	out = appendVarintField(out, fieldRankStep, h.rankStep)
	out = appendVarintField(out, fieldRows, uint64(rows))
	out = appendVarintField(out, fieldLength, uint64(L))
	out = appendVarintField(out, fieldPieces, uint64(len(b.Pieces)))

	var region []byte
	out, region = appendRegion(out, fieldInputIDs, int(idsBytes))
	if err := a.fillIDs(region, b, h); err != nil {
		w.release()
		return nil, err
	}
	out, region = appendRegion(out, fieldLengths, rows*4)
	for r, n := range a.rowLen {
		binary.LittleEndian.PutUint32(region[4*r:], uint32(n))
	}
	out, region = appendRegion(out, fieldIndex, len(b.Pieces)*8)
	for k, p := range b.Pieces {
		binary.LittleEndian.PutUint64(region[8*k:], uint64(int64(p.Index)))
	}
	if h.packed {
		out, region = appendRegion(out, fieldPositionIDs, posBytes)
		a.fillPositions(region, b, h.posStart)
		out, region = appendRegion(out, fieldCuSeqlens, cuLen*4)
		a.fillCuSeqlens(region, b)
	}
	out = appendVarintField(out, fieldSlot, slotNoneWireUint64)
	out = appendVarintField(out, fieldCuLen, uint64(cuLen))
	if len(out) != total {
		panic(fmt.Sprintf("loader: batch encoding wrote %d bytes, sized %d", len(out), total))
	}
	*w.buf = out
	return w, nil
}

// fillIDs writes input_ids: each row's pieces back to back, then pad_id.
func (a *assembler) fillIDs(dst []byte, b bucket.Batch, h batchHeader) error {
	rowBytes := b.Length * 4
	for r := range b.Rows {
		row := dst[r*rowBytes : (r+1)*rowBytes]
		var pieces []bucket.Piece
		if h.packed {
			pieces = b.Pieces[b.RowStart[r]:b.RowStart[r+1]]
		} else {
			pieces = b.Pieces[r : r+1]
		}
		off := 0
		for _, p := range pieces {
			if p.Len == 0 {
				continue
			}
			toks, err := a.pieceTokens(p)
			if err != nil {
				return err
			}
			putInt32s(row[off:off+4*p.Len], toks)
			off += 4 * p.Len
		}
		fillPad(row[off:], h.padID)
	}
	return nil
}

// pieceTokens returns tokens [p.Start, p.Start+p.Len) of row p.Index.
func (a *assembler) pieceTokens(p bucket.Piece) ([]int32, error) {
	var toks []int32
	var err error
	a.cur = p.Index
	if a.zeroCopy {
		toks, err = a.src.Tokens(p.Index)
	} else {
		a.scratch, err = a.src.AppendTokens(a.scratch[:0], p.Index)
		toks = a.scratch
	}
	if err != nil {
		return nil, fmt.Errorf("row %d: %w", p.Index, err)
	}
	if p.Start < 0 || p.Len < 0 || p.Start+p.Len > len(toks) {
		return nil, fmt.Errorf("row %d: plan asks for tokens [%d, %d) of %d", p.Index, p.Start, p.Start+p.Len, len(toks))
	}
	return toks[p.Start : p.Start+p.Len], nil
}

// putInt32s writes v little-endian into dst (len(dst) == 4*len(v)).
func putInt32s(dst []byte, v []int32) {
	if hostLE {
		copy(dst, unsafe.Slice((*byte)(unsafe.Pointer(unsafe.SliceData(v))), 4*len(v)))
		return
	}
	for i, x := range v {
		binary.LittleEndian.PutUint32(dst[4*i:], uint32(x))
	}
}

// fillPad fills dst with the little-endian int32 pad.
func fillPad(dst []byte, pad int32) {
	if len(dst) == 0 {
		return
	}
	if pad == 0 {
		clear(dst)
		return
	}
	binary.LittleEndian.PutUint32(dst, uint32(pad))
	for n := 4; n < len(dst); n *= 2 {
		copy(dst[n:], dst[:n])
	}
}

// fillPositions writes packed position_ids: each piece counts from start, and
// so does each row's padding tail.
func (a *assembler) fillPositions(dst []byte, b bucket.Batch, start int32) {
	if len(a.ramp) < 4*b.Length || a.rampStart != start {
		a.ramp = a.ramp[:0]
		for k := range b.Length {
			a.ramp = binary.LittleEndian.AppendUint32(a.ramp, uint32(start+int32(k)))
		}
		a.rampStart = start
	}
	i := 0
	for r := range b.Rows {
		for _, p := range b.Pieces[b.RowStart[r]:b.RowStart[r+1]] {
			i += copy(dst[i:i+4*p.Len], a.ramp)
		}
		tail := b.Length - int(a.rowLen[r])
		i += copy(dst[i:i+4*tail], a.ramp)
	}
}

// fillCuSeqlens writes the cumulative segment ends over the flattened batch:
// one segment per non-empty piece and one per non-empty padding tail.
func (a *assembler) fillCuSeqlens(dst []byte, b bucket.Batch) {
	i, acc := 1, int32(0)
	binary.LittleEndian.PutUint32(dst, 0)
	push := func(n int) {
		if n == 0 {
			return
		}
		acc += int32(n)
		binary.LittleEndian.PutUint32(dst[4*i:], uint32(acc))
		i++
	}
	for r := range b.Rows {
		for _, p := range b.Pieces[b.RowStart[r]:b.RowStart[r+1]] {
			push(p.Len)
		}
		push(b.Length - int(a.rowLen[r]))
	}
}
