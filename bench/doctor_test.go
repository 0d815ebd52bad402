package bench

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/gload/gload/loader/gpuwatch"
)

// liveTrace is a GPU replayed in real time from now: idle for the first
// idleFor, then busy at 95% for the rest of its 20 s.
func liveTrace(idleFor time.Duration) gpuwatch.Trace {
	start := time.Now()
	tr := gpuwatch.Trace{Recorded: start, Devices: []gpuwatch.DeviceInfo{{Index: 0, Name: "NVIDIA H200", UUID: "GPU-test"}}}
	const fine = 166667 * time.Microsecond
	k := 0
	for poll := start.Add(100 * time.Millisecond); poll.Before(start.Add(20 * time.Second)); poll = poll.Add(100 * time.Millisecond) {
		s := gpuwatch.DeviceSample{Time: poll, PowerW: 500, SMClockMHz: 1980}
		for ; ; k++ {
			pt := start.Add(time.Duration(k) * fine)
			if pt.After(poll) {
				break
			}
			v := 95.0
			if pt.Sub(start) < idleFor {
				v = 0
			}
			s.SM = append(s.SM, gpuwatch.Point{Time: pt, Value: v})
			s.MemCtl = append(s.MemCtl, gpuwatch.Point{Time: pt, Value: v / 2})
		}
		tr.Samples = append(tr.Samples, gpuwatch.TraceSample{Device: 0, Sample: s})
	}
	return tr
}

// warmScript writes five warm-up steps, waits 2 s (the GPU idles), then
// writes 15 compute-only steps 100 ms apart, as gload.doctor on CUDA would.
const warmScript = `e=$GLOAD_DOCTOR_EVIDENCE
echo '{"kind":"doctor","v":1,"t_us":'$(date +%s%6N)',"rank":0,"cuda":true,"device":"NVIDIA H200"}' >> "$e"
step() { echo '{"kind":"step","rank":0,"step":'$1',"t_us":'$(date +%s%6N)',"wall_ms":100,"gpu_ms":100,"phases":{"forward":[1,45],"backward":[1,50],"optimizer":[1,5]}}' >> "$e"; }
for i in 0 1 2 3 4; do step $i; done
sleep 2
i=5
while [ $i -lt 20 ]; do step $i; sleep 0.1; i=$((i+1)); done`

// The doctor judges the loop's counted steps, not the warm-up: over the
// whole run the idle start would fail the criteria.
func TestDoctorJudgesTheLoopSteps(t *testing.T) {
	evPath := filepath.Join(t.TempDir(), "ev.jsonl")
	res, err := Doctor(context.Background(), DoctorOptions{
		Run:      RunOptions{Command: []string{"sh", "-c", warmScript}, Source: gpuwatch.NewTraceSource(liveTrace(1500 * time.Millisecond)), Interval: 100 * time.Millisecond},
		Evidence: evPath,
	})
	if err != nil {
		t.Fatal(err)
	}
	d := res.Diagnosis
	if res.Span.Basis != SpanLoopSteps || res.Span.Steps != 15 || res.Span.Skipped != DefaultDoctorSkip {
		t.Fatalf("span %+v", res.Span)
	}
	if d.Cause != gpuwatch.CauseCompute || !d.CriteriaMet || d.Evidence != "NVML + phases" || d.SMMedian != 95 || d.SMP10 != 95 {
		t.Fatalf("diagnosis %+v\n%s", d, res.Format())
	}
	if res.Run.Report.Devices[0].SMP10 != 0 {
		t.Fatalf("the whole run's P10 %v: want the idle warm-up in it", res.Run.Report.Devices[0].SMP10)
	}
	if len(res.Steps) != 15 || len(res.SMPoints) != 1 || len(res.SMPoints[0].Points) == 0 {
		t.Fatalf("drawing data: %d steps, %d series", len(res.Steps), len(res.SMPoints))
	}
	out := res.Format()
	for _, want := range []string{"cause:     compute bound (fine)", "the loop's steps", "SM median 95.0% (≥ 70%: yes)", ": met", "phases:    forward 45.0%, backward 50.0%, optimizer 5.0% (GPU time"} {
		if !strings.Contains(out, want) {
			t.Errorf("table lacks %q:\n%s", want, out)
		}
	}
	var svg strings.Builder
	if err := WriteDoctorSVG(&svg, res); err != nil || !strings.Contains(svg.String(), "<polyline") || strings.Count(svg.String(), `fill="#1f77b4"`) < 15 {
		t.Fatalf("svg: %v\n%.300s", err, svg.String())
	}
	if b, err := os.ReadFile(evPath); err != nil || strings.Count(string(b), "\n") != 21 {
		t.Fatalf("evidence kept: %v, %d lines", err, strings.Count(string(b), "\n"))
	}
}
