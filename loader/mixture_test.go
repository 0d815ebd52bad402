package loader_test

import (
	"fmt"
	"math"
	"net/http/httptest"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/gload/gload/loader"
	"github.com/gload/gload/loader/dataset"
	"github.com/gload/gload/proto/gloadpb"
)

// mixBase is the token base of mixture test source s: source s's row i token
// j is mixBase[s] + tokenOf(i, j), so every cell says where it came from.
var mixBase = []int32{0, 600_000_000, 1_200_000_000}

// writeSourceDataset writes a dataset like writeDataset with tokens offset by
// base and the given tokenizer hash.
func writeSourceDataset(t testing.TB, dir string, lengths []int, base int32, tokenizer string) {
	t.Helper()
	opts := dataset.WriterOptions{RowsPerBatch: 100, TokenizerHash: tokenizer}
	var infos []dataset.ShardInfo
	for start := 0; start < len(lengths); start += 1500 {
		w, err := dataset.CreateShard(dir, len(infos), opts)
		if err != nil {
			t.Fatal(err)
		}
		for i := start; i < min(start+1500, len(lengths)); i++ {
			ids := make([]int32, lengths[i])
			for j := range ids {
				ids[j] = base + tokenOf(i, j)
			}
			if err := w.Append(ids, nil); err != nil {
				t.Fatal(err)
			}
		}
		info, err := w.Close()
		if err != nil {
			t.Fatal(err)
		}
		infos = append(infos, info)
	}
	if err := dataset.Finalize(dir, infos, opts); err != nil {
		t.Fatal(err)
	}
}

// mixFixture is three datasets of very different sizes (web is 100× math)
// and length distributions, and a server with the mixture pretrain =
// web:0.6, code:0.3, math:0.1 (plus "other", a dataset of another tokenizer).
type mixFixture struct {
	ts      *testServer
	lengths [][]int
	names   []string
	dirs    map[string]string // dataset name → directory
}

func newMixFixture(t *testing.T, shmDir string) *mixFixture {
	t.Helper()
	return newMixFixtureWith(t, shmDir, nil)
}

// newMixFixtureWith is newMixFixture with the server's config changed by edit (when not nil).
func newMixFixtureWith(t *testing.T, shmDir string, edit func(*loader.Config)) *mixFixture {
	t.Helper()
	f := &mixFixture{
		names:   []string{"web", "code", "math"},
		lengths: [][]int{genLengths(4000, 1, 300, 21), genLengths(1200, 200, 900, 22), genLengths(40, 5, 30, 23)},
	}
	dirs := map[string]string{}
	for s, n := range f.names {
		dirs[n] = t.TempDir()
		writeSourceDataset(t, dirs[n], f.lengths[s], mixBase[s], "tok-a")
	}
	dirs["other"] = t.TempDir()
	writeSourceDataset(t, dirs["other"], genLengths(50, 1, 20, 24), 0, "tok-b")
	f.dirs = dirs
	cfg := loader.Config{Datasets: dirs, ShmDir: shmDir, Mixtures: map[string]loader.MixtureSpec{
		"pretrain": {Sources: []loader.MixtureWeight{{Dataset: "web", Weight: 0.6}, {Dataset: "code", Weight: 0.3}, {Dataset: "math", Weight: 0.1}}},
	}}
	if edit != nil {
		edit(&cfg)
	}
	f.ts = startServer(t, cfg, "unix")
	return f
}

// sourceOf splits a mixture index entry into (source, row) by offsets.
func sourceOf(offs []uint64, v int64) (int, int) {
	s := 0
	for s+1 < len(offs) && uint64(v) >= offs[s+1] {
		s++
	}
	return s, int(v - int64(offs[s]))
}

