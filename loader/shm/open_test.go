package shm

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"syscall"
	"testing"
)

// TestMapHostilePath: a server names files that are not its ring (issue 34
// item 3). The client must refuse each, and the victim's file must be left
// as it was (the doorbell mapping writes the released word).
func TestMapHostilePath(t *testing.T) {
	dir := t.TempDir()
	const slots, slotBytes = 2, SlotAlign
	size := int64(slots*slotBytes) + ControlBytes(slots)
	secret := bytes.Repeat([]byte("victim's private data. "), int(size)/23+1)[:size]
	victim := filepath.Join(dir, "private")
	if err := os.WriteFile(victim, secret, 0o600); err != nil {
		t.Fatal(err)
	}
	ringish := func(d string) string { return filepath.Join(d, "gload-1-0-0123456789abcdef.ring") }
	mk := func(t *testing.T, f func(d string) string) string { // a fresh 0700 dir for each case
		d := t.TempDir()
		return f(d)
	}
	cases := []struct {
		name  string
		path  func(t *testing.T) string
		owner int
	}{
		{"any file", func(t *testing.T) string { return victim }, os.Geteuid()},
		{"relative", func(t *testing.T) string { return "gload-1-0-0123456789abcdef.ring" }, os.Geteuid()},
		{"dot dot", func(t *testing.T) string { return ringish(dir) + "/../private" }, os.Geteuid()},
		{"symlink named like a ring", func(t *testing.T) string {
			return mk(t, func(d string) string { p := ringish(d); must(t, os.Symlink(victim, p)); return p })
		}, os.Geteuid()},
		{"hard link named like a ring", func(t *testing.T) string {
			return mk(t, func(d string) string { p := ringish(d); must(t, os.Link(victim, p)); return p })
		}, os.Geteuid()},
		{"symlinked directory", func(t *testing.T) string {
			return mk(t, func(d string) string {
				must(t, os.Link(victim, ringish(dir)))
				t.Cleanup(func() { os.Remove(ringish(dir)) })
				must(t, os.Symlink(dir, filepath.Join(d, "l")))
				return ringish(filepath.Join(d, "l"))
			})
		}, os.Geteuid()},
		{"directory others can write", func(t *testing.T) string {
			return mk(t, func(d string) string {
				w := filepath.Join(d, "w")
				must(t, os.Mkdir(w, 0o700))
				must(t, os.Chmod(w, 0o777))
				must(t, os.WriteFile(ringish(w), secret, 0o600))
				return ringish(w)
			})
		}, os.Geteuid()},
		{"fifo named like a ring", func(t *testing.T) string {
			return mk(t, func(d string) string { p := ringish(d); must(t, syscall.Mkfifo(p, 0o600)); return p })
		}, os.Geteuid()},
		{"server unknown", func(t *testing.T) string {
			return mk(t, func(d string) string { p := ringish(d); must(t, os.WriteFile(p, secret, 0o600)); return p })
		}, -1},
		{"owned by someone else than the server", func(t *testing.T) string {
			return mk(t, func(d string) string { p := ringish(d); must(t, os.WriteFile(p, secret, 0o600)); return p })
		}, os.Geteuid() + 4242},
		{"in /dev/shm, of another uid than the server's", func(t *testing.T) string {
			if _, err := os.Stat(DefaultDir); err != nil {
				t.Skipf("no %s: %v", DefaultDir, err)
			}
			name, err := ringName(1, 0)
			must(t, err)
			p := filepath.Join(DefaultDir, name)
			must(t, os.WriteFile(p, secret, 0o600))
			t.Cleanup(func() { os.Remove(p) })
			return p
		}, os.Geteuid() + 4242},
		{"wrong size", func(t *testing.T) string {
			return mk(t, func(d string) string { p := ringish(d); must(t, os.WriteFile(p, secret[:100], 0o600)); return p })
		}, os.Geteuid()},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			p := tc.path(t)
			m, bell, err := MapDoorbell(p, slots, slotBytes, Owner(tc.owner))
			if err == nil {
				bell.Release(1)
				m.Close()
				t.Fatalf("MapDoorbell(%s) mapped it", p)
			}
			if m, err2 := Map(p, slots, slotBytes, Owner(tc.owner)); err2 == nil {
				m.Close()
				t.Fatalf("Map(%s) mapped it", p)
			}
			t.Logf("refused: %v", err)
			if got, _ := os.ReadFile(victim); !bytes.Equal(got, secret) {
				t.Fatal("the victim's file changed")
			}
		})
	}
	t.Run("a real ring is accepted", func(t *testing.T) {
		r, err := CreateWithDoorbell(t.TempDir(), slots, slotBytes)
		if err != nil {
			t.Fatal(err)
		}
		defer r.Close()
		m, _, err := MapDoorbell(r.Path(), slots, slotBytes, Owner(os.Geteuid()))
		if err != nil {
			t.Fatal(err)
		}
		m.Close()
		if _, _, err := MapDoorbell(r.Path(), slots, slotBytes, Owner(os.Geteuid()+1)); !errors.Is(err, ErrRing) {
			t.Fatalf("a ring of another uid than the server's: %v", err)
		}
	})
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// FuzzCheckRingPath: a path a server announces is accepted only if it is a
// clean absolute ring name in /dev/shm (the fuzzer's paths name no real
// directory of another kind), and checking never panics.
func FuzzCheckRingPath(f *testing.F) {
	for _, s := range []string{"/dev/shm/gload-1-0-0123456789abcdef.ring", "/dev/shm/../etc/passwd", "gload-1-0-0123456789abcdef.ring",
		"/dev/shm/gload-1-0-0123456789abcdef.ring/", "/dev/shm//gload-1-0-0123456789abcdef.ring", "/dev/shm/gload-0-0-0123456789abcdef.ring",
		"/dev/shm/gload-1-0-0123456789abcdeg.ring", "/tmp/gload-1-0-0123456789abcdef.ring", "/dev/shm/gload-1-0-0123456789abcdef.ring\x00"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, p string) {
		if err := CheckRingPath(p, os.Geteuid()); err == nil {
			dir, name := filepath.Split(p)
			if _, _, ok := ParseName(name); !ok || filepath.Clean(p) != p || !filepath.IsAbs(p) {
				t.Fatalf("CheckRingPath(%q) accepted a path that is not a clean ring name", p)
			}
			if dir != DefaultDir+"/" {
				if fi, err := os.Lstat(filepath.Clean(dir)); err != nil || !fi.IsDir() {
					t.Fatalf("CheckRingPath(%q) accepted a ring outside a real directory", p)
				}
			}
		}
	})
}
