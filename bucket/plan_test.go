package bucket

import (
	"errors"
	"fmt"
	"slices"
	"testing"
)

// propCase is one random configuration of the property tests.
type propCase struct {
	name    string
	lengths []uint32
	cfg     Config
}

// propCases builds the configurations the property tests run over: every
// policy and padding mode on datasets of 0, 1, a few, ~100 and ~10k rows.
func propCases() []propCase {
	sizes := []int{0, 1, 2, 7, 100, 10_007}
	var out []propCase
	for i, n := range sizes {
		key := uint64(1000 + i)
		data := map[string][]uint32{
			"uniform":   uniformLengths(n, 0, 700, key),
			"lognormal": logNormalLengths(n, 400, 1, 9000, key),
		}
		for _, dname := range []string{"uniform", "lognormal"} {
			lengths := data[dname]
			bucketed := DefaultConfig()
			bucketed.BatchSize = 1 + int(key%13)
			bucketed.MegaBatchMult = 1 + int(key%5)
			tokens := DefaultConfig()
			tokens.Policy = Tokens
			tokens.TokenBudget = 16384
			tokens.MaxLength = 4000
			cfgs := map[string]Config{
				"bucketed":       bucketed,
				"bucketed-exact": func() Config { c := bucketed; c.PadMultiple = 1; c.PlanWorld = 3; return c }(),
				"bucketed-bounds": func() Config {
					c := bucketed
					c.Boundaries = []int{64, 200, 512, 1024}
					c.Remainder = Wrap
					return c
				}(),
				"bucketed-auto": func() Config { c := bucketed; c.AutoBuckets = 5; c.MaxLength = 3000; return c }(),
				"tokens":        tokens,
				"tokens-cap":    func() Config { c := tokens; c.BatchSize = 9; c.AutoBuckets = 8; c.PlanWorld = 2; return c }(),
				"packed":        {Policy: Packed, BatchSize: 3, SeqLen: 2048},
				"packed-split":  {Policy: Packed, BatchSize: 4, SeqLen: 1024, SplitDocs: true, Remainder: Wrap},
				"packed-maxlen": {Policy: Packed, BatchSize: 2, SeqLen: 512, MaxLength: 300, SplitDocs: true},
				"bucketed-eval": func() Config { c := bucketed; c.Sequential = true; c.Remainder = Keep; return c }(),
				"tokens-eval":   func() Config { c := tokens; c.Sequential = true; c.Remainder = Keep; return c }(),
			}
			names := make([]string, 0, len(cfgs))
			for k := range cfgs {
				names = append(names, k)
			}
			slices.Sort(names)
			for _, cn := range names {
				out = append(out, propCase{name: fmt.Sprintf("%s/%s/n=%d", cn, dname, n), lengths: lengths, cfg: cfgs[cn]})
			}
		}
	}
	return out
}

func TestPlanProperties(t *testing.T) {
	worlds := []int{1, 2, 3, 8, 64}
	for ci, tc := range propCases() {
		t.Run(tc.name, func(t *testing.T) {
			p, err := NewPlan(tc.lengths, "fp-"+tc.name, uint64(ci), 3, tc.cfg)
			if err != nil {
				t.Fatal(err)
			}
			batches := checkPlan(t, p, tc.lengths)

			// Same inputs, same plan.
			q, err := NewPlan(slices.Clone(tc.lengths), "fp-"+tc.name, uint64(ci), 3, tc.cfg)
			if err != nil {
				t.Fatal(err)
			}
			if !samePlan(p, q) {
				t.Fatal("same inputs gave different plans")
			}
			if tc.cfg.Sequential {
				checkSequential(t, p, tc.lengths)
			}
			// Another seed or epoch reorders (datasets big enough to tell).
			if len(tc.lengths) >= 100 && !tc.cfg.Sequential {
				for _, other := range []struct {
					seed  uint64
					epoch int
				}{{uint64(ci) + 1, 3}, {uint64(ci), 4}} {
					r, err := NewPlan(tc.lengths, "fp-"+tc.name, other.seed, other.epoch, tc.cfg)
					if err != nil {
						t.Fatal(err)
					}
					if samePlan(p, r) {
						t.Fatalf("seed %d epoch %d gave the same plan as seed %d epoch 3", other.seed, other.epoch, ci)
					}
				}
			}
			for wi, world := range worlds {
				workers := (ci + wi) % 9 // 0 … 8
				for _, start := range []int{0, p.Len() / 3} {
					checkAssign(t, p, batches, tc.lengths, start, world, workers)
				}
			}
		})
	}
}

