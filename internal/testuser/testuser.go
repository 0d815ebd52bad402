// Package testuser gives tests a second local user and runs code as that
// user: the other side of cross-user attacks (a user who binds our socket
// first, pre-creates our socket directory, or serves us a ring).
//
// The second user is "gloadtest", made with useradd when the tests run as
// root and left in place for later runs; without root (or useradd) Other
// skips the test and says why. The code it runs is the test binary itself,
// copied where that user can execute it and started with a role
// (Start); a package using Start calls Main first thing in its TestMain.
package testuser

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// Name is the second user's name.
const Name = "gloadtest"

const envRole = "GLOAD_TESTUSER_ROLE"

var mu sync.Mutex

// Other returns the uid and gid of the second user, making it if needed, or
// skips t (with the reason) where it cannot.
func Other(t testing.TB) (uid, gid int) {
	t.Helper()
	mu.Lock()
	defer mu.Unlock()
	if os.Geteuid() != 0 {
		t.Skipf("cross-user test skipped: it needs root to make a second user (running as uid %d)", os.Geteuid())
	}
	u, err := user.Lookup(Name)
	if err != nil {
		out, aerr := exec.Command("useradd", "--system", "--no-create-home", "--shell", "/usr/sbin/nologin", Name).CombinedOutput()
		if u, err = user.Lookup(Name); err != nil {
			t.Skipf("cross-user test skipped: cannot make user %s: useradd: %v %s", Name, aerr, strings.TrimSpace(string(out)))
		}
	}
	uid, _ = strconv.Atoi(u.Uid)
	gid, _ = strconv.Atoi(u.Gid)
	if uid == 0 {
		t.Skipf("cross-user test skipped: user %s has uid 0", Name)
	}
	return uid, gid
}

// Dir makes a directory like /tmp (root's, mode 1777) for a test: both users
// can make things in it, and neither can remove the other's.
func Dir(t testing.TB) string {
	t.Helper()
	d, err := os.MkdirTemp("", "gload-xuser-")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(d, 0o777|os.ModeSticky); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(d) })
	return d
}

// tmp is the temporary directory when the process started (tests change $TMPDIR).
var tmp = os.TempDir()

var (
	binOnce sync.Once
	bin     string
	binErr  error
)

// binary copies the test binary where every user can run it.
func binary() (string, error) {
	binOnce.Do(func() {
		self, err := os.Executable()
		if err != nil {
			binErr = err
			return
		}
		d, err := os.MkdirTemp(tmp, "gload-xuser-bin-")
		if err != nil {
			binErr = err
			return
		}
		os.Chmod(d, 0o755)
		bin = filepath.Join(d, "attacker")
		src, err := os.Open(self)
		if err != nil {
			binErr = err
			return
		}
		defer src.Close()
		dst, err := os.OpenFile(bin, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o755)
		if err != nil {
			binErr = err
			return
		}
		if _, err := io.Copy(dst, src); err != nil {
			binErr = err
		}
		if err := dst.Close(); err != nil && binErr == nil {
			binErr = err
		}
	})
	return bin, binErr
}

// Proc is a role running as the second user.
type Proc struct {
	cmd   *exec.Cmd
	lines chan string
	stdin io.WriteCloser
}

// Start runs role as uid:gid and waits until it says "ready" (it fails t if
// it says anything else first). Roles:
//
//	bind PATH [DIRMODE]  make PATH's directory (DIRMODE, octal, default 0755)
//	                     unless it exists, bind and listen on PATH (mode 0777),
//	                     and report "got N" for each connection's N bytes
//	symlink TARGET PATH  make PATH a symbolic link to TARGET
//	mkdir PATH MODE      make the directory PATH with MODE
//	connect ADDR N       open N TCP connections to ADDR and hold them (idle)
func Start(t testing.TB, uid, gid int, role ...string) *Proc {
	t.Helper()
	b, err := binary()
	if err != nil {
		t.Fatalf("copy the test binary for the second user: %v", err)
	}
	cmd := exec.Command(b)
	cmd.Env = append(os.Environ(), envRole+"="+strings.Join(role, "\x1f"))
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}}
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = os.Stderr
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatalf("start %v as uid %d: %v", role, uid, err)
	}
	p := &Proc{cmd: cmd, lines: make(chan string, 64), stdin: stdin}
	go func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			p.lines <- sc.Text()
		}
		close(p.lines)
	}()
	t.Cleanup(p.Stop)
	first, ok := <-p.lines
	if !ok || first != "ready" {
		t.Fatalf("%v as uid %d: %q (exited: %v)", role, uid, first, !ok)
	}
	return p
}

