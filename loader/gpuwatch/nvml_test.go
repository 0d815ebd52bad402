package gpuwatch

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"strconv"
	"testing"
	"time"
)

// TestOpenNVMLWithoutGPU: on a machine without driver (CI) OpenNVML fails
// with ErrNoGPU, and a watcher over Unavailable(err) reports no GPU visible.
func TestOpenNVMLWithoutGPU(t *testing.T) {
	src, err := OpenNVML()
	if err == nil {
		src.Close()
		t.Skip("a GPU is visible here; TestNVMLLive covers this machine")
	}
	if !errors.Is(err, ErrNoGPU) {
		t.Fatalf("OpenNVML: %v, want ErrNoGPU", err)
	}
	w := New(Unavailable(err), Options{})
	w.Poll()
	r := w.Report()
	if r.Verdict.State != StateNoGPU || r.NoGPU == "" {
		t.Errorf("verdict %+v, want no GPU visible", r.Verdict)
	}
	t.Logf("OpenNVML: %v\n%s", err, Format(r))
}

// TestNVMLLive samples the real GPUs for GLOAD_NVML_LIVE_SECONDS (default
// 5) and prints the report. Run on a GPU machine:
//
//	GLOAD_NVML_LIVE=1 go test ./loader/gpuwatch/ -run TestNVMLLive -v
func TestNVMLLive(t *testing.T) {
	if os.Getenv("GLOAD_NVML_LIVE") != "1" {
		t.Skip("set GLOAD_NVML_LIVE=1 to sample the real GPU")
	}
	secs := 5
	if v, err := strconv.Atoi(os.Getenv("GLOAD_NVML_LIVE_SECONDS")); err == nil && v > 0 {
		secs = v
	}
	src, err := OpenNVML()
	if err != nil {
		t.Fatalf("OpenNVML: %v", err)
	}
	defer src.Close()
	devs, err := src.Devices()
	if err != nil {
		t.Fatal(err)
	}
	for i := range devs {
		start := time.Now()
		s, err := src.Sample(i, time.Time{})
		t.Logf("GPU %d (%s): one Sample took %s: %d SM samples, err %v", i, devs[i].Name, time.Since(start), len(s.SM), err)
	}
	w := New(src, Options{Interval: 500 * time.Millisecond, MinCoverage: time.Duration(secs-1) * time.Second})
	ctx, cancel := context.WithTimeout(context.Background(), time.Duration(secs)*time.Second)
	defer cancel()
	if err := w.Run(ctx); err != nil {
		t.Fatal(err)
	}
	r := w.Report()
	b, _ := json.MarshalIndent(r, "", "  ")
	t.Logf("report:\n%s\n%s", Format(r), b)
	if len(r.Devices) == 0 {
		t.Fatal("no device in the report")
	}
	for _, d := range r.Devices {
		if d.Lost {
			t.Errorf("GPU %d lost: %s", d.Index, d.Error)
		}
		if d.Samples == 0 {
			t.Errorf("GPU %d: no SM sample in %d s", d.Index, secs)
		}
	}
}
