package gpuwatch

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"
)

func readTraceFile(t testing.TB, name string) Trace {
	t.Helper()
	f, err := os.Open(filepath.Join("testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	tr, err := ReadTrace(f)
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	return tr
}

// span is an expected range for a statistic.
type span struct{ lo, hi float64 }

func (s span) has(v float64) bool { return v >= s.lo && v <= s.hi }

// TestTraceVerdicts replays each synthetic trace and checks the verdicts
// exactly, the statistics against ranges the generator's shapes imply, and
// the whole report against a golden file (tolerant to float rounding).
func TestTraceVerdicts(t *testing.T) {
	type dev struct {
		state        State
		cause        string
		median, p10  span
		below        span
		failedChecks []string
	}
	tests := []struct {
		name    string
		state   State
		cause   string
		devices []int
		gpus    []dev
		waiting []string // clients judged waiting
		notes   []string // substrings expected among client notes
		left    float64  // seconds left, for insufficient data
	}{
		{
			name: "fed", state: StateFed, cause: diagBound.cause, devices: []int{0},
			gpus: []dev{{state: StateFed, cause: diagBound.cause, median: span{94, 96}, p10: span{90, 94}, below: span{0, 0}}},
		},
		{
			name: "starved_data", state: StateStarvedData, cause: diagData.cause, devices: []int{0},
			gpus: []dev{{
				state: StateStarvedData, cause: diagData.cause, median: span{45, 55}, p10: span{15, 22}, below: span{0.2, 0.3},
				failedChecks: []string{"sm_median", "sm_p10", "sm_below_share"},
			}},
			waiting: []string{"rank0"},
		},
		{
			name: "launch_overhead", state: StateStarvedNotLoader, cause: diagLaunch.cause, devices: []int{0},
			gpus: []dev{{
				state: StateStarvedNotLoader, cause: diagLaunch.cause, median: span{39, 41}, p10: span{35, 38}, below: span{0, 0.01},
				failedChecks: []string{"sm_median", "sm_p10"},
			}},
		},
		{
			name: "padding", state: StateStarvedNotLoader, cause: diagPadding.cause, devices: []int{0},
			gpus: []dev{{
				state: StateStarvedNotLoader, cause: diagPadding.cause, median: span{25, 85}, p10: span{20, 27}, below: span{0.3, 0.6},
				failedChecks: []string{"sm_median", "sm_p10", "sm_below_share"},
			}},
		},
		{
			name: "gradsync", state: StateStarvedNotLoader, cause: diagGradSync.cause, devices: []int{0},
			gpus: []dev{{
				state: StateStarvedNotLoader, cause: diagGradSync.cause, median: span{3, 95}, p10: span{0, 5}, below: span{0.4, 0.6},
				failedChecks: []string{"sm_median", "sm_p10", "sm_below_share"},
			}},
		},
		{
			name: "multi2", state: StateStarvedData, cause: diagData.cause, devices: []int{1},
			gpus: []dev{
				{state: StateFed, cause: diagBound.cause, median: span{94, 96}, p10: span{90, 94}, below: span{0, 0}},
				{state: StateStarvedData, cause: diagData.cause, median: span{45, 55}, p10: span{15, 22}, below: span{0.2, 0.3},
					failedChecks: []string{"sm_median", "sm_p10", "sm_below_share"}},
			},
			waiting: []string{"rank1"},
		},
		{
			name: "multi4", state: StateStarvedNotLoader, cause: diagLaunch.cause, devices: []int{2},
			gpus: []dev{
				{state: StateFed, cause: diagBound.cause, median: span{94, 96}, p10: span{90, 94}, below: span{0, 0}},
				{state: StateFed, cause: diagBound.cause, median: span{94, 96}, p10: span{90, 94}, below: span{0, 0}},
				{state: StateStarvedNotLoader, cause: diagLaunch.cause, median: span{34, 36}, p10: span{30, 33}, below: span{0, 0.1},
					failedChecks: []string{"sm_median", "sm_p10"}},
				{state: StateFed, cause: diagBound.cause, median: span{94, 96}, p10: span{90, 94}, below: span{0, 0}},
			},
		},
		{
			name: "lost", state: StateFed, cause: diagBound.cause, devices: []int{0},
			gpus: []dev{
				{state: StateFed, cause: diagBound.cause, median: span{94, 96}, p10: span{90, 94}, below: span{0, 0}},
				{state: StateLost, cause: diagLost.cause, median: span{94, 96}, p10: span{88, 94}, below: span{0, 0}},
			},
		},
		{
			name: "nogpu", state: StateNoGPU, cause: diagNoGPU.cause,
			notes: []string{"client rank0 clock differs from the server's by +3.0 s"},
		},
		{
			name: "warmup", state: StateInsufficient, devices: []int{0}, left: 4,
			gpus: []dev{{state: StateInsufficient, median: span{94, 96}, p10: span{50, 96}, below: span{0, 0}}},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r, err := Simulate(readTraceFile(t, tc.name+".jsonl"), Options{})
			if err != nil {
				t.Fatal(err)
			}
			v := r.Verdict
			if v.State != tc.state || v.Cause != tc.cause || !slices.Equal(v.Devices, tc.devices) {
				t.Errorf("verdict %q cause %q devices %v, want %q %q %v\n%s", v.State, v.Cause, v.Devices, tc.state, tc.cause, tc.devices, Format(r))
			}
			if math.Abs(v.SecondsLeft-tc.left) > 1e-9 {
				t.Errorf("seconds left %v, want %v", v.SecondsLeft, tc.left)
			}
			if len(r.Devices) != len(tc.gpus) {
				t.Fatalf("%d devices, want %d", len(r.Devices), len(tc.gpus))
			}
			for i, want := range tc.gpus {
				d := r.Devices[i]
				if d.Verdict.State != want.state || d.Verdict.Cause != want.cause {
					t.Errorf("GPU %d: %q (%q), want %q (%q)", i, d.Verdict.State, d.Verdict.Cause, want.state, want.cause)
				}
				if !want.median.has(d.SMMedian) || !want.p10.has(d.SMP10) || !want.below.has(d.SMBelowShare) {
					t.Errorf("GPU %d: median %.2f p10 %.2f below %.3f, want in %v %v %v", i, d.SMMedian, d.SMP10, d.SMBelowShare, want.median, want.p10, want.below)
				}
				var failed []string
				for _, c := range d.Verdict.Checks {
					if !c.Pass {
						failed = append(failed, c.Name)
					}
				}
				if !slices.Equal(failed, want.failedChecks) {
					t.Errorf("GPU %d: failed checks %v, want %v", i, failed, want.failedChecks)
				}
				if d.Verdict.Fix == "" && d.Verdict.State != StateInsufficient {
					t.Errorf("GPU %d: no fix", i)
				}
			}
			var waiting []string
			var notes []string
			for _, c := range r.Clients {
				if c.Waiting {
					waiting = append(waiting, c.Client)
				}
				notes = append(notes, c.Notes...)
			}
			if !slices.Equal(waiting, tc.waiting) {
				t.Errorf("waiting clients %v, want %v", waiting, tc.waiting)
			}
			for _, n := range tc.notes {
				if !strings.Contains(strings.Join(notes, "\n"), n) {
					t.Errorf("notes %q lack %q", notes, n)
				}
			}
			checkGolden(t, filepath.Join("testdata", tc.name+".report.json"), r)
		})
	}
}

// checkGolden compares r with a golden JSON report, numbers within 1e-6
// relative (so a platform that fuses multiply-adds still passes).
func checkGolden(t *testing.T, path string, r Report) {
	t.Helper()
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "  ")
	if err := enc.Encode(r); err != nil {
		t.Fatal(err)
	}
	got := buf.Bytes()
	if *update {
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run with -update)", err)
	}
	var g, w any
	if err := json.Unmarshal(got, &g); err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(want, &w); err != nil {
		t.Fatal(err)
	}
	if diff := jsonDiff("", g, w); diff != "" {
		t.Errorf("report differs from %s (run with -update if intended): %s", path, diff)
	}
}

