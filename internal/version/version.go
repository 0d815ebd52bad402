// Package version holds gload's version, the one every surface reports:
// `gload --version`, the build info metric on /metrics, Health, and (kept
// equal by a test) the Python client's gload.__version__. It must not
// import anything of the project.
//
// The release number is the VERSION file beside this package; a build from
// a git checkout adds the commit: the Makefile passes `git describe
// --always --dirty` with `-ldflags "-X
// github.com/gload/gload/internal/version.commit=..."`, else the commit the
// Go toolchain stamps into the binary is used ("0.1.0+3f2a1c9", ".dirty"
// with uncommitted changes); a build outside git says the release alone.
package version

import (
	_ "embed"
	"runtime/debug"
	"strings"
)

//go:embed VERSION
var release string

var commit string // set by the Makefile (-ldflags -X)

// String returns the version of this binary.
func String() string {
	v := Release()
	if commit != "" {
		return v + "+" + commit
	}
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return v
	}
	var rev string
	dirty := false
	for _, s := range bi.Settings {
		switch s.Key {
		case "vcs.revision":
			rev = s.Value
		case "vcs.modified":
			dirty = s.Value == "true"
		}
	}
	if len(rev) > 7 {
		rev = rev[:7]
	}
	if rev != "" {
		v += "+" + rev
		if dirty {
			v += ".dirty"
		}
	}
	return v
}

// Release returns the release number alone ("0.1.0").
func Release() string { return strings.TrimSpace(release) }
