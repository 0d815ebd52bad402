package version

import (
	"os"
	"regexp"
	"strings"
	"testing"
)

// TestPythonClientAgrees keeps the Python client's version equal to this
// package's VERSION file (the one source; the client cannot read it).
func TestPythonClientAgrees(t *testing.T) {
	b, err := os.ReadFile("../../pyclient/gload/_version.py")
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`__version__ = "([^"]+)"`).FindSubmatch(b)
	if m == nil {
		t.Fatalf("no __version__ in pyclient/gload/_version.py")
	}
	if string(m[1]) != Release() {
		t.Fatalf("pyclient/gload/_version.py says %s, internal/version/VERSION says %s", m[1], Release())
	}
}

func TestString(t *testing.T) {
	if v := String(); !strings.HasPrefix(v, Release()) || Release() == "" {
		t.Fatalf("String() = %q, Release() = %q", v, Release())
	}
	commit = "abc1234-dirty"
	defer func() { commit = "" }()
	if String() != Release()+"+abc1234-dirty" {
		t.Fatalf("commit ignored: %q", String())
	}
}
