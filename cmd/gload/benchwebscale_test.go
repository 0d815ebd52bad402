package main

import (
	"encoding/json"
	"os/exec"
	"path/filepath"
	"testing"
)

// gload bench webscale end to end on a small dataset: written, served by a real subprocess, a slice read by 4×2
// consumers and resumed on 3×2, each global batch and row once (the command fails otherwise).
func TestBenchWebscale(t *testing.T) {
	bin := buildBinary(t)
	dir := filepath.Join(t.TempDir(), "ds")
	out, err := exec.Command(bin, "bench", "webscale", "--dir", dir, "--rows", "200000", "--shard-rows", "70000",
		"--batches", "40", "--batch-size", "16").Output()
	if err != nil {
		if ee, ok := err.(*exec.ExitError); ok {
			t.Fatalf("%v: %s", err, ee.Stderr)
		}
		t.Fatal(err)
	}
	var res struct {
		Read struct {
			GlobalBatches int `json:"global_batches"`
			SliceBatches  int `json:"slice_batches"`
			Rows          int `json:"rows_read"`
		} `json:"read"`
		PeakRSSMB float64 `json:"server_peak_rss_mb"`
	}
	if err := json.Unmarshal(out, &res); err != nil {
		t.Fatalf("%v: %q", err, out)
	}
	if res.Read.GlobalBatches != 200000/16 || res.Read.SliceBatches != (4*2+3*2)*40 || res.Read.Rows != 16*res.Read.SliceBatches || res.PeakRSSMB <= 0 {
		t.Fatalf("%s", out)
	}
}
