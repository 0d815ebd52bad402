package access_test

import (
	"errors"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/gload/gload/loader/access"
)

func TestDefaultAddress(t *testing.T) {
	run := t.TempDir()
	for _, tc := range []struct {
		name, addr, xdg, want string
	}{
		{"GLOAD_ADDR wins", "127.0.0.1:9", run, "127.0.0.1:9"},
		{"XDG_RUNTIME_DIR", "", run, "unix://" + filepath.Join(run, "gload.sock")},
		{"relative XDG_RUNTIME_DIR is ignored", "", "rel", "unix://" + filepath.Join(os.TempDir(), "gload-"+strconv.Itoa(os.Getuid()), "gload.sock")},
		{"neither", "", "", "unix://" + filepath.Join(os.TempDir(), "gload-"+strconv.Itoa(os.Getuid()), "gload.sock")},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Setenv(access.EnvAddr, tc.addr)
			t.Setenv("XDG_RUNTIME_DIR", tc.xdg)
			if got := access.DefaultAddress(); got != tc.want {
				t.Fatalf("DefaultAddress() = %q, want %q", got, tc.want)
			}
		})
	}
}

func TestReadTokenFile(t *testing.T) {
	dir := t.TempDir()
	good := strings.Repeat("ab", 16)
	for _, tc := range []struct {
		name    string
		content string
		mode    os.FileMode
		want    string // token, or a piece of the error
		ok      bool
	}{
		{"good, trailing newline", good + "\n", 0o600, good, true},
		{"read-only owner", "  " + good + "\r\n", 0o400, good, true},
		{"group readable", good, 0o640, "mode 0640", false},
		{"world readable", good, 0o644, "chmod 600", false},
		{"too short", "short", 0o600, "at least 16", false},
		{"empty", "", 0o600, "at least 16", false},
		{"inner space", "abcdefgh ijklmnopq", 0o600, "printable ASCII", false},
		{"control byte", good + "\x00x", 0o600, "printable ASCII", false},
		{"too large", strings.Repeat("x", 5000), 0o600, "one token", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := filepath.Join(dir, strings.ReplaceAll(tc.name, " ", "_"))
			if err := os.WriteFile(p, []byte(tc.content), 0o600); err != nil {
				t.Fatal(err)
			}
			if err := os.Chmod(p, tc.mode); err != nil {
				t.Fatal(err)
			}
			tok, err := access.ReadTokenFile(p)
			if tc.ok {
				if err != nil || tok != tc.want {
					t.Fatalf("ReadTokenFile = %q, %v; want %q", tok, err, tc.want)
				}
				return
			}
			if !errors.Is(err, access.ErrToken) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("ReadTokenFile = %q, %v; want ErrToken mentioning %q", tok, err, tc.want)
			}
		})
	}
	if _, err := access.ReadTokenFile(filepath.Join(dir, "missing")); !errors.Is(err, access.ErrToken) {
		t.Fatalf("missing file: %v", err)
	}
	if _, err := access.ReadTokenFile(dir); !errors.Is(err, access.ErrToken) {
		t.Fatalf("directory: %v", err)
	}
}

func TestAllowed(t *testing.T) {
	tok := strings.Repeat("k", 32)
	for _, tc := range []struct {
		name   string
		values []string
		ok     bool
	}{
		{"right", []string{access.Header(tok)}, true},
		{"scheme in lower case", []string{"bearer " + tok}, true},
		{"one of several", []string{"Bearer nope", access.Header(tok)}, true},
		{"none", nil, false},
		{"wrong", []string{access.Header(strings.Repeat("j", 32))}, false},
		{"prefix of the token", []string{access.Header(tok[:31])}, false},
		{"token plus more", []string{access.Header(tok + "x")}, false},
		{"no scheme", []string{tok}, false},
		{"basic", []string{"Basic " + tok}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := access.Allowed(tc.values, tok); got != tc.ok {
				t.Fatalf("Allowed(%q) = %v, want %v", tc.values, got, tc.ok)
			}
		})
	}
}

