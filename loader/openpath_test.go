package loader_test

import (
	"context"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/gload/gload/loader"
	"github.com/gload/gload/proto/gloadpb"
)

func TestOpenPath(t *testing.T) {
	root := t.TempDir()
	data := filepath.Join(root, "wiki data")
	os.Mkdir(data, 0o755)
	lengths := genLengths(300, 1, 50, 3)
	writeDataset(t, data, lengths, 100, 16)
	file := filepath.Join(root, "file")
	os.WriteFile(file, []byte("x"), 0o644)
	ts := startServer(t, loader.Config{PathsOnly: true, NoGPUWatch: true, NoWriteIndex: true}, "unix")
	c := dial(t, ts.addr)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()

	for _, tc := range []struct {
		name, path string
		code       codes.Code
	}{
		{"empty", "", codes.InvalidArgument},
		{"relative", "wiki", codes.InvalidArgument},
		{"nul", data + "\x00", codes.InvalidArgument},
		{"missing", filepath.Join(root, "nope"), codes.NotFound},
		{"file", file, codes.InvalidArgument},
		{"not a dataset", root, codes.FailedPrecondition},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, _, err := c.OpenPath(ctx, tc.path)
			if status.Code(err) != tc.code {
				t.Fatalf("OpenPath(%q): %v, want %s", tc.path, err, tc.code)
			}
		})
	}

	// Eight clients at once: one opens it, all get the same name.
	var wg sync.WaitGroup
	names := make([]string, 8)
	opened := make([]bool, 8)
	errs := make([]error, 8)
	for i := range names {
		wg.Add(1)
		go func() {
			defer wg.Done()
			info, o, err := c.OpenPath(ctx, data)
			errs[i], opened[i] = err, o
			if err == nil {
				names[i] = info.Name
			}
		}()
	}
	wg.Wait()
	n := 0
	for i := range names {
		if errs[i] != nil {
			t.Fatal(errs[i])
		}
		if names[i] != names[0] {
			t.Fatalf("names %v", names)
		}
		if opened[i] {
			n++
		}
	}
	if n != 1 {
		t.Fatalf("%d calls opened the dataset, want 1", n)
	}
	if !regexp.MustCompile(`^wiki_data-[0-9a-f]{12}$`).MatchString(names[0]) {
		t.Fatalf("name %q", names[0])
	}
	h, err := c.Health(ctx)
	if err != nil || len(h.Datasets) != 1 || h.Datasets[0] != names[0] || h.DatasetInfo[0].Rows != 300 {
		t.Fatalf("health %v, %v", h, err)
	}
	// Served like a dataset the server was started with: every row once.
	batches, _, _, err := pullAll(ctx, c, &gloadpb.Open{Dataset: names[0], Policy: &gloadpb.BatchPolicy{BatchSize: 8, Remainder: "keep", Sequential: true, NoWarmup: true}}, -1)
	if err != nil {
		t.Fatal(err)
	}
	seen := map[int64]int{}
	for _, b := range batches {
		for _, i := range b.index {
			seen[i]++
		}
	}
	if len(seen) != len(lengths) {
		t.Fatalf("%d rows seen, want %d", len(seen), len(lengths))
	}
	for i, k := range seen {
		if k != 1 {
			t.Fatalf("row %d seen %d times", i, k)
		}
	}
}

func TestOpenPathOnlyOverUnixSocket(t *testing.T) {
	data := t.TempDir()
	writeDataset(t, data, genLengths(10, 1, 9, 1), 10, 4)
	ts := startServer(t, loader.Config{PathsOnly: true, NoGPUWatch: true, NoWriteIndex: true}, "tcp")
	c := dial(t, ts.addr)
	_, _, err := c.OpenPath(context.Background(), data)
	if status.Code(err) != codes.PermissionDenied {
		t.Fatalf("OpenPath over TCP: %v, want PermissionDenied", err)
	}
}

func TestPathsOnlyNeedsFlag(t *testing.T) {
	if _, err := loader.NewServer(loader.Config{NoGPUWatch: true}); err == nil {
		t.Fatal("a server without datasets started without PathsOnly")
	}
}

// A dataset in object storage opened by URL: served like one the server was
// started with (every row once).
func TestOpenPathObjectStorage(t *testing.T) {
	lengths, _, _ := remoteDataset(t)
	ts := startServer(t, loader.Config{PathsOnly: true, NoGPUWatch: true, Remote: loader.RemoteConfig{CacheDir: t.TempDir()}}, "unix")
	c := dial(t, ts.addr)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	info, opened, err := c.OpenPath(ctx, "s3://gload-test/web")
	if err != nil || !opened || !strings.HasPrefix(info.Name, "web-") || info.Rows != uint64(len(lengths)) {
		t.Fatalf("OpenPath: %v, %v, %v", info, opened, err)
	}
	batches, _, _, err := pullAll(ctx, c, &gloadpb.Open{Dataset: info.Name, Policy: &gloadpb.BatchPolicy{BatchSize: 50, Remainder: "keep", Sequential: true, NoWarmup: true}}, -1)
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, b := range batches {
		if err := checkBatch(b, lengths, 0, 0); err != nil {
			t.Fatal(err)
		}
		n += b.rows
	}
	if n != len(lengths) {
		t.Fatalf("%d rows, want %d", n, len(lengths))
	}
	// Its shard cache shows in /metrics like a started dataset's.
	if m := scrape(t, ts.srv); !strings.Contains(m, `gload_remote_downloads_total{dataset="`+info.Name+`"}`) {
		t.Fatalf("no remote metrics for %s:\n%s", info.Name, grepLines(m, "gload_remote"))
	}
}
