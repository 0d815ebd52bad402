package loader_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gload/gload/loader"
	"github.com/gload/gload/proto/gloadpb"
)

// TestEvalPass: sequential + keep deals every row exactly once, in dataset
// order, over uneven ranks (11 batches over 3 ranks: 4, 4, 3), with any
// worker count.
func TestEvalPass(t *testing.T) {
	dir := t.TempDir()
	lengths := genLengths(41, 1, 90, 5)
	writeDataset(t, dir, lengths, 16, 8)
	ts := startServer(t, loader.Config{Datasets: map[string]string{"d": dir}}, "unix")
	c := dial(t, ts.addr)
	base := &gloadpb.Open{Dataset: "d", Seed: 9, Policy: &gloadpb.BatchPolicy{
		BatchSize: 4, PadMultiple: 8, Remainder: "keep", Sequential: true, PadId: -3, PadIdSet: true}}
	for _, tc := range []struct{ world, workers int }{{1, 1}, {3, 1}, {3, 2}, {4, 3}} {
		per := consumers(t, c, base, tc.world, tc.workers)
		next := 0
		for k := 0; ; k++ { // global batch g = k·world + rank
			any := false
			for r := range tc.world {
				if k >= len(per[r]) {
					continue
				}
				any = true
				g := per[r][k]
				if g.global != uint64(k*tc.world+r) {
					t.Fatalf("world %d: rank %d batch %d is global %d, want %d", tc.world, r, k, g.global, k*tc.world+r)
				}
				if err := checkBatch(g, lengths, 0, -3); err != nil {
					t.Fatal(err)
				}
				for _, ix := range g.index {
					if int(ix) != next {
						t.Fatalf("world %d workers %d: row %d, want %d (dataset order)", tc.world, tc.workers, ix, next)
					}
					next++
				}
			}
			if !any {
				break
			}
		}
		if next != len(lengths) {
			t.Fatalf("world %d workers %d: %d rows delivered, want all %d", tc.world, tc.workers, next, len(lengths))
		}
		if tc.world == 3 && (len(per[0]) != 4 || len(per[2]) != 3) {
			t.Fatalf("keep over 3 ranks: %d and %d batches, want 4 and 3", len(per[0]), len(per[2]))
		}
	}
	// Packed refuses sequential by name.
	open := cloneOpen(base)
	open.Policy = &gloadpb.BatchPolicy{Policy: "packed", BatchSize: 2, SeqLen: 128, Sequential: true}
	if _, _, _, err := pullAll(t.Context(), c, open, -1); err == nil || !strings.Contains(err.Error(), "policy.sequential") {
		t.Fatalf("packed + sequential: %v, want an error naming policy.sequential", err)
	}
}

// TestPadFromDataset: a dataset recording its pad token is padded with it
// unless the client names a pad_id (0 included, with pad_id_set); ListDatasets
// and Opened report it.
func TestPadFromDataset(t *testing.T) {
	dir := t.TempDir()
	lengths := genLengths(20, 1, 50, 2)
	writeDataset(t, dir, lengths, 20, 8)
	// What gload tokenize records (loader/dataset.SpecialTokens), added to the
	// dataset_info.json written above.
	path := filepath.Join(dir, "dataset_info.json")
	var info map[string]any
	b, _ := os.ReadFile(path)
	if err := json.Unmarshal(b, &info); err != nil {
		t.Fatal(err)
	}
	info["gload"] = map[string]any{"pad_from": "eos_token", "pad_token": "</s>", "pad_token_id": 77}
	b, _ = json.Marshal(info)
	os.WriteFile(path, b, 0o644)

	ts := startServer(t, loader.Config{Datasets: map[string]string{"d": dir}}, "unix")
	c := dial(t, ts.addr)
	ls, err := c.Datasets(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if d := ls[0]; d.PadId != 77 || d.PadToken != "</s>" || d.PadFrom != "eos_token" {
		t.Fatalf("DatasetInfo pad %d %q %q", d.PadId, d.PadToken, d.PadFrom)
	}
	for _, tc := range []struct {
		name string
		pol  *gloadpb.BatchPolicy
		want int32
	}{
		{"dataset", &gloadpb.BatchPolicy{BatchSize: 4}, 77},
		{"client", &gloadpb.BatchPolicy{BatchSize: 4, PadId: 5}, 5},
		{"client-zero", &gloadpb.BatchPolicy{BatchSize: 4, PadIdSet: true}, 0},
	} {
		bs, _, opened, err := pullAll(t.Context(), c, &gloadpb.Open{Dataset: "d", Policy: tc.pol}, -1)
		if err != nil {
			t.Fatal(err)
		}
		if opened.PadId != tc.want {
			t.Errorf("%s: Opened.pad_id %d, want %d", tc.name, opened.PadId, tc.want)
		}
		for _, g := range bs {
			if err := checkBatch(g, lengths, 0, tc.want); err != nil {
				t.Fatalf("%s: %v", tc.name, err)
			}
		}
	}
	// A malformed entry refuses the dataset at start, naming the file.
	os.WriteFile(path, []byte(`{"gload": {"pad_from": "pad_token", "pad_token_id": -1}}`), 0o644)
	if _, err := loader.NewServer(loader.Config{Datasets: map[string]string{"d": dir}}); err == nil || !strings.Contains(err.Error(), "dataset_info.json") {
		t.Fatalf("malformed gload entry: %v", err)
	}
}
