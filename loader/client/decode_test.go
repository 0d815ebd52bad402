package client

import (
	"bytes"
	"encoding/binary"
	"errors"
	"math/rand/v2"
	"slices"
	"testing"

	"google.golang.org/protobuf/proto"

	"github.com/gload/gload/proto/gloadpb"
)

func randBatch(rng *rand.Rand, packed bool) *gloadpb.Batch {
	rows, length := rng.IntN(6), rng.IntN(20)
	pieces := rows
	if packed {
		pieces = rng.IntN(3 * (rows + 1))
	}
	fill := func(n int) []byte {
		b := make([]byte, n)
		for i := range b {
			b[i] = byte(rng.Uint32())
		}
		return b
	}
	b := &gloadpb.Batch{
		Seq: rng.Uint64() >> rng.IntN(64), GlobalIndex: rng.Uint64N(1 << 20), RankStep: rng.Uint64N(1000),
		Rows: uint32(rows), Length: uint32(length), Pieces: uint32(pieces), Slot: -1,
		InputIds: fill(4 * rows * length), Lengths: fill(4 * rows), Index: fill(8 * pieces),
	}
	if packed {
		cu := rng.IntN(10)
		b.PositionIds, b.CuSeqlens, b.CuLen = fill(4*rows*length), fill(4*cu), uint32(cu)
	}
	return b
}

// chunks splits b into random pieces, as gRPC's receive buffers may.
func chunks(rng *rand.Rand, b []byte) [][]byte {
	var out [][]byte
	for len(b) > 0 {
		n := 1 + rng.IntN(len(b))
		if rng.IntN(3) == 0 {
			out = append(out, nil)
		}
		out = append(out, b[:n])
		b = b[n:]
	}
	return out
}

func sameBatch(t *testing.T, got *Batch, want *gloadpb.Batch) {
	t.Helper()
	if got.Seq != want.Seq || got.GlobalIndex != want.GlobalIndex || got.RankStep != want.RankStep ||
		got.Rows != int(want.Rows) || got.Length != int(want.Length) || got.Pieces != int(want.Pieces) ||
		got.Slot != want.Slot || got.CuLen != int(want.CuLen) {
		t.Fatalf("scalars: got %+v, want %v", got, want)
	}
	for _, f := range []struct {
		name      string
		got, want []byte
	}{
		{"input_ids", got.inputIDs, want.InputIds}, {"lengths", got.lengths, want.Lengths}, {"index", got.index, want.Index},
		{"position_ids", got.positionIDs, want.PositionIds}, {"cu_seqlens", got.cuSeqlens, want.CuSeqlens},
	} {
		if !bytes.Equal(f.got, f.want) {
			t.Fatalf("%s: got %x, want %x", f.name, f.got, f.want)
		}
	}
	ids := got.InputIDs()
	for i, v := range ids {
		if w := int32(binary.LittleEndian.Uint32(want.InputIds[4*i:])); v != w {
			t.Fatalf("InputIDs()[%d] = %d, want %d", i, v, w)
		}
	}
	idx := got.Index()
	for i, v := range idx {
		if w := int64(binary.LittleEndian.Uint64(want.Index[8*i:])); v != w {
			t.Fatalf("Index()[%d] = %d, want %d", i, v, w)
		}
	}
}

func TestDecodeRoundTrip(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	pool := &blockPool{}
	for i := range 500 {
		want := randBatch(rng, i%2 == 1)
		wire, err := proto.Marshal(&gloadpb.ServerMessage{Msg: &gloadpb.ServerMessage_Batch{Batch: want}})
		if err != nil {
			t.Fatal(err)
		}
		var m serverMsg
		if err := decodeServerMessage(chunks(rng, wire), pool, &m); err != nil {
			t.Fatalf("batch %d: %v", i, err)
		}
		if m.batch == nil {
			t.Fatal("no batch decoded")
		}
		sameBatch(t, m.batch, want)
		m.batch.pool = pool
		m.batch.Release()
		if m.batch.InputIDs() != nil {
			t.Fatal("views survive Release")
		}
	}
}

func TestDecodeOtherMessages(t *testing.T) {
	pool := &blockPool{}
	for _, sm := range []*gloadpb.ServerMessage{
		{Msg: &gloadpb.ServerMessage_Opened{Opened: &gloadpb.Opened{Batches: 7, Prefetch: 3, Shapes: []*gloadpb.Shape{{Rows: 1, Length: 2}}}}},
		{Msg: &gloadpb.ServerMessage_End{End: &gloadpb.End{Batches: 9}}},
		{},
	} {
		wire, _ := proto.Marshal(sm)
		var m serverMsg
		if err := decodeServerMessage([][]byte{wire}, pool, &m); err != nil {
			t.Fatal(err)
		}
		if m.batch != nil || !proto.Equal(m.other, sm) {
			t.Fatalf("got %v, want %v", m.other, sm)
		}
	}
	// A batch followed by another field goes through protobuf and still
	// yields the batch (last oneof wins: here the batch comes last).
	b := randBatch(rand.New(rand.NewPCG(3, 4)), false)
	end, _ := proto.Marshal(&gloadpb.ServerMessage{Msg: &gloadpb.ServerMessage_End{End: &gloadpb.End{Batches: 1}}})
	bat, _ := proto.Marshal(&gloadpb.ServerMessage{Msg: &gloadpb.ServerMessage_Batch{Batch: b}})
	var m serverMsg
	if err := decodeServerMessage([][]byte{end, bat}, pool, &m); err != nil || m.batch == nil {
		t.Fatalf("end+batch: %v, %v", m.batch, err)
	}
	sameBatch(t, m.batch, b)
}