// checkMixBatch checks every token of a batch against its source and row.
func (f *mixFixture) checkMixBatch(g got, offs []uint64, packed bool) error {
	if packed {
		// Segments of cu_seqlens are documents (in index order) and each
		// row's padding tail.
		k := 0
		for seg := 0; seg+1 < len(g.cu); seg++ {
			lo, hi := int(g.cu[seg]), int(g.cu[seg+1])
			if k < len(g.index) {
				s, row := sourceOf(offs, g.index[k])
				want := min(f.lengths[s][row], g.length)
				if hi-lo == want && g.ids[lo] == mixBase[s]+tokenOf(row, 0) {
					for j := lo; j < hi; j++ {
						if w := mixBase[s] + tokenOf(row, j-lo); g.ids[j] != w {
							return fmt.Errorf("batch %d doc %d (%s row %d) token %d: %d, want %d", g.global, k, f.names[s], row, j-lo, g.ids[j], w)
						}
					}
					k++
					continue
				}
			}
			if hi/g.length != lo/g.length && hi%g.length != 0 {
				return fmt.Errorf("batch %d: segment %d [%d,%d) is neither the next document nor a row's padding", g.global, seg, lo, hi)
			}
		}
		if k != len(g.index) {
			return fmt.Errorf("batch %d: %d of %d documents found in the rows", g.global, k, len(g.index))
		}
		return nil
	}
	for r := range g.rows {
		s, row := sourceOf(offs, g.index[r])
		want := min(f.lengths[s][row], g.length)
		if int(g.lengths[r]) != want {
			return fmt.Errorf("batch %d row %d (%s row %d): length %d, want %d", g.global, r, f.names[s], row, g.lengths[r], want)
		}
		for j := range want {
			if v, w := g.ids[r*g.length+j], mixBase[s]+tokenOf(row, j); v != w {
				return fmt.Errorf("batch %d row %d col %d: token %d, want %d (%s row %d)", g.global, r, j, v, w, f.names[s], row)
			}
		}
	}
	return nil
}

