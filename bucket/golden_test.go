package bucket

import (
	"bufio"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

var update = flag.Bool("update", false, "rewrite the expected plans in testdata/golden")

// goldenConfig is Config as the golden files spell it (wire-protocol names).
type goldenConfig struct {
	Policy        Policy    `json:"policy"`
	BatchSize     int       `json:"batch_size"`
	TokenBudget   int       `json:"token_budget"`
	SeqLen        int       `json:"seq_len"`
	MaxLength     int       `json:"max_length"`
	PadMultiple   int       `json:"pad_multiple"`
	Boundaries    []int     `json:"boundaries"`
	AutoBuckets   int       `json:"auto_buckets"`
	MegaBatchMult int       `json:"mega_batch_mult"`
	Remainder     Remainder `json:"remainder"`
	WarmupShapes  bool      `json:"warmup_shapes"`
	SplitDocs     bool      `json:"split_docs"`
	PlanWorld     int       `json:"plan_world"`
	Sequential    bool      `json:"sequential"`
	ShuffleWindow int       `json:"shuffle_window"`
	Planner       Planner   `json:"planner"`
}

// goldenCase is the input half of a golden file:
//
//	fingerprint: demo
//	seed: 7
//	epoch: 0
//	config: {"policy": "bucketed", "batch_size": 3}
//	lengths: 5 17 3 …            (explicit) or
//	lengths: uniform 40 1 300 5  (n, lo, hi, key of uniformLengths)
//	assign: 2 3 2                (start, world, workers; repeatable)
//	---
//	the expected dump
type goldenCase struct {
	fingerprint string
	seed        uint64
	epoch       int
	cfg         Config
	lengths     []uint32
	assigns     [][3]int
}

func parseGolden(text string) (goldenCase, string, error) {
	var gc goldenCase
	in, want, ok := strings.Cut(text, "\n---\n")
	if !ok {
		return gc, "", fmt.Errorf("no --- line")
	}
	sc := bufio.NewScanner(strings.NewReader(in))
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		key, val, ok := strings.Cut(line, ":")
		if !ok {
			return gc, "", fmt.Errorf("line %q: want key: value", line)
		}
		val = strings.TrimSpace(val)
		var err error
		switch key {
		case "fingerprint":
			gc.fingerprint = val
		case "seed":
			gc.seed, err = strconv.ParseUint(val, 10, 64)
		case "epoch":
			gc.epoch, err = strconv.Atoi(val)
		case "config":
			var c goldenConfig
			dec := json.NewDecoder(strings.NewReader(val))
			dec.DisallowUnknownFields()
			if err = dec.Decode(&c); err == nil {
				gc.cfg = Config(c)
			}
		case "lengths":
			f := strings.Fields(val)
			if len(f) > 0 && f[0] == "uniform" {
				var a [4]int
				for i := range a {
					if a[i], err = strconv.Atoi(f[i+1]); err != nil {
						break
					}
				}
				gc.lengths = uniformLengths(a[0], a[1], a[2], uint64(a[3]))
				break
			}
			for _, s := range f {
				var v uint64
				if v, err = strconv.ParseUint(s, 10, 32); err != nil {
					break
				}
				gc.lengths = append(gc.lengths, uint32(v))
			}
		case "assign":
			var a [3]int
			f := strings.Fields(val)
			if len(f) != 3 {
				return gc, "", fmt.Errorf("assign %q: want start world workers", val)
			}
			for i := range a {
				if a[i], err = strconv.Atoi(f[i]); err != nil {
					break
				}
			}
			gc.assigns = append(gc.assigns, a)
		default:
			return gc, "", fmt.Errorf("unknown key %q", key)
		}
		if err != nil {
			return gc, "", fmt.Errorf("%s: %w", key, err)
		}
	}
	return gc, want, nil
}

// dumpPlan renders a plan (and some assignments) as text.
func dumpPlan(p *Plan, assigns [][3]int) string {
	var b strings.Builder
	st := p.Stats()
	fmt.Fprintf(&b, "batches %d  rows %d  pieces %d  real %d  padded %d  truncated %d  packed_rows %d\n",
		st.Batches, st.Rows, st.Pieces, st.RealTokens, st.PaddedTokens, st.TruncatedTokens, st.PackedRows)
	fmt.Fprintf(&b, "boundaries %v  shapes", p.Boundaries())
	for _, s := range p.Shapes() {
		fmt.Fprintf(&b, " %dx%d", s.Rows, s.Length)
	}
	b.WriteString("\n")
	for g := range p.Len() {
		bt := p.Batch(g)
		fmt.Fprintf(&b, "%3d  %dx%d ", g, bt.Rows, bt.Length)
		for r := range bt.Rows {
			pcs := bt.Pieces[r : r+1]
			if bt.RowStart != nil {
				pcs = bt.Pieces[bt.RowStart[r]:bt.RowStart[r+1]]
				if r > 0 {
					b.WriteString(" |")
				}
			}
			for _, pc := range pcs {
				if pc.Start == 0 {
					fmt.Fprintf(&b, " %d:%d", pc.Index, pc.Len)
				} else {
					fmt.Fprintf(&b, " %d@%d:%d", pc.Index, pc.Start, pc.Len)
				}
			}
		}
		b.WriteString("\n")
	}
	for _, a := range assigns {
		start, world, workers := a[0], a[1], a[2]
		fmt.Fprintf(&b, "assign start %d world %d workers %d (per rank %d):", start, world, workers, p.PerRank(start, world))
		for r := range world {
			for w := range max(workers, 1) {
				got, err := p.Assign(start, r, world, w, workers)
				if err != nil {
					fmt.Fprintf(&b, " error %v", err)
					continue
				}
				fmt.Fprintf(&b, " r%dw%d%v", r, w, got)
			}
		}
		b.WriteString("\n")
	}
	return b.String()
}

func TestGoldenPlans(t *testing.T) {
	files, err := filepath.Glob(filepath.Join("testdata", "golden", "*.txt"))
	if err != nil {
		t.Fatal(err)
	}
	if len(files) == 0 {
		t.Fatal("no golden files")
	}
	for _, file := range files {
		t.Run(filepath.Base(file), func(t *testing.T) {
			raw, err := os.ReadFile(file)
			if err != nil {
				t.Fatal(err)
			}
			gc, want, err := parseGolden(string(raw))
			if err != nil {
				t.Fatalf("%s: %v", file, err)
			}
			p, err := NewPlan(gc.lengths, gc.fingerprint, gc.seed, gc.epoch, gc.cfg)
			if err != nil {
				t.Fatalf("%s: %v", file, err)
			}
			checkPlan(t, p, gc.lengths)
			got := dumpPlan(p, gc.assigns)
			if *update {
				in, _, _ := strings.Cut(string(raw), "\n---\n")
				if err := os.WriteFile(file, []byte(in+"\n---\n"+got), 0o644); err != nil {
					t.Fatal(err)
				}
				return
			}
			if got != want {
				t.Fatalf("%s: plan changed (the plan algorithm must stay stable; run with -update only for a deliberate, versioned change)\ngot:\n%s\nwant:\n%s", file, got, want)
			}
		})
	}
}
