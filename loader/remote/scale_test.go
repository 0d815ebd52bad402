package remote

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"testing"
	"time"

	"github.com/gload/gload/loader/dataset"
	"github.com/gload/gload/loader/objstore"
	"github.com/gload/gload/loader/objstore/s3test"
)

// TestFetchMetaScale measures fetching the metadata of a bucket dataset of GLOAD_REMOTE_INDEX_SCALE_ROWS rows
// (e.g. 100000000; skipped when unset) from the real S3 test server: a synthetic gload.index (shards of 2^22 rows;
// no shard objects are needed to fetch metadata) is uploaded, then FetchMeta runs and the test prints its time, the
// bytes it allocated and the peak of its live heap, and the same for the path it replaced (ReadSmall of the whole
// index, then UnmarshalIndex) for comparison. FetchMeta's peak is objstore's ranged download buffers (Parallel ×
// PartSize, 256 MiB by default), whatever the rows.
func TestFetchMetaScale(t *testing.T) {
	n, _ := strconv.ParseInt(os.Getenv("GLOAD_REMOTE_INDEX_SCALE_ROWS"), 10, 64)
	if n <= 0 {
		t.Skip("set GLOAD_REMOTE_INDEX_SCALE_ROWS (e.g. 100000000) to measure fetching an index of that many rows")
	}
	s3test.Start(t, "gload-test")
	ctx := context.Background()
	st, err := objstore.Open(ctx, objstore.URL{Bucket: "gload-test", Prefix: "scale"}, objstore.Config{})
	if err != nil {
		t.Fatal(err)
	}
	src := t.TempDir()
	func() {
		ix := &dataset.Index{TokenizerHash: "scale", Lengths: make([]uint32, n)}
		for i := range ix.Lengths {
			ix.Lengths[i] = 1 + uint32(i*2654435761>>7)%4096
		}
		const shardRows = 1 << 22
		for k, start := 0, int64(0); start < n; k, start = k+1, start+shardRows {
			rows := min(shardRows, n-start)
			var tok int64
			for _, l := range ix.Lengths[start : start+rows] {
				tok += int64(l)
			}
			ix.Shards = append(ix.Shards, dataset.ShardEntry{Name: fmt.Sprintf("data-%05d.arrow", k), Size: 1 << 40,
				Rows: rows, Tokens: tok, Batches: []dataset.BatchRef{{Offset: 8}}})
		}
		if err := dataset.WriteIndex(src, ix); err != nil {
			t.Fatal(err)
		}
	}()
	if err := st.Upload(ctx, dataset.IndexFile, filepath.Join(src, dataset.IndexFile)); err != nil {
		t.Fatal(err)
	}
	for _, name := range metaFiles {
		if err := st.Put(ctx, name, []byte(`{}`)); err != nil {
			t.Fatal(err)
		}
	}
	fi, _ := os.Stat(filepath.Join(src, dataset.IndexFile))
	// measure runs f twice: timed, with the bytes it allocates (TotalAlloc); then with a sampler that collects
	// garbage every 10 ms and keeps the peak of the live heap above the start (what the process must hold).
	measure := func(what string, f func() error) {
		runtime.GC()
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		t0 := time.Now()
		if err := f(); err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		took := time.Since(t0)
		runtime.ReadMemStats(&after)
		allocated := after.TotalAlloc - before.TotalAlloc
		runtime.GC()
		runtime.ReadMemStats(&before)
		stop, peak := make(chan struct{}), make(chan uint64)
		go func() {
			var top uint64
			var ms runtime.MemStats
			for {
				runtime.GC()
				runtime.ReadMemStats(&ms)
				top = max(top, ms.HeapAlloc)
				select {
				case <-stop:
					peak <- top
					return
				case <-time.After(10 * time.Millisecond):
				}
			}
		}()
		if err := f(); err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		close(stop)
		top := <-peak
		t.Logf("%s: %d rows, index %.1f MB: %.2f s, %.1f MB allocated, live heap peak %.1f MB above the start", what, n,
			float64(fi.Size())/1e6, took.Seconds(), float64(allocated)/1e6,
			float64(top-min(top, before.HeapAlloc))/1e6)
	}
	fetch := func(dir string) error {
		meta, err := FetchMeta(ctx, st, dir)
		if err != nil {
			return err
		}
		if meta.Index.Rows() != n {
			return fmt.Errorf("%d rows", meta.Index.Rows())
		}
		return meta.Close()
	}
	measure("FetchMeta (download to a file, header and block table checked, mapped)", func() error {
		return fetch(filepath.Join(t.TempDir(), "cache"))
	})
	kept := filepath.Join(t.TempDir(), "cache")
	if err := fetch(kept); err != nil {
		t.Fatal(err)
	}
	measure("FetchMeta again (the unchanged index kept)", func() error { return fetch(kept) })
	if fi.Size() > 1<<30 {
		t.Logf("before: refused, the index is above ReadSmall's 1 GiB cap (the old maxMetaBytes)")
		return
	}
	measure("before: ReadSmall of the whole index + UnmarshalIndex", func() error {
		b, err := st.ReadSmall(ctx, dataset.IndexFile, 1<<30)
		if err != nil {
			return err
		}
		_, err = dataset.UnmarshalIndex(b)
		return err
	})
}
