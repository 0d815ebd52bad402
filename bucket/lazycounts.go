package bucket

// Kept counting passes: what a lazy tokens or packed plan learns by reading every length before its first batch (its
// batches or packed rows per window), encoded so that a caller can keep it and plan the same epoch again without the
// pass ([NewLazyPlanFrom], [NewLazyPackedFrom]). This file holds the tokens plan's counts and the encoding both
// share; the packed plan's counts are in lazypack.go.

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"fmt"
	"math"
	"slices"
)

const (
	lazyTokensCountsAlgorithm = "gload/plan/lazy-tokens-counts/v1"
	// tokensVerifyWindows is how many windows beside window 0 [NewLazyPlanFrom] builds again to check the counts it
	// is given.
	tokensVerifyWindows = 2
)

// TokensCounts is the result of a lazy tokens plan's counting pass: the batches of every window. Keep it
// (MarshalBinary) under the plan's [LazyTokensKey] and give it to [NewLazyPlanFrom] to plan the same epoch again
// without the counting pass.
type TokensCounts struct {
	Key     string  // LazyTokensKey of the plan counted
	Batches []int32 // batches of every window
}

// LazyTokensKey is the key of the counts of the lazy tokens plan NewLazyPlan(lengths of rows rows, fingerprint,
// seed, epoch, cfg) would make; it fails for configurations NewLazyPlan refuses and for policies other than tokens
// (a bucketed plan counts nothing).
func LazyTokensKey(rows int64, fingerprint string, seed uint64, epoch int, cfg Config) (string, error) {
	p, err := newLazyPlan(rows, nil, fingerprint, seed, epoch, cfg)
	if err != nil {
		return "", err
	}
	if p.cfg.Policy != Tokens {
		return "", cfgErr("policy", "only tokens plans have counts to keep (policy is %s)", p.cfg.Policy)
	}
	return p.countsKey(), nil
}

func (p *LazyPlan) countsKey() string {
	return p.hash(lazyTokensCountsAlgorithm, p.fingerprint, p.seed, p.epoch, p.cfg, 0, false)
}

// Counts returns a tokens plan's counting-pass result, to keep for [NewLazyPlanFrom]; false for a bucketed plan.
func (p *LazyPlan) Counts() (TokensCounts, bool) {
	if p.cfg.Policy != Tokens {
		return TokensCounts{}, false
	}
	c := TokensCounts{Key: p.countsKey(), Batches: make([]int32, len(p.winEnd))}
	var prev int64
	for w, e := range p.winEnd {
		c.Batches[w] = int32(e - prev)
		prev = e
	}
	return c, true
}

// NewLazyPlanFrom is [NewLazyPlan] for the tokens policy with the counting pass's result given (from
// [LazyPlan.Counts] of the same plan, kept by the caller). It checks that the counts are of this plan (their key)
// and of its windows, and builds window 0, the last window and a few keyed-random windows again to check that they
// match the lengths; it fails with an error naming the mismatch rather than plan from wrong counts. The other
// windows' counts are checked when a window is built to serve a batch: Batch panics, naming the window, rather than
// serve a plan that drops or repeats rows. Only counts that [NewLazyPlan] computed for the same key should be given.
func NewLazyPlanFrom(lengths Lengths, fingerprint string, seed uint64, epoch int, cfg Config, counts TokensCounts, run Runner) (*LazyPlan, error) {
	p, err := newLazyPlan(lengths.Len(), lengths, fingerprint, seed, epoch, cfg)
	if err != nil {
		return nil, err
	}
	if p.cfg.Policy != Tokens {
		return nil, cfgErr("policy", "NewLazyPlanFrom plans tokens plans (policy is %s)", p.cfg.Policy)
	}
	if k := p.countsKey(); counts.Key != k {
		return nil, fmt.Errorf("lazy plan: counts of plan %q given for plan %q", counts.Key, k)
	}
	nwin := p.windows()
	if len(counts.Batches) != nwin {
		return nil, fmt.Errorf("lazy plan: counts of %d windows given for %d", len(counts.Batches), nwin)
	}
	kept := make([]int64, nwin)
	for w, b := range counts.Batches {
		kept[w] = int64(b)
	}
	if _, err := p.finish(run, kept); err != nil { // the budget check first: windows are built below
		return nil, err
	}
	if nwin > 0 {
		check := []int64{0, int64(nwin - 1)} // the first, the last (often short) and keyed-random ones
		for i := range tokensVerifyWindows {
			check = append(check, int64(splitmixAt(p.keyBatch, uint64(1)<<32+uint64(i))%uint64(nwin)))
		}
		for _, w := range check {
			if got := len(p.buildWindow(w).boff) - 1; got != int(counts.Batches[w]) {
				return nil, fmt.Errorf("lazy plan: counts do not match the lengths: window %d has %d batches, the counts say %d", w, got, counts.Batches[w])
			}
		}
	}
	return p, nil
}

