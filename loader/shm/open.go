package shm

// Opening a ring a server named: the client side's defence against a hostile
// or confused server that names some other file (the client maps it and
// writes its released word into it).

import (
	"fmt"
	"os"
	"path/filepath"

	"golang.org/x/sys/unix"
)

// MapOption configures Map and MapDoorbell.
type MapOption func(*mapOptions)

type mapOptions struct{ owner int }

// Owner is the uid the ring file must belong to: the server's, from its peer
// credentials (loader/access). Without it the ring must be the calling
// user's. A negative uid (the server's identity is unknown) refuses every ring.
func Owner(uid int) MapOption { return func(o *mapOptions) { o.owner = uid } }

// CheckRingPath checks the form of a ring path a server announced: an
// absolute, clean path whose base name is a ring name (gload-PID-START-HEX.ring)
// in DefaultDir, or in a directory (not a symbolic link) that belongs to owner
// and that nobody else may write to.
func CheckRingPath(path string, owner int) error {
	if !filepath.IsAbs(path) || filepath.Clean(path) != path {
		return fmt.Errorf("%w: ring path %q is not an absolute, clean path", ErrRing, path)
	}
	dir, name := filepath.Split(path)
	dir = filepath.Clean(dir)
	if _, _, ok := ParseName(name); !ok {
		return fmt.Errorf("%w: ring path %q: %q is not a ring name (gload-PID-START-HEX.ring)", ErrRing, path, name)
	}
	if dir == DefaultDir {
		return nil
	}
	var st unix.Stat_t
	if err := unix.Lstat(dir, &st); err != nil {
		return fmt.Errorf("%w: ring directory %s: %w", ErrRing, dir, err)
	}
	if st.Mode&unix.S_IFMT != unix.S_IFDIR {
		return fmt.Errorf("%w: ring directory %s is not a directory (a symbolic link?)", ErrRing, dir)
	}
	if int(st.Uid) != owner || st.Mode&0o022 != 0 {
		return fmt.Errorf("%w: ring directory %s (uid %d, mode %04o) is neither %s nor a directory of the server's user (uid %d) "+
			"that only it can write to", ErrRing, dir, st.Uid, st.Mode&0o7777, DefaultDir, owner)
	}
	return nil
}

// openRing opens the ring at path for mapping: CheckRingPath, then without
// following a symbolic link and without blocking on a FIFO, and checks that
// it is a regular file with one link, owned by owner, of size bytes.
func openRing(path string, flags, owner int, size int64, want string) (*os.File, error) {
	if owner < 0 {
		return nil, fmt.Errorf("%w: ring %s: the server's user is unknown (a TCP connection the kernel does not list as local), "+
			"so its ring cannot be trusted: use the grpc transport", ErrRing, path)
	}
	if err := CheckRingPath(path, owner); err != nil {
		return nil, err
	}
	fd, err := unix.Open(path, flags|unix.O_NOFOLLOW|unix.O_NONBLOCK|unix.O_CLOEXEC|unix.O_NOCTTY, 0)
	if err != nil {
		return nil, fmt.Errorf("open ring %s: %w", path, &os.PathError{Op: "open", Path: path, Err: err})
	}
	f := os.NewFile(uintptr(fd), path)
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		f.Close()
		return nil, fmt.Errorf("stat ring %s: %w", path, err)
	}
	switch {
	case st.Mode&unix.S_IFMT != unix.S_IFREG:
		err = fmt.Errorf("%w: %s is not a regular file (mode %#o), want a regular file of %s", ErrRing, path, st.Mode, want)
	case st.Size != size:
		err = fmt.Errorf("%w: %s: regular file of %d bytes, want a regular file of %s", ErrRing, path, st.Size, want)
	case int(st.Uid) != owner:
		err = fmt.Errorf("%w: %s belongs to uid %d, not to the server's user (uid %d): a server may only name its own ring",
			ErrRing, path, st.Uid, owner)
	case st.Nlink != 1:
		err = fmt.Errorf("%w: %s has %d links, a ring has one", ErrRing, path, st.Nlink)
	}
	if err != nil {
		f.Close()
		return nil, err
	}
	return f, nil
}
