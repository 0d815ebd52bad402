package bench

import (
	"errors"
	"testing"

	planner "github.com/gload/gload/bucket"
)

func TestPlanBench(t *testing.T) {
	for _, pol := range []planner.Policy{planner.Bucketed, planner.Tokens, planner.Packed} {
		c := PlanConfig{Rows: 20_000, Policy: pol, BatchSize: 16, Samples: 100}
		switch pol {
		case planner.Tokens:
			c.BatchSize, c.TokenBudget = 0, 65536
		case planner.Packed:
			c.SeqLen = 4096
		}
		res, err := PlanBench(c)
		if err != nil {
			t.Fatalf("%s: %v", pol, err)
		}
		if res.Batches < 1 || res.Sampled != 100 || res.FirstBatchS <= 0 || res.BatchUSMean <= 0 ||
			res.BatchUSP99 < res.BatchUSMean/100 || res.PeakRSSMB <= 0 {
			t.Fatalf("%s: implausible result %+v", pol, res)
		}
	}
	// The lazy packed plan packs about as well as the exact one (3 windows).
	var eff [2]float64
	for i, pl := range []string{"exact", "lazy"} {
		res, err := PlanBench(PlanConfig{Rows: 2_500_000, Policy: planner.Packed, BatchSize: 8, SeqLen: 4096, SplitDocs: true, Samples: 20, Planner: pl})
		if err != nil || res.Planner != pl || res.PlanS <= 0 || res.PlanS > res.FirstBatchS {
			t.Fatalf("packed %s: %+v, %v", pl, res, err)
		}
		eff[i] = res.PackingEfficiency
	}
	if eff[0] < 0.999 || eff[1] < eff[0]-0.002 {
		t.Fatalf("packing efficiency exact %.6f, lazy %.6f", eff[0], eff[1])
	}
	// Beyond 2^31 rows the lazy plan, without a lengths array.
	res, err := PlanBench(PlanConfig{Rows: 3_000_000_000, Policy: planner.Bucketed, BatchSize: 16, Samples: 20})
	if err != nil || res.Planner != "lazy" || res.Batches != 3_000_000_000/16 || res.PeakRSSMB > 2000 {
		t.Fatalf("3e9 rows: %+v, %v", res, err)
	}
	if _, err := PlanBench(PlanConfig{Rows: 1 << 31, Policy: planner.Bucketed, BatchSize: 16, Samples: 1, Planner: "exact"}); !errors.Is(err, planner.ErrTooLarge) {
		t.Fatalf("2^31 rows with the exact planner: %v, want ErrTooLarge", err)
	}
}

func TestPlanBenchQuality(t *testing.T) {
	for _, pl := range []string{"exact", "lazy"} {
		res, err := PlanBench(PlanConfig{Rows: 200_000, Policy: planner.Bucketed, BatchSize: 16, Samples: 10, Planner: pl, Quality: true})
		if err != nil {
			t.Fatal(err)
		}
		a := res.Adjacency
		// One window of the lazy plan holds all 200 000 rows: both are full shuffles (p50 of a random order: 0.293).
		if a == nil || a.P50 < 0.25 || a.P50 > 0.34 || a.P01 > a.P10 || a.P10 > a.P50 || a.P50 > a.P90 || a.SameBatch > 0.01 {
			t.Fatalf("%s: adjacency %+v", pl, a)
		}
	}
}

// The parallel counting pass gives the plan the serial one gives.
func TestParallelCountingPass(t *testing.T) {
	syn := planner.Synthetic{Rows: 3_000_000, Seed: 1}
	cfg := planner.Config{Policy: planner.Tokens, TokenBudget: 65536}
	serial, err := planner.NewLazyPlan(syn, "fp", 1, 0, cfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	par, err := planner.NewLazyPlan(syn, "fp", 1, 0, cfg, planner.Parallel)
	if err != nil {
		t.Fatal(err)
	}
	if serial.Windows() < 2 || serial.Hash() != par.Hash() || serial.Len() != par.Len() {
		t.Fatalf("serial %d windows, %d batches, %s; parallel %d batches, %s", serial.Windows(), serial.Len(), serial.Hash(), par.Len(), par.Hash())
	}
}

func TestPlanBenchMixture(t *testing.T) {
	for _, tc := range []struct {
		rows    int64
		planner string
		want    string
	}{
		{200_000, "auto", "exact"},
		{200_000, "lazy", "lazy"},
		{200_000, "exact", "exact"},
		{3_000_000_000, "auto", "lazy"},
	} {
		res, err := PlanBench(PlanConfig{Rows: tc.rows, Policy: planner.Bucketed, BatchSize: 16, Samples: 20, Planner: tc.planner, Sources: 4})
		if err != nil {
			t.Fatalf("%d slots, %s: %v", tc.rows, tc.planner, err)
		}
		if res.Planner != tc.want || res.Sources != 4 || res.Batches != int(tc.rows/16) || res.Sampled != 20 || res.FirstBatchS <= 0 {
			t.Fatalf("%d slots, %s: %+v", tc.rows, tc.planner, res)
		}
		if tc.rows > 1<<31 && res.PeakRSSMB > 1000 {
			t.Fatalf("lazy mixture of 3·10^9 slots: peak RSS %.0f MB", res.PeakRSSMB)
		}
	}
}
