package main

import (
	"encoding/json"
	"strings"
	"testing"
)

func TestBenchPlan(t *testing.T) {
	for _, tc := range []struct {
		args    []string
		planner string
		batches int
	}{
		{[]string{"--rows", "50000", "--samples", "50"}, "exact", 3125},
		{[]string{"--rows", "3000000000", "--samples", "50"}, "lazy", 187_500_000},
		{[]string{"--rows", "50000", "--policy", "packed", "--split-docs", "--samples", "50"}, "exact", -1},
		{[]string{"--rows", "50000", "--policy", "tokens", "--planner", "lazy", "--samples", "50"}, "lazy", -1},
		{[]string{"--rows", "50000", "--policy", "packed", "--split-docs", "--planner", "lazy", "--samples", "50"}, "lazy", -1},
		{[]string{"--rows", "50000", "--sources", "3", "--samples", "50"}, "exact", 3125},
		{[]string{"--rows", "3000000000", "--sources", "3", "--samples", "50"}, "lazy", 187_500_000},
	} {
		out, errs, code := gload(t, "", append([]string{"bench", "plan"}, tc.args...)...)
		if code != 0 {
			t.Fatalf("%v: exit %d: %s", tc.args, code, errs)
		}
		var res struct {
			Planner     string  `json:"planner"`
			Batches     int     `json:"batches"`
			FirstBatchS float64 `json:"first_batch_s"`
			BatchUSMean float64 `json:"batch_us_mean"`
			PeakRSSMB   float64 `json:"peak_rss_mb"`
		}
		if strings.Count(out, "\n") != 1 || json.Unmarshal([]byte(out), &res) != nil {
			t.Fatalf("%v: want one JSON line, got %q", tc.args, out)
		}
		if res.Planner != tc.planner || (tc.batches >= 0 && res.Batches != tc.batches) || res.Batches < 1 ||
			res.FirstBatchS <= 0 || res.BatchUSMean <= 0 || res.PeakRSSMB <= 0 {
			t.Fatalf("%v: %s", tc.args, out)
		}
	}
	if _, errs, code := gload(t, "", "bench", "plan", "--rows", "10", "--policy", "nope"); code == 0 || !strings.Contains(errs, "--policy") {
		t.Fatalf("bad policy: exit %d, %q", code, errs)
	}
	if _, errs, code := gload(t, "", "bench", "plan", "--rows", "10", "--planner", "nope"); code == 0 || !strings.Contains(errs, "planner") {
		t.Fatalf("bad planner: exit %d, %q", code, errs)
	}
}
