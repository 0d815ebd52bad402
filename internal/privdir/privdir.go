// Package privdir makes and checks directories that must be private to the user: gload's shard cache and the
// upload stage of `tokenize --out s3://…`, which hold a user's data and, under a shared $TMPDIR, sit where other
// local users can reach.
//
// A private directory is a real directory (not a symbolic link), owned by the effective user, with no access for
// group or others. Ensure creates one with mode 0700, narrows one the user owns to 0700 (an older gload made them
// 0755, or 0775 under a umask of 002), and refuses anything else, naming the owner and mode: a directory another
// user made was prepared by someone else, and nothing in it can be trusted or kept secret.
package privdir

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
)

// ErrNotPrivate means a directory is not private to the user.
var ErrNotPrivate = errors.New("privdir: directory is not private to this user")

// TempRoot is the fallback for a per-user directory under $TMPDIR when the user has no cache directory ($HOME
// and $XDG_CACHE_HOME unset): $TMPDIR/<name>-<uid>. The uid keeps users apart; Ensure checks that nobody else
// made it first.
func TempRoot(name string) string {
	return filepath.Join(os.TempDir(), name+"-"+strconv.Itoa(os.Geteuid()))
}

// Check returns nil when dir is private (see the package comment), and otherwise an error wrapping ErrNotPrivate
// or the stat error.
func Check(dir string) error {
	fi, err := os.Lstat(dir)
	if err != nil {
		return err
	}
	if err := check(dir, fi); err != nil {
		return err
	}
	return checkMode(dir, fi)
}

func check(dir string, fi os.FileInfo) error {
	if fi.Mode()&os.ModeSymlink != 0 {
		return fmt.Errorf("%w: %s is a symbolic link", ErrNotPrivate, dir)
	}
	if !fi.IsDir() {
		return fmt.Errorf("%w: %s is not a directory", ErrNotPrivate, dir)
	}
	if uid, ok := owner(fi); ok && uid != os.Geteuid() {
		return fmt.Errorf("%w: %s belongs to uid %d (mode %04o), not to this user (uid %d): another user made it; "+
			"refusing to use it", ErrNotPrivate, dir, uid, fi.Mode().Perm(), os.Geteuid())
	}
	return nil
}

// checkMode: the mode gives group and others nothing.
func checkMode(dir string, fi os.FileInfo) error {
	if fi.Mode().Perm()&0o077 != 0 {
		return fmt.Errorf("%w: %s has mode %04o (want 0700)", ErrNotPrivate, dir, fi.Mode().Perm())
	}
	return nil
}

// Ensure makes dir (and missing parents, 0700) if needed and checks it is the user's own real directory, which it
// narrows to 0700. The error says which directory and why, and what to do.
func Ensure(dir string) error {
	if err := os.Mkdir(dir, 0o700); err != nil && !errors.Is(err, os.ErrExist) {
		if !errors.Is(err, os.ErrNotExist) {
			return fmt.Errorf("privdir: %w", err)
		}
		if err := os.MkdirAll(dir, 0o700); err != nil {
			return fmt.Errorf("privdir: %w", err)
		}
	}
	fi, err := os.Lstat(dir)
	if err != nil {
		return fmt.Errorf("privdir: %w", err)
	}
	if err := check(dir, fi); err != nil {
		return fmt.Errorf("%w (set XDG_CACHE_HOME, or pass --cache/--stage, to a directory of your own)", err)
	}
	if fi.Mode().Perm()&0o077 != 0 {
		if err := os.Chmod(dir, 0o700); err != nil {
			return fmt.Errorf("privdir: %w", err)
		}
	}
	return nil
}
