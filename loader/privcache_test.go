package loader_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gload/gload/internal/privdir"
	"github.com/gload/gload/loader"
)

// gload serve with an object-storage dataset and no cache directory of the user's ($HOME, $XDG_CACHE_HOME unset)
// caches under $TMPDIR/gload-cache-<uid>, made 0700 with 0600 files; a symlink planted there first is refused,
// naming it, and nothing is written through it (issue 34 item 6).
func TestServeRemotePrivateFallbackCache(t *testing.T) {
	remoteDataset(t)
	shared, err := os.MkdirTemp("", "gload-shared-tmp-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(shared) })
	os.Chmod(shared, 0o1777)
	t.Setenv("TMPDIR", shared)
	t.Setenv("HOME", "")
	t.Setenv("XDG_CACHE_HOME", "")
	root := privdir.TempRoot("gload-cache")
	loot := filepath.Join(shared, "loot")
	os.Mkdir(loot, 0o777)
	if err := os.Symlink(loot, root); err != nil {
		t.Fatal(err)
	}
	cfg := loader.Config{Datasets: map[string]string{"web": "s3://gload-test/web"}}
	srv, err := loader.NewServer(cfg)
	if err == nil {
		srv.Close()
		t.Fatal("served through a planted symlink as the cache")
	}
	if !strings.Contains(err.Error(), root) || !strings.Contains(err.Error(), "symbolic link") {
		t.Errorf("error does not name the planted cache: %v", err)
	}
	if ents, _ := os.ReadDir(loot); len(ents) > 0 {
		t.Fatalf("wrote %s through the planted symlink", ents[0].Name())
	}
	os.Remove(root)

	srv, err = loader.NewServer(cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	files := 0
	filepath.Walk(root, func(p string, fi os.FileInfo, err error) error {
		if err != nil {
			return nil
		}
		if fi.IsDir() && fi.Mode().Perm() != 0o700 {
			t.Errorf("%s: mode %04o, want 0700", p, fi.Mode().Perm())
		}
		if fi.Mode().IsRegular() {
			files++
			if fi.Mode().Perm() != 0o600 {
				t.Errorf("%s: mode %04o, want 0600", p, fi.Mode().Perm())
			}
		}
		return nil
	})
	if files == 0 {
		t.Error("nothing cached under the fallback")
	}
}