// checkSequential checks that a sequential plan's batches hold the rows in
// dataset order, each batch padded to its own longest row.
func checkSequential(t testing.TB, p *Plan, lengths []uint32) {
	t.Helper()
	next := 0
	for g := range p.Len() {
		b := p.Batch(g)
		longest := int64(0)
		for _, pc := range b.Pieces {
			if pc.Index != next {
				t.Fatalf("batch %d: row %d, want %d (dataset order)", g, pc.Index, next)
			}
			next++
			longest = max(longest, p.pd.pad(p.pd.eff(lengths[pc.Index])))
		}
		if int64(b.Length) != longest {
			t.Fatalf("batch %d: length %d, want %d", g, b.Length, longest)
		}
		if p.cfg.Policy == Bucketed && g < p.Len()-1 && b.Rows != p.cfg.BatchSize {
			t.Fatalf("batch %d: %d rows, want %d", g, b.Rows, p.cfg.BatchSize)
		}
	}
	if next != len(lengths) {
		t.Fatalf("%d rows planned, want %d", next, len(lengths))
	}
}

// samePlan compares two plans batch by batch.
func samePlan(a, b *Plan) bool {
	if a.Len() != b.Len() || !slices.Equal(a.Shapes(), b.Shapes()) || a.Stats() != b.Stats() {
		return false
	}
	for g := range a.Len() {
		x, y := a.Batch(g), b.Batch(g)
		if x.Rows != y.Rows || x.Length != y.Length || !slices.Equal(x.Pieces, y.Pieces) || !slices.Equal(x.RowStart, y.RowStart) {
			return false
		}
	}
	return true
}

