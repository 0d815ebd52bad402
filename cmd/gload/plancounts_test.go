package main

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/gload/gload/loader/client"
	"github.com/gload/gload/proto/gloadpb"
)

// TestServeKeepsPlanCounts: `gload serve` keeps a lazy plan's counting pass in --plan-counts-dir (by default the
// user cache directory's gload/plans), and a second server over the same dataset plans from the kept file (it
// refreshes the file's time, the least-recently-used order) and gives the same plan; --plan-counts-dir "" keeps none.
func TestServeKeepsPlanCounts(t *testing.T) {
	cache := t.TempDir()
	t.Setenv("XDG_CACHE_HOME", cache)
	open := &gloadpb.Open{Dataset: "wiki", Seed: 4,
		Policy: &gloadpb.BatchPolicy{Policy: "tokens", TokenBudget: 1 << 12, Planner: "lazy"}}
	plan := func(extra ...string) string {
		t.Helper()
		sock := startServe(t, append([]string{"--no-gpu-watch"}, extra...)...)
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		c, err := client.Dial(ctx, sock)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		p, err := c.Plan(ctx, open)
		if err != nil {
			t.Fatal(err)
		}
		return p.PlanHash
	}
	kept := func(dir string) []string {
		files, _ := filepath.Glob(filepath.Join(dir, "*.counts"))
		return files
	}

	first := plan()
	dflt := filepath.Join(cache, "gload", "plans")
	files := kept(dflt)
	if len(files) != 1 {
		t.Fatalf("default directory %s holds %v; want one kept file", dflt, files)
	}
	if fi, err := os.Stat(dflt); err != nil || fi.Mode().Perm() != 0o700 {
		t.Fatalf("%s: %v, %v; want mode 0700", dflt, fi, err)
	}
	old := time.Unix(1_000_000_000, 0)
	if err := os.Chtimes(files[0], old, old); err != nil {
		t.Fatal(err)
	}
	if again := plan(); again != first {
		t.Fatalf("a second server planned %s, the first %s", again, first)
	}
	if fi, err := os.Stat(files[0]); err != nil || !fi.ModTime().After(old) {
		t.Fatalf("the kept file was not read by the second server (its time is still %v): %v", fi.ModTime(), err)
	}

	explicit := filepath.Join(t.TempDir(), "counts")
	if plan("--plan-counts-dir", explicit) != first || len(kept(explicit)) != 1 {
		t.Fatalf("--plan-counts-dir %s: kept %v", explicit, kept(explicit))
	}
	none := filepath.Join(t.TempDir(), "cache")
	t.Setenv("XDG_CACHE_HOME", none)
	if plan("--plan-counts-dir", "") != first {
		t.Fatal("a server keeping no counts planned another epoch")
	}
	if _, err := os.Stat(none); !os.IsNotExist(err) {
		t.Fatalf(`--plan-counts-dir "": something was written under %s (%v)`, none, err)
	}
}