// TestMixtureServe runs the mixture under every policy with 4 ranks × 2
// workers: equal batch counts, every token right, the epoch's shares as
// planned and within the bound over windows, no row of a source repeated
// before that source wrapped, and per-source /metrics.
func TestMixtureServe(t *testing.T) {
	for _, tr := range transports {
		if tr.network != "unix" {
			continue
		}
		t.Run(tr.name, func(t *testing.T) {
			f := newMixFixture(t, tr.shmDir(t))
			c := dial(t, f.ts.addr)
			for _, tc := range []struct {
				name   string
				open   *gloadpb.Open
				bound  int // rows off the share over any window of consecutive batches (-1: not checked)
				tokens bool
			}{
				{"bucketed", &gloadpb.Open{Dataset: "pretrain", Policy: &gloadpb.BatchPolicy{BatchSize: 16}}, 2, false},
				{"bucketed tokens", &gloadpb.Open{Dataset: "mix", Policy: &gloadpb.BatchPolicy{BatchSize: 16}, MixBy: "tokens",
					Mixture: []*gloadpb.MixtureSource{{Dataset: "web", Weight: 0.6}, {Dataset: "code", Weight: 0.3}, {Dataset: "math", Weight: 0.1}}}, -1, true},
				{"token budget", &gloadpb.Open{Dataset: "pretrain", Policy: &gloadpb.BatchPolicy{Policy: "tokens", TokenBudget: 8192}}, 2, false},
				{"packed", &gloadpb.Open{Dataset: "pretrain", Policy: &gloadpb.BatchPolicy{Policy: "packed", BatchSize: 4, SeqLen: 1024, MegaBatchMult: 2}}, -1, false},
				{"single-source batches", &gloadpb.Open{Dataset: "one", Policy: &gloadpb.BatchPolicy{BatchSize: 16}, SingleSourceBatches: true,
					Mixture: []*gloadpb.MixtureSource{{Dataset: "web", Weight: 0.6}, {Dataset: "code", Weight: 0.3}, {Dataset: "math", Weight: 0.1}}}, -1, false},
			} {
				t.Run(tc.name, func(t *testing.T) {
					open := tc.open
					open.Seed, open.Epoch, open.Transport = 5, 0, tr.transport // epoch 0: every source starts a pass (epochs that start mid-pass: bucket tests)
					plan, err := c.Plan(t.Context(), open)
					if err != nil {
						t.Fatal(err)
					}
					if !slices.Equal(plan.Sources, f.names) {
						t.Fatalf("sources %v, want %v", plan.Sources, f.names)
					}
					offs := plan.SourceOffsets
					ranks := consumers(t, c, open, 4, 2)
					packed := open.Policy.Policy == "packed"
					byGlobal := map[uint64]got{}
					for r, bs := range ranks {
						if len(bs) != len(ranks[0]) {
							t.Fatalf("rank %d got %d batches, rank 0 %d", r, len(bs), len(ranks[0]))
						}
						for _, g := range bs {
							if err := f.checkMixBatch(g, offs, packed); err != nil {
								t.Fatal(err)
							}
							byGlobal[g.global] = g
						}
					}
					n := len(byGlobal)
					if n != 4*len(ranks[0]) || n < int(plan.GlobalBatches)-3 {
						t.Fatalf("%d distinct batches of %d", n, plan.GlobalBatches)
					}
					// Per-batch source counts in global order.
					counts := make([][3]int64, n)
					delivered := make([]map[int]int, 3)
					for s := range delivered {
						delivered[s] = map[int]int{}
					}
					for g := range n {
						b, ok := byGlobal[uint64(g)]
						if !ok {
							t.Fatalf("global batch %d missing", g)
						}
						first, _ := sourceOf(offs, b.index[0])
						for k, v := range b.index {
							s, row := sourceOf(offs, v)
							if open.SingleSourceBatches && s != first {
								t.Fatalf("batch %d mixes %s and %s", g, f.names[first], f.names[s])
							}
							delivered[s][row]++
							if tc.tokens {
								if packed {
									counts[g][s] += int64(b.cu[k+1] - b.cu[k])
								} else {
									counts[g][s] += int64(b.lengths[k])
								}
							} else {
								counts[g][s]++
							}
						}
					}
					share := []float64{0.6, 0.3, 0.1}
					var all [3]int64
					var total int64
					for _, c := range counts {
						for s, v := range c {
							all[s] += v
							total += v
						}
					}
					for s := range share {
						got := float64(all[s]) / float64(total)
						// Up to 3 batches of the epoch are dropped (4 ranks).
						slack := 3.0 * 16 / float64(total)
						if tc.tokens {
							slack = 0.001 + 3*16*300/float64(total)
						}
						if math.Abs(got-share[s]) > 0.001+slack {
							t.Errorf("%s: %.4f of the epoch, want %.1f", f.names[s], got, share[s])
						}
					}
					if tc.bound >= 0 {
						for _, w := range []int{1, 4, 32, n} {
							if e := windowError(counts, share, w); e > float64(tc.bound) {
								t.Errorf("window of %d batches: %.2f rows off (bound %d)", w, e, tc.bound)
							}
						}
					}
					// No repeats before a wrap: a source planned for c rows of n
					// (from the start of a pass) delivers each at most ⌈c/n⌉
					// times and, once it delivered n, all of them.
					for s := range delivered {
						var c int
						for _, k := range delivered[s] {
							c += k
						}
						nrows := len(f.lengths[s])
						planned := int(plan.Shares[s].Rows) // the epoch's rows of s, before dropped batches
						most := (planned + nrows - 1) / nrows
						for row, k := range delivered[s] {
							if k > most {
								t.Fatalf("%s row %d delivered %d times (%d rows delivered of %d)", f.names[s], row, k, c, nrows)
							}
						}
						if c >= nrows && len(delivered[s]) != nrows {
							t.Fatalf("%s: %d distinct rows after %d deliveries of %d rows", f.names[s], len(delivered[s]), c, nrows)
						}
					}
				})
			}
			// /metrics carries per-source counts.
			rec := httptest.NewRecorder()
			f.ts.srv.MetricsHandler().ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
			body := rec.Body.String()
			for _, n := range f.names {
				re := regexp.MustCompile(`gload_mixture_source_rows_total\{dataset="pretrain",source="` + n + `"\} (\d+)`)
				m := re.FindStringSubmatch(body)
				if m == nil {
					t.Fatalf("no per-source rows for %s in /metrics", n)
				}
				if v, _ := strconv.Atoi(m[1]); v == 0 {
					t.Fatalf("/metrics: 0 rows of %s", n)
				}
			}
		})
	}
}

