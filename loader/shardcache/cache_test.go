package shardcache_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"hash/crc32"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gload/gload/loader/objstore"
	"github.com/gload/gload/loader/objstore/s3test"
	"github.com/gload/gload/loader/shardcache"
)

// upload puts n shards of size bytes each (distinct content) under s3://gload-test/ds and returns the store,
// the shard list and a verify function checking each file's CRC.
func upload(t *testing.T, n, size int) (*objstore.Store, []shardcache.Shard, func(string, string) error) {
	t.Helper()
	s3test.Start(t, "gload-test")
	u, _ := objstore.ParseURL("s3://gload-test/ds")
	st, err := objstore.Open(context.Background(), u, objstore.Config{})
	if err != nil {
		t.Fatal(err)
	}
	sums := map[string]uint32{}
	var shards []shardcache.Shard
	for i := 0; i < n; i++ {
		name := fmt.Sprintf("data-%05d-of-%05d.arrow", i, n)
		b := bytes.Repeat([]byte{byte(i + 1)}, size)
		if err := st.Put(context.Background(), name, b); err != nil {
			t.Fatal(err)
		}
		sums[name] = crc32.ChecksumIEEE(b)
		shards = append(shards, shardcache.Shard{Name: name, Size: int64(size)})
	}
	verify := func(name, path string) error {
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		if crc32.ChecksumIEEE(b) != sums[name] {
			return errors.New("checksum mismatch")
		}
		return nil
	}
	return st, shards, verify
}

func diskBytes(t *testing.T, dir string) int64 {
	var n int64
	ents, _ := os.ReadDir(dir)
	for _, e := range ents {
		if fi, err := e.Info(); err == nil && !strings.HasSuffix(e.Name(), objstore.TempSuffix) {
			n += fi.Size()
		}
	}
	return n
}

// A cache a third of the dataset's size serves a whole pass in plan order: every shard is downloaded once per
// pass, the disk never holds more than the limit, and prefetch makes most acquisitions hits.
func TestBoundedCachePlanOrder(t *testing.T) {
	const n, size = 9, 64 << 10
	st, shards, verify := upload(t, n, size)
	dir := t.TempDir()
	c, err := shardcache.New(st, shards, shardcache.Options{Dir: dir, Limit: 3 * size, Ahead: 2, Verify: verify})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	order := []string{}
	for _, k := range []int{4, 0, 8, 2, 6, 1, 7, 3, 5} {
		order = append(order, shards[k].Name)
	}
	id := c.Want(order)
	ctx := context.Background()
	for i, name := range order {
		c.Advance(id, i)
		p, err := c.Acquire(ctx, name, nil)
		if err != nil {
			t.Fatal(err)
		}
		if err := verify(name, p); err != nil {
			t.Fatalf("shard %s served unverified: %v", name, err)
		}
		time.Sleep(30 * time.Millisecond) // a "step": prefetch runs meanwhile
		c.Release(name)
		if got := diskBytes(t, dir); got > 3*size {
			t.Fatalf("cache holds %d bytes, limit %d", got, 3*size)
		}
	}
	c.Forget(id)
	s := c.Stats()
	if s.Downloads != n || s.Failures != 0 {
		t.Fatalf("stats %+v: want %d downloads, no failures", s, n)
	}
	if s.Hits < n/2 {
		t.Errorf("only %d of %d acquisitions were prefetched (stats %+v)", s.Hits, n, s)
	}
	if s.Evictions < n-3 {
		t.Errorf("evictions %d, want ≥ %d", s.Evictions, n-3)
	}
}

// A stream that registers only the next few shards and moves its list on (Rewant) gets them prefetched in that
// order like one that registered its whole list, each downloaded once.
func TestRewantMovesTheList(t *testing.T) {
	const n, size = 9, 64 << 10
	st, shards, verify := upload(t, n, size)
	c, err := shardcache.New(st, shards, shardcache.Options{Dir: t.TempDir(), Limit: 3 * size, Ahead: 2, Verify: verify})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	order := []string{}
	for _, k := range []int{4, 0, 8, 2, 6, 1, 7, 3, 5} {
		order = append(order, shards[k].Name)
	}
	id := c.Want(order[:3])
	ctx := context.Background()
	for i, name := range order {
		if i > 0 {
			c.Rewant(id, order[i:min(i+3, n)])
		}
		p, err := c.Acquire(ctx, name, nil)
		if err != nil {
			t.Fatal(err)
		}
		if err := verify(name, p); err != nil {
			t.Fatalf("shard %s served unverified: %v", name, err)
		}
		time.Sleep(30 * time.Millisecond) // a "step": prefetch runs meanwhile
		c.Release(name)
	}
	c.Forget(id)
	s := c.Stats()
	if s.Downloads != n || s.Failures != 0 {
		t.Fatalf("stats %+v: want %d downloads, no failures", s, n)
	}
	if s.Hits < n/2 {
		t.Errorf("only %d of %d acquisitions were prefetched (stats %+v)", s.Hits, n, s)
	}
}

