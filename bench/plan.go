package bench

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"math"
	"os"
	"runtime"
	"slices"
	"strconv"
	"sync"
	"time"

	planner "github.com/gload/gload/bucket"
)

// PlanConfig is one `gload bench plan` measurement: an epoch plan over Rows synthetic lengths ([planner.Synthetic]
// with seed LengthSeed), planned as the server plans it.
type PlanConfig struct {
	Rows        int64
	Policy      planner.Policy
	BatchSize   int
	TokenBudget int // tokens only
	SeqLen      int // packed only
	SplitDocs   bool
	Seed        uint64
	Epoch       int
	World       int // the plan's PlanWorld (the warm-up layout)
	LengthSeed  uint64
	Samples     int // batches timed after the first (0: 1000)
	// Planner: "exact" (planner.NewPlan over a lengths array, as the server plans today), "lazy"
	// (planner.NewLazyPlan, or planner.NewLazyPacked for packed, over the synthetic lengths computed on demand: no
	// array) or "auto" (the default: planner.NewEpochPlan's choice, exact up to planner.LazyThreshold rows).
	Planner string
	// Quality walks the whole epoch afterwards and reports the shuffle-quality measure of [Adjacency] (4 bytes
	// per row; at most 2^32−1 rows).
	Quality bool
	// Sources > 0 plans a mixture epoch of Rows slots instead (see [MixSources]); Planner "auto" is
	// planner.NewEpochMixture's choice, "exact" planner.NewMixture over lengths arrays, "lazy"
	// planner.NewLazyMixture.
	Sources int
}

// MixSources are the k synthetic sources of a mixture bench of rows slots: source i has ⌊rows/k⌋ rows (the last
// the rest) of [planner.Synthetic] lengths with seed lengthSeed+i, and weight 1/(i+1) (Zipf), so the first
// sources are upsampled and the last downsampled in an epoch of rows slots.
func MixSources(rows int64, k int, lengthSeed uint64) []planner.MixSource {
	out := make([]planner.MixSource, k)
	for i := range k {
		n := rows / int64(k)
		if i == k-1 {
			n = rows - n*int64(k-1)
		}
		out[i] = planner.MixSource{Name: "s" + strconv.Itoa(i), Fingerprint: "bench/synthetic/" + strconv.FormatUint(lengthSeed+uint64(i), 10) + "/" + strconv.FormatInt(n, 10),
			Lengths: planner.Synthetic{Rows: n, Seed: lengthSeed + uint64(i)}, Weight: 1 / float64(i+1)}
	}
	return out
}

// Adjacency is the distribution of |pos(r+1) − pos(r)| over the dataset's adjacent rows r, r+1, pos being a row's
// position in the epoch (the rows of batch 0, then batch 1, …), as quantiles of that distance over the rows: for a
// uniformly random order the distance/rows has density 2(1−x), quantile q at 1−√(1−q) (p50 0.293). SameBatch is the
// share of adjacent pairs delivered in one batch; Within1000 the share within 1 000 positions.
type Adjacency struct {
	P01        float64 `json:"p01"`
	P10        float64 `json:"p10"`
	P50        float64 `json:"p50"`
	P90        float64 `json:"p90"`
	P99        float64 `json:"p99"`
	SameBatch  float64 `json:"same_batch"`
	Within1000 float64 `json:"within_1000"`
}

// adjacency walks every batch of p over rows rows (see [Adjacency]).
func adjacency(p batcher, rows int64) (Adjacency, error) {
	if rows > math.MaxUint32 || rows < 2 {
		return Adjacency{}, fmt.Errorf("quality: %d rows (want 2 … 2^32−1)", rows)
	}
	pos := make([]uint32, rows)
	batch := make([]uint32, rows)
	var at uint32
	for g := range p.Len() {
		for _, pc := range p.Batch(g).Pieces {
			pos[pc.Index] = at
			batch[pc.Index] = uint32(g)
			at++
		}
	}
	if int64(at) != rows {
		return Adjacency{}, fmt.Errorf("quality: the plan delivers %d pieces for %d rows (dropped rows or split documents)", at, rows)
	}
	d := make([]uint32, rows-1)
	var same, near int
	for r := range rows - 1 {
		a, b := pos[r], pos[r+1]
		d[r] = max(a, b) - min(a, b)
		if batch[r] == batch[r+1] {
			same++
		}
		if d[r] <= 1000 {
			near++
		}
	}
	slices.Sort(d)
	q := func(f float64) float64 { return float64(d[int(f*float64(len(d)-1))]) / float64(rows) }
	n := float64(len(d))
	return Adjacency{P01: q(0.01), P10: q(0.10), P50: q(0.5), P90: q(0.9), P99: q(0.99),
		SameBatch: float64(same) / n, Within1000: float64(near) / n}, nil
}

