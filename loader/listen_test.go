package loader_test

import (
	"errors"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/gload/gload/loader"
)

func TestParseAddr(t *testing.T) {
	for _, tc := range []struct {
		in      string
		network string
		address string
		local   bool
		bad     bool
	}{
		{in: "unix:///run/gload.sock", network: "unix", address: "/run/gload.sock", local: true},
		{in: "unix:rel/g.sock", network: "unix", address: "rel/g.sock", local: true},
		{in: "unix://rel/g.sock", bad: true},
		{in: "unix:", bad: true},
		{in: "127.0.0.1:7700", network: "tcp", address: "127.0.0.1:7700", local: true},
		{in: "127.5.0.1:0", network: "tcp", address: "127.5.0.1:0", local: true},
		{in: "localhost:9400", network: "tcp", address: "localhost:9400", local: true},
		{in: "[::1]:80", network: "tcp", address: "[::1]:80", local: true},
		{in: "0.0.0.0:7700", network: "tcp", address: "0.0.0.0:7700"},
		{in: ":7700", network: "tcp", address: ":7700"},
		{in: "10.1.2.3:7700", network: "tcp", address: "10.1.2.3:7700"},
		{in: "[::]:7700", network: "tcp", address: "[::]:7700"},
		{in: "gpu-node-3:7700", network: "tcp", address: "gpu-node-3:7700"},
		{in: "127.0.0.1", bad: true},
		{in: "127.0.0.1:http", bad: true},
		{in: "127.0.0.1:70000", bad: true},
		{in: "tcp://127.0.0.1:1", bad: true},
		{in: "", bad: true},
	} {
		t.Run(tc.in, func(t *testing.T) {
			a, err := loader.ParseAddr(tc.in)
			if tc.bad {
				if !errors.Is(err, loader.ErrAddress) {
					t.Fatalf("ParseAddr(%q) = %+v, %v; want ErrAddress", tc.in, a, err)
				}
				return
			}
			if err != nil || a.Network != tc.network || a.Address != tc.address || a.Local != tc.local {
				t.Fatalf("ParseAddr(%q) = %+v, %v", tc.in, a, err)
			}
			if b, err := loader.ParseAddr(a.String()); err != nil || b != a {
				t.Fatalf("round trip %q -> %q -> %+v, %v", tc.in, a.String(), b, err)
			}
		})
	}
}

func FuzzParseAddr(f *testing.F) {
	for _, s := range []string{"unix:///a.sock", "unix:a", "127.0.0.1:1", "[::1]:2", ":3", "host:4", "x://y"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		a, err := loader.ParseAddr(s)
		if err != nil {
			if !errors.Is(err, loader.ErrAddress) {
				t.Fatalf("error without ErrAddress: %v", err)
			}
			return
		}
		if a.Network != "unix" && a.Network != "tcp" {
			t.Fatalf("network %q", a.Network)
		}
		if a.Network == "unix" && !a.Local {
			t.Fatal("unix socket not local")
		}
		if b, err := loader.ParseAddr(a.String()); err != nil || b != a {
			t.Fatalf("round trip %q -> %q -> %+v, %v", s, a.String(), b, err)
		}
	})
}

