package privdir

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

func TestEnsure(t *testing.T) {
	base := t.TempDir()
	fresh := filepath.Join(base, "a", "b", "cache")
	if err := Ensure(fresh); err != nil {
		t.Fatal(err)
	}
	for _, d := range []string{filepath.Join(base, "a"), fresh} {
		if fi, _ := os.Stat(d); fi.Mode().Perm() != 0o700 {
			t.Errorf("%s: mode %04o, want 0700", d, fi.Mode().Perm())
		}
	}
	// Ours with access for others (an older gload, a umask of 002 or 000): narrowed.
	for _, mode := range []os.FileMode{0o755, 0o775, 0o777} {
		old := filepath.Join(base, "old"+mode.String())
		os.Mkdir(old, mode)
		os.Chmod(old, mode)
		if err := Check(old); !errors.Is(err, ErrNotPrivate) {
			t.Errorf("Check(%04o) = %v", mode, err)
		}
		if err := Ensure(old); err != nil {
			t.Fatal(err)
		}
		if fi, _ := os.Stat(old); fi.Mode().Perm() != 0o700 {
			t.Errorf("old: mode %04o, want 0700", fi.Mode().Perm())
		}
		if err := Check(old); err != nil {
			t.Error(err)
		}
	}
	// A symlink to a private dir, a file: refused.
	link := filepath.Join(base, "link")
	os.Symlink(fresh, link)
	file := filepath.Join(base, "file")
	os.WriteFile(file, nil, 0o600)
	for _, d := range []string{link, file} {
		if err := Ensure(d); !errors.Is(err, ErrNotPrivate) || !strings.Contains(err.Error(), d) {
			t.Errorf("Ensure(%s) = %v, want ErrNotPrivate naming it", d, err)
		}
	}
}

// otherUser returns the uid and gid of a second local user, made with useradd when the test runs as root; it
// skips, saying why, where that is impossible.
func otherUser(t *testing.T) (int, int) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("needs root to make a second local user (useradd); run as root to test another user's directory")
	}
	const name = "gload-test-other"
	if out, err := exec.Command("id", "-u", name).Output(); err != nil || len(out) == 0 {
		if out, err := exec.Command("useradd", "--system", "--no-create-home", "--shell", "/usr/sbin/nologin", name).CombinedOutput(); err != nil {
			t.Skipf("cannot make a second user with useradd: %v: %s", err, out)
		}
	}
	uid, err1 := exec.Command("id", "-u", name).Output()
	gid, err2 := exec.Command("id", "-g", name).Output()
	if err1 != nil || err2 != nil {
		t.Skipf("id %s: %v %v", name, err1, err2)
	}
	u, _ := strconv.Atoi(strings.TrimSpace(string(uid)))
	g, _ := strconv.Atoi(strings.TrimSpace(string(gid)))
	return u, g
}

// Another local user pre-creates the fallback cache directory (0777 or 0700, theirs) in a shared sticky $TMPDIR:
// Ensure refuses it, naming the owner, and writes nothing into it (issue 34 item 6).
func TestEnsureRefusesAnotherUsersDir(t *testing.T) {
	uid, gid := otherUser(t)
	shared, err := os.MkdirTemp("", "gload-privdir-shared-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(shared) })
	if err := os.Chmod(shared, 0o1777); err != nil {
		t.Fatal(err)
	}
	t.Setenv("TMPDIR", shared)
	for _, mode := range []string{"0777", "0700", "0755"} {
		root := TempRoot("gload-cache")
		os.RemoveAll(root)
		// The other user makes it, as they would: their own process, their own uid.
		cmd := exec.Command("setpriv", "--reuid="+strconv.Itoa(uid), "--regid="+strconv.Itoa(gid), "--clear-groups",
			"mkdir", "-m", mode, root)
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Skipf("setpriv as uid %d: %v: %s", uid, err, out)
		}
		err := Ensure(root)
		if !errors.Is(err, ErrNotPrivate) || !strings.Contains(err.Error(), "uid "+strconv.Itoa(uid)) {
			t.Errorf("mode %s: Ensure = %v, want ErrNotPrivate naming uid %d", mode, err, uid)
		}
		if ents, _ := os.ReadDir(root); len(ents) > 0 {
			t.Errorf("mode %s: something was written into the other user's directory", mode)
		}
	}
}