// PlanResult is the JSON line of `gload bench plan`. Times are wall-clock; PeakRSSBytes is the process's VmHWM, so
// it covers the lengths array (the server holds the index's lengths the same way) and everything planning
// allocated.
type PlanResult struct {
	Rows        int64   `json:"rows"`
	Policy      string  `json:"policy"`
	Planner     string  `json:"planner"`
	Batches     int     `json:"batches"`
	LengthsS    float64 `json:"lengths_s"`         // making the lengths array (not part of planning)
	PlanS       float64 `json:"plan_s"`            // making the plan (the counting pass of lazy tokens and packed plans)
	FirstBatchS float64 `json:"first_batch_s"`     // plan + build batch 0
	BatchUSMean float64 `json:"batch_us_mean"`     // per further batch, sampled across the epoch
	BatchUSP50  float64 `json:"batch_us_p50"`      // (lazy packed: a batch of a window already packed)
	BatchUSP99  float64 `json:"batch_us_p99"`      //
	Sampled     int     `json:"sampled"`           // batches timed
	PeakRSSMB   float64 `json:"peak_rss_mb"`       // VmHWM of this process
	GoMaxProcs  int     `json:"gomaxprocs"`        //
	LengthNS    float64 `json:"length_ns"`         // cost of one synthetic length (lazy plans compute them per batch)
	Sources     int     `json:"sources,omitempty"` // mixture benches: the sources (rows are the epoch's slots)
	PlanHash    string  `json:"plan_hash,omitempty"`
	// PackingEfficiency is the plan's Stats().PackingEfficiency: real / padded tokens (exact plans and lazy packed
	// plans: of the epoch; lazy bucketed and tokens plans: of their first window).
	PackingEfficiency float64    `json:"packing_efficiency"`
	Adjacency         *Adjacency `json:"adjacency,omitempty"` // with Quality
}

