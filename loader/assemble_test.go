package loader

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"math/rand/v2"
	"testing"

	"google.golang.org/protobuf/proto"

	"github.com/gload/gload/bucket"
	"github.com/gload/gload/loader/shm"
	"github.com/gload/gload/proto/gloadpb"
)

// fakeRows is an in-memory token source: row i holds tokens i*1000+j.
type fakeRows struct {
	lengths  []int
	zeroCopy bool
	data     [][]int32
}

func newFakeRows(lengths []int, zeroCopy bool) *fakeRows {
	f := &fakeRows{lengths: lengths, zeroCopy: zeroCopy}
	for i, l := range lengths {
		row := make([]int32, l)
		for j := range row {
			row[j] = int32(i*1000 + j)
		}
		f.data = append(f.data, row)
	}
	return f
}

func (f *fakeRows) ZeroCopy() bool { return f.zeroCopy }

func (f *fakeRows) Tokens(i int) ([]int32, error) {
	if !f.zeroCopy {
		return nil, errors.New("not zero copy")
	}
	return f.data[i], nil
}

func (f *fakeRows) AppendTokens(dst []int32, i int) ([]int32, error) {
	return append(dst, f.data[i]...), nil
}

func decodeWire(t testing.TB, w *wireBatch) *gloadpb.Batch {
	t.Helper()
	var m gloadpb.ServerMessage
	if err := proto.Unmarshal(*w.buf, &m); err != nil {
		t.Fatal(err)
	}
	if m.GetBatch() == nil {
		t.Fatal("not a batch message")
	}
	return m.GetBatch()
}

func le32(v ...int32) []byte {
	var b []byte
	for _, x := range v {
		b = binary.LittleEndian.AppendUint32(b, uint32(x))
	}
	return b
}

func le64(v ...int64) []byte {
	var b []byte
	for _, x := range v {
		b = binary.LittleEndian.AppendUint64(b, uint64(x))
	}
	return b
}

func TestAssemble(t *testing.T) {
	lengths := []int{3, 0, 5, 2, 7}
	for _, zc := range []bool{true, false} {
		src := newFakeRows(lengths, zc)
		a := newAssembler(src, &bufPool{}, 1<<20)
		t.Run(fmt.Sprintf("bucketed/zerocopy=%v", zc), func(t *testing.T) {
			b := bucket.Batch{Rows: 3, Length: 4, Pieces: []bucket.Piece{{Index: 2, Len: 4}, {Index: 1, Len: 0}, {Index: 0, Len: 3}}}
			w, err := a.assemble(b, batchHeader{seq: 0, global: 7, rankStep: 3, padID: -1})
			if err != nil {
				t.Fatal(err)
			}
			got := decodeWire(t, w)
			want := &gloadpb.Batch{
				Seq: 0, GlobalIndex: 7, RankStep: 3, Rows: 3, Length: 4, Pieces: 3, Slot: -1,
				InputIds: le32(2000, 2001, 2002, 2003, -1, -1, -1, -1, 0, 1, 2, -1),
				Lengths:  le32(4, 0, 3),
				Index:    le64(2, 1, 0),
			}
			if !proto.Equal(got, want) {
				t.Fatalf("got %v\nwant %v", got, want)
			}
			w.release()
		})
		t.Run(fmt.Sprintf("packed/zerocopy=%v", zc), func(t *testing.T) {
			b := bucket.Batch{Rows: 2, Length: 6,
				Pieces:   []bucket.Piece{{Index: 4, Start: 2, Len: 3}, {Index: 1, Len: 0}, {Index: 3, Len: 2}, {Index: 2, Start: 0, Len: 5}},
				RowStart: []int{0, 3, 4}}
			w, err := a.assemble(b, batchHeader{seq: 9, global: 1, packed: true, posStart: 1})
			if err != nil {
				t.Fatal(err)
			}
			got := decodeWire(t, w)
			want := &gloadpb.Batch{
				Seq: 9, GlobalIndex: 1, Rows: 2, Length: 6, Pieces: 4, Slot: -1, CuLen: 6,
				InputIds:    le32(4002, 4003, 4004, 3000, 3001, 0, 2000, 2001, 2002, 2003, 2004, 0),
				Lengths:     le32(5, 5),
				Index:       le64(4, 1, 3, 2),
				PositionIds: le32(1, 2, 3, 1, 2, 1, 1, 2, 3, 4, 5, 1),
				CuSeqlens:   le32(0, 3, 5, 6, 11, 12),
			}
			if !proto.Equal(got, want) {
				t.Fatalf("got %v\nwant %v", got, want)
			}
		})
	}
}