// checkAssign deals the plan from start over world ranks and workers and
// checks the remainder rule and row coverage.
func checkAssign(t testing.TB, p *Plan, batches []Batch, lengths []uint32, start, world, workers int) {
	t.Helper()
	n := p.Len()
	per := p.PerRank(start, world)
	nw := max(workers, 1)
	rankPer := func(rank int) int { return per }
	if p.cfg.Remainder == Keep {
		rankPer = func(rank int) int { return max(n-start-rank+world-1, 0) / world } // positions start+rank, +world, … below n
	}
	// positions[q - start] counts how often position q was dealt.
	dealt := make(map[int]int)
	for rank := range world {
		lists := make([][]int, nw)
		total := 0
		for w := range nw {
			l, err := p.Assign(start, rank, world, w, workers)
			if err != nil {
				t.Fatal(err)
			}
			lists[w] = l
			total += len(l)
		}
		if total != rankPer(rank) || total != p.RankBatches(start, rank, world) {
			t.Fatalf("start %d world %d rank %d: %d batches, want %d, RankBatches says %d", start, world, rank, total, rankPer(rank), p.RankBatches(start, rank, world))
		}
		// Round-robin over workers gives the rank's batches in plan order.
		for i := range total {
			w, k := i%nw, i/nw
			if k >= len(lists[w]) {
				t.Fatalf("rank %d: worker %d has %d batches, round-robin wants index %d", rank, w, len(lists[w]), k)
			}
			q := start + rank + i*world
			if got := lists[w][k]; got != q%n {
				t.Fatalf("rank %d worker %d batch %d: got %d, want position %d → %d", rank, w, k, got, q, q%n)
			}
			dealt[q]++
		}
	}
	rem := max(n-start, 0)
	switch p.cfg.Remainder {
	case Drop:
		if per != rem/world {
			t.Fatalf("drop: per rank %d, want %d", per, rem/world)
		}
	case Wrap:
		if per*world < rem || (rem > 0 && per*world-rem >= world) || (rem == 0 && per != 0) {
			t.Fatalf("wrap: per rank %d for %d remaining over %d", per, rem, world)
		}
	}
	// Row coverage from start: the rows of dealt positions plus the rows of
	// the dropped tail are exactly the rows of batches start…n−1; every
	// repeat is a wrapped position.
	seen := make(map[int]int) // plan batch → times delivered
	for q, k := range dealt {
		if k != 1 {
			t.Fatalf("position %d dealt %d times", q, k)
		}
		seen[q%n]++
	}
	for g := start; g < n; g++ {
		k := seen[g]
		dropped := g >= start+per*world && p.cfg.Remainder != Keep
		switch {
		case dropped && k != 0:
			t.Fatalf("dropped batch %d delivered", g)
		case !dropped && k < 1:
			t.Fatalf("batch %d not delivered (start %d, world %d)", g, start, world)
		}
	}
	wrapped := max(start+per*world-max(n, start), 0)
	if p.cfg.Remainder == Keep {
		wrapped = 0
	}
	repeats := 0
	for g, k := range seen {
		if g < start {
			repeats += k // a batch consumed before start, dealt again by the wrap
		} else {
			repeats += k - 1
		}
	}
	if repeats != wrapped {
		t.Fatalf("%d repeated deliveries, %d wrapped positions", repeats, wrapped)
	}
	// The same at row level: count each row's delivered tokens over the dealt
	// positions; rows of dropped batches are missing, wrapped batches repeat.
	if start == 0 {
		got := make([]int64, len(lengths))
		for q := range dealt {
			for _, pc := range batches[q%n].Pieces {
				got[pc.Index] += int64(pc.Len)
			}
		}
		want := make([]int64, len(lengths))
		for g := range min(per*world, n) {
			for _, pc := range batches[g].Pieces {
				want[pc.Index] += int64(pc.Len)
			}
		}
		for q := n; q < per*world && p.cfg.Remainder != Keep; q++ {
			for _, pc := range batches[q%n].Pieces {
				want[pc.Index] += int64(pc.Len)
			}
		}
		inDropped := make(map[int]bool)
		for g := per * world; g < n; g++ {
			for _, pc := range batches[g].Pieces {
				inDropped[pc.Index] = true
			}
		}
		for i, l := range lengths {
			full := delivered(p, l)
			switch {
			case got[i] != want[i]:
				t.Fatalf("row %d: %d tokens delivered, want %d", i, got[i], want[i])
			case p.cfg.Remainder == Keep && got[i] != full:
				t.Fatalf("keep: row %d delivered %d of %d tokens", i, got[i], full)
			case p.cfg.Remainder == Drop && !inDropped[i] && got[i] != full:
				t.Fatalf("drop: row %d outside the dropped batches delivered %d of %d tokens", i, got[i], full)
			case p.cfg.Remainder == Drop && inDropped[i] && got[i] == full && full > 0 && !(p.cfg.Policy == Packed && p.cfg.SplitDocs):
				t.Fatalf("drop: row %d of a dropped batch delivered", i)
			case p.cfg.Remainder == Wrap && got[i] < full:
				t.Fatalf("wrap: row %d delivered %d of %d tokens", i, got[i], full)
			}
		}
	}
}

func TestElasticResume(t *testing.T) {
	lengths := logNormalLengths(5000, 400, 1, 8000, 7)
	for _, rem := range []Remainder{Drop, Wrap} {
		for _, policy := range []Policy{Bucketed, Tokens, Packed} {
			cfg := DefaultConfig()
			cfg.Policy, cfg.Remainder = policy, rem
			switch policy {
			case Bucketed:
				cfg.BatchSize = 8
			case Tokens:
				cfg.TokenBudget, cfg.MaxLength = 8192, 4096
			case Packed:
				cfg.BatchSize, cfg.SeqLen = 4, 2048
			}
			p, err := NewPlan(lengths, "elastic", 11, 1, cfg)
			if err != nil {
				t.Fatal(err)
			}
			n := p.Len()
			for _, tc := range []struct{ w1, nw1, steps, w2, nw2 int }{
				{8, 2, 10, 4, 3}, {4, 0, 33, 16, 1}, {1, 4, 1, 64, 2}, {64, 8, 1, 3, 0}, {7, 3, 0, 5, 5},
				{2, 1, n / 2, 3, 2}, {3, 2, n / 3, 1, 8},
			} {
				t.Run(fmt.Sprintf("%s/%s/%v", policy, rem, tc), func(t *testing.T) {
					// Segment 1: every rank consumes its first `steps` batches,
					// each worker's in round-robin order.
					steps := min(tc.steps, p.PerRank(0, tc.w1))
					got := map[int]int{}
					for rank := range tc.w1 {
						nw := max(tc.nw1, 1)
						lists := make([][]int, nw)
						for w := range nw {
							lists[w], err = p.Assign(0, rank, tc.w1, w, tc.nw1)
							if err != nil {
								t.Fatal(err)
							}
						}
						for i := range steps {
							got[lists[i%nw][i/nw]]++
						}
					}
					k := steps * tc.w1
					for g := range k {
						if got[g] != 1 {
							t.Fatalf("segment 1: batch %d consumed %d times", g, got[g])
						}
					}
					// Segment 2 from k with (w2, nw2).
					var after []int
					for rank := range tc.w2 {
						for w := range max(tc.nw2, 1) {
							l, err := p.Assign(k, rank, tc.w2, w, tc.nw2)
							if err != nil {
								t.Fatal(err)
							}
							after = append(after, l...)
						}
					}
					for _, g := range after {
						got[g]++
					}
					rest := n - k
					switch rem {
					case Drop:
						droppedFrom := n - rest%tc.w2
						for g := range n {
							want := 1
							if g >= droppedFrom {
								want = 0
							}
							if got[g] != want {
								t.Fatalf("batch %d delivered %d times, want %d (k=%d, dropped from %d)", g, got[g], want, k, droppedFrom)
							}
						}
					case Wrap:
						extra := (tc.w2 - rest%tc.w2) % tc.w2
						total := 0
						for g := range n {
							if got[g] < 1 {
								t.Fatalf("batch %d never delivered", g)
							}
							total += got[g]
						}
						if total != n+extra {
							t.Fatalf("%d deliveries, want %d + %d wrapped", total, n, extra)
						}
						for i := range extra {
							if got[i%n] < 2 {
								t.Fatalf("wrapped batch %d delivered once", i%n)
							}
						}
					}
				})
			}
		}
	}
}

