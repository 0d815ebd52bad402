package gpuwatch

import (
	"math"
	"slices"
	"strings"
	"testing"
)

func near(a, b float64) bool { return math.Abs(a-b) <= 1e-9*math.Max(1, math.Abs(b)) }

func TestPercentile(t *testing.T) {
	tests := []struct {
		name string
		vals []float64
		p    float64
		want float64
	}{
		{"empty", nil, 50, 0},
		{"one", []float64{42}, 10, 42},
		{"two median", []float64{10, 20}, 50, 15},
		{"odd median", []float64{1, 2, 3, 4, 5}, 50, 3},
		{"even median", []float64{10, 20, 80, 90}, 50, 50},
		{"p10 interpolates", []float64{10, 20, 80, 90}, 10, 13},
		{"p90 interpolates", []float64{10, 20, 80, 90}, 90, 87},
		{"p0 is min", []float64{3, 5, 9}, 0, 3},
		{"p100 is max", []float64{3, 5, 9}, 100, 9},
		{"p10 of 0..100 by 10", []float64{0, 10, 20, 30, 40, 50, 60, 70, 80, 90, 100}, 10, 10},
		{"p25 numpy", []float64{1, 2, 3, 4}, 25, 1.75}, // numpy.percentile([1,2,3,4], 25) == 1.75
		{"ties", []float64{5, 5, 5, 5}, 10, 5},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := percentile(tc.vals, tc.p); !near(got, tc.want) {
				t.Errorf("percentile(%v, %v) = %v, want %v", tc.vals, tc.p, got, tc.want)
			}
		})
	}
}

func TestSummarize(t *testing.T) {
	tests := []struct {
		name                    string
		vals                    []float64
		median, p10, p90, below float64
		wantN                   int
	}{
		{"empty", nil, 0, 0, 0, 0, 0},
		{"below counts strictly under 30", []float64{30, 29.9, 31, 0}, 29.95, 8.97, 30.7, 0.5, 4},
		{"all high", []float64{95, 96, 97}, 96, 95.2, 96.8, 0, 3},
		{"all idle", []float64{0, 0, 0}, 0, 0, 0, 1, 3},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s := summarize(slices.Clone(tc.vals), 30)
			if s.n != tc.wantN || !near(s.median, tc.median) || !near(s.p10, tc.p10) || !near(s.p90, tc.p90) || !near(s.below, tc.below) {
				t.Errorf("summarize(%v) = %+v, want n %d median %v p10 %v p90 %v below %v", tc.vals, s, tc.wantN, tc.median, tc.p10, tc.p90, tc.below)
			}
		})
	}
}

func TestClampPct(t *testing.T) {
	for _, tc := range []struct{ in, want float64 }{
		{-1, 0}, {0, 0}, {55.5, 55.5}, {100, 100}, {101, 100}, {math.NaN(), 0}, {math.Inf(1), 100}, {math.Inf(-1), 0},
	} {
		if got := clampPct(tc.in); got != tc.want {
			t.Errorf("clampPct(%v) = %v, want %v", tc.in, got, tc.want)
		}
	}
}

// TestHandTraces checks statistics computed by hand (see the comments at
// the top of each trace file).
func TestHandTraces(t *testing.T) {
	t.Run("odd", func(t *testing.T) {
		r, err := Simulate(readTraceFile(t, "hand_odd.jsonl"), Options{})
		if err != nil {
			t.Fatal(err)
		}
		d := r.Devices[0]
		for _, c := range []struct {
			name      string
			got, want float64
		}{
			{"samples", float64(d.Samples), 11}, {"median", d.SMMedian, 50}, {"p10", d.SMP10, 10}, {"p90", d.SMP90, 90},
			{"spread", d.SMSpread, 80}, {"below", d.SMBelowShare, 3.0 / 11}, {"mem-ctl", d.MemCtlMedian, 60},
			{"covered", d.CoveredS, 11}, {"pcie tx", d.PCIeTx, 3000}, {"pcie rx", d.PCIeRx, 1000}, {"power", d.PowerW, 150},
			{"clock", d.SMClockMHz, 1500}, {"mem used", float64(d.MemUsed), 512 << 20}, {"mem total", float64(d.MemTotal), 1 << 30},
		} {
			if !near(c.got, c.want) {
				t.Errorf("%s = %v, want %v", c.name, c.got, c.want)
			}
		}
		if r.Verdict.State != StateStarvedNotLoader || r.Verdict.Cause != diagPadding.cause {
			t.Errorf("verdict %q (%q), want not the loader (padding)\n%s", r.Verdict.State, r.Verdict.Cause, Format(r))
		}
		want := []Check{
			{Name: "sm_median", Value: 50, Op: ">=", Threshold: 70},
			{Name: "sm_p10", Value: 10, Op: ">=", Threshold: 40},
			{Name: "sm_below_share", Value: 3.0 / 11, Op: "<", Threshold: 0.1},
		}
		if !slices.Equal(r.Verdict.Checks, want) {
			t.Errorf("checks %+v, want %+v", r.Verdict.Checks, want)
		}
		if !strings.Contains(strings.Join(r.Verdict.Reasons, "\n"), "no client reports") {
			t.Errorf("reasons %q lack the no-client note", r.Verdict.Reasons)
		}
	})
	t.Run("even", func(t *testing.T) {
		r, err := Simulate(readTraceFile(t, "hand_even.jsonl"), Options{MinSamples: 4})
		if err != nil {
			t.Fatal(err)
		}
		d := r.Devices[0]
		if !near(d.SMMedian, 50) || !near(d.SMP10, 13) || !near(d.SMP90, 87) || !near(d.SMBelowShare, 0.5) || !near(d.MemCtlMedian, 10) {
			t.Errorf("device %+v, want median 50 p10 13 p90 87 below 0.5 mem-ctl 10", d)
		}
		if len(r.Clients) != 1 {
			t.Fatalf("clients %+v", r.Clients)
		}
		c := r.Clients[0]
		for _, x := range []struct {
			name      string
			got, want float64
		}{
			{"steps", float64(c.Steps), 4}, {"wait share", c.WaitShare, 0.2}, {"step ms", c.StepMS, 80}, {"wait ms", c.WaitMS, 20},
			{"not ready", float64(c.NotReady), 1}, {"empty", c.QueueEmptyShare, 5.0 / 12}, {"occupancy", c.QueueOccupancy, 3.5 / 12},
			{"depth", float64(c.QueueDepth), 2}, {"capacity", float64(c.QueueCapacity), 4}, {"skew", c.SkewS, 2.5}, {"silent", c.SilentS, 8},
		} {
			if !near(x.got, x.want) {
				t.Errorf("client %s = %v, want %v", x.name, x.got, x.want)
			}
		}
		if !c.Waiting || c.Silent {
			t.Errorf("client waiting %v silent %v, want waiting and not silent", c.Waiting, c.Silent)
		}
		if r.Verdict.State != StateStarvedData || r.Verdict.Cause != diagData.cause {
			t.Errorf("verdict %q (%q), want starved: data\n%s", r.Verdict.State, r.Verdict.Cause, Format(r))
		}
		if !strings.Contains(strings.Join(c.Notes, "\n"), "clock differs from the server's by +2.5 s") {
			t.Errorf("notes %q lack the skew", c.Notes)
		}
	})
}
