package safename

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

func TestCheck(t *testing.T) {
	good := []string{"shard-00000.arrow", "data-00000-of-00001.arrow", "a", "a..b", "x.arrow.", "名前.arrow", "a b", "-x"}
	for _, n := range good {
		if err := Check(n); err != nil {
			t.Errorf("Check(%q) = %v, want nil", n, err)
		}
	}
	bad := []string{
		"", ".", "..", "../x", "../../home/u/.bashrc", "/etc/passwd", "a/b", "a/", "/", `a\b`, `..\x`, "a\x00b",
		".bashrc", ".gload-sync", "..arrow", ".x.gload-part", "a\nb", "a\rb", "a\tb", "a\x7fb", "a\u0085b",
		"\xff\xfe", "a\xc0\xafb", strings.Repeat("a", MaxLen+1), "./a", "a/.", "a/..", "//a",
	}
	for _, n := range bad {
		err := Check(n)
		if !errors.Is(err, ErrBadName) {
			t.Errorf("Check(%q) = %v, want ErrBadName", n, err)
		}
		if _, err := Join("/d", n); !errors.Is(err, ErrBadName) {
			t.Errorf("Join(/d, %q) = %v, want ErrBadName", n, err)
		}
	}
	if p, err := Join("/d/./e/", "x"); err != nil || p != "/d/e/x" {
		t.Errorf("Join = %q, %v", p, err)
	}
}

func TestOpenRegular(t *testing.T) {
	dir := t.TempDir()
	reg := filepath.Join(dir, "reg")
	if err := os.WriteFile(reg, []byte("hello"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("reg", filepath.Join(dir, "link")); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Mkfifo(filepath.Join(dir, "fifo"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(filepath.Join(dir, "sub"), 0o700); err != nil {
		t.Fatal(err)
	}
	f, fi, err := OpenRegular(reg)
	if err != nil || fi.Size() != 5 {
		t.Fatalf("OpenRegular(reg) = %v, %v", fi, err)
	}
	b := make([]byte, 5)
	if _, err := f.Read(b); err != nil || string(b) != "hello" {
		t.Fatalf("read %q, %v", b, err)
	}
	f.Close()
	for _, n := range []string{"link", "fifo", "sub"} { // the FIFO must not block
		if _, _, err := OpenRegular(filepath.Join(dir, n)); !errors.Is(err, ErrNotRegular) {
			t.Errorf("OpenRegular(%s) = %v, want ErrNotRegular", n, err)
		}
		if _, err := LstatRegular(filepath.Join(dir, n)); !errors.Is(err, ErrNotRegular) {
			t.Errorf("LstatRegular(%s) = %v, want ErrNotRegular", n, err)
		}
	}
	// Creating through a symlink fails instead of writing the link's target.
	if _, err := OpenFile(filepath.Join(dir, "link"), os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o600); !errors.Is(err, ErrNotRegular) {
		t.Errorf("OpenFile(link, O_CREATE) = %v, want ErrNotRegular", err)
	}
	if b, _ := os.ReadFile(reg); string(b) != "hello" {
		t.Errorf("target changed to %q", b)
	}
}

func FuzzCheck(f *testing.F) {
	for _, s := range []string{"shard-00000.arrow", "../x", "a/b", ".", "..", "\x00", ".hidden"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, name string) {
		p, err := Join("/base/dir", name)
		if err != nil {
			return
		}
		if filepath.Dir(p) != "/base/dir" || filepath.Base(p) != name || strings.HasPrefix(name, ".") {
			t.Fatalf("Join accepted %q as %q", name, p)
		}
	})
}

func TestReadFileBounded(t *testing.T) {
	dir := t.TempDir()
	small := filepath.Join(dir, "small")
	os.WriteFile(small, []byte("{}"), 0o600)
	big := filepath.Join(dir, "big")
	if err := os.WriteFile(big, make([]byte, 1001), 0o600); err != nil {
		t.Fatal(err)
	}
	if b, err := ReadFile(small, 1000); err != nil || string(b) != "{}" {
		t.Fatalf("ReadFile(small) = %q, %v", b, err)
	}
	if _, err := ReadFile(big, 1000); !errors.Is(err, ErrTooLarge) || !strings.Contains(err.Error(), big) {
		t.Fatalf("ReadFile(big) = %v, want ErrTooLarge naming it", err)
	}
	os.Symlink("/dev/zero", filepath.Join(dir, "zero"))
	syscall.Mkfifo(filepath.Join(dir, "fifo"), 0o600)
	for _, n := range []string{"zero", "fifo"} { // neither blocks nor reads forever
		if _, err := ReadFile(filepath.Join(dir, n), 1000); !errors.Is(err, ErrNotRegular) {
			t.Errorf("ReadFile(%s) = %v, want ErrNotRegular", n, err)
		}
	}
	if _, err := ReadFile("/dev/zero", 1000); !errors.Is(err, ErrNotRegular) {
		t.Errorf("ReadFile(/dev/zero) = %v", err)
	}
}