func TestListen(t *testing.T) {
	if _, err := loader.Listen("0.0.0.0:0", loader.ListenOptions{}); !errors.Is(err, loader.ErrAddress) ||
		!strings.Contains(err.Error(), "--allow-remote") {
		t.Fatalf("remote address without AllowRemote: %v", err)
	}
	lis, err := loader.Listen("0.0.0.0:0", loader.ListenOptions{AllowRemote: true})
	if err != nil {
		t.Fatal(err)
	}
	lis.Close()

	dir := t.TempDir()
	// A stale socket (its server died) is removed.
	stale := filepath.Join(dir, "stale.sock")
	l, err := net.Listen("unix", stale)
	if err != nil {
		t.Fatal(err)
	}
	l.(*net.UnixListener).SetUnlinkOnClose(false)
	l.Close()
	if _, err := os.Stat(stale); err != nil {
		t.Fatal(err)
	}
	lis, err = loader.Listen("unix://"+stale, loader.ListenOptions{})
	if err != nil {
		t.Fatalf("stale socket: %v", err)
	}
	// A live one is not touched.
	if _, err := loader.Listen("unix://"+stale, loader.ListenOptions{}); !errors.Is(err, loader.ErrAddrInUse) {
		t.Fatalf("live socket: %v", err)
	}
	lis.Close()
	// Nor is a file that is not a socket.
	plain := filepath.Join(dir, "plain")
	if err := os.WriteFile(plain, []byte("keep me"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := loader.Listen("unix://"+plain, loader.ListenOptions{}); !errors.Is(err, loader.ErrAddress) {
		t.Fatalf("regular file: %v", err)
	}
	if b, err := os.ReadFile(plain); err != nil || string(b) != "keep me" {
		t.Fatalf("regular file changed: %q, %v", b, err)
	}
}

// TestListenUnixMode: the socket's mode is 0600 whatever the umask (0660 and
// the group with SocketGroup); its parent is created 0700; Close removes it.
func TestListenUnixMode(t *testing.T) {
	base := t.TempDir() // before the umask of 0: a 0777 parent is refused (TestListenUnsafeDir)
	old := syscall.Umask(0)
	defer syscall.Umask(old)
	dir := filepath.Join(base, "run")
	gid := os.Getgid()
	for _, tc := range []struct {
		name  string
		group string
		mode  os.FileMode
	}{
		{"private", "", 0o600},
		{"group by id", strconv.Itoa(gid), 0o660},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(dir, "gload.sock")
			lis, err := loader.Listen("unix://"+path, loader.ListenOptions{SocketGroup: tc.group})
			if err != nil {
				t.Fatal(err)
			}
			st, err := os.Lstat(path)
			if err != nil {
				t.Fatal(err)
			}
			if st.Mode()&os.ModeSocket == 0 || st.Mode().Perm() != tc.mode {
				t.Fatalf("socket mode %v, want socket %04o", st.Mode(), tc.mode)
			}
			if g := st.Sys().(*syscall.Stat_t).Gid; tc.group != "" && int(g) != gid {
				t.Fatalf("socket group %d, want %d", g, gid)
			}
			if ds, err := os.Stat(dir); err != nil || ds.Mode().Perm() != 0o700 {
				t.Fatalf("socket directory: %v, %v; want 0700", ds.Mode(), err)
			}
			if lis.Addr().String() != path {
				t.Fatalf("Addr %q, want %q", lis.Addr(), path)
			}
			// It accepts connections under its final name.
			done := make(chan error, 1)
			go func() {
				c, err := lis.Accept()
				if err == nil {
					c.Close()
				}
				done <- err
			}()
			c, err := net.Dial("unix", path)
			if err != nil {
				t.Fatal(err)
			}
			c.Close()
			if err := <-done; err != nil {
				t.Fatal(err)
			}
			if ents, _ := os.ReadDir(dir); len(ents) != 1 {
				t.Fatalf("socket directory holds %v, want the socket alone", ents)
			}
			lis.Close()
			if _, err := os.Lstat(path); !errors.Is(err, os.ErrNotExist) {
				t.Fatalf("socket left after Close: %v", err)
			}
		})
	}
	if _, err := loader.Listen("unix://"+filepath.Join(dir, "x.sock"), loader.ListenOptions{SocketGroup: "no-such-group-gload"}); !errors.Is(err, loader.ErrAddress) {
		t.Fatalf("unknown group: %v", err)
	}
	if _, err := loader.Listen("127.0.0.1:0", loader.ListenOptions{SocketGroup: "0"}); !errors.Is(err, loader.ErrAddress) {
		t.Fatalf("group on TCP: %v", err)
	}
	long := "unix://" + filepath.Join(dir, strings.Repeat("x", 110))
	if _, err := loader.Listen(long, loader.ListenOptions{}); !errors.Is(err, loader.ErrAddress) {
		t.Fatalf("path too long: %v", err)
	}
	// A path near the limit leaves no room for the private name: it still gets 0600.
	near := filepath.Join(dir, strings.Repeat("n", 107-len(dir)-1))
	lis, err := loader.Listen("unix://"+near, loader.ListenOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer lis.Close()
	if st, err := os.Lstat(near); err != nil || st.Mode().Perm() != 0o600 {
		t.Fatalf("near the limit: %v, %v", st.Mode(), err)
	}
}