func TestDecodeErrors(t *testing.T) {
	good := &gloadpb.Batch{Rows: 2, Length: 3, Pieces: 2, InputIds: make([]byte, 24), Lengths: make([]byte, 8), Index: make([]byte, 16)}
	for _, tc := range []struct {
		name string
		edit func(b *gloadpb.Batch)
	}{
		{"short input_ids", func(b *gloadpb.Batch) { b.InputIds = b.InputIds[:20] }},
		{"long lengths", func(b *gloadpb.Batch) { b.Lengths = make([]byte, 12) }},
		{"index for 3 pieces", func(b *gloadpb.Batch) { b.Pieces = 3 }},
		{"odd position_ids", func(b *gloadpb.Batch) { b.PositionIds = make([]byte, 4) }},
		{"cu_len without cu_seqlens", func(b *gloadpb.Batch) { b.CuLen = 2 }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := proto.Clone(good).(*gloadpb.Batch)
			tc.edit(b)
			wire, _ := proto.Marshal(&gloadpb.ServerMessage{Msg: &gloadpb.ServerMessage_Batch{Batch: b}})
			var m serverMsg
			if err := decodeServerMessage([][]byte{wire}, &blockPool{}, &m); !errors.Is(err, ErrProtocol) {
				t.Fatalf("got %v, want ErrProtocol", err)
			}
		})
	}
	wire, _ := proto.Marshal(&gloadpb.ServerMessage{Msg: &gloadpb.ServerMessage_Batch{Batch: good}})
	for n := range len(wire) {
		var m serverMsg
		if err := decodeServerMessage([][]byte{wire[:n]}, &blockPool{}, &m); err == nil && m.batch != nil {
			t.Fatalf("truncated at %d: decoded a batch", n)
		}
	}
}

// FuzzDecodeServerMessage: arbitrary bytes never panic; whatever decodes as
// a batch agrees with protobuf's reading of the same bytes.
func FuzzDecodeServerMessage(f *testing.F) {
	rng := rand.New(rand.NewPCG(5, 6))
	for i := range 4 {
		wire, _ := proto.Marshal(&gloadpb.ServerMessage{Msg: &gloadpb.ServerMessage_Batch{Batch: randBatch(rng, i%2 == 0)}})
		f.Add(wire, uint8(i))
	}
	end, _ := proto.Marshal(&gloadpb.ServerMessage{Msg: &gloadpb.ServerMessage_End{End: &gloadpb.End{Batches: 3}}})
	f.Add(end, uint8(0))
	f.Fuzz(func(t *testing.T, wire []byte, split uint8) {
		bufs := [][]byte{wire}
		if k := int(split); k > 0 && k < len(wire) {
			bufs = [][]byte{wire[:k], wire[k:]}
		}
		var m serverMsg
		err := decodeServerMessage(bufs, &blockPool{}, &m)
		var ref gloadpb.ServerMessage
		refErr := proto.Unmarshal(wire, &ref)
		if err != nil {
			return
		}
		if refErr != nil {
			t.Fatalf("decoded what protobuf rejects (%v)", refErr)
		}
		if m.batch == nil {
			return
		}
		pb := ref.GetBatch()
		if pb == nil {
			t.Fatal("decoded a batch protobuf does not see")
		}
		if m.batch.Slot >= 0 {
			// A shared-memory batch: its buffers are in a ring slot, attached by the stream.
			if len(pb.InputIds)+len(pb.Lengths)+len(pb.Index)+len(pb.PositionIds)+len(pb.CuSeqlens) != 0 || pb.Slot != m.batch.Slot {
				t.Fatalf("slot batch %d carries buffers (or protobuf sees slot %d)", m.batch.Slot, pb.Slot)
			}
			return
		}
		sameBatch(t, m.batch, pb)
		if got := m.batch.Lengths(); len(got) != m.batch.Rows || !slices.Equal(m.batch.lengths, pb.Lengths) {
			t.Fatal("lengths view")
		}
	})
}

// TestDecodeFieldNumbers: a tag whose field number is 0 or ≥ 2^29 is an
// error, as in protobuf, even where the number's low 32 bits look valid
// (../shared/repro/FuzzDecodeServerMessage-c6b6863b38bf71a4 is in the corpus).
func TestDecodeFieldNumbers(t *testing.T) {
	good := &gloadpb.Batch{Rows: 1, Length: 1, Pieces: 1, Slot: -1, InputIds: make([]byte, 4), Lengths: make([]byte, 4), Index: make([]byte, 8)}
	inner, _ := proto.Marshal(good)
	for _, tc := range []struct {
		name string
		num  uint64
		ok   bool
	}{
		{"largest valid", 1<<29 - 1, true},
		{"2^29", 1 << 29, false},
		{"2^32+6 (low bits are field 6)", 1<<32 + 6, false},
		{"2^45+2", 1<<45 + 2, false},
		{"zero", 0, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			body := binary.AppendUvarint(slices.Clone(inner), tc.num<<3|0) // varint field
			body = append(body, 1)
			wire := append([]byte{0x12}, binary.AppendUvarint(nil, uint64(len(body)))...)
			wire = append(wire, body...)
			var m serverMsg
			err := decodeServerMessage([][]byte{wire}, &blockPool{}, &m)
			var ref gloadpb.ServerMessage
			refErr := proto.Unmarshal(wire, &ref)
			if (refErr == nil) != tc.ok {
				t.Fatalf("protobuf: %v, want ok=%v", refErr, tc.ok)
			}
			if tc.ok && err != nil {
				t.Fatalf("decode: %v", err)
			}
			if !tc.ok && !errors.Is(err, ErrProtocol) {
				t.Fatalf("decode: %v, want ErrProtocol", err)
			}
		})
	}
}
