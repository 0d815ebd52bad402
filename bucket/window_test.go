package bucket

import (
	"fmt"
	"testing"
)

// Windowed plans deliver every row exactly once, read the blocks one after another, and are deterministic.
func TestShuffleWindowLocality(t *testing.T) {
	lengths := make([]uint32, 1000)
	r := newRNG(42)
	for i := range lengths {
		lengths[i] = uint32(1 + r.below(300))
	}
	for _, tc := range []struct {
		name string
		cfg  Config
	}{
		{"bucketed", Config{Policy: Bucketed, BatchSize: 8, MegaBatchMult: 4, ShuffleWindow: 100}},
		{"bucketed-warmup", Config{Policy: Bucketed, BatchSize: 8, ShuffleWindow: 100, WarmupShapes: true}},
		{"tokens", Config{Policy: Tokens, TokenBudget: 2048, ShuffleWindow: 64}},
		{"packed", Config{Policy: Packed, BatchSize: 4, SeqLen: 512, ShuffleWindow: 100}},
		{"packed-split", Config{Policy: Packed, BatchSize: 4, SeqLen: 128, SplitDocs: true, ShuffleWindow: 100}},
		{"window-larger-than-dataset", Config{Policy: Bucketed, BatchSize: 8, ShuffleWindow: 5000}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p, err := NewPlan(lengths, "fp", 1, 0, tc.cfg)
			if err != nil {
				t.Fatal(err)
			}
			w := tc.cfg.ShuffleWindow
			seen := map[int]int{}
			var blockOrder []int
			warm := 0
			if tc.cfg.WarmupShapes {
				warm = len(p.Shapes())
			}
			for g := 0; g < p.Len(); g++ {
				b := p.Batch(g)
				blocks := map[int]bool{}
				for _, pc := range b.Pieces {
					if pc.Start == 0 {
						seen[pc.Index]++
					}
					blocks[pc.Index/w] = true
				}
				limit := 1
				if tc.cfg.Policy == Packed {
					limit = 2
				}
				if g >= warm && len(blocks) > limit {
					t.Fatalf("batch %d holds rows of %d blocks: %v", g, len(blocks), blocks)
				}
				if g >= warm {
					for k := range blocks {
						if n := len(blockOrder); n == 0 || blockOrder[n-1] != k {
							blockOrder = append(blockOrder, k)
						}
					}
				}
			}
			for i := range lengths {
				if seen[i] != 1 {
					t.Fatalf("row %d delivered %d times", i, seen[i])
				}
			}
			// Each block is read in one stretch (it may reappear only right after itself, for packed batches
			// that straddle two blocks).
			visited := map[int]bool{}
			for i, k := range blockOrder {
				if visited[k] && !(tc.cfg.Policy == Packed && i >= 2 && blockOrder[i-2] == k) {
					t.Fatalf("block %d read again later: order %v", k, blockOrder)
				}
				visited[k] = true
			}
			q, _ := NewPlan(lengths, "fp", 1, 0, tc.cfg)
			if fmt.Sprint(batchesOf(p)) != fmt.Sprint(batchesOf(q)) {
				t.Fatal("same inputs, different plans")
			}
			e1, _ := NewPlan(lengths, "fp", 1, 1, tc.cfg)
			if tc.cfg.ShuffleWindow < len(lengths) && fmt.Sprint(batchesOf(p)) == fmt.Sprint(batchesOf(e1)) {
				t.Fatal("epoch 1 plans the same batches as epoch 0")
			}
		})
	}
}

func batchesOf(p *Plan) []Batch {
	out := make([]Batch, p.Len())
	for g := range out {
		out[g] = p.Batch(g)
	}
	return out
}
