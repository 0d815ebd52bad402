package loader_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/gload/gload/bench"
	"github.com/gload/gload/loader"
	"github.com/gload/gload/loader/dataset"
	"github.com/gload/gload/loader/objstore"
	"github.com/gload/gload/loader/objstore/s3test"
	"github.com/gload/gload/loader/remote"
	"github.com/gload/gload/proto/gloadpb"
)

// A bucket dataset's index is checked as a local one is: its header and block table when it is downloaded, its
// lengths block by block as plans read them. A corrupt lengths block in a large dataset (past the size whose index
// is checked in full) opens fine and then refuses every plan with the block and the cached index named.
func TestObjectStorageCorruptIndexBlockRefusesPlans(t *testing.T) {
	const rows = 1<<20 + 5000 // past the size below which every block is checked when the index is fetched
	s3test.Start(t, "gload-test")
	dir := t.TempDir()
	if err := bench.WriteScaleDataset(dir, rows, 600_000, 2); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	st, err := objstore.Open(ctx, objstore.URL{Bucket: "gload-test", Prefix: "big"}, objstore.Config{})
	if err != nil {
		t.Fatal(err)
	}
	if err := remote.Upload(ctx, dir, st); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(filepath.Join(dir, dataset.IndexFile))
	if err != nil {
		t.Fatal(err)
	}
	lengths := len(b) - 4*rows // the lengths end the file
	b[lengths+4*(3<<16+10)] ^= 0x40
	if err := st.Put(ctx, dataset.IndexFile, b); err != nil {
		t.Fatal(err)
	}
	cacheDir := t.TempDir()
	ts := startServer(t, loader.Config{
		Datasets: map[string]string{"big": "s3://gload-test/big"},
		Remote:   loader.RemoteConfig{CacheDir: cacheDir},
	}, "unix")
	c := dial(t, ts.addr)
	open := &gloadpb.Open{Dataset: "big", Seed: 1, Policy: &gloadpb.BatchPolicy{BatchSize: 16}}
	for range 2 { // the second open finds the block already known bad
		_, err = c.Plan(t.Context(), open)
		t.Logf("plan: %v", err)
		if status.Code(err) != codes.FailedPrecondition || !strings.Contains(err.Error(), "block 3") ||
			!strings.Contains(err.Error(), filepath.Join("gload-test", "big", dataset.IndexFile)) {
			t.Fatalf("plan over a corrupt index block of a bucket dataset: %v; want FailedPrecondition naming block 3 and the cached index", err)
		}
	}
}
