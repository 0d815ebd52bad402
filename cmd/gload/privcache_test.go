package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/gload/gload/internal/privdir"
	"github.com/gload/gload/loader/objstore/s3test"
)

// sharedTmp makes a sticky, world-writable directory (like /tmp) and points $TMPDIR at it, with no $HOME or
// $XDG_CACHE_HOME: gload's cache and stage fall back to $TMPDIR.
func sharedTmp(t *testing.T) string {
	t.Helper()
	shared, err := os.MkdirTemp("", "gload-shared-tmp-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(shared) })
	if err := os.Chmod(shared, 0o1777); err != nil {
		t.Fatal(err)
	}
	t.Setenv("TMPDIR", shared)
	t.Setenv("HOME", "")
	t.Setenv("XDG_CACHE_HOME", "")
	return shared
}

// Without $HOME the upload stage goes to $TMPDIR/gload-cache-<uid>, made 0700; a directory another user put
// there first (theirs, or a symlink to theirs) is refused, naming it, and nothing is written into it (issue 34
// item 6).
func TestTokenizeToS3PrivateFallbackCache(t *testing.T) {
	s3test.Start(t, "gload-test")
	shared := sharedTmp(t)
	root := privdir.TempRoot("gload-cache")
	if filepath.Dir(root) != shared {
		t.Fatalf("fallback %s is not under $TMPDIR %s", root, shared)
	}
	args := []string{"tokenize", "--quiet", "--tokenizer", exampleTokenizer, "--out", "s3://gload-test/priv", exampleCorpus}
	if _, e, code := gload(t, "", args...); code != 0 {
		t.Fatalf("tokenize: %s", e)
	}
	if fi, err := os.Lstat(root); err != nil || fi.Mode().Perm() != 0o700 {
		t.Fatalf("fallback cache %s: %v, mode %v", root, err, fi.Mode())
	}
	os.RemoveAll(root)

	// A symlink to a directory the attacker reads.
	loot := filepath.Join(shared, "attacker-loot")
	if err := os.Mkdir(loot, 0o777); err != nil {
		t.Fatal(err)
	}
	os.Chmod(loot, 0o777)
	if err := os.Symlink(loot, root); err != nil {
		t.Fatal(err)
	}
	_, e, code := gload(t, "", append(args[:len(args)-1:len(args)-1], "--overwrite", exampleCorpus)...)
	if code == 0 || !strings.Contains(e, root) || !strings.Contains(e, "symbolic link") {
		t.Fatalf("tokenize with a planted symlink as the cache: exit %d, %s", code, e)
	}
	if ents, _ := os.ReadDir(loot); len(ents) > 0 {
		t.Fatalf("the run wrote %s into the attacker's directory", ents[0].Name())
	}
	os.Remove(root)

	// Another user's directory (root only: a second user is made with useradd).
	if os.Geteuid() != 0 {
		t.Skip("the other-user case needs root to make a second local user (useradd)")
	}
	uid, gid := secondUser(t)
	cmd := exec.Command("setpriv", "--reuid="+strconv.Itoa(uid), "--regid="+strconv.Itoa(gid), "--clear-groups",
		"mkdir", "-m", "0777", root)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Skipf("setpriv as uid %d: %v: %s", uid, err, out)
	}
	_, e, code = gload(t, "", append(args[:len(args)-1:len(args)-1], "--overwrite", exampleCorpus)...)
	if code == 0 || !strings.Contains(e, root) || !strings.Contains(e, "uid "+strconv.Itoa(uid)) {
		t.Fatalf("tokenize with another user's cache directory: exit %d, %s", code, e)
	}
	if ents, _ := os.ReadDir(root); len(ents) > 0 {
		t.Fatalf("the run wrote %s into the other user's directory", ents[0].Name())
	}
}

// secondUser returns the uid and gid of a second local user, made with useradd if needed; it skips with the
// reason where that is impossible.
func secondUser(t *testing.T) (int, int) {
	t.Helper()
	const name = "gload-test-other"
	if out, err := exec.Command("id", "-u", name).Output(); err != nil || len(out) == 0 {
		if out, err := exec.Command("useradd", "--system", "--no-create-home", "--shell", "/usr/sbin/nologin", name).CombinedOutput(); err != nil {
			t.Skipf("cannot make a second user with useradd: %v: %s", err, out)
		}
	}
	u, err1 := exec.Command("id", "-u", name).Output()
	g, err2 := exec.Command("id", "-g", name).Output()
	if err1 != nil || err2 != nil {
		t.Skipf("id %s: %v %v", name, err1, err2)
	}
	uid, _ := strconv.Atoi(strings.TrimSpace(string(u)))
	gid, _ := strconv.Atoi(strings.TrimSpace(string(g)))
	return uid, gid
}
