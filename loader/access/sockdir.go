package access

// Socket directories: where a unix socket may live so that no other local
// user can take it over (bind it first, or replace it later).
//
// A path is safe for a user when every directory on it, from / down, is owned
// by that user or root (or a uid the caller trusts) and is writable by nobody
// else, or is sticky (like /tmp, where others cannot rename or remove what
// they do not own). A symbolic link on the way must be owned by a trusted uid
// too; it is followed and the rest of the walk goes on from its target. This is
// OpenSSH's rule for authorized_keys (safe_path) and tmux's for its socket
// directory.

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
)

// ErrUnsafePath means a socket path, or a directory on it, can be changed by
// another user; ErrUntrusted means a socket, its file or a ring is another
// user's.
var (
	ErrUnsafePath = errors.New("access: unsafe socket path")
	ErrUntrusted  = errors.New("access: untrusted server")
)

// maxLinks bounds the symbolic links one walk follows.
const maxLinks = 32

// owner returns the owner uid and gid of fi.
func owner(fi fs.FileInfo) (uid, gid int) {
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return -1, -1
	}
	return int(st.Uid), int(st.Gid)
}

// CheckPathDirs checks that nobody but root and the uids in owners can change
// which file path names: each directory from / to path's parent (and path
// itself when it is a directory) is owned by root or one of owners and is not
// writable by group or others unless it is sticky; a symbolic link on the way
// is owned by root or one of owners and is followed. The last element of path
// is not checked unless it is a directory (a socket's owner is the caller's to
// check). A missing path is an error wrapping fs.ErrNotExist.
func CheckPathDirs(path string, owners ...int) error {
	abs, err := filepath.Abs(path)
	if err != nil {
		return fmt.Errorf("%w: %s: %w", ErrUnsafePath, path, err)
	}
	trusted := func(uid int) bool {
		if uid == 0 {
			return true
		}
		for _, o := range owners {
			if uid == o {
				return true
			}
		}
		return false
	}
	links := 0
	todo := strings.Split(strings.TrimPrefix(abs, "/"), "/")
	cur := "/"
	check := func(p string, fi fs.FileInfo) error {
		uid, _ := owner(fi)
		if !trusted(uid) {
			return fmt.Errorf("%w: %s belongs to uid %d, not to you (uid %d) or root: another user can replace what is in it",
				ErrUnsafePath, p, uid, os.Geteuid())
		}
		if fi.IsDir() && fi.Mode().Perm()&0o022 != 0 && fi.Mode()&fs.ModeSticky == 0 {
			return fmt.Errorf("%w: %s has mode %04o: others can write to it and replace what is in it (chmod go-w %s)",
				ErrUnsafePath, p, fi.Mode().Perm(), p)
		}
		return nil
	}
	fi, err := os.Lstat(cur)
	if err != nil {
		return fmt.Errorf("%w: %s: %w", ErrUnsafePath, cur, err)
	}
	if err := check(cur, fi); err != nil {
		return err
	}
	for len(todo) > 0 {
		name := todo[0]
		todo = todo[1:]
		if name == "" || name == "." {
			continue
		}
		if name == ".." {
			cur = filepath.Dir(cur)
			continue
		}
		next := filepath.Join(cur, name)
		fi, err := os.Lstat(next)
		if errors.Is(err, fs.ErrNotExist) && len(todo) == 0 {
			return nil // the socket itself is not there (yet): nothing to check
		}
		if err != nil {
			return fmt.Errorf("%w: %s: %w", ErrUnsafePath, next, err)
		}
		if fi.Mode()&fs.ModeSymlink != 0 {
			if err := check(next, fi); err != nil {
				return err
			}
			if links++; links > maxLinks {
				return fmt.Errorf("%w: %s: more than %d symbolic links", ErrUnsafePath, path, maxLinks)
			}
			target, err := os.Readlink(next)
			if err != nil {
				return fmt.Errorf("%w: %s: %w", ErrUnsafePath, next, err)
			}
			if filepath.IsAbs(target) {
				cur = "/"
			}
			todo = append(strings.Split(target, "/"), todo...)
			continue
		}
		if len(todo) > 0 || fi.IsDir() {
			if !fi.IsDir() {
				return fmt.Errorf("%w: %s is not a directory", ErrUnsafePath, next)
			}
			if err := check(next, fi); err != nil {
				return err
			}
		}
		cur = next
	}
	return nil
}

// PrepareSocketDir makes dir ready to hold the server's unix socket: a
// missing dir (and missing parents) is created with mode 0700; an existing
// one must be safe for the calling user (CheckPathDirs). An unsafe dir is
// never used or changed: the error names it and says what to do.
func PrepareSocketDir(dir string) error {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return fmt.Errorf("socket directory %s: %w", dir, err)
	}
	// Create from the top down with Mkdir, never MkdirAll's "exists is fine":
	// a directory another user made meanwhile is caught by the check below.
	var missing []string
	for p := abs; ; p = filepath.Dir(p) {
		if _, err := os.Lstat(p); err == nil {
			break
		} else if !errors.Is(err, fs.ErrNotExist) {
			return fmt.Errorf("socket directory %s: %w", p, err)
		}
		missing = append(missing, p)
		if p == "/" {
			break
		}
	}
	for i := len(missing) - 1; i >= 0; i-- {
		if err := os.Mkdir(missing[i], 0o700); err != nil && !errors.Is(err, fs.ErrExist) {
			return fmt.Errorf("socket directory %s: %w", missing[i], err)
		}
	}
	if err := CheckPathDirs(abs, os.Geteuid()); err != nil {
		return fmt.Errorf("socket directory %s is not private to you: %w; remove it, or listen elsewhere "+
			"(--listen unix:///path/in/a/private/dir.sock, or set XDG_RUNTIME_DIR to a 0700 directory of yours)", dir, err)
	}
	return nil
}

// CheckSocketFile checks a unix socket file a client is about to connect to:
// a socket (not a symbolic link) whose owner is root, the calling user or one
// of owners, in a directory only they can change (CheckPathDirs).
func CheckSocketFile(path string, owners ...int) error {
	all := append([]int{os.Geteuid()}, owners...)
	if err := CheckPathDirs(path, all...); err != nil {
		return err
	}
	fi, err := os.Lstat(path)
	if err != nil {
		return err
	}
	if fi.Mode().Type() != fs.ModeSocket {
		return fmt.Errorf("%w: %s is a %s, not a unix socket", ErrUntrusted, path, typeName(fi.Mode()))
	}
	uid, _ := owner(fi)
	for _, o := range all {
		if uid == o {
			return nil
		}
	}
	if uid == 0 {
		return nil
	}
	return fmt.Errorf("%w: socket %s belongs to uid %d, not to you (uid %d): another user may have bound it first",
		ErrUntrusted, path, uid, os.Geteuid())
}

func typeName(m fs.FileMode) string {
	switch m.Type() {
	case fs.ModeSymlink:
		return "symbolic link"
	case fs.ModeDir:
		return "directory"
	case 0:
		return "regular file"
	case fs.ModeNamedPipe:
		return "named pipe"
	case fs.ModeDevice, fs.ModeDevice | fs.ModeCharDevice:
		return "device"
	}
	return m.Type().String()
}
