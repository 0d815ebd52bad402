package loader_test

import (
	"testing"

	"github.com/gload/gload/bucket"
	"github.com/gload/gload/loader"
	"github.com/gload/gload/loader/client"
	"github.com/gload/gload/proto/gloadpb"
)

// TestElasticResume stops a 4×2 job after k batches per rank and resumes it
// with other world and worker counts: before ∪ after is the epoch, nothing
// repeated.
func TestElasticResume(t *testing.T) {
	dir := t.TempDir()
	lengths := genLengths(2000, 1, 200, 3)
	writeDataset(t, dir, lengths, 700, 100)
	for _, tr := range transports {
		if tr.network != "unix" {
			continue
		}
		t.Run(tr.name, func(t *testing.T) { testElasticResume(t, dir, lengths, tr) })
	}
}

func testElasticResume(t *testing.T, dir string, lengths []int, tr transport) {
	ts := startServer(t, loader.Config{Datasets: map[string]string{"d": dir}, ShmDir: tr.shmDir(t)}, "unix")
	c := dial(t, ts.addr)
	infos, err := c.Datasets(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name                string
		policy              *gloadpb.BatchPolicy
		w1, nw1, k, w2, nw2 int
		w3, nw3, k2         int
	}{
		{"bucketed 4x2 -> 3x3", &gloadpb.BatchPolicy{BatchSize: 8}, 4, 2, 5, 3, 3, 0, 0, 0},
		{"bucketed 4x2 -> 6x1 -> 2x4", &gloadpb.BatchPolicy{BatchSize: 8}, 4, 2, 7, 6, 1, 2, 4, 4},
		{"tokens 2x1 -> 5x2", &gloadpb.BatchPolicy{Policy: "tokens", TokenBudget: 2048}, 2, 1, 9, 5, 2, 0, 0, 0},
		{"packed 4x2 -> 1x3", &gloadpb.BatchPolicy{Policy: "packed", BatchSize: 2, SeqLen: 512}, 4, 2, 3, 1, 3, 0, 0, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			open := &gloadpb.Open{Dataset: "d", Seed: 11, Epoch: 1, Policy: tc.policy, Transport: tr.transport}
			seen := map[uint64]int{}
			// Segment 1: each rank reads k batches, its workers in turn.
			state := runSegment(t, c, open, nil, tc.w1, tc.nw1, tc.k, seen)
			if want := uint64(tc.k * tc.w1); state.Consumed != want {
				t.Fatalf("state after segment 1: consumed %d, want %d", state.Consumed, want)
			}
			if state.PlanWorld != uint32(tc.w1) {
				t.Fatalf("plan_world %d, want %d", state.PlanWorld, tc.w1)
			}
			if tc.w3 > 0 {
				state = runSegment(t, c, open, state, tc.w2, tc.nw2, tc.k2, seen)
				state = runSegment(t, c, open, state, tc.w3, tc.nw3, -1, seen)
			} else {
				runSegment(t, c, open, state, tc.w2, tc.nw2, -1, seen)
			}
			for g, n := range seen {
				if n != 1 {
					t.Fatalf("global batch %d delivered %d times", g, n)
				}
			}
			// The plan: everything up to the last segment's dropped tail.
			cfg := bucket.DefaultConfig()
			cfg.PlanWorld = tc.w1
			switch tc.policy.GetPolicy() {
			case "tokens":
				cfg.Policy, cfg.TokenBudget = bucket.Tokens, int(tc.policy.TokenBudget)
			case "packed":
				cfg.Policy, cfg.BatchSize, cfg.SeqLen = bucket.Packed, int(tc.policy.BatchSize), int(tc.policy.SeqLen)
			default:
				cfg.BatchSize = int(tc.policy.BatchSize)
			}
			plan := planFor(t, lengths, infos[0].Fingerprint, 11, 1, cfg)
			lastWorld := tc.w2
			if tc.w3 > 0 {
				lastWorld = tc.w3
			}
			if len(seen) < plan.Len()-lastWorld+1 || len(seen) > plan.Len() {
				t.Fatalf("%d distinct batches of %d (last world %d)", len(seen), plan.Len(), lastWorld)
			}
			for g := range len(seen) {
				if seen[uint64(g)] != 1 {
					t.Fatalf("batch %d missing: the epoch has a hole", g)
				}
			}
		})
	}
}

// runSegment runs world×workers consumers from state; each rank reads k
// batches (k < 0: to the end). It returns the state of the last batch read
// on rank 0 and records every global batch delivered.
func runSegment(t *testing.T, c *client.Client, base *gloadpb.Open, state *gloadpb.ResumeState, world, workers, k int, seen map[uint64]int) *gloadpb.ResumeState {
	t.Helper()
	var out *gloadpb.ResumeState
	for r := range world {
		streams := make([]*client.Stream, workers)
		for w := range workers {
			open := cloneOpen(base)
			open.Rank, open.WorldSize, open.Worker, open.NumWorkers = uint32(r), uint32(world), uint32(w), uint32(workers)
			open.Resume = state
			s, err := c.Stream(t.Context(), open)
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			streams[w] = s
		}
		var last *client.Stream
		for i := 0; k < 0 || i < k; i++ {
			s := streams[i%workers]
			b, err := s.Next(t.Context())
			if err != nil {
				break // io.EOF: the rank's share is done
			}
			seen[b.GlobalIndex]++
			b.Release()
			last = s
		}
		if r == 0 && last != nil {
			out = last.State()
		}
	}
	return out
}
