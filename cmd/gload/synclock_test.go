package main

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gload/gload/loader/objstore/s3test"
)

// Four gload sync processes of one dataset into one directory at once (one per local rank) all succeed and leave
// the dataset; a sync of another dataset into it fails naming both; two different datasets synced at once into a
// fresh directory: one wins whole, the other fails clearly (issue 34 item 7).
func TestConcurrentSyncs(t *testing.T) {
	s3test.Start(t, "gload-test")
	bin := buildBinary(t)
	tmp := t.TempDir()
	a, b := filepath.Join(tmp, "a"), filepath.Join(tmp, "b")
	for dir, corpus := range map[string]string{a: exampleCorpus, b: bigCorpus(t, tmp)} {
		if _, e, code := gload(t, "", "tokenize", "--quiet", "--tokenizer", exampleTokenizer, "--shard-size", "200KB", "--out", dir, corpus); code != 0 {
			t.Fatalf("tokenize: %s", e)
		}
		if _, e, code := gload(t, "", "sync", "--quiet", dir, "s3://gload-test/"+filepath.Base(dir)); code != 0 {
			t.Fatalf("upload: %s", e)
		}
	}
	syncs := func(dst string, srcs ...string) []error {
		errs := make([]error, len(srcs))
		var wg sync.WaitGroup
		for i, src := range srcs {
			wg.Add(1)
			go func() {
				defer wg.Done()
				t0 := time.Now()
				out, err := exec.Command(bin, "sync", src, dst).CombinedOutput()
				t.Logf("sync %d %s: %.1fs %s", i, src, time.Since(t0).Seconds(), out)
				if err != nil {
					errs[i] = fmt.Errorf("%w: %s", err, out)
				}
			}()
		}
		wg.Wait()
		return errs
	}
	dst := filepath.Join(tmp, "copy")
	for i, err := range syncs(dst, "s3://gload-test/a", "s3://gload-test/a", "s3://gload-test/a", "s3://gload-test/a") {
		if err != nil {
			t.Errorf("sync %d of 4: %v", i, err)
		}
	}
	sameDataset(t, dst, a)
	if _, err := os.Stat(filepath.Join(dst, "gload.lock")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("lock file left behind: %v", err)
	}
	_, e, code := gload(t, "", "sync", "--quiet", "s3://gload-test/b", dst)
	if code == 0 || !strings.Contains(e, "s3://gload-test/a") || !strings.Contains(e, "s3://gload-test/b") {
		t.Fatalf("sync of another dataset into the copy: exit %d, %s", code, e)
	}
	sameDataset(t, dst, a)

	race := filepath.Join(tmp, "race")
	errs := syncs(race, "s3://gload-test/a", "s3://gload-test/b")
	switch {
	case errs[0] == nil && errs[1] != nil:
		sameDataset(t, race, a)
	case errs[1] == nil && errs[0] != nil:
		sameDataset(t, race, b)
	default:
		t.Fatalf("two datasets into one directory: %v / %v", errs[0], errs[1])
	}
	for _, err := range errs {
		if err != nil && !strings.Contains(err.Error(), "another dataset") {
			t.Errorf("the loser's error is not clear: %v", err)
		}
	}
}