// PlanBench plans one epoch and times it (see [PlanResult]). It allocates the lengths array of today's planner (4
// bytes per row) with all CPUs.
func PlanBench(c PlanConfig) (PlanResult, error) {
	if c.Rows < 1 {
		return PlanResult{}, fmt.Errorf("rows must be >= 1, got %d", c.Rows)
	}
	if c.Samples == 0 {
		c.Samples = 1000
	}
	if c.Samples < 0 {
		return PlanResult{}, fmt.Errorf("samples must be >= 0, got %d", c.Samples)
	}
	cfg := planner.DefaultConfig()
	cfg.Policy = c.Policy
	cfg.BatchSize = c.BatchSize
	cfg.TokenBudget = c.TokenBudget
	cfg.SeqLen = c.SeqLen
	cfg.SplitDocs = c.SplitDocs
	cfg.PlanWorld = max(c.World, 1)
	syn := planner.Synthetic{Rows: c.Rows, Seed: c.LengthSeed}
	res := PlanResult{Rows: c.Rows, Policy: string(c.Policy), Planner: c.Planner, GoMaxProcs: runtime.GOMAXPROCS(0)}
	fp := "bench/synthetic/" + strconv.FormatUint(c.LengthSeed, 10) + "/" + strconv.FormatInt(c.Rows, 10)
	res.LengthNS = lengthCost(syn)
	if c.Sources > 0 {
		return mixBench(c, cfg, res)
	}
	switch c.Planner {
	case "", "auto":
		res.Planner = "exact"
		if planner.EpochPlanner(c.Rows, cfg) != "exact" {
			res.Planner = "lazy"
		}
	case "exact", "lazy":
	default:
		return res, fmt.Errorf("planner: want auto, exact or lazy, got %q", c.Planner)
	}
	if res.Planner == "lazy" {
		t0 := time.Now()
		var p lazyPlan
		var err error
		if c.Policy == planner.Packed {
			p, err = planner.NewLazyPacked(syn, fp, c.Seed, c.Epoch, cfg, planner.Parallel)
		} else {
			p, err = planner.NewLazyPlan(syn, fp, c.Seed, c.Epoch, cfg, planner.Parallel)
		}
		if err != nil {
			return res, err
		}
		res.PlanS = time.Since(t0).Seconds()
		res.PackingEfficiency = p.Stats().PackingEfficiency
		if p.Len() > 0 {
			_ = p.Batch(0)
		}
		res.FirstBatchS = time.Since(t0).Seconds()
		res.Batches = p.Len()
		timeBatches(p, c.Samples, &res)
		res.PeakRSSMB = peakRSSMB()
		return res, quality(c, p, &res)
	}

	if c.Rows > math.MaxInt32 {
		return res, fmt.Errorf("plan %d rows: %w (at most %d rows)", c.Rows, planner.ErrTooLarge, math.MaxInt32)
	}
	t0 := time.Now()
	lengths := make([]uint32, c.Rows)
	fillParallel(syn, lengths)
	res.LengthsS = time.Since(t0).Seconds()

	t0 = time.Now()
	p, err := planner.NewPlan(lengths, fp, c.Seed, c.Epoch, cfg)
	if err != nil {
		return res, err
	}
	res.PlanS = time.Since(t0).Seconds()
	res.PackingEfficiency = p.Stats().PackingEfficiency
	var plan batcher = p
	if plan.Len() > 0 {
		_ = plan.Batch(0)
	}
	res.FirstBatchS = time.Since(t0).Seconds()
	res.Batches = plan.Len()
	timeBatches(plan, c.Samples, &res)
	res.PeakRSSMB = peakRSSMB()
	runtime.KeepAlive(lengths)
	return res, quality(c, plan, &res)
}

// mixBench is PlanBench of a mixture epoch of c.Rows slots over c.Sources synthetic sources ([MixSources]).
func mixBench(c PlanConfig, cfg planner.Config, res PlanResult) (PlanResult, error) {
	res.Sources = c.Sources
	if c.Quality {
		return res, fmt.Errorf("quality: not measured for mixtures")
	}
	if c.Sources > planner.MaxSources || int64(c.Sources) > c.Rows {
		return res, fmt.Errorf("sources: want 1 … %d and at most rows, got %d", planner.MaxSources, c.Sources)
	}
	src := MixSources(c.Rows, c.Sources, c.LengthSeed)
	mc := planner.MixConfig{EpochSamples: c.Rows}
	ctx := context.Background()
	var p batcher
	var keep []planner.Source
	t0 := time.Now()
	switch c.Planner {
	case "", "auto", "lazy":
		var mp planner.MixturePlan
		var err error
		if c.Planner == "lazy" {
			mp, err = planner.NewLazyMixture(ctx, src, c.Seed, c.Epoch, cfg, mc, planner.Parallel)
		} else {
			mp, err = planner.NewEpochMixture(ctx, src, c.Seed, c.Epoch, cfg, mc, planner.Parallel)
		}
		if err != nil {
			return res, err
		}
		res.Planner = "exact"
		if _, ok := mp.(*planner.LazyMixture); ok {
			res.Planner = "lazy"
		}
		p = mp
	case "exact":
		keep = make([]planner.Source, len(src))
		for i, s := range src {
			syn := s.Lengths.(planner.Synthetic)
			if syn.Rows > math.MaxInt32 {
				return res, fmt.Errorf("source of %d rows: %w (at most %d rows)", syn.Rows, planner.ErrTooLarge, math.MaxInt32)
			}
			l := make([]uint32, syn.Rows)
			fillParallel(syn, l)
			keep[i] = planner.Source{Name: s.Name, Fingerprint: s.Fingerprint, Lengths: l, Weight: s.Weight}
		}
		res.LengthsS = time.Since(t0).Seconds()
		t0 = time.Now()
		m, err := planner.NewMixtureContext(ctx, keep, c.Seed, c.Epoch, cfg, mc)
		if err != nil {
			return res, err
		}
		p = m
	default:
		return res, fmt.Errorf("planner: want auto, exact or lazy, got %q", c.Planner)
	}
	if p.Len() > 0 {
		_ = p.Batch(0)
	}
	res.FirstBatchS = time.Since(t0).Seconds()
	res.Batches = p.Len()
	timeBatches(p, c.Samples, &res)
	res.PeakRSSMB = peakRSSMB()
	runtime.KeepAlive(keep)
	return res, nil
}

