package bucket

import (
	"errors"
	"fmt"
	"math"
	"reflect"
	"slices"
	"strings"
	"testing"
)

// zeroLengths is Synthetic with every 37th row empty (empty documents are zero-length pieces).
type zeroLengths struct{ Synthetic }

func (z zeroLengths) Length(i int64) uint32 {
	if mix64(uint64(i)^0xabc)%37 == 0 {
		return 0
	}
	return z.Synthetic.Length(i)
}

// walkPacked reads batches [lo, hi) of p and checks every batch's layout, every token of the rows it meets
// delivered once and nothing missing: with SplitDocs the pieces of row r cover [0, eff(r)) exactly once; without,
// row r is one piece [0, min(eff(r), SeqLen)). blocks, when not nil, are the blocks whose rows the batches must
// deliver (all of them, and no other); else every row of the dataset.
func walkPacked(t *testing.T, p *LazyPacked, l Lengths, lo, hi int, blocks []int64) (pieces, packedRows int, real int64, maxPieces int) {
	t.Helper()
	c := p.Config()
	s := c.SeqLen
	eff := func(r int64) int {
		e := int(l.Length(r))
		if c.MaxLength > 0 {
			e = min(e, c.MaxLength)
		}
		if !c.SplitDocs {
			e = min(e, s)
		}
		return e
	}
	var rows []int64 // the rows to deliver; idx maps one to its place there
	idx := func(r int64) int { return int(r) }
	if blocks == nil {
		rows = make([]int64, l.Len())
		for i := range rows {
			rows[i] = int64(i)
		}
	} else {
		at := map[int64]int{}
		for i, b := range blocks {
			at[b] = i
			for r := b * LazyBlockRows; r < min((b+1)*LazyBlockRows, l.Len()); r++ {
				rows = append(rows, r)
			}
		}
		idx = func(r int64) int {
			i, ok := at[r/LazyBlockRows]
			if !ok {
				t.Fatalf("row %d is not in blocks %v", r, blocks)
			}
			return i*LazyBlockRows + int(r%LazyBlockRows)
		}
	}
	got := make([]int32, len(rows))   // tokens delivered of every row
	count := make([]uint8, len(rows)) // pieces of every row (saturating)
	var multi [][3]int                // pieces that are not a whole row: row, start, len
	for g := lo; g < hi; g++ {
		b := p.Batch(g)
		if b.Rows < 1 || b.Rows > c.BatchSize || b.Length != s || len(b.RowStart) != b.Rows+1 || b.RowStart[0] != 0 || b.RowStart[b.Rows] != len(b.Pieces) {
			t.Fatalf("batch %d: layout %d rows, length %d, row starts %v, %d pieces", g, b.Rows, b.Length, b.RowStart, len(b.Pieces))
		}
		if sh := p.Shape(g); sh.Rows != b.Rows || sh.Length != b.Length {
			t.Fatalf("batch %d: Shape %+v, batch %d×%d", g, sh, b.Rows, b.Length)
		}
		for r := range b.Rows {
			fill := 0
			for _, pc := range b.Pieces[b.RowStart[r]:b.RowStart[r+1]] {
				fill += pc.Len
			}
			if fill > s {
				t.Fatalf("batch %d row %d: %d tokens > seq_len %d", g, r, fill, s)
			}
		}
		for _, pc := range b.Pieces {
			row := int64(pc.Index)
			e := eff(row)
			if pc.Start < 0 || pc.Len < 0 || pc.Start+pc.Len > e {
				t.Fatalf("batch %d: piece %+v outside row %d's %d tokens", g, pc, row, e)
			}
			i := idx(row)
			got[i] += int32(pc.Len)
			count[i] = min(count[i]+1, 200)
			if pc.Start != 0 || pc.Len != e {
				multi = append(multi, [3]int{pc.Index, pc.Start, pc.Len})
			}
			real += int64(pc.Len)
		}
		pieces += len(b.Pieces)
		packedRows += b.Rows
		maxPieces = max(maxPieces, len(b.Pieces))
	}
	for i, r := range rows {
		if int(got[i]) != eff(r) || count[i] == 0 || (!c.SplitDocs && count[i] != 1) {
			t.Fatalf("row %d: %d tokens in %d pieces, want %d", r, got[i], count[i], eff(r))
		}
	}
	// Split rows: their pieces, sorted by start, tile [0, eff) (a whole-row piece never has a sibling: count 1).
	slices.SortFunc(multi, func(a, b [3]int) int {
		if a[0] != b[0] {
			return a[0] - b[0]
		}
		return a[1] - b[1]
	})
	for i := 0; i < len(multi); {
		r, at := multi[i][0], 0
		for ; i < len(multi) && multi[i][0] == r; i++ {
			if multi[i][1] != at {
				t.Fatalf("row %d: a piece starts at %d, want %d (overlap or gap)", r, multi[i][1], at)
			}
			at += multi[i][2]
		}
		if at != eff(int64(r)) {
			t.Fatalf("row %d: pieces end at %d, want %d", r, at, eff(int64(r)))
		}
	}
	return pieces, packedRows, real, maxPieces
}