// A restarted cache keeps verified complete shards and removes partial downloads and corrupt files.
func TestRestartReusesCache(t *testing.T) {
	st, shards, verify := upload(t, 3, 4096)
	dir := t.TempDir()
	c, err := shardcache.New(st, shards, shardcache.Options{Dir: dir, Verify: verify})
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range shards[:2] {
		if _, err := c.Acquire(context.Background(), s.Name, nil); err != nil {
			t.Fatal(err)
		}
		c.Release(s.Name)
	}
	c.Close()
	// What a killed process leaves: a partial download, and (say) a shard damaged on disk.
	os.WriteFile(filepath.Join(dir, "."+shards[2].Name+".abc"+objstore.TempSuffix), []byte("half"), 0o644)
	b, _ := os.ReadFile(filepath.Join(dir, shards[1].Name))
	b[10] ^= 0xff
	os.WriteFile(filepath.Join(dir, shards[1].Name), b, 0o644)

	c2, err := shardcache.New(st, shards, shardcache.Options{Dir: dir, Verify: verify})
	if err != nil {
		t.Fatal(err)
	}
	defer c2.Close()
	s := c2.Stats()
	if s.ResumedFromDisk != 1 || s.SweptTemporaryFile != 1 {
		t.Fatalf("restart stats %+v: want 1 shard reused, 1 partial file swept", s)
	}
	for _, sh := range shards {
		p, err := c2.Acquire(context.Background(), sh.Name, nil)
		if err != nil {
			t.Fatal(err)
		}
		if err := verify(sh.Name, p); err != nil {
			t.Fatalf("%s: %v", sh.Name, err)
		}
		c2.Release(sh.Name)
	}
	if s := c2.Stats(); s.Downloads != 2 || s.Hits != 1 {
		t.Fatalf("after restart %+v: want the reused shard a hit and 2 downloads", s)
	}
}

// Many readers at once, a small cache: nobody deadlocks, everybody gets verified data (run under -race).
func TestConcurrentReaders(t *testing.T) {
	const n, size = 6, 16 << 10
	st, shards, verify := upload(t, n, size)
	c, err := shardcache.New(st, shards, shardcache.Options{Dir: t.TempDir(), Limit: 2 * size, Fetch: 3, Verify: verify})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	for r := 0; r < 8; r++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var names []string
			for i := 0; i < n; i++ {
				names = append(names, shards[(i*(r+1)+r)%n].Name)
			}
			id := c.Want(names)
			defer c.Forget(id)
			for i, name := range names {
				c.Advance(id, i)
				p, err := c.Acquire(ctx, name, nil)
				if err != nil {
					errs <- err
					return
				}
				if err := verify(name, p); err != nil {
					errs <- fmt.Errorf("%s: %w", name, err)
				}
				c.Release(name)
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
}

// A shard that keeps failing verification is an error naming it, and nothing is left under its name.
func TestCorruptObjectNeverServed(t *testing.T) {
	st, shards, _ := upload(t, 1, 1024)
	dir := t.TempDir()
	c, err := shardcache.New(st, shards, shardcache.Options{Dir: dir, Verify: func(string, string) error {
		return errors.New("content hash differs from gload.index")
	}})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	_, err = c.Acquire(context.Background(), shards[0].Name, nil)
	if err == nil || !strings.Contains(err.Error(), shards[0].Name) || !errors.Is(err, objstore.ErrVerify) {
		t.Fatalf("Acquire of a corrupt object = %v", err)
	}
	if _, serr := os.Stat(filepath.Join(dir, shards[0].Name)); !os.IsNotExist(serr) {
		t.Fatal("corrupt shard left under its final name")
	}
}

// Readers pinning more than the bound holds make the cache grow past it (no deadlock); once they release, it is
// back under the bound.
func TestOverLimitShrinksBack(t *testing.T) {
	const n, size = 4, 8 << 10
	st, shards, verify := upload(t, n, size)
	dir := t.TempDir()
	c, err := shardcache.New(st, shards, shardcache.Options{Dir: dir, Limit: 2 * size, Verify: verify})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	for _, s := range shards {
		if _, err := c.Acquire(context.Background(), s.Name, nil); err != nil {
			t.Fatal(err)
		}
	}
	if got := diskBytes(t, dir); got != n*size || !c.Stats().OverLimit {
		t.Fatalf("with every shard pinned the cache holds %d bytes (over limit %v), want all %d", got, c.Stats().OverLimit, n*size)
	}
	for _, s := range shards {
		c.Release(s.Name)
	}
	deadline := time.Now().Add(5 * time.Second)
	for diskBytes(t, dir) > 2*size && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if got := diskBytes(t, dir); got > 2*size {
		t.Fatalf("after the releases the cache holds %d bytes, bound %d", got, 2*size)
	}
}
