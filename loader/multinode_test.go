package loader_test

import (
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/gload/gload/bucket"
	"github.com/gload/gload/loader"
	"github.com/gload/gload/loader/client"
	"github.com/gload/gload/loader/dataset"
	"github.com/gload/gload/proto/gloadpb"
)

// TestTwoNodes is the multi-node set-up of DESIGN "Beyond one machine": one
// server per node, each over its own copy of the dataset (copied with cp -r,
// so every file has new times and inodes), 4 ranks × 2 DataLoader workers,
// ranks 0–1 on node A and 2–3 on node B. Both servers must report the same
// fingerprint and plan hash; every row comes at most once per epoch and only
// the remainder the plan drops is missing; every rank gets the same number of
// batches. Then the job stops at step k and resumes with 3 ranks on node B
// only: nothing lost or repeated.
func TestTwoNodes(t *testing.T) {
	dirA := filepath.Join(t.TempDir(), "ds")
	if err := os.Mkdir(dirA, 0o755); err != nil {
		t.Fatal(err)
	}
	lengths := genLengths(1500, 1, 300, 21)
	writeDataset(t, dirA, lengths, 400, 64)
	time.Sleep(10 * time.Millisecond) // the copy's times differ from the original's
	dirB := filepath.Join(t.TempDir(), "ds-copy")
	if b, err := exec.Command("cp", "-r", dirA, dirB).CombinedOutput(); err != nil {
		t.Fatalf("cp -r: %v\n%s", err, b)
	}
	nodeA := startServer(t, loader.Config{Datasets: map[string]string{"d": dirA}, NoGPUWatch: true}, "unix")
	nodeB := startServer(t, loader.Config{Datasets: map[string]string{"d": dirB}, NoGPUWatch: true}, "tcp")
	cA, cB := dial(t, nodeA.addr), dial(t, nodeB.addr)

	for _, tc := range []struct {
		name   string
		policy *gloadpb.BatchPolicy
		cfg    func(c *bucket.Config)
	}{
		{"bucketed", &gloadpb.BatchPolicy{BatchSize: 6}, func(c *bucket.Config) { c.BatchSize = 6 }},
		{"packed", &gloadpb.BatchPolicy{Policy: "packed", BatchSize: 2, SeqLen: 512}, func(c *bucket.Config) {
			c.Policy, c.BatchSize, c.SeqLen = bucket.Packed, 2, 512
		}},
		// The lazy planners, asked for on a small dataset (planner "lazy"): the same guarantees.
		{"bucketed lazy", &gloadpb.BatchPolicy{BatchSize: 6, Planner: "lazy"}, func(c *bucket.Config) {
			c.BatchSize, c.Planner = 6, bucket.PlannerLazy
		}},
		{"packed lazy", &gloadpb.BatchPolicy{Policy: "packed", BatchSize: 2, SeqLen: 512, Planner: "lazy"}, func(c *bucket.Config) {
			c.Policy, c.BatchSize, c.SeqLen, c.Planner = bucket.Packed, 2, 512, bucket.PlannerLazy
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			open := &gloadpb.Open{Dataset: "d", Seed: 5, Epoch: 2, Policy: tc.policy}

			// Before step 0, a launcher checks that every node plans the same epoch.
			var fps, hashes []string
			for _, c := range []*client.Client{cA, cB} {
				h, err := c.Health(t.Context())
				if err != nil || len(h.DatasetInfo) != 1 {
					t.Fatalf("health: %v, %v", h, err)
				}
				o := cloneOpen(open)
				o.WorldSize = 4
				p, err := c.Plan(t.Context(), o)
				if err != nil {
					t.Fatal(err)
				}
				if p.Fingerprint != h.DatasetInfo[0].Fingerprint {
					t.Fatalf("plan fingerprint %s, health %s", p.Fingerprint, h.DatasetInfo[0].Fingerprint)
				}
				fps, hashes = append(fps, p.Fingerprint), append(hashes, p.PlanHash)
			}
			if fps[0] != fps[1] || hashes[0] != hashes[1] || len(hashes[0]) != 32 {
				t.Fatalf("nodes disagree: fingerprints %v, plan hashes %v", fps, hashes)
			}
			// gload inspect --plan computes the same identity offline.
			ds, err := dataset.Open(dirB, dataset.OpenOptions{})
			if err != nil {
				t.Fatal(err)
			}
			id, err := loader.EpochPlanIdentity(ds, tc.policy, 5, 2, 4)
			ds.Close()
			if err != nil || id.Fingerprint != fps[0] || id.PlanHash != hashes[0] {
				t.Fatalf("offline plan identity %+v, %v; servers say %s %s", id, err, fps[0], hashes[0])
			}

			cfg := bucket.DefaultConfig()
			tc.cfg(&cfg)
			cfg.PlanWorld = 4
			plan := epochPlanFor(t, lengths, fps[0], 5, 2, cfg)
			if _, exact := plan.(*bucket.Plan); exact != (cfg.Planner != bucket.PlannerLazy) {
				t.Fatalf("planner %q planned with %T", cfg.Planner, plan)
			}
			kept := plan.Len() / 4 * 4 // remainder "drop": the tail that does not divide among 4 ranks

			// A whole epoch, ranks 0–1 on A and 2–3 on B.
			nodes := []*client.Client{cA, cA, cB, cB}
			per, _ := ranks(t, nodes, open, nil, 2, -1)
			checkEpoch(t, per, plan, kept, len(lengths))
			for r := range per {
				if len(per[r]) != len(per[0]) {
					t.Fatalf("rank %d got %d batches, rank 0 %d", r, len(per[r]), len(per[0]))
				}
			}

			// Stop at step k, resume on node B only with 3 ranks.
			const k = 4
			first, state := ranks(t, nodes, open, nil, 2, k)
			if state.Consumed != 4*k || state.Fingerprint != fps[0] {
				t.Fatalf("state after step %d: %v", k, state)
			}
			rest, _ := ranks(t, []*client.Client{cB, cB, cB}, open, state, 2, -1)
			checkEpoch(t, append(first, rest...), plan, plan.Len()-(plan.Len()-4*k)%3, len(lengths))
		})
	}
}