func TestLazyPackedExactlyOnce(t *testing.T) {
	for _, tc := range []struct {
		rows  int64
		cfg   Config
		zeros bool
	}{
		{3_000_000, Config{Policy: Packed, BatchSize: 8, SeqLen: 4096, SplitDocs: true}, false},
		{3_000_000, Config{Policy: Packed, BatchSize: 8, SeqLen: 4096}, false},
		{2_500_000, Config{Policy: Packed, BatchSize: 3, SeqLen: 1000, SplitDocs: true, MaxLength: 20_000}, true},
		{2_500_000, Config{Policy: Packed, BatchSize: 16, SeqLen: 2048, MaxLength: 1500}, true},
		{10_000_000, Config{Policy: Packed, BatchSize: 8, SeqLen: 4096, SplitDocs: true}, false},
	} {
		name := fmt.Sprintf("%d/%d×%d/split=%v/max=%d/zeros=%v", tc.rows, tc.cfg.BatchSize, tc.cfg.SeqLen, tc.cfg.SplitDocs, tc.cfg.MaxLength, tc.zeros)
		t.Run(name, func(t *testing.T) {
			if tc.rows > 3_000_000 && testing.Short() {
				t.Skipf("%d rows: about 15 s and 600 MB on 2 cores; run without -short", tc.rows)
			}
			var l Lengths = Synthetic{Rows: tc.rows, Seed: 3}
			if tc.zeros {
				l = zeroLengths{Synthetic{Rows: tc.rows, Seed: 3}}
			}
			p, err := NewLazyPacked(l, "fp", 7, 1, tc.cfg, Parallel)
			if err != nil {
				t.Fatal(err)
			}
			if p.Windows() < 3 {
				t.Fatalf("%d windows, want several", p.Windows())
			}
			pieces, packed, real, most := walkPacked(t, p, l, 0, p.Len(), nil)
			st := p.Stats()
			if st.Pieces != pieces || st.PackedRows != packed || st.RealTokens != real || st.Batches != p.Len() || st.Rows != int(tc.rows) {
				t.Fatalf("stats %+v; walked %d pieces, %d packed rows, %d tokens", st, pieces, packed, real)
			}
			bd := p.Bound()
			if bd.Rows != tc.cfg.BatchSize || bd.Length != tc.cfg.SeqLen || bd.Pieces < int64(most) || bd.Pieces > int64(tc.cfg.BatchSize)*int64(tc.cfg.SeqLen)+tc.rows {
				t.Fatalf("bound %+v; the batches hold up to %d pieces", bd, most)
			}
			t.Logf("%d windows, %d batches, packing efficiency %.6f, pieces per batch at most %d (bound %d)", p.Windows(), p.Len(), st.PackingEfficiency, most, bd.Pieces)
		})
	}
}