// quality fills res.Adjacency when c asks for it (after the peak RSS is taken).
func quality(c PlanConfig, p batcher, res *PlanResult) error {
	if !c.Quality {
		return nil
	}
	a, err := adjacency(p, c.Rows)
	if err != nil {
		return err
	}
	res.Adjacency = &a
	return nil
}

// lazyPlan is a lazy plan as PlanBench uses it.
type lazyPlan interface {
	batcher
	Stats() planner.Stats
}

// batcher is what PlanBench times: a plan's batch count and batch builder.
type batcher interface {
	Len() int
	Batch(g int) planner.Batch
}

// timeBatches times n batches spread evenly over the epoch (batch 1 + k·(Len−1)/n), one call each.
func timeBatches(p batcher, n int, res *PlanResult) {
	total := p.Len()
	if total < 2 || n == 0 {
		return
	}
	n = min(n, total-1)
	us := make([]float64, n)
	for k := range n {
		g := 1 + int(int64(k)*int64(total-1)/int64(n))
		t := time.Now()
		_ = p.Batch(g)
		us[k] = float64(time.Since(t).Nanoseconds()) / 1e3
	}
	var sum float64
	for _, v := range us {
		sum += v
	}
	slices.Sort(us)
	res.Sampled = n
	res.BatchUSMean = sum / float64(n)
	res.BatchUSP50 = us[(n-1)/2]
	res.BatchUSP99 = us[min(n-1, int(math.Ceil(0.99*float64(n)))-1)]
}

// lengthCost is the mean cost of one synthetic length in nanoseconds (100 000 rows).
func lengthCost(syn planner.Synthetic) float64 {
	const n = 100_000
	_ = syn.Length(0) // the first call builds the quantile table
	t := time.Now()
	var sink uint32
	for i := range int64(n) {
		sink += syn.Length(i * 7919)
	}
	d := time.Since(t)
	runtime.KeepAlive(sink)
	return float64(d.Nanoseconds()) / n
}

// fillParallel writes syn's lengths into dst with one goroutine per CPU.
func fillParallel(syn planner.Synthetic, dst []uint32) {
	workers := runtime.GOMAXPROCS(0)
	chunk := (len(dst) + workers - 1) / workers
	var wg sync.WaitGroup
	for lo := 0; lo < len(dst); lo += chunk {
		hi := min(lo+chunk, len(dst))
		wg.Add(1)
		go func() {
			defer wg.Done()
			syn.Fill(int64(lo), dst[lo:hi])
		}()
	}
	wg.Wait()
}

// peakRSSMB is this process's PeakRSSMB.
func peakRSSMB() float64 { return PeakRSSMB(0) }

// PeakRSSMB reads VmHWM, in MiB, from /proc/PID/status of process pid (0: this process; Linux); 0 where it is not
// available.
func PeakRSSMB(pid int) float64 {
	path := "/proc/self/status"
	if pid > 0 {
		path = "/proc/" + strconv.Itoa(pid) + "/status"
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return 0
	}
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		f := bytes.Fields(sc.Bytes())
		if len(f) >= 2 && string(f[0]) == "VmHWM:" {
			kb, err := strconv.ParseFloat(string(f[1]), 64)
			if err != nil {
				return 0
			}
			return kb / 1024
		}
	}
	return 0
}
