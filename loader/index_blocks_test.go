package loader_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/gload/gload/bench"
	"github.com/gload/gload/loader"
	"github.com/gload/gload/loader/dataset"
	"github.com/gload/gload/proto/gloadpb"
)

// A large dataset's index is checked block by block as plans read it: a corrupt lengths block opens fine (open
// reads no length) and then refuses every plan with the block named, instead of serving rows planned from it.
func TestCorruptIndexBlockRefusesPlans(t *testing.T) {
	const rows = 1<<20 + 5000 // past the size below which open checks every block
	dir := t.TempDir()
	if err := bench.WriteScaleDataset(dir, rows, 600_000, 2); err != nil {
		t.Fatal(err)
	}
	index := filepath.Join(dir, dataset.IndexFile)
	b, err := os.ReadFile(index)
	if err != nil {
		t.Fatal(err)
	}
	lengths := len(b) - 4*rows // the lengths end the file
	b[lengths+4*(3<<16+10)] ^= 0x40
	if err := os.WriteFile(index, b, 0o644); err != nil {
		t.Fatal(err)
	}
	ts := startServer(t, loader.Config{Datasets: map[string]string{"big": dir}, NoWriteIndex: true}, "unix")
	c := dial(t, ts.addr)
	open := &gloadpb.Open{Dataset: "big", Seed: 1, Policy: &gloadpb.BatchPolicy{BatchSize: 16}}
	for range 2 { // the second open finds the block already known bad
		_, err = c.Plan(t.Context(), open)
		if status.Code(err) != codes.FailedPrecondition || !strings.Contains(err.Error(), "block 3") {
			t.Fatalf("plan over a corrupt index block: %v; want FailedPrecondition naming block 3", err)
		}
	}
}
