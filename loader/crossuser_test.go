package loader_test

import (
	"context"
	"errors"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/gload/gload/internal/testuser"
	"github.com/gload/gload/loader"
	"github.com/gload/gload/loader/access"
	"github.com/gload/gload/loader/client"
)

// TestListenOtherUser: another local user takes the socket path first (issue
// 34 item 2). Our server must refuse to start there, naming the problem, and
// our client must refuse the other user's socket before it sends anything
// (the other user counts the bytes it receives: none).
func TestListenOtherUser(t *testing.T) {
	uid, gid := testuser.Other(t)
	dialRefused := func(t *testing.T, addr string, atk *testuser.Proc) {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		c, err := client.Dial(ctx, addr, client.WithTrust(access.Trust{}))
		if err == nil {
			c.Close()
			t.Fatalf("client.Dial(%s) connected to the other user's socket", addr)
		}
		if !errors.Is(err, access.ErrUntrusted) && !errors.Is(err, access.ErrUnsafePath) {
			t.Fatalf("client.Dial(%s): %v, want ErrUntrusted or ErrUnsafePath", addr, err)
		}
		t.Logf("client: %v", err)
		for _, l := range atk.Lines() {
			if l != "got 0" {
				t.Fatalf("the other user received %q", l)
			}
		}
	}
	t.Run("default socket bound first", func(t *testing.T) {
		t.Setenv("TMPDIR", testuser.Dir(t))
		t.Setenv("XDG_RUNTIME_DIR", "")
		t.Setenv(access.EnvAddr, "")
		addr := access.DefaultAddress()
		atk := testuser.Start(t, uid, gid, "bind", strings.TrimPrefix(addr, "unix://"), "755")
		lis, err := loader.Listen(addr, loader.ListenOptions{})
		if err == nil {
			lis.Close()
			t.Fatal("Listen started in the other user's directory")
		}
		if !strings.Contains(err.Error(), "uid "+strconv.Itoa(uid)) {
			t.Fatalf("Listen: %v, want the other user's uid named", err)
		}
		t.Logf("server: %v", err)
		dialRefused(t, addr, atk)
	})
	t.Run("directory made 0777 first", func(t *testing.T) {
		dir := filepath.Join(testuser.Dir(t), "gload-run")
		testuser.Start(t, uid, gid, "mkdir", dir, "777")
		lis, err := loader.Listen("unix://"+filepath.Join(dir, "gload.sock"), loader.ListenOptions{})
		if err == nil {
			lis.Close()
			t.Fatal("Listen started in a directory the other user can write to")
		}
		t.Logf("server: %v", err)
	})
	t.Run("socket in a sticky directory bound first", func(t *testing.T) {
		sock := filepath.Join(testuser.Dir(t), "gload-1234.sock")
		atk := testuser.Start(t, uid, gid, "bind", sock)
		lis, err := loader.Listen("unix://"+sock, loader.ListenOptions{})
		if err == nil {
			lis.Close()
			t.Fatal("Listen took over the other user's socket")
		}
		if !errors.Is(err, loader.ErrAddrInUse) || !strings.Contains(err.Error(), "another user") {
			t.Fatalf("Listen: %v, want ErrAddrInUse naming another user", err)
		}
		t.Logf("server: %v", err)
		dialRefused(t, "unix://"+sock, atk)
	})
}
