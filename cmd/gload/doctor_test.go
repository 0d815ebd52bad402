package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// evidenceScript writes gload.doctor's evidence as the helper would: a head
// record and 12 steps, 60% of each waiting for data; then exits with $1.
const evidenceScript = `e=$GLOAD_DOCTOR_EVIDENCE
echo '{"kind":"doctor","v":1,"t_us":'$(date +%s%6N)',"rank":0,"cuda":false}' >> "$e"
i=0
while [ $i -lt 12 ]; do
	echo '{"kind":"step","rank":0,"step":'$i',"t_us":'$(date +%s%6N)',"wall_ms":10,"gpu_ms":null,"phases":{"data":[6,null],"forward":[4,null]},"tokens":[90,100]}' >> "$e"
	sleep 0.01
	i=$((i+1))
done
exit ${1:-0}`

// gload doctor on this machine (no GPU): the command runs, its evidence is
// read, and the report names the cause from the phases alone.
func TestDoctorWithoutGPU(t *testing.T) {
	dir := t.TempDir()
	svg, html, ev, res := filepath.Join(dir, "r.svg"), filepath.Join(dir, "r.html"), filepath.Join(dir, "ev.jsonl"), filepath.Join(dir, "res.json")
	t.Setenv("GLOAD_DOCTOR_EVIDENCE", "/nonexistent/must-be-replaced")
	out, errOut, code := gload(t, "", "doctor", "--interval", "50ms", "--report", svg, "--evidence", ev, "--", "sh", "-c", evidenceScript, "sh", "3")
	if code != 3 {
		t.Fatalf("exit %d, want the command's 3\nstdout: %s\nstderr: %s", code, out, errOut)
	}
	for _, want := range []string{"exit 3", "cause:     input pipeline", "no GPU visible", "evidence:  phases",
		"waiting for data 60.0% of the step's host time", "the loop's steps", "7 steps of 1 rank(s), first 5 of each skipped",
		"criteria:  not judged", "1. DataLoader"} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	if b, err := os.ReadFile(svg); err != nil || !strings.HasPrefix(string(b), "<svg") || !strings.Contains(string(b), "input pipeline") {
		t.Errorf("report %s: %v, %.200q", svg, err, b)
	}
	if b, err := os.ReadFile(ev); err != nil || strings.Count(string(b), `"kind":"step"`) != 12 {
		t.Errorf("evidence kept in %s: %v, %d steps", ev, err, strings.Count(string(b), `"kind":"step"`))
	}

	// JSON to a file, HTML report, no skipped steps.
	out, errOut, code = gload(t, "", "doctor", "--interval", "50ms", "--json", "--out", res, "--report", html, "--skip-steps", "0", "--", "sh", "-c", evidenceScript)
	if code != 0 {
		t.Fatalf("exit %d\n%s\n%s", code, out, errOut)
	}
	var got struct {
		Diagnosis struct {
			Cause, Evidence string
			Phases          struct {
				Steps    int
				PadShare float64 `json:"pad_share"`
			}
		}
	}
	b, err := os.ReadFile(res)
	if err != nil || json.Unmarshal(b, &got) != nil {
		t.Fatalf("--out %s: %v\n%s", res, err, b)
	}
	if got.Diagnosis.Cause != "input pipeline" || got.Diagnosis.Phases.Steps != 12 || got.Diagnosis.Phases.PadShare < 0.09 {
		t.Errorf("JSON diagnosis %+v", got.Diagnosis)
	}
	if b, err := os.ReadFile(html); err != nil || !strings.HasPrefix(string(b), "<!doctype html>") || !strings.Contains(string(b), "<svg") {
		t.Errorf("html report: %v", err)
	}

	// A job without the helper: the run is judged, and the report says there were no phases.
	out, _, code = gload(t, "", "doctor", "--interval", "50ms", "--", "true")
	if code != 0 || !strings.Contains(out, "no phases: the job did not use gload.doctor.Doctor") || !strings.Contains(out, "the whole run") {
		t.Errorf("without evidence: exit %d\n%s", code, out)
	}
	// Evidence that does not parse is named, and the run still judged.
	out, _, code = gload(t, "", "doctor", "--interval", "50ms", "--", "sh", "-c", `echo '{"kind":"lunch"}' >> "$GLOAD_DOCTOR_EVIDENCE"; echo '{}' >> "$GLOAD_DOCTOR_EVIDENCE"`)
	if code != 0 || !strings.Contains(out, `the evidence file could not be read`) || !strings.Contains(out, `unknown kind "lunch"`) {
		t.Errorf("bad evidence: exit %d\n%s", code, out)
	}
}

func TestDoctorFlags(t *testing.T) {
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"doctor", "--report", "x.pdf", "--", "true"}, "want a .svg or .html"},
		{[]string{"doctor", "--profile", "5", "--", "true"}, "START:COUNT"},
		{[]string{"doctor", "--profile", "5:0", "--", "true"}, "START:COUNT"},
		{[]string{"doctor", "--skip-steps", "-1", "--", "true"}, "--skip-steps -1"},
	} {
		_, errOut, code := gload(t, "", c.args...)
		if code == 0 || !strings.Contains(errOut, c.want) {
			t.Errorf("%v: exit %d, stderr %q (want %q)", c.args, code, errOut, c.want)
		}
	}
	out, _, code := gload(t, "", "doctor", "--help")
	if code != 0 || !strings.Contains(out, "GLOAD_DOCTOR_EVIDENCE") {
		t.Errorf("--help: exit %d\n%s", code, out)
	}
}
