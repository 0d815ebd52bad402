package main

import (
	"fmt"
	"reflect"
	"strings"
	"testing"

	"github.com/gload/gload/loader"
)

func TestParseMixtureFlag(t *testing.T) {
	for _, tc := range []struct {
		flag string
		name string
		spec loader.MixtureSpec
		err  string
	}{
		{flag: "pretrain=web:0.6,code:0.25,math:0.15", name: "pretrain", spec: loader.MixtureSpec{Sources: []loader.MixtureWeight{{Dataset: "web", Weight: 0.6}, {Dataset: "code", Weight: 0.25}, {Dataset: "math", Weight: 0.15}}}},
		{flag: "m=web:6, code:3,mix_by=tokens,epoch_until=code", name: "m", spec: loader.MixtureSpec{Sources: []loader.MixtureWeight{{Dataset: "web", Weight: 6}, {Dataset: "code", Weight: 3}}, MixBy: "tokens", EpochUntil: "code"}},
		{flag: "m=a:1,epoch_samples=100,allow_tokenizer_mismatch=true,single_source_batches=1", name: "m", spec: loader.MixtureSpec{Sources: []loader.MixtureWeight{{Dataset: "a", Weight: 1}}, EpochSamples: 100, AllowTokenizerMismatch: true, SingleSourceBatches: true}},
		{flag: "pretrain", err: `--mixture "pretrain": want NAME=DATASET:WEIGHT,DATASET:WEIGHT,…`},
		{flag: "m=web", err: `--mixture "m=web": item 1 "web": want DATASET:WEIGHT or KEY=VALUE`},
		{flag: "m=web:x", err: `--mixture "m=web:x": item 1 "web:x": weight "x" is not a finite number >= 0`},
		{flag: "m=web:-1", err: `weight "-1" is not a finite number >= 0`},
		{flag: "m=web:NaN", err: `weight "NaN" is not a finite number >= 0`},
		{flag: "m=web:1,colour=red", err: `item 2 "colour=red": unknown option "colour"`},
		{flag: "m=web:1,epoch_samples=many", err: `item 2 "epoch_samples=many": epoch_samples: strconv.ParseInt`},
		{flag: "m=mix_by=tokens", err: `--mixture "m=mix_by=tokens": no DATASET:WEIGHT items`},
	} {
		t.Run(tc.flag, func(t *testing.T) {
			name, spec, err := parseMixtureFlag(tc.flag)
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("error %v, want %q", err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if name != tc.name || !reflect.DeepEqual(spec, tc.spec) {
				t.Fatalf("got %q %+v, want %q %+v", name, spec, tc.name, tc.spec)
			}
		})
	}
}

func TestParseMixtureFile(t *testing.T) {
	yamlDoc := `mixtures:
  - name: pretrain
    mix_by: tokens
    sources:
      - {dataset: web, weight: 0.6}
      - {dataset: code, weight: 0.4}
`
	jsonDoc := `{"mixtures": [{"name": "pretrain", "mix_by": "tokens", "sources": [{"dataset": "web", "weight": 0.6}, {"dataset": "code", "weight": 0.4}]}]}`
	want := map[string]loader.MixtureSpec{"pretrain": {MixBy: "tokens", Sources: []loader.MixtureWeight{{Dataset: "web", Weight: 0.6}, {Dataset: "code", Weight: 0.4}}}}
	for _, doc := range []string{yamlDoc, jsonDoc} {
		got, err := parseMixtureFile("m.yaml", []byte(doc))
		if err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("got %+v, want %+v", got, want)
		}
	}
	for _, tc := range []struct{ doc, err string }{
		{"mixtures:\n  - name: a\n    colour: red\n", "--mixture-file m.yaml: yaml: unmarshal errors:\n  line 3: field colour not found"},
		{"mixtures:\n  - sources: [{dataset: a, weight: 1}]\n", "--mixture-file m.yaml: mixtures[0]: no name"},
		{"mixtures:\n  - name: a\n    sources: [{dataset: w}]\n", "--mixture-file m.yaml: mixtures[0].sources[0] (w): no weight"},
		{"mixtures:\n  - name: a\n", "--mixture-file m.yaml: mixtures[0] (a): no sources"},
		{"mixtures:\n  - name: a\n    sources: [{dataset: w, weight: 1}]\n  - name: a\n    sources: [{dataset: w, weight: 1}]\n", `mixtures[1]: name "a" given twice`},
		{"mixtures: [", "--mixture-file m.yaml: yaml: line 1: did not find expected node content"},
	} {
		if _, err := parseMixtureFile("m.yaml", []byte(tc.doc)); err == nil || !strings.Contains(err.Error(), tc.err) {
			t.Errorf("%q: error %v, want %q", tc.doc, err, tc.err)
		}
	}
}

// formatMixtureFlag writes a spec back as a --mixture flag.
func formatMixtureFlag(name string, s loader.MixtureSpec) string {
	var items []string
	for _, w := range s.Sources {
		items = append(items, fmt.Sprintf("%s:%v", w.Dataset, w.Weight))
	}
	if s.MixBy != "" {
		items = append(items, "mix_by="+s.MixBy)
	}
	if s.EpochSamples != 0 {
		items = append(items, fmt.Sprint("epoch_samples=", s.EpochSamples))
	}
	if s.EpochTokens != 0 {
		items = append(items, fmt.Sprint("epoch_tokens=", s.EpochTokens))
	}
	if s.EpochUntil != "" {
		items = append(items, "epoch_until="+s.EpochUntil)
	}
	if s.AllowTokenizerMismatch {
		items = append(items, "allow_tokenizer_mismatch=true")
	}
	if s.SingleSourceBatches {
		items = append(items, "single_source_batches=true")
	}
	return name + "=" + strings.Join(items, ",")
}

// FuzzParseMixtureFlag: no panic; what parses formats back to a flag that
// parses to the same spec.
func FuzzParseMixtureFlag(f *testing.F) {
	f.Add("pretrain=web:0.6,code:0.25,math:0.15")
	f.Add("m=web:6,code:3,mix_by=tokens,epoch_until=code")
	f.Fuzz(func(t *testing.T, flag string) {
		name, spec, err := parseMixtureFlag(flag)
		if err != nil {
			return
		}
		for _, w := range spec.Sources {
			if strings.ContainsAny(w.Dataset, ",=") || strings.TrimSpace(w.Dataset) != w.Dataset {
				return // not expressible again
			}
		}
		if strings.ContainsAny(spec.MixBy+spec.EpochUntil, ",") || strings.Contains(name, "=") {
			return
		}
		name2, spec2, err := parseMixtureFlag(formatMixtureFlag(name, spec))
		if err != nil || name2 != name || !reflect.DeepEqual(spec, spec2) {
			t.Fatalf("%q → %q %+v → %v %q %+v", flag, name, spec, err, name2, spec2)
		}
	})
}

// FuzzParseMixtureFile: no panic on any document.
func FuzzParseMixtureFile(f *testing.F) {
	f.Add([]byte("mixtures:\n  - name: a\n    sources: [{dataset: w, weight: 1}]\n"))
	f.Add([]byte(`{"mixtures": [{"name": "p", "sources": [{"dataset": "web", "weight": 0.6}]}]}`))
	f.Fuzz(func(t *testing.T, doc []byte) {
		_, _ = parseMixtureFile("fuzz.yaml", doc)
	})
}
