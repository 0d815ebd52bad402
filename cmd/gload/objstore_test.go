package main

import (
	"bytes"
	"context"
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/gload/gload/loader/client"
	"github.com/gload/gload/loader/dataset"
	"github.com/gload/gload/loader/objstore"
	"github.com/gload/gload/loader/objstore/s3test"
	"github.com/gload/gload/loader/remote"
	"github.com/gload/gload/proto/gloadpb"
)

// shardFiles returns the .arrow and .json files of a dataset directory with their bytes.
func shardFiles(t *testing.T, dir string) map[string][]byte {
	t.Helper()
	out := map[string][]byte{}
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range ents {
		if e.Name() == remote.SourceFile {
			continue // gload sync's record of where a copy came from, not part of the dataset
		}
		if strings.HasSuffix(e.Name(), ".arrow") || strings.HasSuffix(e.Name(), ".json") {
			b, err := os.ReadFile(filepath.Join(dir, e.Name()))
			if err != nil {
				t.Fatal(err)
			}
			out[e.Name()] = b
		}
	}
	return out
}

func sameDataset(t *testing.T, got, want string) {
	t.Helper()
	g, w := shardFiles(t, got), shardFiles(t, want)
	var names []string
	for n := range w {
		names = append(names, n)
	}
	sort.Strings(names)
	if len(g) != len(w) {
		t.Fatalf("%s has %d files, %s has %d", got, len(g), want, len(w))
	}
	for _, n := range names {
		if !bytes.Equal(g[n], w[n]) {
			t.Fatalf("%s differs between %s and %s", n, got, want)
		}
	}
	gi, err := dataset.ReadIndex(got)
	if err != nil {
		t.Fatal(err)
	}
	wi, err := dataset.ReadIndex(want)
	if err != nil {
		t.Fatal(err)
	}
	if len(gi.Lengths) != len(wi.Lengths) || len(gi.Shards) != len(wi.Shards) {
		t.Fatalf("indexes differ: %d/%d rows, %d/%d shards", len(gi.Lengths), len(wi.Lengths), len(gi.Shards), len(wi.Shards))
	}
}

func bucketNames(t *testing.T, root string) []string {
	t.Helper()
	var names []string
	filepath.Walk(root, func(p string, fi os.FileInfo, err error) error {
		if err == nil && !fi.IsDir() && !strings.Contains(p, ".vgw") {
			rel, _ := filepath.Rel(root, p)
			names = append(names, rel)
		}
		return nil
	})
	return names
}

// Tokenize into a bucket, sync it back: the same bytes as a local run, nothing staged left in the bucket.
func TestTokenizeToS3ThenSync(t *testing.T) {
	srv := s3test.Start(t, "gload-test")
	tmp := t.TempDir()
	local := filepath.Join(tmp, "local")
	common := []string{"--quiet", "--tokenizer", exampleTokenizer, "--shard-size", "200KB", "--workers", "2"}
	if _, e, code := gload(t, "", append([]string{"tokenize", "--out", local}, append(common, exampleCorpus)...)...); code != 0 {
		t.Fatalf("local tokenize: %s", e)
	}
	out, e, code := gload(t, "", append([]string{"tokenize", "--out", "s3://gload-test/udhr", "--stage", filepath.Join(tmp, "stage")}, append(common, exampleCorpus)...)...)
	if code != 0 {
		t.Fatalf("tokenize to s3: %s", e)
	}
	if !strings.Contains(out, "s3://gload-test/udhr") {
		t.Errorf("summary does not name the bucket: %s", out)
	}
	for _, n := range bucketNames(t, filepath.Join(srv.Root, "gload-test")) {
		if strings.Contains(n, ".gload-upload") || strings.Contains(n, "progress") {
			t.Errorf("staged object left in the bucket: %s", n)
		}
	}
	if _, err := os.Stat(filepath.Join(tmp, "stage")); !os.IsNotExist(err) {
		t.Errorf("stage directory left after a successful upload")
	}
	copyDir := filepath.Join(tmp, "copy")
	if _, e, code := gload(t, "", "sync", "--quiet", "s3://gload-test/udhr", copyDir); code != 0 {
		t.Fatalf("sync: %s", e)
	}
	sameDataset(t, copyDir, local)

	// A second tokenize into the same URL is refused without --overwrite.
	_, e, code = gload(t, "", append([]string{"tokenize", "--out", "s3://gload-test/udhr"}, append(common, exampleCorpus)...)...)
	if code == 0 || !strings.Contains(e, "--overwrite") {
		t.Fatalf("tokenize over a complete bucket dataset: exit %d, %s", code, e)
	}
	// Upload of a local dataset to another prefix, synced back: identical.
	if _, e, code := gload(t, "", "sync", local, "s3://gload-test/uploaded"); code != 0 {
		t.Fatalf("sync upload: %s", e)
	}
	copy2 := filepath.Join(tmp, "copy2")
	if _, e, code := gload(t, "", "sync", "--quiet", "s3://gload-test/uploaded", copy2); code != 0 {
		t.Fatalf("sync: %s", e)
	}
	sameDataset(t, copy2, local)
}