func TestWarmup(t *testing.T) {
	lengths := logNormalLengths(20000, 400, 1, 8000, 9)
	for _, tc := range []struct {
		name string
		cfg  Config
	}{
		{"bucketed-w1", Config{BatchSize: 16, WarmupShapes: true, AutoBuckets: 8}},
		{"bucketed-w8", Config{BatchSize: 16, WarmupShapes: true, PlanWorld: 8}},
		{"bucketed-w64", Config{BatchSize: 8, WarmupShapes: true, PlanWorld: 64, PadMultiple: 128}},
		{"tokens-w4", Config{Policy: Tokens, TokenBudget: 32768, WarmupShapes: true, PlanWorld: 4, Boundaries: []int{256, 512, 1024, 2048, 4096, 8192}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p, err := NewPlan(lengths, "warm", 5, 0, tc.cfg)
			if err != nil {
				t.Fatal(err)
			}
			w := max(tc.cfg.PlanWorld, 1)
			counts := map[Shape]int{}
			for g := range p.Len() {
				counts[p.Shape(g)]++
			}
			var frequent []Shape
			for _, s := range p.Shapes() {
				if counts[s] >= w {
					frequent = append(frequent, s)
				}
			}
			if len(frequent) < 2 {
				t.Fatalf("test data gives %d frequent shapes; want several", len(frequent))
			}
			if frequent[0].Length < frequent[len(frequent)-1].Length {
				t.Fatalf("warm-up not longest first: %v", frequent)
			}
			for rank := range w {
				got, err := p.Assign(0, rank, w, 0, 0)
				if err != nil {
					t.Fatal(err)
				}
				for i, s := range frequent {
					if sh := p.Shape(got[i]); sh != s {
						t.Fatalf("rank %d step %d: shape %v, want %v (warm-up order %v)", rank, i, sh, s, frequent)
					}
				}
			}
			// Without warm-up the same batches exist, in shuffled order.
			c := tc.cfg
			c.WarmupShapes = false
			q, err := NewPlan(lengths, "warm", 5, 0, c)
			if err != nil {
				t.Fatal(err)
			}
			if q.Len() != p.Len() || !slices.Equal(q.Shapes(), p.Shapes()) || q.Stats() != p.Stats() {
				t.Fatal("warm-up changed more than the order")
			}
		})
	}
}