// windowError is the largest |count − share·total| over windows of w
// consecutive batches.
func windowError(counts [][3]int64, share []float64, w int) float64 {
	var worst float64
	for g0 := 0; g0+w <= len(counts); g0++ {
		var sum [3]int64
		var all int64
		for _, c := range counts[g0 : g0+w] {
			for s, v := range c {
				sum[s] += v
				all += v
			}
		}
		for s := range share {
			worst = max(worst, math.Abs(float64(sum[s])-share[s]*float64(all)))
		}
	}
	return worst
}

// TestMixtureResume kills a 4-rank job at step k and resumes it with 3
// ranks: every batch after the resume is the uninterrupted run's batch of the
// same global index, and before ∪ after is the epoch with nothing repeated.
func TestMixtureResume(t *testing.T) {
	f := newMixFixture(t, t.TempDir())
	c := dial(t, f.ts.addr)
	for _, policy := range []*gloadpb.BatchPolicy{
		{BatchSize: 8},
		{Policy: "packed", BatchSize: 2, SeqLen: 1024},
	} {
		t.Run(policy.GetPolicy()+"x", func(t *testing.T) {
			open := &gloadpb.Open{Dataset: "pretrain", Seed: 9, Epoch: 2, Policy: policy}
			full := map[uint64]got{}
			for _, bs := range consumers(t, c, open, 4, 2) {
				for _, g := range bs {
					full[g.global] = g
				}
			}
			const k = 5
			seen := map[uint64]int{}
			state := runSegment(t, c, open, nil, 4, 2, k, seen)
			if state.Consumed != 4*k {
				t.Fatalf("consumed %d, want %d", state.Consumed, 4*k)
			}
			resumed := cloneOpen(open)
			resumed.Resume = state
			after := consumers(t, c, resumed, 3, 2)
			for r, bs := range after {
				if len(bs) != len(after[0]) {
					t.Fatalf("rank %d: %d batches, rank 0 %d", r, len(bs), len(after[0]))
				}
				for _, g := range bs {
					seen[g.global]++
					want, ok := full[g.global]
					if !ok {
						continue // beyond the 4-rank run's dropped tail
					}
					if !slices.Equal(g.ids, want.ids) || !slices.Equal(g.index, want.index) {
						t.Fatalf("resumed batch %d differs from the uninterrupted run's", g.global)
					}
				}
			}
			for g, n := range seen {
				if n != 1 {
					t.Fatalf("global batch %d delivered %d times", g, n)
				}
			}
			if len(seen) < len(full)-3 {
				t.Fatalf("%d batches before and after the resume, the epoch has %d", len(seen), len(full))
			}
		})
	}
}

