package loader

import (
	"encoding/binary"
	"fmt"
	"unsafe"

	"google.golang.org/protobuf/encoding/protowire"

	"github.com/gload/gload/bucket"
	"github.com/gload/gload/loader/shm"
)

// tokenSource is what batch assembly reads rows from (a *dataset.Dataset).
type tokenSource interface {
	ZeroCopy() bool
	Tokens(i int) ([]int32, error)
	AppendTokens(dst []int32, i int) ([]int32, error)
}

// labelSource is a tokenSource that may store SFT labels (a *dataset.Dataset).
type labelSource interface {
	HasLabels() bool
	Labels(i int) ([]int32, error)
	AppendLabels(dst []int32, i int) ([]int32, error)
}

// ignoreIndex is the label the loss skips (PyTorch's CrossEntropyLoss ignore_index).
const ignoreIndex = -100

// ignoreWire is ignoreIndex as its little-endian int32 bits.
var ignoreWire = func() uint32 { v := int32(ignoreIndex); return uint32(v) }()

// batchHeader holds the per-batch fields that do not come from the data.
type batchHeader struct {
	seq, global, rankStep uint64
	packed                bool
	labels                bool // serve the source's stored labels
	padID                 int32
	posStart              int32
}

// Field numbers of gload.v1.ServerMessage and gload.v1.Batch.
const (
	fieldServerBatch = 2
	fieldSeq         = 1
	fieldGlobalIndex = 2
	fieldRankStep    = 3
	fieldRows        = 4
	fieldLength      = 5
	fieldPieces      = 6
	fieldInputIDs    = 7
	fieldLengths     = 8
	fieldIndex       = 9
	fieldPositionIDs = 10
	fieldCuSeqlens   = 11
	fieldSlot        = 12
	fieldCuLen       = 13
	fieldLabels      = 40
	fieldTrained     = 41 // fixed32, written after the buffers are filled
	slotNone         = int32(-1)
)

// assembler builds wire batches for one stream. It is not safe for
// concurrent use; it keeps scratch space between batches.
type assembler struct {
	src      tokenSource
	labels   labelSource // nil when the source has no labels
	zeroCopy bool
	lscratch []int32
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
	a := &assembler{src: src, zeroCopy: src.ZeroCopy() && hostLE, pool: pool, maxBytes: maxBytes, cur: -1}
	if ls, ok := src.(labelSource); ok && ls.HasLabels() {
		a.labels = ls
	}
	return a
}

// storesLabels reports whether src stores SFT labels (batches then carry them).
func storesLabels(src tokenSource) bool {
	ls, ok := src.(labelSource)
	return ok && ls.HasLabels()
}

// hasLabels reports whether batches of this assembler's source carry stored labels.
func (a *assembler) hasLabels() bool { return a.labels != nil }

// trainedSize is the encoded size of the trained_tokens field (fixed32, present whenever labels are).
func trainedSize(h batchHeader) int {
	if !h.labels {
		return 0
	}
	return protowire.SizeTag(fieldTrained) + 4
}

func appendTrained(b []byte, h batchHeader, n int) []byte {
	if !h.labels {
		return b
	}
	b = protowire.AppendTag(b, fieldTrained, protowire.Fixed32Type)
	return protowire.AppendFixed32(b, uint32(n))
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

// sizes are the byte sizes of one batch's buffers.
type sizes struct {
	ids, lengths, index, pos, cu int
	labels                       int
	cuLen                        int // entries of cu_seqlens
}

// prepare validates plan batch b, records its row lengths and returns its
// buffer sizes.
func (a *assembler) prepare(b bucket.Batch, h batchHeader) (sizes, error) {
	rows, L := b.Rows, b.Length
	if rows < 0 || L < 0 || (h.packed && len(b.RowStart) != rows+1) || (!h.packed && len(b.Pieces) != rows) {
		return sizes{}, fmt.Errorf("batch %d: inconsistent plan batch (rows %d, length %d, pieces %d)", h.global, rows, L, len(b.Pieces))
	}
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
				return sizes{}, fmt.Errorf("batch %d row %d: %d tokens exceed length %d", h.global, r, s, L)
			}
			if s < L {
				cuLen++
			}
			a.rowLen[r] = int32(s)
		}
	} else {
		for r, p := range b.Pieces {
			if p.Len < 0 || p.Len > L {
				return sizes{}, fmt.Errorf("batch %d row %d: %d tokens exceed length %d", h.global, r, p.Len, L)
			}
			a.rowLen[r] = int32(p.Len)
		}
	}
	idsBytes := int64(rows) * int64(L) * 4
	est := idsBytes + int64(rows)*4 + int64(len(b.Pieces))*8 + int64(cuLen)*4 + 128
	if h.packed {
		est += idsBytes
	}
	if h.labels {
		est += idsBytes
	}
	if est > a.maxBytes {
		return sizes{}, fmt.Errorf("batch %d: %d×%d needs %d bytes, more than the server's limit of %d", h.global, rows, L, est, a.maxBytes)
	}
	sz := sizes{ids: int(idsBytes), lengths: rows * 4, index: len(b.Pieces) * 8}
	if h.packed {
		sz.pos, sz.cu, sz.cuLen = int(idsBytes), cuLen*4, cuLen
	}
	if h.labels {
		if a.labels == nil {
			return sizes{}, fmt.Errorf("batch %d: labels asked for a dataset without a labels column", h.global)
		}
		sz.labels = int(idsBytes)
	}
	return sz, nil
}