func TestAssembleErrors(t *testing.T) {
	a := newAssembler(newFakeRows([]int{3, 4}, true), &bufPool{}, 4096)
	for _, tc := range []struct {
		name   string
		b      bucket.Batch
		packed bool
		want   string
	}{
		{"piece longer than length", bucket.Batch{Rows: 1, Length: 2, Pieces: []bucket.Piece{{Index: 0, Len: 3}}}, false, "exceed"},
		{"pieces past the row", bucket.Batch{Rows: 1, Length: 8, Pieces: []bucket.Piece{{Index: 1, Start: 2, Len: 3}}}, false, "tokens [2, 5) of 4"},
		{"rows and pieces disagree", bucket.Batch{Rows: 2, Length: 8, Pieces: []bucket.Piece{{Index: 1, Len: 3}}}, false, "inconsistent"},
		{"packed row overflow", bucket.Batch{Rows: 1, Length: 4, Pieces: []bucket.Piece{{Index: 0, Len: 3}, {Index: 1, Len: 2}}, RowStart: []int{0, 2}}, true, "exceed"},
		{"packed without row starts", bucket.Batch{Rows: 1, Length: 4, Pieces: []bucket.Piece{{Index: 0, Len: 3}}}, true, "inconsistent"},
		{"over the size limit", bucket.Batch{Rows: 1, Length: 4096, Pieces: []bucket.Piece{{Index: 0, Len: 3}}}, false, "limit"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := a.assemble(tc.b, batchHeader{packed: tc.packed})
			if err == nil || !bytes.Contains([]byte(err.Error()), []byte(tc.want)) {
				t.Fatalf("got %v, want %q", err, tc.want)
			}
		})
	}
}

// FuzzAssemble: random batches encode to what protobuf decodes, with every
// cell where the plan puts it.
func FuzzAssemble(f *testing.F) {
	f.Add(uint64(1), uint8(3), uint8(16), true, int32(0), int32(0))
	f.Add(uint64(2), uint8(1), uint8(1), false, int32(-100), int32(1))
	f.Fuzz(func(t *testing.T, seed uint64, rows, length uint8, packed bool, pad, posStart int32) {
		rng := rand.New(rand.NewPCG(seed, 1))
		if posStart < 0 {
			posStart = -posStart
		}
		lengths := make([]int, 50)
		for i := range lengths {
			lengths[i] = rng.IntN(40)
		}
		src := newFakeRows(lengths, seed%2 == 0)
		a := newAssembler(src, &bufPool{}, 1<<20)
		R, L := int(rows%8), int(length%48)
		b := bucket.Batch{Rows: R, Length: L}
		if packed {
			b.RowStart = []int{0}
			for range R {
				room := L
				for k := rng.IntN(4); k > 0; k-- {
					row := rng.IntN(len(lengths))
					if lengths[row] == 0 {
						b.Pieces = append(b.Pieces, bucket.Piece{Index: row})
						continue
					}
					start := rng.IntN(lengths[row])
					n := min(rng.IntN(lengths[row]-start+1), room)
					room -= n
					b.Pieces = append(b.Pieces, bucket.Piece{Index: row, Start: start, Len: n})
				}
				b.RowStart = append(b.RowStart, len(b.Pieces))
			}
		} else {
			for range R {
				row := rng.IntN(len(lengths))
				b.Pieces = append(b.Pieces, bucket.Piece{Index: row, Len: min(lengths[row], L)})
			}
		}
		w, err := a.assemble(b, batchHeader{seq: seed, global: seed >> 3, packed: packed, padID: pad, posStart: posStart})
		if err != nil {
			t.Fatal(err)
		}
		got := decodeWire(t, w)
		ids := got.InputIds
		if len(ids) != 4*R*L || int(got.Rows) != R || int(got.Length) != L || int(got.Pieces) != len(b.Pieces) {
			t.Fatalf("shape: %d ids bytes for %d×%d", len(ids), R, L)
		}
		cell := func(r, j int) int32 { return int32(binary.LittleEndian.Uint32(ids[4*(r*L+j):])) }
		for r := range R {
			var ps []bucket.Piece
			if packed {
				ps = b.Pieces[b.RowStart[r]:b.RowStart[r+1]]
			} else {
				ps = b.Pieces[r : r+1]
			}
			off := 0
			for _, p := range ps {
				for j := range p.Len {
					if v := cell(r, off+j); v != int32(p.Index*1000+p.Start+j) {
						t.Fatalf("row %d col %d: %d", r, off+j, v)
					}
				}
				off += p.Len
			}
			for j := off; j < L; j++ {
				if v := cell(r, j); v != pad {
					t.Fatalf("row %d col %d: pad %d, want %d", r, j, v, pad)
				}
			}
			if n := int32(binary.LittleEndian.Uint32(got.Lengths[4*r:])); int(n) != off {
				t.Fatalf("row %d: length %d, want %d", r, n, off)
			}
		}
		if packed {
			cu := got.CuSeqlens
			if len(cu) != 4*int(got.CuLen) || len(got.PositionIds) != len(ids) {
				t.Fatalf("cu %d bytes, cu_len %d, positions %d bytes", len(cu), got.CuLen, len(got.PositionIds))
			}
			if last := int(binary.LittleEndian.Uint32(cu[len(cu)-4:])); last != R*L {
				t.Fatalf("cu_seqlens ends at %d, want %d", last, R*L)
			}
		} else if len(got.CuSeqlens) != 0 || len(got.PositionIds) != 0 {
			t.Fatal("packed fields on a padded batch")
		}
		w.release()
		checkSlotAssembly(t, a, b, batchHeader{seq: seed, global: seed >> 3, packed: packed, padID: pad, posStart: posStart}, got)
	})
}