func TestEnvTokenValue(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "tok")
	if err := os.WriteFile(p, []byte(strings.Repeat("f", 20)+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Setenv(access.EnvToken, "")
	t.Setenv(access.EnvTokenFile, "")
	if tok, err := access.EnvTokenValue(); tok != "" || err != nil {
		t.Fatalf("unset: %q, %v", tok, err)
	}
	t.Setenv(access.EnvTokenFile, p)
	if tok, err := access.EnvTokenValue(); tok != strings.Repeat("f", 20) || err != nil {
		t.Fatalf("file: %q, %v", tok, err)
	}
	t.Setenv(access.EnvToken, "from-env-token-123")
	if tok, err := access.EnvTokenValue(); tok != "from-env-token-123" || err != nil {
		t.Fatalf("env wins: %q, %v", tok, err)
	}
	t.Setenv(access.EnvToken, "")
	if err := os.Chmod(p, 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := access.EnvTokenValue(); !errors.Is(err, access.ErrToken) || !strings.Contains(err.Error(), access.EnvTokenFile) {
		t.Fatalf("readable file: %v", err)
	}
}

// FuzzAllowed: any header value is judged without panicking; the header made
// for a valid token always passes, and a value that passes for tok carries it.
func FuzzAllowed(f *testing.F) {
	for _, s := range []string{"Bearer 0123456789abcdef", "bearer x", "Basic abc", "", "Bearer "} {
		f.Add(s, "0123456789abcdef")
	}
	f.Fuzz(func(t *testing.T, value, tok string) {
		ok := access.Allowed([]string{value}, tok)
		if ok && !strings.HasSuffix(value, tok) {
			t.Fatalf("Allowed(%q, %q) without the token", value, tok)
		}
		if access.CheckToken(tok) == nil && !access.Allowed([]string{access.Header(tok)}, tok) {
			t.Fatalf("Header(%q) refused", tok)
		}
	})
}

// TestCheckPathDirs: which directories may hold a socket.
func TestCheckPathDirs(t *testing.T) {
	base := t.TempDir()
	os.Chmod(base, 0o700)
	mk := func(name string, mode os.FileMode) string {
		p := filepath.Join(base, name)
		if err := os.Mkdir(p, 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(p, mode); err != nil {
			t.Fatal(err)
		}
		return p
	}
	private := mk("private", 0o700)
	open := mk("open", 0o777)
	sticky := mk("sticky", 0o777|os.ModeSticky)
	group := mk("group", 0o770)
	os.Symlink(private, filepath.Join(base, "link"))
	os.Symlink(open, filepath.Join(base, "badlink"))
	for _, tc := range []struct {
		path string
		ok   bool
	}{
		{filepath.Join(private, "s.sock"), true},
		{filepath.Join(open, "s.sock"), false},
		{filepath.Join(sticky, "s.sock"), true},
		{filepath.Join(group, "s.sock"), false},
		{filepath.Join(base, "link", "s.sock"), true},
		{filepath.Join(base, "badlink", "s.sock"), false},
		{filepath.Join(base, "link", "..", "open", "s.sock"), false},
		{open, false},
		{private, true},
	} {
		err := access.CheckPathDirs(tc.path)
		if (err == nil) != tc.ok {
			t.Errorf("CheckPathDirs(%s) = %v, want ok %v", tc.path, err, tc.ok)
		}
		if err != nil && !errors.Is(err, access.ErrUnsafePath) {
			t.Errorf("CheckPathDirs(%s) = %v, want ErrUnsafePath", tc.path, err)
		}
	}
	// PrepareSocketDir makes missing directories 0700.
	fresh := filepath.Join(private, "a", "b")
	if err := access.PrepareSocketDir(fresh); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{filepath.Join(private, "a"), fresh} {
		if st, err := os.Stat(p); err != nil || st.Mode().Perm() != 0o700 {
			t.Fatalf("%s: %v %v, want 0700", p, st.Mode(), err)
		}
	}
}

// TestTCPPeer: a loopback TCP server's uid comes from /proc/net/tcp{,6}.
func TestTCPPeer(t *testing.T) {
	for _, addr := range []string{"127.0.0.1:0", "[::1]:0"} {
		l, err := net.Listen("tcp", addr)
		if err != nil {
			t.Logf("%s: %v (skipped)", addr, err)
			continue
		}
		defer l.Close()
		go func() {
			for {
				c, err := l.Accept()
				if err != nil {
					return
				}
				defer c.Close()
			}
		}()
		c, err := net.Dial("tcp", l.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		p, err := access.ConnPeer(c)
		c.Close()
		if err != nil || p.UID != os.Geteuid() {
			t.Fatalf("%s: peer %+v, %v; want uid %d", addr, p, err, os.Geteuid())
		}
	}
}

// FuzzParseTrust: any $GLOAD_TRUST_SERVER value parses or is refused, never
// panics, and a parsed one names only non-negative ids.
func FuzzParseTrust(f *testing.F) {
	for _, s := range []string{"", "root", "0,1,2", "group:0", "group:root,1000", ",,", "group:", "nosuchuser-gload", "-1", "99999999999999"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		tr, err := access.ParseTrust(s)
		if err != nil {
			return
		}
		for _, id := range append(tr.UIDs, tr.GIDs...) {
			if id < 0 {
				t.Fatalf("ParseTrust(%q) gave id %d", s, id)
			}
		}
	})
}
