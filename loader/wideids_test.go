package loader_test

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"google.golang.org/grpc/codes"

	"github.com/gload/gload/loader"
	"github.com/gload/gload/loader/dataset"
	"github.com/gload/gload/proto/gloadpb"
)

// hfPython returns $GLOAD_PYTHON (a python with datasets), or skips the test
// outside CI and fails it in CI.
func hfPython(t *testing.T) string {
	t.Helper()
	py := os.Getenv("GLOAD_PYTHON")
	if _, err := os.Stat(py); py == "" || err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("GLOAD_PYTHON=%q: %v (CI needs a python with datasets)", py, err)
		}
		t.Skip("GLOAD_PYTHON not set: skipping (set it to a python with datasets, e.g. .venv/bin/python)")
	}
	return py
}

// TestInt64IDsBeyondInt32: a Hugging Face dataset (input_ids int64, as
// datasets writes them) with one id above 2^31 fails at the first touch of
// that id's record batch — the first batch of the epoch — naming the shard and
// the row, not when the epoch reaches the row; the stream ends with
// FAILED_PRECONDITION and the server refuses the dataset from then on.
func TestInt64IDsBeyondInt32(t *testing.T) {
	py := hfPython(t)
	dir := filepath.Join(t.TempDir(), "hf")
	script := `
import sys, datasets
rows = [[i + 1, i + 2, i + 3] for i in range(400)]
rows[333] = [7, 2**31 + 5, 9]
datasets.Dataset.from_dict({"input_ids": rows}).save_to_disk(sys.argv[1])
`
	if out, err := exec.Command(py, "-c", script, dir).CombinedOutput(); err != nil {
		t.Fatalf("write HF dataset: %v\n%s", err, out)
	}
	d, err := dataset.Open(dir, dataset.OpenOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if d.Shards()[0].IDsType != "list<int64>" {
		t.Fatalf("ids stored as %s, want list<int64>", d.Shards()[0].IDsType)
	}
	shard := d.Shards()[0].Name
	_, err = d.AppendTokens(nil, 0)
	d.Close()
	if !errors.Is(err, dataset.ErrUnsupported) || !strings.Contains(err.Error(), shard) || !strings.Contains(err.Error(), "row 333") ||
		!strings.Contains(err.Error(), "2147483653") {
		t.Fatalf("row 0 of the batch holding row 333: %v; want ErrUnsupported naming %s, row 333 and the id", err, shard)
	}

	ts := startServer(t, loader.Config{Datasets: map[string]string{"hf": dir}, NoGPUWatch: true, NoWriteIndex: true}, "unix")
	c := dial(t, ts.addr)
	open := &gloadpb.Open{Dataset: "hf", Policy: &gloadpb.BatchPolicy{BatchSize: 8}, Prefetch: 1}
	s, err := c.Stream(t.Context(), open)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	_, err = s.Next(t.Context())
	checkStatus(t, "Batches", err, codes.FailedPrecondition, []string{"dataset hf", shard, "row 333", "does not fit in int32"})
	_, err = c.Stream(t.Context(), open)
	checkStatus(t, "Batches", err, codes.FailedPrecondition, []string{"dataset hf", "row 333"})
}
