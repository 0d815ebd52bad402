package access_test

import (
	"context"
	"errors"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/gload/gload/internal/testuser"
	"github.com/gload/gload/loader/access"
)

func TestMain(m *testing.M) {
	testuser.Main()
	code := m.Run()
	testuser.Done()
	os.Exit(code)
}

// serve listens on path (in a directory it makes 0700) and accepts until the
// test ends: the user's own server.
func serve(t *testing.T, path string) {
	t.Helper()
	if err := access.PrepareSocketDir(filepath.Dir(path)); err != nil {
		t.Fatal(err)
	}
	l, err := net.Listen("unix", path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			c.Close()
		}
	}()
}

func dial(path string, tr access.Trust) (access.Peer, error) {
	d := access.NewDialer(tr)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	c, err := d.Dial(ctx, "unix://"+path)
	if err != nil {
		return access.Unknown, err
	}
	c.Close()
	return d.Last(), nil
}

// TestSocketOtherUser: another local user squats the socket path (issue 34
// item 2), in each order we could think of. The server must refuse the
// directory and the client must refuse the socket before sending a byte.
func TestSocketOtherUser(t *testing.T) {
	uid, gid := testuser.Other(t)
	me := strconv.Itoa(os.Geteuid())

	t.Run("binds the default socket first", func(t *testing.T) {
		tmp := testuser.Dir(t)
		t.Setenv("TMPDIR", tmp)
		t.Setenv("XDG_RUNTIME_DIR", "")
		sock := access.DefaultSocketPath()
		if want := filepath.Join(tmp, "gload-"+me, "gload.sock"); sock != want {
			t.Fatalf("default socket %s, want %s", sock, want)
		}
		atk := testuser.Start(t, uid, gid, "bind", sock, "755")
		err := access.PrepareSocketDir(filepath.Dir(sock))
		if !errors.Is(err, access.ErrUnsafePath) || !strings.Contains(err.Error(), "uid "+strconv.Itoa(uid)) {
			t.Fatalf("server: %v, want ErrUnsafePath naming uid %d", err, uid)
		}
		_, err = dial(sock, access.Trust{})
		if !errors.Is(err, access.ErrUntrusted) && !errors.Is(err, access.ErrUnsafePath) {
			t.Fatalf("client: %v, want a refusal", err)
		}
		t.Logf("server: %v\nclient: %v", access.PrepareSocketDir(filepath.Dir(sock)), err)
		if got := atk.Lines(); len(got) > 0 && got[0] != "got 0" {
			t.Fatalf("the other user received %v", got)
		}
	})
	t.Run("pre-creates the directory 0777", func(t *testing.T) {
		tmp := testuser.Dir(t)
		dir := filepath.Join(tmp, "gload-"+me)
		testuser.Start(t, uid, gid, "mkdir", dir, "777")
		if err := access.PrepareSocketDir(dir); !errors.Is(err, access.ErrUnsafePath) {
			t.Fatalf("server: %v, want ErrUnsafePath", err)
		}
	})
	t.Run("our own directory left 0777", func(t *testing.T) {
		dir := filepath.Join(testuser.Dir(t), "gload-"+me)
		if err := os.Mkdir(dir, 0o700); err != nil {
			t.Fatal(err)
		}
		os.Chmod(dir, 0o777)
		if err := access.PrepareSocketDir(dir); !errors.Is(err, access.ErrUnsafePath) || !strings.Contains(err.Error(), "0777") {
			t.Fatalf("server: %v, want ErrUnsafePath naming mode 0777", err)
		}
	})
	t.Run("links the directory to its own", func(t *testing.T) {
		tmp := testuser.Dir(t)
		own := filepath.Join(tmp, "theirs")
		atk := testuser.Start(t, uid, gid, "bind", filepath.Join(own, "gload.sock"), "755")
		dir := filepath.Join(tmp, "gload-"+me)
		testuser.Start(t, uid, gid, "symlink", own, dir)
		if err := access.PrepareSocketDir(dir); !errors.Is(err, access.ErrUnsafePath) {
			t.Fatalf("server: %v, want ErrUnsafePath", err)
		}
		if _, err := dial(filepath.Join(dir, "gload.sock"), access.Trust{}); !errors.Is(err, access.ErrUntrusted) && !errors.Is(err, access.ErrUnsafePath) {
			t.Fatalf("client: %v, want a refusal", err)
		}
		if got := atk.Lines(); len(got) > 0 && got[0] != "got 0" {
			t.Fatalf("the other user received %v", got)
		}
	})
	t.Run("binds a socket in a sticky directory first", func(t *testing.T) {
		// README's Slurm recipe of old: /tmp/gload-$SLURM_JOB_ID.sock.
		sock := filepath.Join(testuser.Dir(t), "gload-1234.sock")
		atk := testuser.Start(t, uid, gid, "bind", sock)
		_, err := dial(sock, access.Trust{})
		if !errors.Is(err, access.ErrUntrusted) || !strings.Contains(err.Error(), "uid "+strconv.Itoa(uid)) {
			t.Fatalf("client: %v, want ErrUntrusted naming uid %d", err, uid)
		}
		if got := atk.Lines(); len(got) > 0 && got[0] != "got 0" {
			t.Fatalf("the other user received %v", got)
		}
	})
	t.Run("trusted explicitly", func(t *testing.T) {
		sock := filepath.Join(testuser.Dir(t), "shared.sock")
		testuser.Start(t, uid, gid, "bind", sock)
		for _, tr := range []string{testuser.Name, strconv.Itoa(uid), "group:" + strconv.Itoa(gid)} {
			trust, err := access.ParseTrust(tr)
			if err != nil {
				t.Fatal(err)
			}
			p, err := dial(sock, trust)
			if err != nil || p.UID != uid {
				t.Fatalf("trust %s: %v, peer %+v", tr, err, p)
			}
		}
	})
	t.Run("our own server is accepted", func(t *testing.T) {
		sock := filepath.Join(testuser.Dir(t), "gload-"+me, "gload.sock")
		serve(t, sock)
		p, err := dial(sock, access.Trust{})
		if err != nil || p.UID != os.Geteuid() || p.PID != os.Getpid() {
			t.Fatalf("%v, peer %+v", err, p)
		}
	})
}
