package loader

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/gload/gload/loader/access"
)

// Addr is a parsed listen address.
type Addr struct {
	// Network is "unix" or "tcp".
	Network string
	// Address is the socket path (unix) or host:port (tcp).
	Address string
	// Local is true for unix sockets and loopback TCP addresses.
	Local bool
}

// String gives the address in the form ParseAddr reads.
func (a Addr) String() string {
	if a.Network == "unix" {
		return unixURL(a.Address)
	}
	return a.Address
}

// unixURL writes a socket path as unix:///abs/path or unix:rel/path.
func unixURL(path string) string {
	if strings.HasPrefix(path, "/") {
		return "unix://" + path
	}
	return "unix:" + path
}

// ParseAddr parses a listen address: "unix:///abs/path.sock" or
// "unix:rel/path.sock" for a unix socket, or host:port for TCP. Loopback
// hosts (127.0.0.0/8, ::1, "localhost") are local; an empty host, 0.0.0.0 or
// any other host is not.
func ParseAddr(s string) (Addr, error) {
	if rest, ok := strings.CutPrefix(s, "unix:"); ok {
		path := rest
		if p, ok := strings.CutPrefix(rest, "//"); ok {
			path = p
			if !strings.HasPrefix(path, "/") {
				return Addr{}, fmt.Errorf("%w: %q: unix:// needs an absolute path (unix:///path.sock)", ErrAddress, s)
			}
		}
		if path == "" || strings.ContainsRune(path, 0) {
			return Addr{}, fmt.Errorf("%w: %q: empty or invalid socket path", ErrAddress, s)
		}
		return Addr{Network: "unix", Address: path, Local: true}, nil
	}
	if strings.Contains(s, "://") {
		return Addr{}, fmt.Errorf("%w: %q: want unix:///path.sock or host:port", ErrAddress, s)
	}
	host, port, err := net.SplitHostPort(s)
	if err != nil {
		return Addr{}, fmt.Errorf("%w: %q: %w", ErrAddress, s, err)
	}
	if n, err := strconv.ParseUint(port, 10, 16); err != nil || (n == 0 && port != "0") {
		return Addr{}, fmt.Errorf("%w: %q: port %q is not a number from 0 to 65535", ErrAddress, s, port)
	}
	local := strings.EqualFold(host, "localhost")
	if ip, err := netip.ParseAddr(host); err == nil {
		local = ip.IsLoopback()
	}
	return Addr{Network: "tcp", Address: s, Local: local}, nil
}

// ListenOptions control Listen.
type ListenOptions struct {
	// AllowRemote permits TCP addresses other than loopback.
	AllowRemote bool
	// SocketGroup, when not empty, is the group (name or numeric id) that may
	// connect to a unix socket too: the socket gets mode 0660 and this group
	// instead of 0600.
	SocketGroup string
}

// Listen opens a listener on addr (see ParseAddr). Non-local addresses need
// AllowRemote. A unix socket file left by a dead server is removed first;
// one that a live server answers on gives ErrAddrInUse, and a path that is
// not a socket is never removed.
//
// A unix socket is created with mode 0600 (0660 and SocketGroup's group with
// SocketGroup), whatever the umask: it is bound inside a private 0700
// directory, given its mode there and only then linked under its name, so
// nobody else can connect in between. A missing parent directory is created
// with mode 0700; an existing directory must be private to the user
// (access.PrepareSocketDir: owned by the user or root, and writable by
// nobody else unless sticky, up to /), and a socket file of another user is
// never probed or removed. Closing the listener removes the socket file.
func Listen(addr string, opts ListenOptions) (net.Listener, error) {
	a, err := ParseAddr(addr)
	if err != nil {
		return nil, err
	}
	if !a.Local && !opts.AllowRemote {
		return nil, fmt.Errorf("%w: %s is not a unix socket or loopback address: pass --allow-remote to serve other hosts", ErrAddress, addr)
	}
	if a.Network == "unix" {
		return listenUnix(a.Address, opts.SocketGroup)
	}
	if opts.SocketGroup != "" {
		return nil, fmt.Errorf("%w: %s: a socket group applies to unix sockets only", ErrAddress, addr)
	}
	lis, err := net.Listen(a.Network, a.Address)
	if err != nil {
		return nil, fmt.Errorf("listen on %s: %w", addr, err)
	}
	return lis, nil
}

// maxSocketPath is the longest unix socket path Linux binds (sun_path less its NUL).
const maxSocketPath = 107

