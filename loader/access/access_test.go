package access_test

import (
	"errors"
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
