package main

import (
	"encoding/json"
	"encoding/xml"
	"image/png"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gload/gload/bench"
)

func TestBenchFeed(t *testing.T) {
	data := t.TempDir()
	writeServeDataset(t, data, 400)
	out, errOut, code := gload(t, "", "bench", "feed", "--dataset", data, "--batch-size", "8", "--transport", "grpc",
		"--clients", "1,2", "--duration", "200ms", "--consume-ms", "1", "--json")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	var rep struct {
		Server  string             `json:"server"`
		Results []bench.FeedResult `json:"results"`
	}
	if err := json.Unmarshal([]byte(out), &rep); err != nil {
		t.Fatalf("not JSON: %v\n%s", err, out)
	}
	if rep.Server != "in-process" || len(rep.Results) != 2 || rep.Results[1].Clients != 2 {
		t.Fatalf("results: %+v", rep)
	}
	for _, r := range rep.Results {
		if r.Capacity.BatchesPerS <= 0 || r.Capacity.TokensPerS <= 0 || r.Consume == nil || r.Consume.Headroom <= 0 {
			t.Errorf("%s × %d: %+v", r.Transport, r.Clients, r)
		}
	}

	out, errOut, code = gload(t, "", "bench", "feed", "--dataset", data, "--batch-size", "8", "--transport", "grpc,shm", "--duration", "100ms")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	for _, w := range []string{"batches/s", "next p99", "grpc", "shm"} {
		if !strings.Contains(out, w) {
			t.Errorf("table lacks %q:\n%s", w, out)
		}
	}
	if !strings.Contains(errOut, "grpc × 1:") {
		t.Errorf("progress: %q", errOut)
	}

	// A mixture of two datasets, in-process.
	data2 := t.TempDir()
	writeServeDataset(t, data2, 40)
	out, errOut, code = gload(t, "", "bench", "feed", "--source", "a="+data, "--source", "b="+data2, "--weights", "a:0.7,b:0.3",
		"--batch-size", "8", "--transport", "grpc", "--duration", "100ms", "--json")
	if code != 0 {
		t.Fatalf("mixture: exit %d: %s", code, errOut)
	}
	if err := json.Unmarshal([]byte(out), &rep); err != nil || len(rep.Results) != 1 || rep.Results[0].Capacity.BatchesPerS <= 0 {
		t.Fatalf("mixture: %v %+v", err, rep)
	}

	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"bench", "feed"}, "dataset"},
		{[]string{"bench", "feed", "--source", "a=" + data}, "--weights"},
		{[]string{"bench", "feed", "--source", "a=" + data, "--weights", "a:x"}, "--weights"},
		{[]string{"bench", "feed", "--source", "a=" + data, "--weights", "c:1"}, `dataset "c" is not served here`},
		{[]string{"bench", "feed", "--dataset", filepath.Join(data, "nope")}, "--dataset"},
		{[]string{"bench", "feed", "--dataset", data, "--transport", "tcp"}, "--transport"},
		{[]string{"bench", "feed", "--dataset", data, "--clients", "0"}, "--clients"},
	} {
		_, stderr, code := gload(t, "", tc.args...)
		if code == 0 || !strings.Contains(stderr, tc.want) {
			t.Errorf("%v: exit %d, stderr %q; want an error mentioning %q", tc.args, code, stderr, tc.want)
		}
	}
}

// TestBenchRun: the command's exit status is passed through, its output too,
// and the report is printed anyway; without a GPU it says so.
func TestBenchRun(t *testing.T) {
	out, errOut, code := gload(t, "", "bench", "run", "--interval", "50ms", "--", "sh", "-c", "echo from-the-command; exit 3")
	if code != 3 {
		t.Fatalf("exit %d, want 3: %s", code, errOut)
	}
	for _, w := range []string{"from-the-command", "exit 3", "judged: the whole run", "verdict:"} {
		if !strings.Contains(out, w) {
			t.Errorf("output lacks %q:\n%s", w, out)
		}
	}
	if !strings.Contains(out, "NVML on this host") { // CI has no GPU
		if !strings.Contains(out, "no GPU visible") || !strings.Contains(errOut, "no GPU visible") {
			t.Errorf("no GPU: stdout\n%s\nstderr\n%s", out, errOut)
		}
	}
	if !strings.Contains(errOut, "status 3") {
		t.Errorf("stderr: %q", errOut)
	}

	// Flags after the command are the command's.
	out, _, code = gload(t, "", "bench", "run", "sh", "-c", "echo $0 $1", "--json", "x")
	if code != 0 || !strings.Contains(out, "--json x") {
		t.Fatalf("interspersed: exit %d\n%s", code, out)
	}

	dir := t.TempDir()
	svg, pngFile, traceFile, res := filepath.Join(dir, "run.svg"), filepath.Join(dir, "run.png"), filepath.Join(dir, "run.jsonl"), filepath.Join(dir, "run.json")
	out, errOut, code = gload(t, "", "bench", "run", "--json", "--plot", svg, "--trace", traceFile, "--", "sh", "-c", "echo to-stderr")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	var r bench.RunResult
	if err := json.Unmarshal([]byte(out), &r); err != nil {
		t.Fatalf("stdout is not the JSON alone: %v\n%s", err, out)
	}
	if r.ExitCode != 0 || r.Command[0] != "sh" || !strings.Contains(errOut, "to-stderr") {
		t.Fatalf("result %+v, stderr %q", r, errOut)
	}
	b, err := os.ReadFile(svg)
	if err != nil || xml.Unmarshal(b, new(struct{})) != nil {
		t.Fatalf("svg: %v\n%s", err, b)
	}
	if b, err := os.ReadFile(traceFile); err != nil || !strings.Contains(string(b), `"kind":"devices"`) {
		t.Fatalf("trace: %v %s", err, b)
	}

	out, errOut, code = gload(t, "", "bench", "run", "--json", "--out", res, "--plot", pngFile, "--", "true")
	if code != 0 || !strings.Contains(out, "judged: the whole run") {
		t.Fatalf("exit %d: %s\n%s", code, errOut, out)
	}
	if b, err := os.ReadFile(res); err != nil || json.Unmarshal(b, &r) != nil {
		t.Fatalf("--out: %v", err)
	}
	f, err := os.Open(pngFile)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := png.Decode(f); err != nil {
		t.Fatalf("png: %v", err)
	}

	_, errOut, code = gload(t, "", "bench", "run", "--plot", filepath.Join(dir, "x.pdf"), "--", "true")
	if code == 0 || !strings.Contains(errOut, "--plot") {
		t.Fatalf("pdf plot: exit %d %q", code, errOut)
	}
	_, errOut, code = gload(t, "", "bench", "run", "--", "/nonexistent/cmd")
	if code != 127 || !strings.Contains(errOut, "nonexistent") {
		t.Fatalf("missing command: exit %d %q", code, errOut)
	}
}

func TestBenchWatchHelp(t *testing.T) {
	for _, cmd := range [][]string{{"watch", "--help"}, {"bench", "--help"}, {"bench", "feed", "--help"}, {"bench", "run", "--help"}, {"bench"}} {
		out, _, code := gload(t, "", cmd...)
		if code != 0 || !strings.Contains(out, "Usage:") {
			t.Errorf("%v: exit %d, output %q", cmd, code, out)
		}
	}
	out, _, _ := gload(t, "", "serve", "--help")
	for _, f := range []string{"--watch-interval", "--watch-window", "--no-gpu-watch"} {
		if !strings.Contains(out, f) {
			t.Errorf("serve --help lacks %s", f)
		}
	}
}
