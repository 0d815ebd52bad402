package main

// Parsing of gload serve's --mixture and --mixture-file (issue 13).

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"math"
	"strconv"
	"strings"

	"go.yaml.in/yaml/v3"

	"github.com/gload/gload/internal/readcap"
	"github.com/gload/gload/loader"
)

// parseMixtureFlag reads one --mixture NAME=SRC:W,SRC:W[,KEY=VALUE…]. Items
// with ':' are sources in order; items with '=' are options: mix_by,
// epoch_samples, epoch_tokens, epoch_until, allow_tokenizer_mismatch,
// single_source_batches.
func parseMixtureFlag(f string) (string, loader.MixtureSpec, error) {
	var spec loader.MixtureSpec
	name, body, ok := strings.Cut(f, "=")
	if !ok || name == "" || body == "" {
		return "", spec, fmt.Errorf("--mixture %q: want NAME=DATASET:WEIGHT,DATASET:WEIGHT,…", f)
	}
	for i, item := range strings.Split(body, ",") {
		item = strings.TrimSpace(item)
		if k, v, ok := strings.Cut(item, "="); ok {
			if err := setMixOption(&spec, k, v); err != nil {
				return "", spec, fmt.Errorf("--mixture %q: item %d %q: %w", f, i+1, item, err)
			}
			continue
		}
		ds, ws, ok := strings.Cut(item, ":")
		if !ok || ds == "" {
			return "", spec, fmt.Errorf("--mixture %q: item %d %q: want DATASET:WEIGHT or KEY=VALUE", f, i+1, item)
		}
		w, err := strconv.ParseFloat(ws, 64)
		if err != nil || math.IsNaN(w) || math.IsInf(w, 0) || w < 0 {
			return "", spec, fmt.Errorf("--mixture %q: item %d %q: weight %q is not a finite number >= 0", f, i+1, item, ws)
		}
		spec.Sources = append(spec.Sources, loader.MixtureWeight{Dataset: ds, Weight: w})
	}
	if len(spec.Sources) == 0 {
		return "", spec, fmt.Errorf("--mixture %q: no DATASET:WEIGHT items", f)
	}
	return name, spec, nil
}

func setMixOption(spec *loader.MixtureSpec, k, v string) error {
	var err error
	switch k {
	case "mix_by":
		spec.MixBy = v
	case "epoch_samples":
		spec.EpochSamples, err = strconv.ParseInt(v, 10, 64)
	case "epoch_tokens":
		spec.EpochTokens, err = strconv.ParseInt(v, 10, 64)
	case "epoch_until":
		spec.EpochUntil = v
	case "allow_tokenizer_mismatch":
		spec.AllowTokenizerMismatch, err = strconv.ParseBool(v)
	case "single_source_batches":
		spec.SingleSourceBatches, err = strconv.ParseBool(v)
	default:
		return fmt.Errorf("unknown option %q (want mix_by, epoch_samples, epoch_tokens, epoch_until, allow_tokenizer_mismatch or single_source_batches)", k)
	}
	if err != nil {
		return fmt.Errorf("%s: %w", k, err)
	}
	return nil
}

// mixtureFile is the --mixture-file format (YAML, or JSON which YAML reads):
//
//	mixtures:
//	  - name: pretrain
//	    mix_by: samples
//	    sources: [{dataset: web, weight: 0.6}, {dataset: code, weight: 0.25}]
type mixtureFile struct {
	Mixtures []struct {
		Name                   string `yaml:"name"`
		MixBy                  string `yaml:"mix_by"`
		EpochSamples           int64  `yaml:"epoch_samples"`
		EpochTokens            int64  `yaml:"epoch_tokens"`
		EpochUntil             string `yaml:"epoch_until"`
		AllowTokenizerMismatch bool   `yaml:"allow_tokenizer_mismatch"`
		SingleSourceBatches    bool   `yaml:"single_source_batches"`
		Sources                []struct {
			Dataset string   `yaml:"dataset"`
			Weight  *float64 `yaml:"weight"`
		} `yaml:"sources"`
	} `yaml:"mixtures"`
}

// parseMixtureFile reads a --mixture-file's content; errors name the file
// and, from the YAML decoder, the line.
func parseMixtureFile(path string, data []byte) (map[string]loader.MixtureSpec, error) {
	var mf mixtureFile
	dec := yaml.NewDecoder(bytes.NewReader(data))
	dec.KnownFields(true)
	if err := dec.Decode(&mf); err != nil && !errors.Is(err, io.EOF) {
		return nil, fmt.Errorf("--mixture-file %s: %w", path, err)
	}
	out := map[string]loader.MixtureSpec{}
	for i, m := range mf.Mixtures {
		where := fmt.Sprintf("--mixture-file %s: mixtures[%d]", path, i)
		if m.Name == "" {
			return nil, fmt.Errorf("%s: no name", where)
		}
		if _, dup := out[m.Name]; dup {
			return nil, fmt.Errorf("%s: name %q given twice", where, m.Name)
		}
		spec := loader.MixtureSpec{MixBy: m.MixBy, EpochSamples: m.EpochSamples, EpochTokens: m.EpochTokens,
			EpochUntil: m.EpochUntil, AllowTokenizerMismatch: m.AllowTokenizerMismatch, SingleSourceBatches: m.SingleSourceBatches}
		if len(m.Sources) == 0 {
			return nil, fmt.Errorf("%s (%s): no sources", where, m.Name)
		}
		for j, s := range m.Sources {
			if s.Dataset == "" {
				return nil, fmt.Errorf("%s.sources[%d]: no dataset", where, j)
			}
			if s.Weight == nil {
				return nil, fmt.Errorf("%s.sources[%d] (%s): no weight", where, j, s.Dataset)
			}
			spec.Sources = append(spec.Sources, loader.MixtureWeight{Dataset: s.Dataset, Weight: *s.Weight})
		}
		out[m.Name] = spec
	}
	return out, nil
}

// maxMixtureFileBytes bounds a --mixture-file (a mixture is a few hundred bytes).
const maxMixtureFileBytes = 4 << 20

// mixtures gathers --mixture and --mixture-file.
func mixtures(flags []string, file string) (map[string]loader.MixtureSpec, error) {
	out := map[string]loader.MixtureSpec{}
	if file != "" {
		data, err := readcap.File(file, readcap.Limit{Bytes: maxMixtureFileBytes, Name: "gload serve --mixture-file"})
		if err != nil {
			return nil, fmt.Errorf("--mixture-file: %w", err)
		}
		if out, err = parseMixtureFile(file, data); err != nil {
			return nil, err
		}
	}
	for _, f := range flags {
		name, spec, err := parseMixtureFlag(f)
		if err != nil {
			return nil, err
		}
		if _, dup := out[name]; dup {
			return nil, fmt.Errorf("--mixture %q: mixture %s given twice", f, name)
		}
		out[name] = spec
	}
	return out, nil
}
