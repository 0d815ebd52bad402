package loader_test

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/gload/gload/internal/fixtures"
	"github.com/gload/gload/loader"
	"github.com/gload/gload/proto/gloadpb"
)

// serveRows streams a whole epoch of dir (bucketed, batches of 4, exact
// lengths) and returns every row's ids by dataset index.
func serveRows(t *testing.T, dir string) map[int][]int32 {
	t.Helper()
	ts := startServer(t, loader.Config{Datasets: map[string]string{"hf": dir}, NoWriteIndex: true}, "unix")
	c := dial(t, ts.addr)
	open := &gloadpb.Open{Dataset: "hf", Policy: &gloadpb.BatchPolicy{BatchSize: 4, PadMultiple: 1, Remainder: "wrap", PadId: -1}}
	bs, _, _, err := pullAll(t.Context(), c, open, -1)
	if err != nil {
		t.Fatal(err)
	}
	rows := map[int][]int32{}
	for _, g := range bs {
		for r := range g.rows {
			n := int(g.lengths[r])
			rows[int(g.index[r])] = g.ids[r*g.length : r*g.length+n]
			for _, v := range g.ids[r*g.length+n : (r+1)*g.length] {
				if v != -1 {
					t.Fatalf("batch %d row %d: padding %d, want -1", g.global, r, v)
				}
			}
		}
	}
	return rows
}

func compareRows(t *testing.T, got map[int][]int32, want [][]int64) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%d rows served, want %d", len(got), len(want))
	}
	for i, w := range want {
		g := got[i]
		if len(g) != len(w) {
			t.Fatalf("row %d: %d tokens, want %d", i, len(g), len(w))
		}
		for j := range w {
			if int64(g[j]) != w[j] {
				t.Fatalf("row %d token %d: %d, want %d", i, j, g[j], w[j])
			}
		}
	}
}

// TestHuggingFaceFixture serves the committed dataset that Hugging Face
// datasets wrote (int64 input_ids, 3 shards, record batches of 7, extra
// columns of other types).
func TestHuggingFaceFixture(t *testing.T) {
	src := filepath.Join("dataset", "testdata", "hf", "hf_int64_3shards")
	b, err := os.ReadFile(filepath.Join(src, "expected.json"))
	if err != nil {
		t.Fatal(err)
	}
	var exp struct {
		InputIDs [][]int64 `json:"input_ids"`
	}
	if err := json.Unmarshal(b, &exp); err != nil {
		t.Fatal(err)
	}
	compareRows(t, serveRows(t, src), exp.InputIDs)
}

func findPython(t *testing.T) string {
	t.Helper()
	return fixtures.Python(t, "datasets")
}

// TestHuggingFaceWritten has the venv's datasets package write a fresh
// dataset (int64 input_ids, several shards) and serves it.
func TestHuggingFaceWritten(t *testing.T) {
	py := findPython(t)
	dir := filepath.Join(t.TempDir(), "hfds")
	script := `
import sys, datasets
ids = [[(i * 31 + j) % 50000 for j in range(i % 37)] for i in range(500)]
features = datasets.Features({"input_ids": datasets.Sequence(datasets.Value("int64")), "text": datasets.Value("string")})
ds = datasets.Dataset.from_dict({"input_ids": ids, "text": [str(i) for i in range(500)]}, features=features)
assert str(ds.features["input_ids"].feature.dtype) == "int64", ds.features
ds.save_to_disk(sys.argv[1], num_shards=3)
`
	cmd := exec.Command(py, "-c", script, dir)
	cmd.Env = append(os.Environ(), "HF_DATASETS_CACHE="+t.TempDir(), "HF_HUB_OFFLINE=1")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("python: %v\n%s", err, out)
	}
	want := make([][]int64, 500)
	for i := range want {
		want[i] = []int64{}
		for j := range i % 37 {
			want[i] = append(want[i], int64((i*31+j)%50000))
		}
	}
	compareRows(t, serveRows(t, dir), want)
}