// MarshalBinary encodes the counts: "gload/plan/lazy-tokens-counts/v1" 0x00 ‖ u64le(len(Key)) ‖ Key ‖
// u64le(windows) ‖ u32le(Batches[w]) for every window ‖ the first 16 bytes of SHA-256 of everything before.
func (c TokensCounts) MarshalBinary() ([]byte, error) {
	return encodeWindowCounts(lazyTokensCountsAlgorithm, c.Key, c.Batches, nil), nil
}

// UnmarshalBinary decodes counts encoded by MarshalBinary, checking their checksum and every size before use.
func (c *TokensCounts) UnmarshalBinary(data []byte) error {
	key, batches, _, err := decodeWindowCounts(lazyTokensCountsAlgorithm, "lazy tokens counts", "batches", data, 0)
	if err != nil {
		return err
	}
	*c = TokensCounts{Key: key, Batches: batches}
	return nil
}

// encodeWindowCounts encodes alg 0x00 ‖ u64le(len(key)) ‖ key ‖ u64le(len(per)) ‖ u32le of each per ‖ u64le of each
// total ‖ the first 16 bytes of SHA-256 of everything before.
func encodeWindowCounts(alg, key string, per []int32, totals []int64) []byte {
	b := append([]byte(alg), 0)
	b = binary.LittleEndian.AppendUint64(b, uint64(len(key)))
	b = append(b, key...)
	b = binary.LittleEndian.AppendUint64(b, uint64(len(per)))
	for _, r := range per {
		b = binary.LittleEndian.AppendUint32(b, uint32(r))
	}
	for _, v := range totals {
		b = binary.LittleEndian.AppendUint64(b, uint64(v))
	}
	sum := sha256.Sum256(b)
	return append(b, sum[:16]...)
}

// decodeWindowCounts decodes what encodeWindowCounts(alg, …) wrote with ntotals totals, checking the checksum and
// every size before use; errors start with what and call the per-window values unit.
func decodeWindowCounts(alg, what, unit string, data []byte, ntotals int) (string, []int32, []int64, error) {
	bad := func(why string) error { return fmt.Errorf("%s: %s (%d bytes)", what, why, len(data)) }
	head := append([]byte(alg), 0)
	if !bytes.HasPrefix(data, head) {
		return "", nil, nil, bad("not " + what + " of version v1")
	}
	if len(data) < len(head)+16 {
		return "", nil, nil, bad("truncated")
	}
	body, sum := data[:len(data)-16], data[len(data)-16:]
	if h := sha256.Sum256(body); !bytes.Equal(h[:16], sum) {
		return "", nil, nil, bad("checksum mismatch")
	}
	r := body[len(head):]
	u64 := func() (uint64, bool) {
		if len(r) < 8 {
			return 0, false
		}
		v := binary.LittleEndian.Uint64(r)
		r = r[8:]
		return v, true
	}
	kl, ok := u64()
	if !ok || kl > 1024 || uint64(len(r)) < kl {
		return "", nil, nil, bad("bad key")
	}
	key := string(r[:kl])
	r = r[kl:]
	nw, ok := u64()
	if !ok || nw > MaxPlanRows/(LazyBlockRows*LazyWindowBlocks)+1 || uint64(len(r)) != nw*4+8*uint64(ntotals) {
		return "", nil, nil, bad("bad window count")
	}
	per := make([]int32, nw)
	for w := range per {
		v := binary.LittleEndian.Uint32(r[4*w:])
		if v > math.MaxInt32 {
			return "", nil, nil, bad(fmt.Sprintf("window %d: %d %s", w, v, unit))
		}
		per[w] = int32(v)
	}
	r = r[4*nw:]
	totals := make([]int64, ntotals)
	for i := range totals {
		v, _ := u64()
		if v > math.MaxInt64 {
			return "", nil, nil, bad("bad total")
		}
		totals[i] = int64(v)
	}
	return key, slices.Clip(per), totals, nil
}