// TestLazyPackedOnDemand: batches read in any order, windows packed again after eviction, equal the batches read
// window after window from a fresh plan, and a window's batches are its packing (buildWindow) in order.
func TestLazyPackedOnDemand(t *testing.T) {
	l := Synthetic{Rows: 5_500_000, Seed: 9}
	cfg := Config{Policy: Packed, BatchSize: 5, SeqLen: 2048, SplitDocs: true}
	p, err := NewLazyPacked(l, "fp", 1, 0, cfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	q, err := NewLazyPacked(l, "fp", 1, 0, cfg, Parallel)
	if err != nil {
		t.Fatal(err)
	}
	if p.Windows() <= lazyPackedKeep {
		t.Fatalf("%d windows: want more than the %d a plan keeps", p.Windows(), lazyPackedKeep)
	}
	var order []int // interleaved over the windows, last window first, so windows are evicted and packed again
	for k := range 4 {
		for w := p.Windows() - 1; w >= 0; w-- {
			lo, hi := p.WindowBatches(w)
			order = append(order, lo+(k*7919)%(hi-lo))
		}
	}
	want := map[int]Batch{}
	for _, g := range order {
		want[g] = Batch{}
	}
	for g := range q.Len() { // in order: each window packed once
		if _, ok := want[g]; ok {
			want[g] = q.Batch(g)
		}
	}
	for _, g := range order {
		if b := p.Batch(g); !samePacked(b, want[g]) {
			t.Fatalf("batch %d read out of order differs from the one read in order", g)
		}
	}
	w := p.Windows() - 1
	tb := p.buildWindow(int64(w))
	lo, hi := p.WindowBatches(w)
	at := 0
	for g := lo; g < hi; g++ {
		for _, pc := range p.Batch(g).Pieces {
			if pc.Index != int(tb.rows[tb.pos[at]]) || pc.Start != int(tb.pstart[at]) || pc.Len != int(tb.plen[at]) {
				t.Fatalf("batch %d: piece %+v, the window's packing has piece %d = row %d [%d, +%d)", g, pc, at, tb.rows[tb.pos[at]], tb.pstart[at], tb.plen[at])
			}
			at++
		}
	}
	if at != len(tb.plen) {
		t.Fatalf("window %d: batches hold %d pieces, its packing %d", w, at, len(tb.plen))
	}
}

func samePacked(a, b Batch) bool {
	return a.Rows == b.Rows && a.Length == b.Length && slices.Equal(a.Pieces, b.Pieces) && slices.Equal(a.RowStart, b.RowStart)
}

// TestLazyPackedDeterminism: the same inputs give the same plan whatever the Runner (serial, parallel, reversed);
// another seed, epoch or config another hash; no lazy packed plan hashes like an exact or lazy bucketed one.
func TestLazyPackedDeterminism(t *testing.T) {
	l := Synthetic{Rows: 2_200_000, Seed: 1}
	cfg := Config{Policy: Packed, BatchSize: 4, SeqLen: 4096, SplitDocs: true}
	reversed := func(n int, f func(int)) {
		for i := n - 1; i >= 0; i-- {
			f(i)
		}
	}
	var ref *LazyPacked
	for i, run := range []Runner{nil, Parallel, reversed} {
		p, err := NewLazyPacked(l, "fp", 5, 2, cfg, run)
		if err != nil {
			t.Fatal(err)
		}
		if ref == nil {
			ref = p
			continue
		}
		if !reflect.DeepEqual(p.Counts(), ref.Counts()) || p.Hash() != ref.Hash() || p.Len() != ref.Len() || p.Stats() != ref.Stats() {
			t.Fatalf("runner %d: counts %+v hash %s, want %+v %s", i, p.Counts(), p.Hash(), ref.Counts(), ref.Hash())
		}
		for _, g := range []int{0, p.Len() / 2, p.Len() - 1} {
			if !samePacked(p.Batch(g), ref.Batch(g)) {
				t.Fatalf("runner %d: batch %d differs", i, g)
			}
		}
	}
	seen := map[string]string{ref.Hash(): "reference"}
	other := cfg
	other.SplitDocs = false
	for name, mk := range map[string]func() (EpochPlan, error){
		"seed":  func() (EpochPlan, error) { return NewLazyPacked(l, "fp", 6, 2, cfg, Parallel) },
		"epoch": func() (EpochPlan, error) { return NewLazyPacked(l, "fp", 5, 3, cfg, Parallel) },
		"split": func() (EpochPlan, error) { return NewLazyPacked(l, "fp", 5, 2, other, Parallel) },
		"fp":    func() (EpochPlan, error) { return NewLazyPacked(l, "fp2", 5, 2, cfg, Parallel) },
		"lazy": func() (EpochPlan, error) {
			return NewLazyPlan(l, "fp", 5, 2, Config{Policy: Bucketed, BatchSize: 4}, nil)
		},
	} {
		p, err := mk()
		if err != nil {
			t.Fatal(err)
		}
		if prev, ok := seen[p.Hash()]; ok {
			t.Fatalf("%s hashes like %s", name, prev)
		}
		seen[p.Hash()] = name
	}
	if a, b := ref.Batch(0), mustPacked(t)(NewLazyPacked(l, "fp", 6, 2, cfg, nil)).Batch(0); samePacked(a, b) {
		t.Fatal("another seed gives the same first batch")
	}
}

func mustPacked(t *testing.T) func(*LazyPacked, error) *LazyPacked {
	return func(p *LazyPacked, err error) *LazyPacked {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
		return p
	}
}

// TestLazyPackedEfficiency compares the packing efficiency of the lazy plan (windows packed on their own) with the
// exact planner's (the whole dataset packed at once) on the same lengths.
func TestLazyPackedEfficiency(t *testing.T) {
	const n = 3_000_000
	l := Synthetic{Rows: n, Seed: 11}
	s := make([]uint32, n)
	l.Fill(0, s)
	for _, cfg := range []Config{
		{Policy: Packed, BatchSize: 8, SeqLen: 4096, SplitDocs: true},
		{Policy: Packed, BatchSize: 8, SeqLen: 4096},
		{Policy: Packed, BatchSize: 8, SeqLen: 8192},
	} {
		lazy, err := NewLazyPacked(l, "fp", 1, 0, cfg, Parallel)
		if err != nil {
			t.Fatal(err)
		}
		exact, err := NewPlan(s, "fp", 1, 0, cfg)
		if err != nil {
			t.Fatal(err)
		}
		le, ee := lazy.Stats().PackingEfficiency, exact.Stats().PackingEfficiency
		t.Logf("seq_len %d split %v: packing efficiency lazy %.6f (%d packed rows), exact %.6f (%d)", cfg.SeqLen, cfg.SplitDocs, le, lazy.Stats().PackedRows, ee, exact.Stats().PackedRows)
		if le < ee-0.002 || lazy.Stats().RealTokens != exact.Stats().RealTokens {
			t.Fatalf("lazy %.6f (%d tokens) vs exact %.6f (%d tokens)", le, lazy.Stats().RealTokens, ee, exact.Stats().RealTokens)
		}
	}
}

// TestLazyPackedBeyondInt32 plans 2^31 + 3·2^20 + 12345 synthetic rows. Counting every window (about 2 000 of
// them) would take minutes on a small machine, so the counts are computed for the windows the test reads and for
// those NewLazyPackedFrom checks, and copied from window 0 for the others (whose batches the test does not read):
// the construction path a server restarted with kept counts takes. Every token of every row of the windows read
// (one past row 2^31) is delivered once, batch numbers pass 2^31, and wrong counts are refused.
func TestLazyPackedBeyondInt32(t *testing.T) {
	n := int64(1)<<31 + 3<<20 + 12345
	l := Synthetic{Rows: n, Seed: 4}
	cfg := Config{Policy: Packed, BatchSize: 1, SeqLen: 256, SplitDocs: true}
	p0, err := newLazyPacked(n, l, "fp", 1, 0, cfg)
	if err != nil {
		t.Fatal(err)
	}
	nwin := p0.windows()
	// The window holding the dataset's last block, and so rows past 2^31.
	var blk [LazyWindowBlocks]int64
	high := -1
	for w := range nwin {
		if k, _ := p0.windowBlocks(int64(w), &blk); blk[k-1] == p0.nblocks-1 {
			high = w
		}
	}
	read := []int{nwin - 1, high}
	counted := map[int]winCount{}
	for _, w := range append([]int{0, high, nwin - 1}, verifyWindows(p0)...) {
		if _, ok := counted[w]; !ok {
			wc, err := p0.countWindow(int64(w))
			if err != nil {
				t.Fatal(err)
			}
			counted[w] = wc
		}
	}
	key, err := LazyPackedKey(n, "fp", 1, 0, cfg)
	if err != nil || key != p0.key() {
		t.Fatalf("key %q %v, want %q", key, err, p0.key())
	}
	c := PackedCounts{Key: key, Rows: make([]int32, nwin)}
	for w := range c.Rows {
		wc, ok := counted[w]
		if !ok {
			wc = counted[0]
		}
		c.Rows[w] = wc.rows
		c.MaxBatchPieces = max(c.MaxBatchPieces, wc.batchPieces)
	}
	p, err := NewLazyPackedFrom(l, "fp", 1, 0, cfg, c)
	if err != nil {
		t.Fatal(err)
	}
	if p.Len() <= math.MaxInt32 || p.Rows() != n {
		t.Fatalf("%d batches of %d rows, want more than 2^31 batches", p.Len(), p.Rows())
	}
	for _, w := range read {
		blocks := p.WindowBlocks(w)
		lo, hi := p.WindowBatches(w)
		walkPacked(t, p, l, lo, hi, blocks)
		if w == high && blocks[len(blocks)-1] != p.nblocks-1 {
			t.Fatalf("window %d does not hold the last block", w)
		}
	}
	if b := p.Batch(p.Len() - 1); b.Rows != 1 {
		t.Fatalf("last batch: %d rows", b.Rows)
	}

	// Wrong counts are refused: another plan's key, a window count, a window's packed rows.
	for name, mod := range map[string]func(*PackedCounts){
		"key":     func(c *PackedCounts) { c.Key = "x" + c.Key[1:] },
		"windows": func(c *PackedCounts) { c.Rows = c.Rows[1:] },
		"rows":    func(c *PackedCounts) { c.Rows[0]++ },
		"pieces":  func(c *PackedCounts) { c.MaxBatchPieces = 1 },
	} {
		bad := c
		bad.Rows = slices.Clone(c.Rows)
		mod(&bad)
		if _, err := NewLazyPackedFrom(l, "fp", 1, 0, cfg, bad); err == nil {
			t.Fatalf("%s: wrong counts accepted", name)
		}
	}
	if _, err := NewLazyPackedFrom(l, "fp", 2, 0, cfg, c); err == nil {
		t.Fatal("counts of seed 1 accepted for seed 2")
	}
}

// verifyWindows are the windows NewLazyPackedFrom packs again beside window 0.
func verifyWindows(p *LazyPacked) []int {
	var out []int
	for i := range packedVerifyWindows {
		out = append(out, int(splitmixAt(p.keyPacked, uint64(1)<<32+uint64(i))%uint64(p.windows())))
	}
	return out
}

// TestLazyPackedCounts: counts kept and given back plan the same epoch; their encoding round-trips and refuses
// corruption.
func TestLazyPackedCounts(t *testing.T) {
	l := Synthetic{Rows: 2_300_000, Seed: 2}
	cfg := Config{Policy: Packed, BatchSize: 8, SeqLen: 4096, SplitDocs: true}
	p, err := NewLazyPacked(l, "fp", 1, 0, cfg, Parallel)
	if err != nil {
		t.Fatal(err)
	}
	enc, err := p.Counts().MarshalBinary()
	if err != nil {
		t.Fatal(err)
	}
	var c PackedCounts
	if err := c.UnmarshalBinary(enc); err != nil || !reflect.DeepEqual(c, p.Counts()) {
		t.Fatalf("round trip: %v, %+v want %+v", err, c, p.Counts())
	}
	q, err := NewLazyPackedFrom(l, "fp", 1, 0, cfg, c)
	if err != nil {
		t.Fatal(err)
	}
	if q.Hash() != p.Hash() || q.Stats() != p.Stats() || q.Bound() != p.Bound() || !samePacked(q.Batch(q.Len()-1), p.Batch(p.Len()-1)) {
		t.Fatalf("from counts: hash %s stats %+v, want %s %+v", q.Hash(), q.Stats(), p.Hash(), p.Stats())
	}
	for i := range enc {
		bad := slices.Clone(enc)
		bad[i] ^= 0x10
		if err := new(PackedCounts).UnmarshalBinary(bad); err == nil {
			t.Fatalf("byte %d flipped: accepted", i)
		}
	}
	for _, k := range []int{0, 10, len(enc) - 1} {
		if err := new(PackedCounts).UnmarshalBinary(enc[:k]); err == nil {
			t.Fatalf("truncated to %d bytes: accepted", k)
		}
	}
}

func FuzzPackedCountsUnmarshal(f *testing.F) {
	for _, c := range []PackedCounts{{}, {Key: "k", Rows: []int32{1, 2, 3}, Pieces: 9, RealTokens: 100, Tokens: 120, MaxBatchPieces: 4}} {
		b, _ := c.MarshalBinary()
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		var c PackedCounts
		if err := c.UnmarshalBinary(b); err != nil {
			return
		}
		again, _ := c.MarshalBinary()
		if !slices.Equal(again, b) {
			t.Fatalf("decoded %+v re-encodes differently", c)
		}
	})
}