// TestMixtureRefused covers the bad cases: each error names what is wrong.
func TestMixtureRefused(t *testing.T) {
	f := newMixFixture(t, t.TempDir())
	c := dial(t, f.ts.addr)
	mix := func(w ...any) []*gloadpb.MixtureSource {
		var out []*gloadpb.MixtureSource
		for i := 0; i < len(w); i += 2 {
			out = append(out, &gloadpb.MixtureSource{Dataset: w[i].(string), Weight: w[i+1].(float64)})
		}
		return out
	}
	pol := &gloadpb.BatchPolicy{BatchSize: 8}
	// A state saved under weights 0.6/0.3/0.1 …
	_, state, _, err := pullAll(t.Context(), c, &gloadpb.Open{Dataset: "pretrain", Policy: pol}, 3)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		open *gloadpb.Open
		code codes.Code
		msg  string
	}{
		{"unknown source", &gloadpb.Open{Mixture: mix("web", 0.5, "chat", 0.5)}, codes.NotFound,
			`open.mixture[1]: dataset "chat" is not served here`},
		{"tokenizers differ", &gloadpb.Open{Mixture: mix("web", 0.5, "other", 0.5)}, codes.FailedPrecondition,
			`open.mixture: sources "web" (tokenizer tok-a) and "other" (tokenizer tok-b) were tokenized differently`},
		{"all zero", &gloadpb.Open{Mixture: mix("web", 0.0, "code", 0.0)}, codes.InvalidArgument,
			"open.mixture: weights sum to 0; at least one must be > 0"},
		{"negative", &gloadpb.Open{Mixture: mix("web", 1.0, "code", -1.0)}, codes.InvalidArgument,
			`open.mixture: source "code": weight -1 must be a finite number >= 0`},
		{"mix_by", &gloadpb.Open{Mixture: mix("web", 1.0), MixBy: "bytes"}, codes.InvalidArgument,
			`open.mixture.mix_by: unknown value "bytes"`},
		{"settings of a server mixture", &gloadpb.Open{Dataset: "pretrain", MixBy: "tokens"}, codes.InvalidArgument,
			`mixture "pretrain" is defined by the server`},
		{"unknown mixture", &gloadpb.Open{Dataset: "nope"}, codes.NotFound, `dataset: "nope" is not served here; this server serves: code, math, other, web, pretrain`},
		{"weights changed on resume", &gloadpb.Open{Dataset: "pretrain", Mixture: mix("web", 0.5, "code", 0.4, "math", 0.1), Resume: state}, codes.FailedPrecondition,
			"resume.fingerprint: the state was saved under another mixture"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tc.open.Policy = pol
			_, err := c.Plan(t.Context(), tc.open)
			st := status.Convert(err)
			if err == nil || st.Code() != tc.code || !strings.Contains(st.Message(), tc.msg) {
				t.Fatalf("error %v, want %v containing %q", err, tc.code, tc.msg)
			}
		})
	}
	// The same weights sent by the client are the server's mixture: the
	// state resumes; normalisation makes 6:3:1 the same; weight 0 leaves a
	// source out; the override mixes different tokenizers.
	for _, tc := range []struct {
		name   string
		open   *gloadpb.Open
		noMath bool
	}{
		{"same weights resume", &gloadpb.Open{Dataset: "pretrain", Mixture: mix("web", 0.6, "code", 0.3, "math", 0.1), Resume: state}, false},
		{"normalised", &gloadpb.Open{Mixture: mix("web", 6.0, "code", 3.0, "math", 1.0), Resume: state}, false},
		{"weight 0", &gloadpb.Open{Mixture: mix("web", 0.7, "code", 0.3, "math", 0.0)}, true},
		{"override", &gloadpb.Open{Mixture: mix("web", 0.5, "other", 0.5), AllowTokenizerMismatch: true}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tc.open.Policy = pol
			bs, _, opened, err := pullAll(t.Context(), c, tc.open, -1)
			if err != nil {
				t.Fatal(err)
			}
			if len(bs) == 0 {
				t.Fatal("no batches")
			}
			for _, b := range bs {
				for _, v := range b.index {
					if s, _ := sourceOf(opened.SourceOffsets, v); tc.noMath && s == 2 {
						t.Fatal("a row of the weight-0 source was delivered")
					}
				}
			}
		})
	}
}

