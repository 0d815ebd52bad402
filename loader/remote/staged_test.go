package remote

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gload/gload/internal/safename"
	"github.com/gload/gload/loader/objstore"
	"github.com/gload/gload/loader/objstore/s3test"
)

// hostileBucket puts a gload.progress.json listing one shard named name, and the staged upload object its
// content hash and size point at, into a fresh bucket; it returns the store.
func hostileBucket(t *testing.T, srv *s3test.Server, bucket, name string, payload []byte) *objstore.Store {
	t.Helper()
	ctx := context.Background()
	st, err := objstore.Open(ctx, objstore.URL{Bucket: bucket, Prefix: "ds"}, objstore.Config{Endpoint: srv.Endpoint})
	if err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(payload)
	j, _ := json.Marshal(map[string]any{
		"version": 3,
		"shards":  []map[string]any{{"Name": name, "Bytes": len(payload), "Hash": hex.EncodeToString(sum[:])}},
	})
	if err := st.Put(ctx, journalFile, j); err != nil {
		t.Fatal(err)
	}
	if err := st.Put(ctx, fmt.Sprintf("%s/%x-%d.arrow", uploadDir, sum, len(payload)), payload); err != nil {
		t.Fatal(err)
	}
	return st
}

// A bucket's journal names every shard the resume downloads: a name that leaves the stage, or lands on one of
// its own files, is refused before anything is written (issue 34 item 1).
func TestStagedResumeHostileNames(t *testing.T) {
	srv := s3test.Start(t, "hostile")
	payload := []byte("PWNED by the bucket\n")
	names := []string{
		"../../victim.txt", "../../../a/victim.txt", "sub/../../../victim.txt", "/abs-victim.txt", "a/b.arrow",
		".", "..", "", ".hidden.arrow", "gload.index", "gload.progress.json", "state.json", "x.arrow.tmp",
		"x.arrow\x00.txt", "x\n.arrow", `..\..\victim.txt`, strings.Repeat("a", 300) + ".arrow",
	}
	for i, name := range names {
		t.Run(fmt.Sprintf("%d:%q", i, name), func(t *testing.T) {
			root := t.TempDir()
			stage := filepath.Join(root, "a", "b", "c", "stage")
			if err := os.MkdirAll(stage, 0o700); err != nil {
				t.Fatal(err)
			}
			st := hostileBucket(t, srv, "hostile", name, payload)
			_, err := NewStagedUpload(context.Background(), st, stage, StageOptions{Resume: true})
			if err == nil {
				t.Errorf("resume accepted the journal shard name %q", name)
			}
			if err != nil && !errors.Is(err, safename.ErrBadName) && !strings.Contains(err.Error(), "bad file name") {
				t.Errorf("error does not say the name is bad: %v", err)
			}
			if err != nil && !strings.Contains(err.Error(), journalFile) {
				t.Errorf("error does not name %s: %v", journalFile, err)
			}
			// Nothing anywhere under root (inside the stage or outside it) holds the payload.
			filepath.WalkDir(root, func(p string, d os.DirEntry, err error) error {
				if err == nil && d.Type().IsRegular() {
					if b, _ := os.ReadFile(p); string(b) == string(payload) {
						t.Errorf("payload written to %s", p)
					}
				}
				return nil
			})
		})
	}
}

// A symbolic link planted in the stage under a shard's name (or the journal's temporary name) is replaced or
// refused, never written through.
func TestStagedResumeSymlinkInStage(t *testing.T) {
	srv := s3test.Start(t, "hostile")
	payload := []byte("shard bytes from the bucket\n")
	root := t.TempDir()
	victim := filepath.Join(root, "victim")
	if err := os.WriteFile(victim, []byte("precious\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	stage := filepath.Join(root, "stage")
	if err := os.MkdirAll(stage, 0o700); err != nil {
		t.Fatal(err)
	}
	for _, n := range []string{"shard-00000.arrow", journalFile + ".tmp"} {
		if err := os.Symlink(victim, filepath.Join(stage, n)); err != nil {
			t.Fatal(err)
		}
	}
	st := hostileBucket(t, srv, "hostile", "shard-00000.arrow", payload)
	_, err := NewStagedUpload(context.Background(), st, stage, StageOptions{Resume: true})
	t.Logf("resume: %v", err)
	if b, _ := os.ReadFile(victim); string(b) != "precious\n" {
		t.Fatalf("victim overwritten through a symlink in the stage: %q", b)
	}
	if fi, err := os.Lstat(filepath.Join(stage, "shard-00000.arrow")); err == nil && fi.Mode()&os.ModeSymlink == 0 {
		if b, _ := os.ReadFile(filepath.Join(stage, "shard-00000.arrow")); string(b) != string(payload) {
			t.Fatalf("shard holds %q", b)
		}
	}
}
