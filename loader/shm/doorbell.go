package shm

import (
	"sync/atomic"
	"time"
	"unsafe"
)

// The control region of a ring made by [CreateWithDoorbell]: little-endian
// uint64 words after the slots. Word 0 is written by the client: the number
// of batches it has released, in stream order (batch s lives in slot
// s mod slots). Bytes 8–11 are the server's waiting flag (a uint32: while
// the server sleeps on word 0, the low half of the released count at which
// it wants to be woken; 0 when it does not sleep), bytes 16–19 the client's
// (1 while it sleeps on a slot's sequence word); see futex.go. From byte [HeaderStart]
// on, slot i has a [HeaderBytes] header:
//
//	[0] s+1 once batch s is in the slot — stored last, with release semantics
//	[1] global index   [2] rank step   [3] rows | length<<32
//	[4] pieces | cu_len<<32             [5] trained tokens   [6..7] reserved
//
// Each side polls the word it waits for (the client the sequence word of the
// slot it expects next, the server the released word when its ring is
// full), then sleeps on it with its waiting flag raised; the other side
// wakes it after storing that word.
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
	p := word(d.mem, base)
	atomic.StoreUint64(p, h.Seq+1)
	if atomic.LoadUint32(clientWaiting(d.mem)) != 0 {
		futexWakeAll(low32(p))
	}
}

// The waiting flags in the control region's first words.
func serverWaiting(ctl []byte) *uint32 { return (*uint32)(unsafe.Pointer(&ctl[8])) }
func clientWaiting(ctl []byte) *uint32 { return (*uint32)(unsafe.Pointer(&ctl[16])) }

// WaitReleased sleeps while the released count is seen, at most timeout,
// and returns it (possibly still seen: a timeout). The client wakes it once
// the count reaches wakeAt (> seen): a server with several slots to refill
// is woken once for a group of them rather than once per slot.
func (d *Doorbell) WaitReleased(seen, wakeAt uint64, timeout time.Duration) uint64 {
	return wait(word(d.mem, 0), serverWaiting(d.mem), wakeFlag(wakeAt), seen, timeout)
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

// Release stores n as the released count (batches handed back, in order),
// waking the server if it sleeps for it.
func (d *ClientDoorbell) Release(n uint64) {
	p := word(d.released, 0)
	atomic.StoreUint64(p, n)
	if f := atomic.LoadUint32(serverWaiting(d.released)); f != 0 && reached(n, f) {
		futexWakeAll(low32(p))
	}
}

// WaitReady sleeps until slot's sequence word may announce batch seq (it
// changed, or timeout passed); call Ready then.
func (d *ClientDoorbell) WaitReady(slot int, seq uint64, timeout time.Duration) {
	p := word(d.headers, headerWord(slot))
	if seen := atomic.LoadUint64(p); seen != seq+1 {
		wait(p, clientWaiting(d.released), 1, seen, timeout)
	}
}

// Slots returns the ring's slot count.
func (d *ClientDoorbell) Slots() int { return d.slots }
