package main

import (
	"bytes"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/gload/gload/loader/dataset"
	"github.com/gload/gload/loader/objstore/s3test"
)

// shardFiles returns the .arrow files of a dataset directory with their bytes.
func shardFiles(t *testing.T, dir string) map[string][]byte {
	t.Helper()
	out := map[string][]byte{}
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range ents {
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