// lookupGroup resolves a group name or numeric id.
func lookupGroup(g string) (int, error) {
	if id, err := strconv.Atoi(g); err == nil && id >= 0 {
		return id, nil
	}
	gr, err := user.LookupGroup(g)
	if err != nil {
		return 0, fmt.Errorf("%w: socket group %q: %w", ErrAddress, g, err)
	}
	id, err := strconv.Atoi(gr.Gid)
	if err != nil {
		return 0, fmt.Errorf("%w: socket group %q: gid %q: %w", ErrAddress, g, gr.Gid, err)
	}
	return id, nil
}

// listenUnix binds a unix socket at path with mode 0600, or 0660 and group.
func listenUnix(path, group string) (net.Listener, error) {
	url := unixURL(path)
	mode, gid := os.FileMode(0o600), -1
	if group != "" {
		id, err := lookupGroup(group)
		if err != nil {
			return nil, err
		}
		mode, gid = 0o660, id
	}
	dir := filepath.Dir(path)
	if err := access.PrepareSocketDir(dir); err != nil {
		return nil, fmt.Errorf("%w: listen on %s: %w", ErrAddress, url, err)
	}
	if err := removeStaleSocket(path); err != nil {
		return nil, err
	}
	if len(path) > maxSocketPath {
		return nil, fmt.Errorf("%w: %s: socket path of %d bytes, the system allows %d", ErrAddress, url, len(path), maxSocketPath)
	}
	private, err := os.MkdirTemp(dir, ".g")
	if err != nil {
		return nil, fmt.Errorf("listen on %s: %w", url, err)
	}
	defer os.RemoveAll(private)
	tmp := filepath.Join(private, "s")
	if len(tmp) > maxSocketPath {
		// No room for the private name: bind in place and set the mode at
		// once (the one case where the umask's mode shows for an instant).
		tmp = path
	}
	ul, err := net.ListenUnix("unix", &net.UnixAddr{Name: tmp, Net: "unix"})
	if err != nil {
		return nil, fmt.Errorf("listen on %s: %w", url, err)
	}
	ul.SetUnlinkOnClose(false)
	fail := func(err error) (net.Listener, error) {
		ul.Close()
		os.Remove(tmp)
		return nil, fmt.Errorf("listen on %s: %w", url, err)
	}
	if gid >= 0 {
		if err := os.Lchown(tmp, -1, gid); err != nil {
			return fail(fmt.Errorf("socket group %s: %w", group, err))
		}
	}
	if err := os.Chmod(tmp, mode); err != nil {
		return fail(err)
	}
	// Link, not rename: a socket another server bound meanwhile is never replaced.
	if tmp != path {
		if err := os.Link(tmp, path); err != nil {
			if errors.Is(err, os.ErrExist) {
				ul.Close()
				return nil, fmt.Errorf("%w: %s appeared while listening", ErrAddrInUse, url)
			}
			return fail(err)
		}
	}
	st, err := os.Lstat(path)
	if err != nil {
		return fail(err)
	}
	return &unixListener{UnixListener: ul, path: path, st: st}, nil
}

// unixListener is a socket bound under a temporary name and linked at path:
// it reports path as its address and removes it on Close (if it is still
// this socket).
type unixListener struct {
	*net.UnixListener
	path string
	st   os.FileInfo
	once sync.Once
}

func (l *unixListener) Addr() net.Addr { return &net.UnixAddr{Name: l.path, Net: "unix"} }

func (l *unixListener) Close() error {
	err := l.UnixListener.Close()
	l.once.Do(func() {
		if st, serr := os.Lstat(l.path); serr == nil && os.SameFile(st, l.st) {
			os.Remove(l.path)
		}
	})
	return err
}

// removeStaleSocket removes path if it is a unix socket nobody listens on.
func removeStaleSocket(path string) error {
	st, err := os.Lstat(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("listen on unix://%s: %w", path, err)
	}
	if st.Mode()&os.ModeSocket == 0 {
		return fmt.Errorf("%w: unix://%s exists and is not a socket", ErrAddress, path)
	}
	if sys, ok := st.Sys().(*syscall.Stat_t); ok && int(sys.Uid) != os.Geteuid() && sys.Uid != 0 {
		return fmt.Errorf("%w: unix://%s belongs to uid %d, not to you (uid %d): another user bound it first; "+
			"listen in a directory of your own (mode 0700)", ErrAddrInUse, path, sys.Uid, os.Geteuid())
	}
	c, err := net.DialTimeout("unix", path, time.Second)
	if err == nil {
		c.Close()
		return fmt.Errorf("%w: a server already listens on unix://%s", ErrAddrInUse, path)
	}
	if !errors.Is(err, syscall.ECONNREFUSED) {
		return fmt.Errorf("listen on unix://%s: probing existing socket: %w", path, err)
	}
	if err := os.Remove(path); err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("listen on unix://%s: removing stale socket: %w", path, err)
	}
	return nil
}