// TestMixtureLazy serves a mixture epoch above bucket.LazyThreshold slots (a lazy mixture plan): the plan and its
// hash come at once, batches carry the right tokens of the right sources, ranks split the epoch, and a resume on
// another world size continues it.
func TestMixtureLazy(t *testing.T) {
	const slots = 1<<27 + 5000
	f := newMixFixtureWith(t, t.TempDir(), func(c *loader.Config) {
		c.MaxMixtureRows = 1 << 28
		c.Mixtures["huge"] = loader.MixtureSpec{EpochSamples: slots,
			Sources: []loader.MixtureWeight{{Dataset: "web", Weight: 0.6}, {Dataset: "code", Weight: 0.3}, {Dataset: "math", Weight: 0.1}}}
	})
	c := dial(t, f.ts.addr)
	open := &gloadpb.Open{Dataset: "huge", Seed: 4, Epoch: 1, Policy: &gloadpb.BatchPolicy{BatchSize: 8}, WorldSize: 2}
	plan, err := c.Plan(t.Context(), open)
	if err != nil {
		t.Fatal(err)
	}
	if plan.GlobalBatches != (slots+7)/8 || plan.PlanHash == "" || len(plan.Shares) != 3 {
		t.Fatalf("plan: %d global batches (want %d), hash %q, %d shares", plan.GlobalBatches, (slots+7)/8, plan.PlanHash, len(plan.Shares))
	}
	if len(plan.Shapes) == 0 {
		t.Fatal("no shapes")
	}
	var rows uint64
	for i, sh := range plan.Shares {
		rows += sh.Rows
		if sh.Start != sh.Rows {
			t.Fatalf("share %d: starts at %d, epoch 1 of %d rows an epoch", i, sh.Start, sh.Rows)
		}
	}
	if rows != slots {
		t.Fatalf("shares sum to %d rows, want %d", rows, slots)
	}
	seen := map[uint64]int{}
	for r := range 2 {
		o := cloneOpen(open)
		o.Rank = uint32(r)
		bs, _, opened, err := pullAll(t.Context(), c, o, 40)
		if err != nil || len(bs) != 40 {
			t.Fatalf("rank %d: %d batches, %v", r, len(bs), err)
		}
		for _, g := range bs {
			if g.global%2 != uint64(r) {
				t.Fatalf("rank %d got global batch %d", r, g.global)
			}
			seen[g.global]++
			if err := f.checkMixBatch(g, opened.SourceOffsets, false); err != nil {
				t.Fatal(err)
			}
		}
	}
	if len(seen) != 80 {
		t.Fatalf("%d distinct batches of 80", len(seen))
	}
	// Resume after 10 global batches of one rank on 3 ranks: rank 1 starts at global batch 11.
	state := runSegment(t, c, open, nil, 1, 1, 10, map[uint64]int{})
	if state == nil || state.Consumed != 10 {
		t.Fatalf("resume state after 10 batches: %+v", state)
	}
	o := cloneOpen(open)
	o.WorldSize, o.Rank = 3, 1
	o.Resume = state
	bs, _, _, err := pullAll(t.Context(), c, o, 3)
	if err != nil || len(bs) != 3 || bs[0].global != state.Consumed+1 {
		t.Fatalf("resumed on 3 ranks: %d batches, first %v, consumed %d: %v", len(bs), bs, state.Consumed, err)
	}
	// A state saved when this epoch was planned exactly (its policy hash alone: what a small dataset's plan carries
	// for the same policy) does not continue the lazy plan.
	small, err := c.Plan(t.Context(), &gloadpb.Open{Dataset: "web", Seed: open.Seed, Policy: open.Policy})
	if err != nil {
		t.Fatal(err)
	}
	if small.Start.PolicyHash == state.PolicyHash {
		t.Fatal("the lazy plan's resume state carries the exact plans' policy hash")
	}
	old := cloneOpen(o)
	old.Resume.PolicyHash = small.Start.PolicyHash
	if _, err = c.Plan(t.Context(), old); status.Code(err) != codes.FailedPrecondition || !strings.Contains(err.Error(), "exact plan") {
		t.Fatalf("a resume state of the exact planner: %v; want FailedPrecondition naming the exact plan", err)
	}
}
