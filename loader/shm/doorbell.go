package shm

import (
	"sync/atomic"
	"unsafe"
)

// The control region of a ring made by [CreateWithDoorbell]: little-endian
// uint64 words after the slots. Word 0 is written by the client: the number
// of batches it has released, in stream order (batch s lives in slot
// s mod slots). From byte [HeaderStart] on, slot i has a [HeaderBytes] header:
//
//	[0] s+1 once batch s is in the slot — stored last, with release semantics
//	[1] global index   [2] rank step   [3] rows | length<<32
//	[4] pieces | cu_len<<32             [5] trained tokens   [6..7] reserved
//
// Both sides poll: the client the header of the slot it expects next, the
// server the released word when its ring is full.
const (
	HeaderStart = 64
	HeaderBytes = 64
)

// ControlBytes is the size of the control region of a ring of slots slots
// (a whole number of pages).
func ControlBytes(slots int) int64 {
	return alignUp(HeaderStart+int64(slots)*HeaderBytes, SlotAlign)
}

// Header describes the batch in one slot.
type Header struct {
	Seq, Global, RankStep       uint64
	Rows, Length, Pieces, CuLen uint32
	Trained                     uint32
}

// Doorbell is the server's view of a ring's control region. Publish and
// Released may run on different goroutines.
type Doorbell struct {
	mem   []byte
	slots int
}

// word is the i-th uint64 of b (the mappings are page-aligned, so every
// word is 8-byte aligned).
func word(b []byte, i int) *uint64 { return (*uint64)(unsafe.Pointer(&b[i*8])) }

// headerWord is the index of slot's sequence word in the control region.
func headerWord(slot int) int { return (HeaderStart + slot*HeaderBytes) / 8 }

// Publish announces that slot holds the batch of h: the header's fields
// first, its sequence word last (an atomic store: a reader that sees it sees
// the slot's payload and the fields).
func (d *Doorbell) Publish(slot int, h Header) {
	base := headerWord(slot)
	atomic.StoreUint64(word(d.mem, base+1), h.Global)
	atomic.StoreUint64(word(d.mem, base+2), h.RankStep)
	atomic.StoreUint64(word(d.mem, base+3), uint64(h.Rows)|uint64(h.Length)<<32)
	atomic.StoreUint64(word(d.mem, base+4), uint64(h.Pieces)|uint64(h.CuLen)<<32)
	atomic.StoreUint64(word(d.mem, base+5), uint64(h.Trained))
	atomic.StoreUint64(word(d.mem, base), h.Seq+1)
}

// Released returns the client's released count (word 0).
func (d *Doorbell) Released() uint64 { return atomic.LoadUint64(word(d.mem, 0)) }

// Slots returns the number of slots the region has headers for.
func (d *Doorbell) Slots() int { return d.slots }

// ClientDoorbell is a client's view of a ring's control region: the slots'
// headers (read) and the released word (written). Valid until the
// [Mapping] it came with is closed.
type ClientDoorbell struct {
	headers  []byte
	released []byte
	slots    int
}

func load(b []byte, i int) uint64 { return atomic.LoadUint64(word(b, i)) }

// Ready reports whether slot holds batch seq, and then its header.
func (d *ClientDoorbell) Ready(slot int, seq uint64) (Header, bool) {
	base := headerWord(slot)
	if load(d.headers, base) != seq+1 {
		return Header{}, false
	}
	w3, w4 := load(d.headers, base+3), load(d.headers, base+4)
	h := Header{Seq: seq, Global: load(d.headers, base+1), RankStep: load(d.headers, base+2),
		Rows: uint32(w3), Length: uint32(w3 >> 32), Pieces: uint32(w4), CuLen: uint32(w4 >> 32),
		Trained: uint32(load(d.headers, base+5))}
	return h, true
}

// Release stores n as the released count (batches handed back, in order).
func (d *ClientDoorbell) Release(n uint64) {
	atomic.StoreUint64(word(d.released, 0), n)
}

// Slots returns the ring's slot count.
func (d *ClientDoorbell) Slots() int { return d.slots }
