package loader_test

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gload/gload/loader"
	"github.com/gload/gload/loader/dataset"
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
// datasets writes them) with one id above 2^31 is refused when it is opened,
// naming the shard and the row (it failed only when the epoch reached the
// row): dataset.Open fails, and so does the server's start.
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
	shard := "data-00000-of-00001.arrow"
	for _, want := range []string{shard, "row 333", "2147483653", "does not fit in int32"} {
		_, err := dataset.Open(dir, dataset.OpenOptions{IndexDir: t.TempDir()})
		if !errors.Is(err, dataset.ErrUnsupported) || !strings.Contains(err.Error(), want) {
			t.Fatalf("Open: %v; want ErrUnsupported mentioning %q", err, want)
		}
		_, err = loader.NewServer(loader.Config{Datasets: map[string]string{"hf": dir}, NoGPUWatch: true, NoWriteIndex: true, IndexDir: t.TempDir()})
		if !errors.Is(err, loader.ErrDataset) || !strings.Contains(err.Error(), "dataset hf") || !strings.Contains(err.Error(), want) {
			t.Fatalf("NewServer: %v; want the dataset refused, mentioning %q", err, want)
		}
	}
}