func jsonDiff(at string, got, want any) string {
	switch w := want.(type) {
	case float64:
		g, ok := got.(float64)
		if !ok || math.Abs(g-w) > 1e-6*math.Max(1, math.Abs(w)) {
			return fmt.Sprintf("%s: %v, want %v", at, got, want)
		}
	case map[string]any:
		g, ok := got.(map[string]any)
		if !ok || len(g) != len(w) {
			return fmt.Sprintf("%s: %v, want %v", at, got, want)
		}
		for k := range w {
			if d := jsonDiff(at+"."+k, g[k], w[k]); d != "" {
				return d
			}
		}
	case []any:
		g, ok := got.([]any)
		if !ok || len(g) != len(w) {
			return fmt.Sprintf("%s: %v, want %v", at, got, want)
		}
		for i := range w {
			if d := jsonDiff(fmt.Sprintf("%s[%d]", at, i), g[i], w[i]); d != "" {
				return d
			}
		}
	default:
		if !reflect.DeepEqual(got, want) {
			return fmt.Sprintf("%s: %v, want %v", at, got, want)
		}
	}
	return ""
}

// TestFormatGolden pins the table Format prints.
func TestFormatGolden(t *testing.T) {
	for _, name := range []string{"multi2", "nogpu", "warmup"} {
		t.Run(name, func(t *testing.T) {
			r, err := Simulate(readTraceFile(t, name+".jsonl"), Options{})
			if err != nil {
				t.Fatal(err)
			}
			got := []byte(Format(r))
			path := filepath.Join("testdata", name+".format.golden")
			if *update {
				if err := os.WriteFile(path, got, 0o644); err != nil {
					t.Fatal(err)
				}
				return
			}
			want, err := os.ReadFile(path)
			if err != nil {
				t.Fatalf("%v (run with -update)", err)
			}
			if !bytes.Equal(got, want) {
				t.Errorf("Format:\n%s\nwant:\n%s", got, want)
			}
		})
	}
}