// An upload that breaks off leaves the bucket without gload.index (sync refuses it, naming --resume); --resume
// with the local stage gone continues from the bucket and ends with the same dataset.
func TestTokenizeToS3ResumeFromBucket(t *testing.T) {
	srv := s3test.Start(t, "gload-test")
	proxy := s3test.Proxy(t, srv.Endpoint)
	tmp := t.TempDir()
	local := filepath.Join(tmp, "local")
	common := []string{"--quiet", "--tokenizer", exampleTokenizer, "--shard-size", "200KB", "--workers", "2"}
	if _, e, code := gload(t, "", append([]string{"tokenize", "--out", local}, append(common, exampleCorpus)...)...); code != 0 {
		t.Fatalf("local tokenize: %s", e)
	}
	stage := filepath.Join(tmp, "stage")
	args := append([]string{"tokenize", "--out", "s3://gload-test/udhr", "--stage", stage, "--s3-endpoint", proxy.Endpoint}, append(common, exampleCorpus)...)
	proxy.FailAfter(12, 1<<30, "gload-upload/") // staged shard uploads fail after the first few requests
	_, e, code := gload(t, "", args...)
	if code == 0 {
		t.Fatal("tokenize succeeded through a failing store")
	}
	if !strings.Contains(e, "s3://gload-test/udhr/.gload-upload/") {
		t.Errorf("error does not name the object: %s", e)
	}
	for _, n := range bucketNames(t, filepath.Join(srv.Root, "gload-test")) {
		if strings.HasSuffix(n, dataset.IndexFile) {
			t.Fatalf("interrupted upload left %s", n)
		}
	}
	proxy.Fail(0, "")
	os.RemoveAll(stage) // another machine: only the bucket remains
	_, e, code = gload(t, "", "sync", "--quiet", "--s3-endpoint", proxy.Endpoint, "s3://gload-test/udhr", filepath.Join(tmp, "early"))
	if code == 0 || !strings.Contains(e, "--resume") {
		t.Fatalf("sync of an unfinished upload: exit %d, %s", code, e)
	}
	if _, e, code := gload(t, "", append(args, "--resume")...); code != 0 {
		t.Fatalf("tokenize --resume from the bucket: %s", e)
	}
	copyDir := filepath.Join(tmp, "copy")
	if _, e, code := gload(t, "", "sync", "--quiet", "--s3-endpoint", proxy.Endpoint, "s3://gload-test/udhr", copyDir); code != 0 {
		t.Fatalf("sync: %s", e)
	}
	sameDataset(t, copyDir, local)
}

// Wrong credentials: a clear error, never the secret.
func TestS3WrongCredentialsMessage(t *testing.T) {
	s3test.Start(t, "gload-test")
	const secret = "wrong-secret-for-the-test-1234"
	t.Setenv("AWS_SECRET_ACCESS_KEY", secret)
	_, e, code := gload(t, "", "sync", "--quiet", "s3://gload-test/udhr", t.TempDir())
	if code == 0 || strings.Contains(e, secret) || !strings.Contains(e, "credentials") {
		t.Fatalf("sync with a wrong secret: exit %d, %q", code, e)
	}
}