// ranks runs one rank per client, each with `workers` streams read in turn as
// torch reads DataLoader workers, from state; each rank stops after k batches
// (k < 0: at the end of its share). It returns every rank's batches and rank
// 0's state after its last one.
func ranks(t *testing.T, nodes []*client.Client, base *gloadpb.Open, state *gloadpb.ResumeState, workers, k int) ([][]got, *gloadpb.ResumeState) {
	t.Helper()
	world := len(nodes)
	per := make([][]got, world)
	states := make([]*gloadpb.ResumeState, world)
	errs := make([]error, world)
	var wg sync.WaitGroup
	for r, c := range nodes {
		wg.Add(1)
		go func() {
			defer wg.Done()
			streams := make([]*client.Stream, workers)
			for w := range workers {
				open := cloneOpen(base)
				open.Rank, open.WorldSize, open.Worker, open.NumWorkers = uint32(r), uint32(world), uint32(w), uint32(workers)
				open.Resume, open.ClientId = state, fmt.Sprintf("rank%d-w%d", r, w)
				s, err := c.Stream(t.Context(), open)
				if err != nil {
					errs[r] = err
					return
				}
				defer s.Close()
				streams[w] = s
			}
			for i := 0; k < 0 || i < k; i++ {
				s := streams[i%workers]
				b, err := s.Next(t.Context())
				if errors.Is(err, io.EOF) {
					break
				}
				if err != nil {
					errs[r] = fmt.Errorf("rank %d: %w", r, err)
					return
				}
				per[r] = append(per[r], copyBatch(b))
				b.Release()
				states[r] = s.State()
			}
		}()
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	return per, states[0]
}

// checkEpoch: the delivered global batches are exactly 0..want-1, each once,
// with the plan's rows; no dataset row comes twice, and a row is missing only
// if the plan puts it in a batch past want.
func checkEpoch(t *testing.T, per [][]got, plan bucket.EpochPlan, want, rows int) {
	t.Helper()
	seenBatch := map[uint64]bool{}
	seenRow := make([]int, rows)
	for _, bs := range per {
		for _, b := range bs {
			if seenBatch[b.global] {
				t.Fatalf("global batch %d delivered twice", b.global)
			}
			seenBatch[b.global] = true
			pb := plan.Batch(int(b.global))
			if len(pb.Pieces) != len(b.index) {
				t.Fatalf("batch %d: %d pieces, the plan has %d", b.global, len(b.index), len(pb.Pieces))
			}
			for i, row := range b.index {
				if int(row) != pb.Pieces[i].Index {
					t.Fatalf("batch %d piece %d: row %d, the plan says %d", b.global, i, row, pb.Pieces[i].Index)
				}
				seenRow[row]++
			}
		}
	}
	if len(seenBatch) != want {
		t.Fatalf("%d global batches delivered, want %d", len(seenBatch), want)
	}
	inTail := make([]bool, rows)
	for g := want; g < plan.Len(); g++ {
		for _, p := range plan.Batch(g).Pieces {
			inTail[p.Index] = true
		}
	}
	for row, n := range seenRow {
		switch {
		case n > 1:
			t.Fatalf("row %d delivered %d times", row, n)
		case n == 0 && !inTail[row]:
			t.Fatalf("row %d never delivered", row)
		}
	}
}