// TestLazyPackedConcurrent reads batches of two windows from several goroutines at once (run with -race).
func TestLazyPackedConcurrent(t *testing.T) {
	l := zeroLengths{Synthetic{Rows: 1_200_000, Seed: 8}}
	cfg := Config{Policy: Packed, BatchSize: 8, SeqLen: 2048, SplitDocs: true}
	p := mustPacked(t)(NewLazyPacked(l, "fp", 1, 0, cfg, Parallel))
	ref := mustPacked(t)(NewLazyPacked(l, "fp", 1, 0, cfg, nil))
	want := map[int]Batch{}
	var gs []int
	for g := 0; g < p.Len(); g += 97 {
		gs = append(gs, g)
		want[g] = ref.Batch(g)
	}
	const readers = 4
	errs := make(chan string, readers)
	for r := range readers {
		go func() {
			for i := range gs {
				g := gs[(i*(r+1)+r)%len(gs)]
				if !samePacked(p.Batch(g), want[g]) {
					errs <- fmt.Sprintf("reader %d: batch %d differs", r, g)
					return
				}
			}
			errs <- ""
		}()
	}
	for range readers {
		if e := <-errs; e != "" {
			t.Fatal(e)
		}
	}
}

func TestLazyPackedThreshold(t *testing.T) {
	pk := Config{Policy: Packed, BatchSize: 4, SeqLen: 2048}
	for _, tc := range []struct {
		n    int64
		cfg  Config
		want string
	}{
		{LazyThreshold, pk, "exact"},
		{LazyThreshold + 1, pk, "lazy-packed"},
		{math.MaxInt32 + 1, pk, "lazy-packed"},
		{LazyThreshold + 1, Config{Policy: Bucketed, BatchSize: 4}, "lazy"},
		{LazyThreshold + 1, Config{Policy: Tokens, TokenBudget: 4096}, "lazy"},
		{LazyThreshold + 1, Config{BatchSize: 4, Sequential: true}, "lazy-sequential"},
		{LazyThreshold + 1, Config{Policy: Tokens, TokenBudget: 4096, Sequential: true}, "exact"},
		{10, Config{Policy: Tokens, TokenBudget: 4096}, "exact"},
	} {
		if got := EpochPlanner(tc.n, tc.cfg); got != tc.want {
			t.Errorf("EpochPlanner(%d, %s): %s, want %s", tc.n, tc.cfg.Policy, got, tc.want)
		}
	}
	// Above it, the lazy packed plan (a counting pass over 2^27 rows: a few seconds).
	if testing.Short() {
		t.Log("skipping NewEpochPlan at LazyThreshold+1 packed rows under -short (a counting pass of 2^27 rows)")
	} else {
		big := hashLengths{n: LazyThreshold + 1, max: 1000}
		ep, err := NewEpochPlan(big, "fp", 1, 0, pk, Parallel)
		if err != nil {
			t.Fatal(err)
		}
		lp, ok := ep.(*LazyPacked)
		if !ok || lp.Rows() != LazyThreshold+1 {
			t.Fatalf("above the threshold: %T, want *LazyPacked of %d rows", ep, LazyThreshold+1)
		}
		lo, hi := lp.WindowBatches(lp.Windows() - 1)
		walkPacked(t, lp, big, lo, hi, lp.WindowBlocks(lp.Windows()-1))
	}
	// Below the threshold NewEpochPlan gives the exact packed plan, hash and all.
	small := make(SliceLengths, 20_000)
	Synthetic{Rows: 20_000}.Fill(0, small)
	ep, err := NewEpochPlan(small, "fp", 1, 0, pk, Parallel)
	if err != nil {
		t.Fatal(err)
	}
	exact, err := NewPlan(small, "fp", 1, 0, pk)
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := ep.(*Plan); !ok || ep.Hash() != exact.Hash() {
		t.Fatalf("below the threshold: %T %s, want the exact plan %s", ep, ep.Hash(), exact.Hash())
	}
	for _, bad := range []Config{
		{Policy: Bucketed, BatchSize: 4},
		{Policy: Packed, BatchSize: 4, SeqLen: 64, ShuffleWindow: 10},
		{Policy: Packed, BatchSize: 4},
	} {
		if _, err := NewLazyPacked(small, "fp", 1, 0, bad, nil); !errors.Is(err, ErrConfig) {
			t.Fatalf("%+v: %v, want ErrConfig", bad, err)
		}
	}
	if _, err := NewLazyPacked(small, "fp", 1, -1, pk, nil); !errors.Is(err, ErrConfig) {
		t.Fatalf("epoch -1: %v", err)
	}
	// A window of too many pieces is refused.
	if _, err := NewLazyPacked(Synthetic{Rows: 200_000}, "fp", 1, 0, Config{Policy: Packed, BatchSize: 4, SeqLen: 1, SplitDocs: true}, nil); !errors.Is(err, ErrTooLarge) {
		t.Fatalf("2^25+ pieces in a window: %v, want ErrTooLarge", err)
	}
	// No rows: no batches.
	z, err := NewLazyPacked(SliceLengths{}, "fp", 1, 0, pk, nil)
	if err != nil || z.Len() != 0 || z.Hash() == "" || len(z.Shapes()) != 0 {
		t.Fatalf("no rows: %v, %d batches", err, z.Len())
	}
	func() {
		defer func() {
			if recover() == nil {
				t.Fatal("Batch(0) of an empty plan did not panic")
			}
		}()
		z.Batch(0)
	}()
	// SeqLen at or above the histogram limit counts by sorting: same plan shape as the exact planner's.
	big := Config{Policy: Packed, BatchSize: 2, SeqLen: packedHistMax, SplitDocs: true}
	bp := mustPacked(t)(NewLazyPacked(small, "fp", 1, 0, big, nil))
	be, err := NewPlan(small, "fp", 1, 0, big)
	if err != nil {
		t.Fatal(err)
	}
	if bp.Stats().PackedRows != be.Stats().PackedRows || bp.Stats().RealTokens != be.Stats().RealTokens {
		t.Fatalf("seq_len 2^20: lazy %+v, exact %+v", bp.Stats(), be.Stats())
	}
	walkPacked(t, bp, small, 0, bp.Len(), nil)
}

