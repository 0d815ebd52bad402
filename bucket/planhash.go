package bucket

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"hash"
)

// planHashTag opens every plan hash; a new layout of the hashed bytes needs a new tag.
const planHashTag = "gload/plan/v1\x00"

// HashBatches identifies n global batches by what they deliver: SHA-256 over
//
//	"gload/plan/v1" 0x00 ‖ u64le(n) ‖ per global batch g in order:
//	    u32le(rows) ‖ u32le(length) ‖ u32le(pieces) ‖
//	    per piece: u32le(source) ‖ u32le(row) ‖ u32le(start) ‖ u32le(tokens) ‖
//	    u32le(len(RowStart)) ‖ u32le(RowStart[i])…
//
// printed as its first 16 bytes in hex (32 digits). Servers that agree on the
// hash of an epoch hand every rank the same batches: a launcher compares it
// across nodes before step 0.
func HashBatches(n int, batch func(g int) Batch) string {
	w := newPlanHasher(n)
	for g := range n {
		b := batch(g)
		w.u32(b.Rows)
		w.u32(b.Length)
		w.u32(len(b.Pieces))
		for _, p := range b.Pieces {
			w.u32(p.Source)
			w.u32(p.Index)
			w.u32(p.Start)
			w.u32(p.Len)
		}
		w.u32(len(b.RowStart))
		for _, r := range b.RowStart {
			w.u32(r)
		}
	}
	return w.sum()
}

// Hash is HashBatches over the plan's batches, computed from the plan's
// tables without building each Batch (one pass, no allocation per batch).
func (p *Plan) Hash() string {
	w := newPlanHasher(p.nbatch)
	for g := range p.nbatch {
		if p.cfg.Policy == Packed {
			r0 := g * p.cfg.BatchSize
			r1 := min(r0+p.cfg.BatchSize, len(p.roff)-1)
			lo, hi := int(p.roff[r0]), int(p.roff[r1])
			w.u32(r1 - r0)
			w.u32(p.cfg.SeqLen)
			w.u32(hi - lo)
			for k := lo; k < hi; k++ {
				w.u32(0) // source: Batch reports 0 for a plain plan
				w.u32(int(p.rows[k]))
				w.u32(int(p.pstart[k]))
				w.u32(int(p.plen[k]))
			}
			w.u32(r1 - r0 + 1)
			for r := r0; r <= r1; r++ {
				w.u32(int(p.roff[r]) - lo)
			}
			continue
		}
		b := p.seq[g]
		lo, hi := int(p.boff[b]), int(p.boff[b+1])
		w.u32(hi - lo)
		w.u32(p.blen[b])
		w.u32(hi - lo)
		for k := lo; k < hi; k++ {
			w.u32(0) // source: Batch reports 0 for a plain plan
			w.u32(int(p.rows[k]))
			w.u32(0)
			w.u32(int(p.pd.eff(p.lengths[p.rows[k]])))
		}
		w.u32(0)
	}
	return w.sum()
}

type planHasher struct {
	h   hash.Hash
	buf []byte
}

func newPlanHasher(n int) *planHasher {
	w := &planHasher{h: sha256.New(), buf: make([]byte, 0, 64<<10)}
	w.h.Write([]byte(planHashTag))
	w.buf = binary.LittleEndian.AppendUint64(w.buf, uint64(n))
	return w
}

func (w *planHasher) u32(v int) {
	w.buf = binary.LittleEndian.AppendUint32(w.buf, uint32(v))
	if len(w.buf) > cap(w.buf)-8 {
		w.h.Write(w.buf)
		w.buf = w.buf[:0]
	}
}

func (w *planHasher) sum() string {
	w.h.Write(w.buf)
	s := w.h.Sum(nil)
	return hex.EncodeToString(s[:16])
}