// TestRealH200Traces replays recordings cmd/nvmlprobe made on an H200 (NVML
// samples every ~200 ms; the first poll returns the driver's buffer of the
// ~14 s before the recording): idle; a bf16 matmul loop starting ~2 s in
// ("steady"); and the same loop busy 0.6 s, idle 0.6 s ("stall").
func TestRealH200Traces(t *testing.T) {
	waitingClient := func(tr Trace) Trace {
		for at := tr.start().Add(time.Second); at.Before(tr.end()); at = at.Add(1200 * time.Millisecond) {
			tr.Steps = append(tr.Steps, TraceStep{Time: at, Client: "rank0", WaitUS: 600_000, StepUS: 600_000})
		}
		return tr
	}
	tests := []struct {
		name   string
		file   string
		opts   Options
		edit   func(Trace) Trace
		state  State
		cause  string
		median span
	}{
		{"idle", "h200_idle.jsonl", Options{}, nil, StateStarvedNotLoader, diagIdle.cause, span{0, 0}},
		{"steady, last 5 s", "h200_steady.jsonl", Options{Window: 5 * time.Second}, nil, StateFed, diagBusy.cause, span{99, 99}},
		{"steady, idle history in the window", "h200_steady.jsonl", Options{}, nil, StateStarvedNotLoader, diagGradSync.cause, span{0, 0}},
		{"stall, no client", "h200_stall.jsonl", Options{Window: 10 * time.Second}, nil, StateStarvedNotLoader, diagGradSync.cause, span{30, 99}},
		{"stall, client waiting", "h200_stall.jsonl", Options{Window: 10 * time.Second}, waitingClient, StateStarvedData, diagData.cause, span{30, 99}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			tr := readTraceFile(t, tc.file)
			if tc.edit != nil {
				tr = tc.edit(tr)
			}
			r, err := Simulate(tr, tc.opts)
			if err != nil {
				t.Fatal(err)
			}
			d := r.Devices[0]
			if r.Verdict.State != tc.state || r.Verdict.Cause != tc.cause || !tc.median.has(d.SMMedian) {
				t.Errorf("%q (%q) median %v, want %q (%q) median in %v\n%s", r.Verdict.State, r.Verdict.Cause, d.SMMedian, tc.state, tc.cause, tc.median, Format(r))
			}
			// Polls overlap (NVML's last-seen time is per call): each
			// sample counts once.
			window := tc.opts.Window
			if window == 0 {
				window = time.Minute
			}
			from := tr.end().Add(-window)
			distinct := map[time.Time]bool{}
			for _, s := range tr.Samples {
				for _, p := range s.Sample.SM {
					if !p.Time.Before(from) {
						distinct[p.Time] = true
					}
				}
			}
			if d.Samples != len(distinct) {
				t.Errorf("%d samples in the window, want %d distinct", d.Samples, len(distinct))
			}
		})
	}
}