// TestLazyPackedWrongCounts: counts that pass NewLazyPackedFrom's checks but are wrong for a window it did not
// pack again make Batch panic with a message naming the window, every time (the cache keeps no half-built window).
func TestLazyPackedWrongCounts(t *testing.T) {
	l := Synthetic{Rows: 4_300_000, Seed: 6}
	cfg := Config{Policy: Packed, BatchSize: 8, SeqLen: 4096}
	p := mustPacked(t)(NewLazyPacked(l, "fp", 1, 0, cfg, Parallel))
	checked := append([]int{0}, verifyWindows(p)...)
	w := 0
	for slices.Contains(checked, w) {
		w++
	}
	c := p.Counts()
	c.Rows[w] += 8 // one batch more
	q, err := NewLazyPackedFrom(l, "fp", 1, 0, cfg, c)
	if err != nil {
		t.Fatalf("window %d's count is not checked, yet: %v", w, err)
	}
	lo, _ := q.WindowBatches(w)
	for range 2 {
		func() {
			defer func() {
				if r := recover(); r == nil || !strings.Contains(fmt.Sprint(r), fmt.Sprintf("window %d packs into", w)) {
					t.Fatalf("Batch(%d) of window %d with a wrong count: recovered %v", lo, w, r)
				}
			}()
			q.Batch(lo)
		}()
	}
}