// checkSlotAssembly assembles b into a shared-memory slot and checks that the
// slot holds the buffers want (the gRPC encoding) carries, and that the
// message names the slot and carries no buffers.
func checkSlotAssembly(t *testing.T, a *assembler, b bucket.Batch, h batchHeader, want *gloadpb.Batch) {
	t.Helper()
	need := shm.Need{Cells: int64(b.Rows) * int64(b.Length), Rows: int64(b.Rows), Pieces: int64(len(b.Pieces))}
	if h.packed {
		need.Positions, need.CuLen = true, int64(want.CuLen)
	}
	layout, err := shm.NewLayout(need)
	if err != nil {
		t.Fatal(err)
	}
	slot := make([]byte, layout.SlotBytes)
	for i := range slot {
		slot[i] = 0xee // stale bytes of an earlier batch
	}
	w, err := a.assembleSlot(b, h, 3, slot, layout)
	if err != nil {
		t.Fatal(err)
	}
	got := decodeWire(t, w)
	if got.Slot != 3 || len(got.InputIds)+len(got.Lengths)+len(got.Index)+len(got.PositionIds)+len(got.CuSeqlens) != 0 ||
		got.Rows != want.Rows || got.Length != want.Length || got.Pieces != want.Pieces || got.CuLen != want.CuLen ||
		got.Seq != want.Seq || got.GlobalIndex != want.GlobalIndex {
		t.Fatalf("slot message %v, gRPC message had rows %d length %d", got, want.Rows, want.Length)
	}
	for _, f := range []struct {
		name string
		off  int64
		want []byte
	}{
		{"input_ids", layout.InputIDs, want.InputIds}, {"lengths", layout.Lengths, want.Lengths}, {"index", layout.Index, want.Index},
		{"position_ids", layout.PositionIDs, want.PositionIds}, {"cu_seqlens", layout.CuSeqlens, want.CuSeqlens},
	} {
		if !bytes.Equal(slot[f.off:f.off+int64(len(f.want))], f.want) {
			t.Fatalf("slot %s differs from the gRPC encoding", f.name)
		}
	}
	w.release()
	if _, err := a.assembleSlot(b, h, 3, slot[:layout.InputIDs+int64(len(want.InputIds))/2], layout); err == nil && len(want.InputIds) > 0 {
		t.Fatal("assembled into a slot too small for the batch")
	}
}

func TestBufPool(t *testing.T) {
	p := &bufPool{}
	for _, n := range []int{0, 1, 4096, 4097, 1 << 20, 3<<20 + 5} {
		b := p.Get(n)
		if len(*b) != n || cap(*b) < n || cap(*b)&(cap(*b)-1) != 0 || cap(*b) < 4096 {
			t.Fatalf("Get(%d): len %d cap %d", n, len(*b), cap(*b))
		}
		p.Put(b)
	}
	p.Put(&[]byte{1, 2, 3}) // foreign buffers are dropped
	w := &wireBatch{buf: p.Get(5000), pool: p}
	if _, err := w.take(); err != nil {
		t.Fatal(err)
	}
	if _, err := w.take(); !errors.Is(err, errSpent) {
		t.Fatalf("second take: %v", err)
	}
	w.release() // no-op once taken
}