// regions are the destinations of one batch's buffers (sized by prepare).
type regions struct {
	ids, lengths, index, pos, cu []byte
	labels                       []byte
}

// fill writes batch b's buffers into r: each piece's tokens are copied from
// the source once.
// It returns the number of trained labels (0 without labels).
func (a *assembler) fill(r regions, b bucket.Batch, h batchHeader) (int, error) {
	if err := a.fillIDs(r.ids, b, h); err != nil {
		return 0, err
	}
	trained := 0
	if h.labels {
		var err error
		if trained, err = a.fillLabels(r.labels, b, h); err != nil {
			return 0, err
		}
	}
	for i, n := range a.rowLen {
		binary.LittleEndian.PutUint32(r.lengths[4*i:], uint32(n))
	}
	for k, p := range b.Pieces {
		binary.LittleEndian.PutUint64(r.index[8*k:], uint64(int64(p.Index)))
	}
	if h.packed {
		a.fillPositions(r.pos, b, h.posStart)
		a.fillCuSeqlens(r.cu, b)
	}
	return trained, nil
}

// headerSize is the encoded size of a Batch's scalar fields.
func headerSize(b bucket.Batch, h batchHeader, slot int32, cuLen int) int {
	return sizeVarintField(fieldSeq, h.seq) + sizeVarintField(fieldGlobalIndex, h.global) +
		sizeVarintField(fieldRankStep, h.rankStep) + sizeVarintField(fieldRows, uint64(b.Rows)) +
		sizeVarintField(fieldLength, uint64(b.Length)) + sizeVarintField(fieldPieces, uint64(len(b.Pieces))) +
		sizeVarintField(fieldSlot, slotWire(slot)) + sizeVarintField(fieldCuLen, uint64(cuLen)) + trainedSize(h)
}

// slotWire is a slot number as a protobuf int32 varint (negative values
// sign-extend to 64 bits).
func slotWire(slot int32) uint64 { return uint64(int64(slot)) }

// assemble encodes batch b as a ServerMessage{batch}: every piece's tokens
// are copied from the source into the outgoing buffer once. The buffer comes
// from the pool; the caller sends or releases it.
func (a *assembler) assemble(b bucket.Batch, h batchHeader) (*wireBatch, error) {
	sz, err := a.prepare(b, h)
	if err != nil {
		return nil, err
	}
	body := headerSize(b, h, slotNone, sz.cuLen) +
		sizeBytesField(fieldInputIDs, sz.ids) + sizeBytesField(fieldLengths, sz.lengths) +
		sizeBytesField(fieldIndex, sz.index) + sizeBytesField(fieldPositionIDs, sz.pos) +
		sizeBytesField(fieldCuSeqlens, sz.cu) + sizeBytesField(fieldLabels, sz.labels)
	total := protowire.SizeTag(fieldServerBatch) + protowire.SizeBytes(body)

	w := &wireBatch{buf: a.pool.Get(total), pool: a.pool, payload: sz.ids}
	out := (*w.buf)[:0]
	out = protowire.AppendTag(out, fieldServerBatch, protowire.BytesType)
	out = protowire.AppendVarint(out, uint64(body))
	out = appendVarintField(out, fieldSeq, h.seq)
	out = appendVarintField(out, fieldGlobalIndex, h.global)
	out = appendVarintField(out, fieldRankStep, h.rankStep)
	out = appendVarintField(out, fieldRows, uint64(b.Rows))
	out = appendVarintField(out, fieldLength, uint64(b.Length))
	out = appendVarintField(out, fieldPieces, uint64(len(b.Pieces)))
	var r regions
	out, r.ids = appendRegion(out, fieldInputIDs, sz.ids)
	out, r.lengths = appendRegion(out, fieldLengths, sz.lengths)
	out, r.index = appendRegion(out, fieldIndex, sz.index)
	out, r.pos = appendRegion(out, fieldPositionIDs, sz.pos)
	out, r.cu = appendRegion(out, fieldCuSeqlens, sz.cu)
	out, r.labels = appendRegion(out, fieldLabels, sz.labels)
	out = appendVarintField(out, fieldSlot, slotWire(slotNone))
	out = appendVarintField(out, fieldCuLen, uint64(sz.cuLen))
	trained, err := a.fill(r, b, h)
	if err != nil {
		w.release()
		return nil, err
	}
	out = appendTrained(out, h, trained)
	if len(out) != total {
		panic(fmt.Sprintf("loader: batch encoding wrote %d bytes, sized %d", len(out), total))
	}
	*w.buf = out
	return w, nil
}