// TestPlaceRunMatchesPlace: placing runs of equal items k at a time (placeRun, used by the counting pass and window
// packing) gives every item the rows and parts that placing them one at a time (place, the exact packer's) gives.
func TestPlaceRunMatchesPlace(t *testing.T) {
	for _, s := range []int64{1, 7, 64, 4096} {
		for _, split := range []bool{false, true} {
			for seed := range uint64(20) {
				n := 1 + int(mix64(seed)%3000)
				lens := make([]int64, n)
				for i := range lens {
					v := mix64(seed<<32 | uint64(i))
					switch {
					case v%11 == 0:
						lens[i] = 0
					case v%5 == 0:
						lens[i] = s
					default:
						lens[i] = int64(v>>8) % (s + 1)
					}
				}
				slices.SortFunc(lens, func(a, b int64) int { return int(b - a) })
				var want, got [][]part
				one := packer{tree: newBinTree(), s: s, split: split, maxRows: math.MaxInt32}
				for _, x := range lens {
					ps, err := one.place(x, nil)
					if err != nil {
						t.Fatal(err)
					}
					want = append(want, ps)
				}
				run := packer{tree: newBinTree(), s: s, split: split, maxRows: math.MaxInt32}
				whole := func(r int, k, x int64) {
					for range k {
						got = append(got, []part{{row: int32(r), n: uint32(x)}})
					}
				}
				parts := func(ps []part) { got = append(got, slices.Clone(ps)) }
				for lo := 0; lo < n; {
					hi := lo + 1
					for hi < n && lens[hi] == lens[lo] {
						hi++
					}
					run.placeRun(lens[lo], int64(hi-lo), whole, parts)
					lo = hi
				}
				if run.tree.open != one.tree.open || !slices.EqualFunc(got, want, slices.Equal[[]part]) {
					t.Fatalf("s=%d split=%v seed %d: %d rows vs %d; items placed differently", s, split, seed, run.tree.open, one.tree.open)
				}
			}
		}
	}
}