// gload serve killed (-9) while it downloads shards: the cache holds no partial shard under a final name, and the
// restarted server reuses what was complete and serves a whole epoch.
func TestServeFromS3KilledMidDownload(t *testing.T) {
	srv := s3test.Start(t, "gload-test")
	proxy := s3test.Proxy(t, srv.Endpoint)
	bin := buildBinary(t)
	tmp := t.TempDir()
	local := filepath.Join(tmp, "local")
	corpus := bigCorpus(t, tmp)
	if _, e, code := gload(t, "", "tokenize", "--quiet", "--tokenizer", exampleTokenizer, "--shard-size", "256KB", "--out", local, corpus); code != 0 {
		t.Fatalf("tokenize: %s", e)
	}
	if _, e, code := gload(t, "", "sync", local, "s3://gload-test/web"); code != 0 {
		t.Fatalf("upload: %s", e)
	}
	ix, err := dataset.ReadIndex(local)
	if err != nil {
		t.Fatal(err)
	}
	if len(ix.Shards) < 4 {
		t.Fatalf("only %d shards: the corpus is too small for this test", len(ix.Shards))
	}
	cache := filepath.Join(tmp, "cache")
	sock := filepath.Join(tmp, "gload.sock")
	serve := func() *exec.Cmd {
		cmd := exec.Command(bin, "serve", "--dataset", "web=s3://gload-test/web", "--cache", cache, "--cache-fetch", "1",
			"--s3-endpoint", proxy.Endpoint, "--listen", "unix://"+sock, "--no-gpu-watch", "--log-level", "warn")
		cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		return cmd
	}
	proxy.Slow(50 * time.Millisecond) // ~1.3 MB/s: each shard takes a while
	cmd := serve()
	dsDir := filepath.Join(cache, "s3", "gload-test", "web")
	// Pull batches in the background so shards are fetched; kill the server once a download is under way.
	waitFor(t, 30*time.Second, func() bool { _, err := os.Stat(sock); return err == nil })
	cl := newGoClient(t, "unix://"+sock)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		s, err := cl.Stream(ctx, &gloadpb.Open{Dataset: "web", Policy: &gloadpb.BatchPolicy{BatchSize: 4}})
		if err == nil {
			for {
				b, err := s.Next(ctx)
				if err != nil {
					return
				}
				b.Release()
			}
		}
	}()
	waitFor(t, 30*time.Second, func() bool {
		ents, _ := os.ReadDir(dsDir)
		for _, e := range ents {
			if strings.HasSuffix(e.Name(), objstore.TempSuffix) {
				return true
			}
		}
		return false
	})
	cmd.Process.Signal(syscall.SIGKILL)
	cmd.Wait()
	complete := map[string]bool{}
	ents, _ := os.ReadDir(dsDir)
	entries := map[string]dataset.ShardEntry{}
	for _, e := range ix.Shards {
		entries[e.Name] = e
	}
	for _, e := range ents {
		if ent, ok := entries[e.Name()]; ok {
			if err := remote.VerifyShard(filepath.Join(dsDir, e.Name()), ent); err != nil {
				t.Fatalf("after kill -9 the cache holds a bad shard under its final name: %v", err)
			}
			complete[e.Name()] = true
		}
	}
	if len(complete) == len(ix.Shards) {
		t.Fatal("every shard was downloaded before the kill: the test did not interrupt a download")
	}
	before := map[string]uint64{}
	for name := range complete {
		fi, _ := os.Stat(filepath.Join(dsDir, name))
		before[name] = fi.Sys().(*syscall.Stat_t).Ino
	}

	proxy.Slow(0)
	os.Remove(sock)
	cmd = serve()
	defer func() { cmd.Process.Signal(syscall.SIGTERM); cmd.Wait() }()
	waitFor(t, 30*time.Second, func() bool { _, err := os.Stat(sock); return err == nil })
	cl = newGoClient(t, "unix://"+sock)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	s, err := cl.Stream(ctx, &gloadpb.Open{Dataset: "web", Policy: &gloadpb.BatchPolicy{BatchSize: 4, Remainder: "wrap"}})
	if err != nil {
		t.Fatal(err)
	}
	rows := 0
	seen := map[int64]bool{}
	for {
		b, err := s.Next(ctx)
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		for _, i := range b.Index() {
			seen[i] = true
		}
		rows += b.Rows
		b.Release()
	}
	if len(seen) != int(ix.Rows()) {
		t.Fatalf("restarted server delivered %d distinct rows of %d", len(seen), ix.Rows())
	}
	ents, _ = os.ReadDir(dsDir)
	for _, e := range ents {
		if strings.HasSuffix(e.Name(), objstore.TempSuffix) {
			t.Errorf("partial download of the killed server not swept: %s", e.Name())
		}
	}
	for name, ino := range before {
		fi, err := os.Stat(filepath.Join(dsDir, name))
		if err != nil || fi.Sys().(*syscall.Stat_t).Ino != ino {
			t.Errorf("shard %s complete before the kill was downloaded again (cache not reused)", name)
		}
	}
}

func waitFor(t *testing.T, d time.Duration, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("condition not met within %v", d)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func newGoClient(t *testing.T, addr string) *client.Client {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c, err := client.Dial(ctx, addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}