// assembleSlot writes batch b's buffers into a shared-memory slot at the
// offsets of layout and encodes a ServerMessage{batch} that names the slot
// and carries no buffers.
func (a *assembler) assembleSlot(b bucket.Batch, h batchHeader, slot int32, mem []byte, layout shm.Layout) (*wireBatch, error) {
	sz, err := a.prepare(b, h)
	if err != nil {
		return nil, err
	}
	at := func(off int64, n int) ([]byte, error) {
		if off < 0 || off > int64(len(mem)) || int64(n) > int64(len(mem))-off {
			return nil, fmt.Errorf("batch %d: %d bytes at offset %d do not fit slot %d of %d bytes", h.global, n, off, slot, len(mem))
		}
		return mem[off : off+int64(n)], nil
	}
	var r regions
	for _, f := range []struct {
		dst *[]byte
		off int64
		n   int
	}{
		{&r.ids, layout.InputIDs, sz.ids}, {&r.lengths, layout.Lengths, sz.lengths}, {&r.index, layout.Index, sz.index},
		{&r.pos, layout.PositionIDs, sz.pos}, {&r.cu, layout.CuSeqlens, sz.cu}, {&r.labels, layout.Labels, sz.labels},
	} {
		if *f.dst, err = at(f.off, f.n); err != nil {
			return nil, err
		}
	}
	trained, err := a.fill(r, b, h)
	if err != nil {
		return nil, err
	}
	body := headerSize(b, h, slot, sz.cuLen)
	total := protowire.SizeTag(fieldServerBatch) + protowire.SizeBytes(body)
	w := &wireBatch{buf: a.pool.Get(total), pool: a.pool, payload: sz.ids,
		inSlot: sz.ids + sz.lengths + sz.index + sz.pos + sz.cu + sz.labels,
		rows:   uint32(b.Rows), length: uint32(b.Length), pieces: uint32(len(b.Pieces)), cuLen: uint32(sz.cuLen), trained: uint32(trained)}
	out := (*w.buf)[:0]
	out = protowire.AppendTag(out, fieldServerBatch, protowire.BytesType)
	out = protowire.AppendVarint(out, uint64(body))
	out = appendVarintField(out, fieldSeq, h.seq)
	out = appendVarintField(out, fieldGlobalIndex, h.global)
	out = appendVarintField(out, fieldRankStep, h.rankStep)
	out = appendVarintField(out, fieldRows, uint64(b.Rows))
	out = appendVarintField(out, fieldLength, uint64(b.Length))
	out = appendVarintField(out, fieldPieces, uint64(len(b.Pieces)))
	out = appendVarintField(out, fieldSlot, slotWire(slot))
	out = appendVarintField(out, fieldCuLen, uint64(sz.cuLen))
	out = appendTrained(out, h, trained)
	if len(out) != total {
		panic(fmt.Sprintf("loader: slot batch encoding wrote %d bytes, sized %d", len(out), total))
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

// fillLabels writes labels: each row's pieces' stored labels back to back, -100 at the padding and, in packed rows,
// at the first token of every piece (no loss across documents, as transformers' DataCollatorWithFlattening). It
// returns how many labels are not -100.
func (a *assembler) fillLabels(dst []byte, b bucket.Batch, h batchHeader) (int, error) {
	rowBytes := b.Length * 4
	trained := 0
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
			labs, err := a.pieceLabels(p)
			if err != nil {
				return 0, err
			}
			seg := row[off : off+4*p.Len]
			putInt32s(seg, labs)
			for k, l := range labs {
				if h.packed && k == 0 {
					binary.LittleEndian.PutUint32(seg, ignoreWire)
					continue
				}
				if l != ignoreIndex {
					trained++
				}
			}
			off += 4 * p.Len
		}
		fillPad(row[off:], ignoreIndex)
	}
	return trained, nil
}

// pieceLabels returns labels [p.Start, p.Start+p.Len) of row p.Index.
func (a *assembler) pieceLabels(p bucket.Piece) ([]int32, error) {
	var labs []int32
	var err error
	a.cur = p.Index
	if a.zeroCopy {
		labs, err = a.labels.Labels(p.Index)
	} else {
		a.lscratch, err = a.labels.AppendLabels(a.lscratch[:0], p.Index)
		labs = a.lscratch
	}
	if err != nil {
		return nil, fmt.Errorf("row %d labels: %w", p.Index, err)
	}
	if p.Start < 0 || p.Len < 0 || p.Start+p.Len > len(labs) {
		return nil, fmt.Errorf("row %d: plan asks for labels [%d, %d) of %d", p.Index, p.Start, p.Start+p.Len, len(labs))
	}
	return labs[p.Start : p.Start+p.Len], nil
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