// Stop ends the role and waits for it.
func (p *Proc) Stop() {
	if p.cmd.ProcessState != nil {
		return
	}
	p.stdin.Close()
	done := make(chan struct{})
	go func() { p.cmd.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(30 * time.Second):
		p.cmd.Process.Kill()
		<-done
	}
}

// Lines returns what the role reported after "ready", once it has stopped.
func (p *Proc) Lines() []string {
	p.Stop()
	var l []string
	for s := range p.lines {
		l = append(l, s)
	}
	return l
}

// Done removes the copy of the test binary; call it after m.Run in TestMain.
func Done() {
	if bin != "" {
		os.RemoveAll(filepath.Dir(bin))
	}
}

// Main performs a role when the process was started by Start, and returns
// otherwise. Call it first in TestMain.
func Main() {
	r := os.Getenv(envRole)
	if r == "" {
		return
	}
	if err := perform(strings.Split(r, "\x1f")); err != nil {
		fmt.Println("error:", err)
		os.Exit(1)
	}
	os.Exit(0)
}

func perform(role []string) error {
	switch {
	case role[0] == "bind" && len(role) >= 2:
		path, mode := role[1], uint64(0o755)
		if len(role) > 2 {
			m, err := strconv.ParseUint(role[2], 8, 32)
			if err != nil {
				return err
			}
			mode = m
		}
		if err := os.Mkdir(filepath.Dir(path), 0o700); err == nil {
			if err := os.Chmod(filepath.Dir(path), os.FileMode(mode)); err != nil {
				return err
			}
		}
		l, err := net.Listen("unix", path)
		if err != nil {
			return err
		}
		os.Chmod(path, 0o777)
		var out sync.Mutex
		go func() {
			for {
				c, err := l.Accept()
				if err != nil {
					return
				}
				go func() {
					n, _ := io.Copy(io.Discard, c)
					out.Lock()
					fmt.Printf("got %d\n", n)
					out.Unlock()
				}()
			}
		}()
		fmt.Println("ready")
		io.Copy(io.Discard, os.Stdin) // until the test stops us
		time.Sleep(100 * time.Millisecond)
		l.Close()
		return nil
	case role[0] == "symlink" && len(role) == 3:
		if err := os.Symlink(role[1], role[2]); err != nil {
			return err
		}
	case role[0] == "connect" && len(role) == 3:
		n, err := strconv.Atoi(role[2])
		if err != nil {
			return err
		}
		var held []net.Conn
		for range n {
			c, err := net.Dial("tcp", role[1])
			if err != nil {
				fmt.Printf("error: %v\n", err)
				break
			}
			held = append(held, c)
		}
		fmt.Println("ready")
		io.Copy(io.Discard, os.Stdin)
		for _, c := range held {
			c.Close()
		}
		return nil
	case role[0] == "mkdir" && len(role) == 3:
		m, err := strconv.ParseUint(role[2], 8, 32)
		if err != nil {
			return err
		}
		if err := os.Mkdir(role[1], 0o700); err != nil {
			return err
		}
		if err := os.Chmod(role[1], os.FileMode(m)); err != nil {
			return err
		}
	default:
		return fmt.Errorf("unknown role %q", role)
	}
	fmt.Println("ready")
	io.Copy(io.Discard, os.Stdin)
	return nil
}
