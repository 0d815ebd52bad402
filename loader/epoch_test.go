package loader_test

import (
	"fmt"
	"testing"

	"github.com/gload/gload/bucket"
	"github.com/gload/gload/loader"
	"github.com/gload/gload/proto/gloadpb"
)

// expectRows returns, for the plan the server makes, the dataset rows of
// every global batch.
func planFor(t *testing.T, lengths []int, fp string, seed uint64, epoch int, cfg bucket.Config) *bucket.Plan {
	t.Helper()
	ls := make([]uint32, len(lengths))
	for i, l := range lengths {
		ls[i] = uint32(l)
	}
	p, err := bucket.NewPlan(ls, fp, seed, epoch, cfg)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// epochPlanFor is the plan the server makes for cfg (bucket.NewEpochPlan: exact or lazy as cfg.Planner says).
func epochPlanFor(t *testing.T, lengths []int, fp string, seed uint64, epoch int, cfg bucket.Config) bucket.EpochPlan {
	t.Helper()
	ls := make(bucket.SliceLengths, len(lengths))
	for i, l := range lengths {
		ls[i] = uint32(l)
	}
	p, err := bucket.NewEpochPlan(ls, fp, seed, epoch, cfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func TestEpochCoverage(t *testing.T) {
	dir := t.TempDir()
	lengths := genLengths(3000, 0, 300, 1)
	writeDataset(t, dir, lengths, 1100, 250)
	const world, workers = 4, 2
	cases := []struct {
		name   string
		policy *gloadpb.BatchPolicy
		cfg    func(c *bucket.Config)
	}{
		{"bucketed", &gloadpb.BatchPolicy{BatchSize: 16, PadId: -7}, func(c *bucket.Config) { c.BatchSize = 16 }},
		{"bucketed-maxlen-wrap", &gloadpb.BatchPolicy{BatchSize: 10, MaxLength: 100, Remainder: "wrap", PadMultiple: 8},
			func(c *bucket.Config) { c.BatchSize, c.MaxLength, c.Remainder, c.PadMultiple = 10, 100, bucket.Wrap, 8 }},
		{"tokens", &gloadpb.BatchPolicy{Policy: "tokens", TokenBudget: 4096, AutoBuckets: 4},
			func(c *bucket.Config) { c.Policy, c.TokenBudget, c.AutoBuckets = bucket.Tokens, 4096, 4 }},
		{"packed", &gloadpb.BatchPolicy{Policy: "packed", BatchSize: 4, SeqLen: 512, PositionStart: 1},
			func(c *bucket.Config) { c.Policy, c.BatchSize, c.SeqLen = bucket.Packed, 4, 512 }},
		{"packed-split", &gloadpb.BatchPolicy{Policy: "packed", BatchSize: 3, SeqLen: 256, SplitDocs: true},
			func(c *bucket.Config) { c.Policy, c.BatchSize, c.SeqLen, c.SplitDocs = bucket.Packed, 3, 256, true }},
	}
	for _, tr := range transports {
		network := tr.network + "-" + tr.name
		ts := startServer(t, loader.Config{Datasets: map[string]string{"d": dir}, ShmDir: tr.shmDir(t)}, tr.network)
		c := dial(t, ts.addr)
		infos, err := c.Datasets(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		fp := infos[0].Fingerprint
		for _, tc := range cases {
			t.Run(network+"/"+tc.name, func(t *testing.T) {
				cfg := bucket.DefaultConfig()
				cfg.PlanWorld = world
				tc.cfg(&cfg)
				plan := planFor(t, lengths, fp, 5, 2, cfg)
				open := &gloadpb.Open{Dataset: "d", Seed: 5, Epoch: 2, Policy: tc.policy, Prefetch: 3, Transport: tr.transport}
				ranks := consumers(t, c, open, world, workers)
				per := plan.PerRank(0, world)
				seen := map[int]int{}
				for r, bs := range ranks {
					if len(bs) != per {
						t.Fatalf("rank %d got %d batches, want %d", r, len(bs), per)
					}
					for k, g := range bs {
						if want := uint64(k); g.rankStep != want {
							t.Fatalf("rank %d batch %d: rank_step %d", r, k, g.rankStep)
						}
						if want := (r + k*world) % plan.Len(); int(g.global) != want {
							t.Fatalf("rank %d batch %d: global %d, want %d", r, k, g.global, want)
						}
						pb := plan.Batch(int(g.global))
						if g.rows != pb.Rows || g.length != pb.Length {
							t.Fatalf("batch %d: shape %d×%d, plan %d×%d", g.global, g.rows, g.length, pb.Rows, pb.Length)
						}
						if err := checkAny(g, pb, lengths, tc.policy); err != nil {
							t.Fatal(err)
						}
						for _, p := range pb.Pieces {
							if p.Start == 0 {
								seen[p.Index]++
							}
						}
					}
				}
				// Every row of every delivered batch exactly once (wrap: the
				// wrapped batches are the only repeats).
				delivered := per * world
				wrapped := max(delivered-plan.Len(), 0)
				want := map[int]int{}
				for q := range delivered {
					for _, p := range plan.Batch(q % plan.Len()).Pieces {
						if p.Start == 0 {
							want[p.Index]++
						}
					}
				}
				if len(seen) != len(want) {
					t.Fatalf("%d distinct rows, want %d", len(seen), len(want))
				}
				repeats := 0
				for row, n := range want {
					if seen[row] != n {
						t.Fatalf("row %d seen %d times, want %d", row, seen[row], n)
					}
					repeats += n - 1
				}
				if wrapped == 0 && repeats != 0 {
					t.Fatalf("%d repeated rows without wrap", repeats)
				}
				// Delivered rows plus the rows of the dropped remainder are the
				// whole dataset.
				all := map[int]bool{}
				for row := range seen {
					all[row] = true
				}
				dropped := 0
				for q := delivered; q < plan.Len(); q++ {
					for _, p := range plan.Batch(q).Pieces {
						all[p.Index] = true
						dropped++
					}
				}
				if len(all) != len(lengths) {
					t.Fatalf("delivered and dropped rows cover %d of %d rows", len(all), len(lengths))
				}
				if dropped > 0 {
					t.Logf("%d batches dropped (%d pieces) of %d", plan.Len()-delivered, dropped, plan.Len())
				}
			})
		}
	}
}

// checkAny checks a received batch against its plan batch, cell by cell.
func checkAny(g got, pb bucket.Batch, lengths []int, pol *gloadpb.BatchPolicy) error {
	if pol.GetPolicy() != "packed" {
		if len(g.pos) != 0 || len(g.cu) != 0 {
			return fmt.Errorf("batch %d: position_ids/cu_seqlens on a %q batch", g.global, pol.GetPolicy())
		}
		for r, p := range pb.Pieces {
			if int(g.index[r]) != p.Index {
				return fmt.Errorf("batch %d row %d: index %d, plan %d", g.global, r, g.index[r], p.Index)
			}
		}
		return checkBatch(g, lengths, int(pol.GetMaxLength()), pol.GetPadId())
	}
	return checkPacked(g, pb, pol.GetPositionStart(), pol.GetPadId())
}

func checkPacked(g got, pb bucket.Batch, posStart, pad int32) error {
	L := g.length
	if len(g.index) != len(pb.Pieces) || len(g.pos) != g.rows*L {
		return fmt.Errorf("batch %d: %d index entries (plan %d pieces), %d positions", g.global, len(g.index), len(pb.Pieces), len(g.pos))
	}
	cu := []int32{0}
	acc := int32(0)
	for r := range g.rows {
		off := 0
		for k := pb.RowStart[r]; k < pb.RowStart[r+1]; k++ {
			p := pb.Pieces[k]
			if int(g.index[k]) != p.Index {
				return fmt.Errorf("batch %d piece %d: index %d, plan %d", g.global, k, g.index[k], p.Index)
			}
			for j := range p.Len {
				if v, w := g.ids[r*L+off+j], tokenOf(p.Index, p.Start+j); v != w {
					return fmt.Errorf("batch %d row %d col %d: token %d, want %d", g.global, r, off+j, v, w)
				}
				if v, w := g.pos[r*L+off+j], posStart+int32(j); v != w {
					return fmt.Errorf("batch %d row %d col %d: position %d, want %d", g.global, r, off+j, v, w)
				}
			}
			off += p.Len
			if p.Len > 0 {
				acc += int32(p.Len)
				cu = append(cu, acc)
			}
		}
		if int(g.lengths[r]) != off {
			return fmt.Errorf("batch %d row %d: length %d, want %d", g.global, r, g.lengths[r], off)
		}
		for j := off; j < L; j++ {
			if g.ids[r*L+j] != pad || g.pos[r*L+j] != posStart+int32(j-off) {
				return fmt.Errorf("batch %d row %d col %d: padding token %d position %d", g.global, r, j, g.ids[r*L+j], g.pos[r*L+j])
			}
		}
		if off < L {
			acc += int32(L - off)
			cu = append(cu, acc)
		}
	}
	if len(cu) != len(g.cu) {
		return fmt.Errorf("batch %d: cu_seqlens %v, want %v", g.global, g.cu, cu)
	}
	for i := range cu {
		if cu[i] != g.cu[i] {
			return fmt.Errorf("batch %d: cu_seqlens %v, want %v", g.global, g.cu, cu)
		}
	}
	return nil
}
