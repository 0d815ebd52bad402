package bucket

import (
	"fmt"
	"testing"
)

func TestPackingEfficiency(t *testing.T) {
	// ~100k documents, log-normal lengths with mean ~400, S = 2048.
	lengths := logNormalLengths(100_000, 400, 1, 1<<20, 42)
	var sum int64
	for _, l := range lengths {
		sum += int64(l)
	}
	t.Logf("synthetic corpus: %d documents, mean length %.1f", len(lengths), float64(sum)/float64(len(lengths)))
	for _, split := range []bool{false, true} {
		t.Run(fmt.Sprintf("split=%v", split), func(t *testing.T) {
			p, err := NewPlan(lengths, "pack", 1, 0, Config{Policy: Packed, BatchSize: 8, SeqLen: 2048, SplitDocs: split})
			if err != nil {
				t.Fatal(err)
			}
			checkPlan(t, p, lengths)
			st := p.Stats()
			t.Logf("packed rows %d, real tokens %d, truncated %d, packing efficiency %.4f%%",
				st.PackedRows, st.RealTokens, st.TruncatedTokens, 100*st.PackingEfficiency)
			if st.PackingEfficiency < 0.98 {
				t.Fatalf("packing efficiency %.4f < 0.98", st.PackingEfficiency)
			}
			if split && st.TruncatedTokens != 0 {
				t.Fatalf("split_docs truncated %d tokens", st.TruncatedTokens)
			}
		})
	}
}

func TestPackedFirstFitDecreasing(t *testing.T) {
	// S = 10: FFD of 7,6,5,4,3,2,2,1 is [7,3] [6,4] [5,2,2,1].
	lengths := []uint32{2, 7, 1, 5, 4, 6, 3, 2}
	p, err := NewPlan(lengths, "ffd", 1, 0, Config{Policy: Packed, BatchSize: 1, SeqLen: 10})
	if err != nil {
		t.Fatal(err)
	}
	checkPlan(t, p, lengths)
	got := map[string]bool{}
	for g := range p.Len() {
		b := p.Batch(g)
		s := ""
		for _, pc := range b.Pieces {
			s += fmt.Sprint(pc.Len, " ")
		}
		got[s] = true
	}
	for _, want := range []string{"7 3 ", "6 4 ", "5 2 2 1 "} {
		if !got[want] {
			t.Fatalf("packed rows %v, want a row %q", got, want)
		}
	}
	if p.Len() != 3 {
		t.Fatalf("%d rows, want 3", p.Len())
	}
}

func TestPackedSplitAndTruncate(t *testing.T) {
	lengths := []uint32{25, 7, 3}
	for _, tc := range []struct {
		name      string
		cfg       Config
		wantRows  int
		truncated int64
	}{
		// 25 → 10: rows [10] [7,3].
		{"truncate", Config{Policy: Packed, BatchSize: 4, SeqLen: 10}, 2, 15},
		// Items 10,10,7,5,3: rows [10] [10] [7, 3 of the 5] [2 of the 5, 3].
		{"split", Config{Policy: Packed, BatchSize: 4, SeqLen: 10, SplitDocs: true}, 4, 0},
		// MaxLength first: 25 → 12 → 10+2 when split.
		{"maxlen-split", Config{Policy: Packed, BatchSize: 4, SeqLen: 10, MaxLength: 12, SplitDocs: true}, 3, 13},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p, err := NewPlan(lengths, "split", 1, 0, tc.cfg)
			if err != nil {
				t.Fatal(err)
			}
			checkPlan(t, p, lengths)
			st := p.Stats()
			if st.PackedRows != tc.wantRows || st.TruncatedTokens != tc.truncated {
				t.Fatalf("rows %d truncated %d, want %d and %d", st.PackedRows, st.TruncatedTokens, tc.wantRows, tc.truncated)
			}
		})
	}
}

func TestBinTree(t *testing.T) {
	b := newBinTree()
	if b.first(0) != -1 {
		t.Fatal("empty tree found a row")
	}
	// Grow past the initial size and compare with a linear scan.
	var rooms []int64
	r := newRNG(5)
	for i := range 5000 {
		room := int64(r.below(100))
		if got := b.add(room); got != i {
			t.Fatalf("add returned %d, want %d", got, i)
		}
		rooms = append(rooms, room)
		if i%7 == 0 {
			j := int(r.below(uint64(len(rooms))))
			rooms[j] = int64(r.below(100))
			b.set(j, rooms[j])
		}
		x := int64(r.below(110))
		want := -1
		for k, v := range rooms {
			if v >= x {
				want = k
				break
			}
		}
		if got := b.first(x); got != want {
			t.Fatalf("first(%d) = %d, want %d", x, got, want)
		}
	}
}
