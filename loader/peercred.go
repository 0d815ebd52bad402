package loader

import (
	"errors"
	"net"
	"reflect"
	"syscall"

	"golang.org/x/sys/unix"
)

// PeerAddr is the remote address of a connection accepted on a unix socket,
// with the peer's credentials as the kernel recorded them when it connected
// (SO_PEERCRED): the only identity of a local client that it cannot forge.
// Handlers read it from peer.FromContext(ctx).Addr.
type PeerAddr struct {
	net.Addr
	PID      int32
	UID, GID uint32
}

// credListener wraps a unix listener: every accepted connection reports a
// *PeerAddr as its RemoteAddr.
type credListener struct{ net.Listener }

// credConn is a connection whose RemoteAddr carries its peer's credentials.
type credConn struct {
	net.Conn
	addr *PeerAddr
}

func (c *credConn) RemoteAddr() net.Addr { return c.addr }

// SyscallConn passes the socket through, so that a listener wrapping this one
// can read the peer's credentials too.
func (c *credConn) SyscallConn() (syscall.RawConn, error) {
	sc, ok := c.Conn.(syscall.Conn)
	if !ok {
		return nil, errors.New("not a syscall.Conn")
	}
	return sc.SyscallConn()
}

// peerAddrOf finds the *PeerAddr in a connection's remote address, also when
// a listener wrapping this one wrapped the address in turn (a struct
// embedding it as its Addr field, or an Unwrap method).
func peerAddrOf(a net.Addr) (*PeerAddr, bool) {
	for range 4 {
		switch t := a.(type) {
		case nil:
			return nil, false
		case *PeerAddr:
			return t, true
		case interface{ Unwrap() net.Addr }:
			a = t.Unwrap()
			continue
		}
		v := reflect.Indirect(reflect.ValueOf(a))
		if v.Kind() != reflect.Struct {
			return nil, false
		}
		f := v.FieldByName("Addr")
		if !f.IsValid() || !f.CanInterface() {
			return nil, false
		}
		next, ok := f.Interface().(net.Addr)
		if !ok {
			return nil, false
		}
		a = next
	}
	return nil, false
}

// withPeerCred returns lis unchanged unless it is a unix socket listener; then
// its connections carry their peer's credentials (see PeerAddr).
func withPeerCred(lis net.Listener) net.Listener {
	if lis.Addr().Network() != "unix" {
		return lis
	}
	return credListener{lis}
}

func (l credListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	cred, err := peerCred(c)
	if err != nil {
		// No credentials, no identity: the connection is served as before,
		// but calls that need an identity (OpenPath) are refused.
		return c, nil
	}
	return &credConn{Conn: c, addr: &PeerAddr{Addr: c.RemoteAddr(), PID: cred.Pid, UID: cred.Uid, GID: cred.Gid}}, nil
}

// peerCred reads SO_PEERCRED of a unix connection.
func peerCred(c net.Conn) (*unix.Ucred, error) {
	sc, ok := c.(syscall.Conn)
	if !ok {
		return nil, errors.New("not a syscall.Conn")
	}
	raw, err := sc.SyscallConn()
	if err != nil {
		return nil, err
	}
	var cred *unix.Ucred
	var cerr error
	if err := raw.Control(func(fd uintptr) {
		cred, cerr = unix.GetsockoptUcred(int(fd), unix.SOL_SOCKET, unix.SO_PEERCRED)
	}); err != nil {
		return nil, err
	}
	return cred, cerr
}