func TestTokenBudget(t *testing.T) {
	lengths := []uint32{10, 20, 600, 30, 5, 100, 640, 64, 0}
	for _, tc := range []struct {
		name    string
		cfg     Config
		wantErr string
	}{
		{"fits", Config{Policy: Tokens, TokenBudget: 1024}, ""},
		{"exact-fit", Config{Policy: Tokens, TokenBudget: 640, PadMultiple: 64}, ""},
		{"too-small", Config{Policy: Tokens, TokenBudget: 512}, "bucket: token budget too small: token_budget 512 is smaller than row 2 (length 600, padded 640)"},
		{"truncated-fits", Config{Policy: Tokens, TokenBudget: 512, MaxLength: 500}, ""},
		{"bounds-too-small", Config{Policy: Tokens, TokenBudget: 700, Boundaries: []int{100, 1000}}, "bucket: token budget too small: token_budget 700 is smaller than row 2 (length 600, padded 1000)"},
		{"cap", Config{Policy: Tokens, TokenBudget: 4096, BatchSize: 2, PadMultiple: 8}, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p, err := NewPlan(lengths, "tok", 1, 0, tc.cfg)
			if tc.wantErr != "" {
				if err == nil || err.Error() != tc.wantErr || !errors.Is(err, ErrTokenBudget) {
					t.Fatalf("err = %v, want %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			checkPlan(t, p, lengths)
		})
	}
}

func TestBucketedSemantics(t *testing.T) {
	// One mega-batch holding everything: batches are the sorted rows cut in B.
	lengths := uniformLengths(100, 1, 1000, 3)
	p, err := NewPlan(lengths, "sem", 1, 0, Config{BatchSize: 10, MegaBatchMult: 10, PadMultiple: 1})
	if err != nil {
		t.Fatal(err)
	}
	sorted := slices.Clone(lengths)
	slices.Sort(sorted)
	slices.Reverse(sorted)
	var got [][]uint32
	for g := range p.Len() {
		var ls []uint32
		for _, pc := range p.Batch(g).Pieces {
			ls = append(ls, uint32(pc.Len))
		}
		got = append(got, ls)
	}
	slices.SortFunc(got, func(a, b []uint32) int { return int(b[0]) - int(a[0]) })
	for i, ls := range got {
		if !slices.Equal(ls, sorted[i*10:(i+1)*10]) {
			t.Fatalf("batch %d: %v, want %v", i, ls, sorted[i*10:(i+1)*10])
		}
	}
	// The partial batch keeps its own shape.
	p, err = NewPlan(uniformLengths(103, 1, 1000, 3), "sem", 1, 0, Config{BatchSize: 10})
	if err != nil {
		t.Fatal(err)
	}
	small := 0
	for g := range p.Len() {
		if p.Shape(g).Rows == 3 {
			small++
		}
	}
	if p.Len() != 11 || small != 1 {
		t.Fatalf("103 rows by 10: %d batches, %d of 3 rows; want 11 and 1", p.Len(), small)
	}
}

func TestEmptyRows(t *testing.T) {
	lengths := []uint32{0, 0, 0, 5}
	for _, cfg := range []Config{
		{BatchSize: 2},
		{BatchSize: 2, Boundaries: []int{16, 32}},
		{Policy: Tokens, TokenBudget: 64},
		{Policy: Packed, BatchSize: 1, SeqLen: 8},
		{Policy: Packed, BatchSize: 1, SeqLen: 2, SplitDocs: true},
	} {
		p, err := NewPlan(lengths, "empty", 1, 0, cfg)
		if err != nil {
			t.Fatal(err)
		}
		checkPlan(t, p, lengths)
	}
}

func TestAssignErrors(t *testing.T) {
	p, err := NewPlan([]uint32{1, 2, 3}, "a", 1, 0, Config{BatchSize: 1})
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		start, rank, world, worker, workers int
		field                               string
	}{
		{-1, 0, 1, 0, 1, "start"},
		{0, 0, 0, 0, 1, "world_size"},
		{0, 1, 1, 0, 1, "rank"},
		{0, -1, 2, 0, 1, "rank"},
		{0, 0, 1, 1, 1, "worker"},
		{0, 0, 1, 1, 0, "worker"},
		{0, 0, 1, 0, -2, "num_workers"},
	} {
		_, err := p.Assign(tc.start, tc.rank, tc.world, tc.worker, tc.workers)
		var ce *ConfigError
		if !errors.As(err, &ce) || ce.Field != tc.field || !errors.Is(err, ErrConfig) {
			t.Errorf("Assign%v: err %v, want field %s", tc, err, tc.field)
		}
	}
	if got, _ := p.Assign(3, 0, 1, 0, 1); len(got) != 0 {
		t.Errorf("Assign past the end: %v", got)
	}
	if got, _ := p.Assign(100, 0, 2, 0, 1); len(got) != 0 {
		t.Errorf("Assign far past the end: %v", got)
	}
}
