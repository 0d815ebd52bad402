// Package safename checks file names that come from data — a resume journal, a gload.index, a bucket listing, a
// merge part, a Hugging Face state.json — before they touch a path, and opens and creates files without following
// a symbolic link in the last component.
//
// A name from data is accepted only as a plain base name of one directory entry: not empty, at most MaxLen bytes,
// valid UTF-8, no '/', '\\', NUL or other control character, not "." or "..", no leading '.' (hidden files and
// gload's own temporary names such as ".gload-sync" or ".x.gload-part" start with one), and unchanged by
// filepath.Clean. Join therefore always yields a path directly inside its directory.
//
// # Caveats
//
// The checks cover the last component only: the directory itself is the caller's (a path the user gave, or one
// gload made). Opening "without following symlinks" means O_NOFOLLOW on the name, then fstat of the opened file
// descriptor; code that checks a file and then uses it must use the *os.File it got here, not the path again.
package safename

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"unicode"
	"unicode/utf8"
)

// MaxLen is the longest accepted name in bytes (NAME_MAX of Linux file systems).
const MaxLen = 255

// Sentinel errors.
var (
	ErrBadName    = errors.New("safename: not a plain file name")
	ErrNotRegular = errors.New("safename: not a regular file")
	ErrTooLarge   = errors.New("safename: file larger than its limit")
)

// MaxMetaBytes bounds the JSON metadata files of a dataset directory that gload reads whole (state.json,
// dataset_info.json, the freshness stamp, a task record): real ones are kilobytes.
const MaxMetaBytes = 64 << 20

// ReadFile reads a whole regular file of at most limit bytes, opened without following a symbolic link or
// blocking on a FIFO. A larger file is an error wrapping ErrTooLarge that names it and the limit; nothing past
// limit+1 bytes is read.
func ReadFile(path string, limit int64) ([]byte, error) {
	f, fi, err := OpenRegular(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	if fi.Size() > limit {
		return nil, fmt.Errorf("%w: %s is %d bytes (at most %d)", ErrTooLarge, path, fi.Size(), limit)
	}
	b, err := io.ReadAll(io.LimitReader(f, limit+1))
	if err != nil {
		return nil, err
	}
	if int64(len(b)) > limit {
		return nil, fmt.Errorf("%w: %s grew past %d bytes while read", ErrTooLarge, path, limit)
	}
	return b, nil
}

// Check returns nil when name is a plain base name that is safe to join to a directory, and otherwise an error
// wrapping ErrBadName that quotes the name (escaped) and says why.
func Check(name string) error {
	why := problem(name)
	if why == "" {
		return nil
	}
	q := name
	if len(q) > 80 {
		q = q[:80] + "..."
	}
	return fmt.Errorf("%w: %q %s", ErrBadName, q, why)
}

func problem(name string) string {
	switch {
	case name == "":
		return "is empty"
	case len(name) > MaxLen:
		return fmt.Sprintf("is %d bytes long (at most %d)", len(name), MaxLen)
	case !utf8.ValidString(name):
		return "is not valid UTF-8"
	case name == "." || name == "..":
		return "names a directory"
	case strings.ContainsAny(name, `/\`):
		return "has a path separator"
	case strings.HasPrefix(name, "."):
		return "starts with a dot"
	}
	for _, r := range name {
		if r == 0 || unicode.IsControl(r) || r == utf8.RuneError {
			return fmt.Sprintf("has the control character %U", r)
		}
	}
	if filepath.Clean(name) != name || filepath.Base(name) != name || !filepath.IsLocal(name) {
		return "is not a clean local name"
	}
	return ""
}

// Join returns dir/name after Check, and checks that the cleaned result is directly inside dir.
func Join(dir, name string) (string, error) {
	if err := Check(name); err != nil {
		return "", err
	}
	p := filepath.Join(dir, name)
	if filepath.Dir(p) != filepath.Clean(dir) {
		return "", fmt.Errorf("%w: %q leaves %s", ErrBadName, name, dir)
	}
	return p, nil
}

// OpenFile is os.OpenFile with O_NOFOLLOW added: a symbolic link as the last component of path is an error
// (ELOOP), never followed.
func OpenFile(path string, flag int, perm os.FileMode) (*os.File, error) {
	f, err := os.OpenFile(path, flag|oNoFollow, perm)
	if err != nil {
		if isLoop(err) {
			return nil, fmt.Errorf("%w: %s is a symbolic link", ErrNotRegular, path)
		}
		return nil, err
	}
	return f, nil
}

// OpenRegular opens path for reading without following a symbolic link and without blocking on a FIFO, and
// returns an error wrapping ErrNotRegular unless the opened file is a regular file. Use the returned file (its
// Stat, its bytes); the path may change after the check.
func OpenRegular(path string) (*os.File, os.FileInfo, error) {
	f, err := OpenFile(path, os.O_RDONLY|oNonBlock, 0)
	if err != nil {
		return nil, nil, err
	}
	fi, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, nil, err
	}
	if !fi.Mode().IsRegular() {
		f.Close()
		return nil, nil, fmt.Errorf("%w: %s is %s", ErrNotRegular, path, kind(fi.Mode()))
	}
	if err := clearNonBlock(f); err != nil {
		f.Close()
		return nil, nil, err
	}
	return f, fi, nil
}

// LstatRegular returns path's FileInfo (not following a symbolic link) and an error wrapping ErrNotRegular
// unless it is a regular file.
func LstatRegular(path string) (os.FileInfo, error) {
	fi, err := os.Lstat(path)
	if err != nil {
		return nil, err
	}
	if !fi.Mode().IsRegular() {
		return nil, fmt.Errorf("%w: %s is %s", ErrNotRegular, path, kind(fi.Mode()))
	}
	return fi, nil
}

func kind(m os.FileMode) string {
	switch {
	case m&os.ModeSymlink != 0:
		return "a symbolic link"
	case m.IsDir():
		return "a directory"
	case m&os.ModeNamedPipe != 0:
		return "a named pipe"
	case m&os.ModeSocket != 0:
		return "a socket"
	case m&os.ModeDevice != 0:
		return "a device"
	}
	return "not a regular file (" + m.Type().String() + ")"
}
