package loader

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"strconv"
	"strings"
	"syscall"
	"time"
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
}

// Listen opens a listener on addr (see ParseAddr). Non-local addresses need
// AllowRemote. A unix socket file left by a dead server is removed first;
// one that a live server answers on gives ErrAddrInUse, and a path that is
// not a socket is never removed.
func Listen(addr string, opts ListenOptions) (net.Listener, error) {
	a, err := ParseAddr(addr)
	if err != nil {
		return nil, err
	}
	if !a.Local && !opts.AllowRemote {
		return nil, fmt.Errorf("%w: %s is not a unix socket or loopback address: pass --allow-remote to serve other hosts", ErrAddress, addr)
	}
	if a.Network == "unix" {
		if err := removeStaleSocket(a.Address); err != nil {
			return nil, err
		}
	}
	lis, err := net.Listen(a.Network, a.Address)
	if err != nil {
		return nil, fmt.Errorf("listen on %s: %w", addr, err)
	}
	return lis, nil
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
