package access

// Peer credentials: which local user a client is really talking to.
//
// On a unix socket the kernel says who called listen() on the other end
// (SO_PEERCRED); on a loopback TCP connection /proc/net/tcp{,6} says which uid
// owns the server's end. A client accepts a server run by itself, by root, or
// by a uid or gid it was told to trust (Trust, $GLOAD_TRUST_SERVER), and
// checks this before it sends a byte. The server's uid is also the owner a
// shared-memory ring must have (loader/shm).

import (
	"bufio"
	"context"
	"encoding/hex"
	"fmt"
	"net"
	"net/netip"
	"os"
	"os/user"
	"strconv"
	"strings"
	"sync"

	"golang.org/x/sys/unix"
)

// EnvTrust names the uids and gids (besides the user's own and root's) whose
// servers clients accept: a comma-separated list of user names or uids and
// group:NAME or group:GID entries.
const EnvTrust = "GLOAD_TRUST_SERVER"

// Trust is the set of identities a client accepts as its server besides its
// own uid and root: a server whose uid is in UIDs or whose gid is in GIDs.
type Trust struct {
	UIDs []int
	GIDs []int
}

// ParseTrust reads EnvTrust's form: "alice,1002,group:gload,group:1003".
func ParseTrust(s string) (Trust, error) {
	var t Trust
	for _, e := range strings.Split(s, ",") {
		e = strings.TrimSpace(e)
		if e == "" {
			continue
		}
		if g, ok := strings.CutPrefix(e, "group:"); ok {
			id, err := lookupID(g, true)
			if err != nil {
				return Trust{}, fmt.Errorf("trusted server %q: %w", e, err)
			}
			t.GIDs = append(t.GIDs, id)
			continue
		}
		id, err := lookupID(e, false)
		if err != nil {
			return Trust{}, fmt.Errorf("trusted server %q: %w", e, err)
		}
		t.UIDs = append(t.UIDs, id)
	}
	return t, nil
}

func lookupID(s string, group bool) (int, error) {
	if id, err := strconv.ParseUint(s, 10, 31); err == nil {
		return int(id), nil
	}
	var sid string
	if group {
		g, err := user.LookupGroup(s)
		if err != nil {
			return 0, err
		}
		sid = g.Gid
	} else {
		u, err := user.Lookup(s)
		if err != nil {
			return 0, err
		}
		sid = u.Uid
	}
	return strconv.Atoi(sid)
}

// TrustFromEnv is ParseTrust of $GLOAD_TRUST_SERVER (empty: trust nobody else).
func TrustFromEnv() (Trust, error) {
	t, err := ParseTrust(os.Getenv(EnvTrust))
	if err != nil {
		return Trust{}, fmt.Errorf("$%s: %w", EnvTrust, err)
	}
	return t, nil
}

// Allows reports whether a server of uid and gid is trusted: the calling
// user's (effective) uid, root, or one t names.
func (t Trust) Allows(uid, gid int) bool {
	if uid == os.Geteuid() || uid == 0 {
		return true
	}
	for _, u := range t.UIDs {
		if u == uid {
			return true
		}
	}
	for _, g := range t.GIDs {
		if g == gid && gid >= 0 {
			return true
		}
	}
	return false
}

// Peer is who serves the other end of a connection. UID is -1 when it is
// not known (a TCP connection to another host or another network namespace).
type Peer struct {
	UID, GID, PID int
}

// Unknown is the Peer of a connection whose server cannot be identified.
var Unknown = Peer{UID: -1, GID: -1}

// PeerCred returns the credentials of the process that listens on the other
// end of a connected unix socket (SO_PEERCRED).
func PeerCred(c *net.UnixConn) (Peer, error) {
	raw, err := c.SyscallConn()
	if err != nil {
		return Unknown, err
	}
	var cred *unix.Ucred
	var serr error
	if err := raw.Control(func(fd uintptr) {
		cred, serr = unix.GetsockoptUcred(int(fd), unix.SOL_SOCKET, unix.SO_PEERCRED)
	}); err != nil {
		return Unknown, err
	}
	if serr != nil {
		return Unknown, fmt.Errorf("SO_PEERCRED: %w", serr)
	}
	return Peer{UID: int(cred.Uid), GID: int(cred.Gid), PID: int(cred.Pid)}, nil
}

// TCPPeer returns the uid owning the server's end of a loopback TCP
// connection from local to remote, from /proc/net/tcp and /proc/net/tcp6;
// Unknown when no such socket is listed (another host or namespace).
func TCPPeer(local, remote netip.AddrPort) Peer {
	if !remote.Addr().IsLoopback() && remote.Addr() != local.Addr() {
		return Unknown
	}
	for _, f := range []string{"/proc/net/tcp", "/proc/net/tcp6"} {
		if uid, ok := procTCPUID(f, remote, local); ok {
			return Peer{UID: uid, GID: -1}
		}
	}
	return Unknown
}

// procTCPUID finds the socket with local address l and remote address r in
// a /proc/net/tcp file and returns its uid.
func procTCPUID(file string, l, r netip.AddrPort) (int, bool) {
	f, err := os.Open(file)
	if err != nil {
		return 0, false
	}
	defer f.Close()
	want := procAddr(l) + " " + procAddr(r)
	want6 := procAddr6(l) + " " + procAddr6(r)
	sc := bufio.NewScanner(f)
	for n := 0; sc.Scan() && n < 1<<20; n++ {
		fs := strings.Fields(sc.Text())
		if len(fs) < 8 {
			continue
		}
		pair := fs[1] + " " + fs[2]
		if pair == want || pair == want6 {
			uid, err := strconv.Atoi(fs[7])
			return uid, err == nil
		}
	}
	return 0, false
}

// procAddr writes a as /proc/net/tcp does: the address's 32-bit words in
// host (little-endian) order, ":" and the port, in upper-case hex.
func procAddr(a netip.AddrPort) string {
	ip := a.Addr().Unmap()
	if !ip.Is4() {
		return procAddr6(a)
	}
	b := ip.As4()
	return strings.ToUpper(hex.EncodeToString([]byte{b[3], b[2], b[1], b[0]})) + fmt.Sprintf(":%04X", a.Port())
}

// procAddr6 writes a as /proc/net/tcp6 does (an IPv4 address as ::ffff:a.b.c.d).
func procAddr6(a netip.AddrPort) string {
	b := a.Addr().As16()
	var w []byte
	for i := 0; i < 16; i += 4 {
		w = append(w, b[i+3], b[i+2], b[i+1], b[i])
	}
	return strings.ToUpper(hex.EncodeToString(w)) + fmt.Sprintf(":%04X", a.Port())
}

// ConnPeer identifies the server of a connected unix or TCP connection.
func ConnPeer(c net.Conn) (Peer, error) {
	switch c := c.(type) {
	case *net.UnixConn:
		return PeerCred(c)
	case *net.TCPConn:
		l, lok := c.LocalAddr().(*net.TCPAddr)
		r, rok := c.RemoteAddr().(*net.TCPAddr)
		if !lok || !rok {
			return Unknown, nil
		}
		return TCPPeer(l.AddrPort(), r.AddrPort()), nil
	}
	return Unknown, nil
}

// CheckPeer checks that the server at the other end of c is trusted: for a
// unix socket its SO_PEERCRED uid or gid, for loopback TCP the uid owning its
// end when the kernel lists it (else Unknown is returned without error).
func CheckPeer(c net.Conn, t Trust) (Peer, error) {
	p, err := ConnPeer(c)
	if err != nil {
		return Unknown, fmt.Errorf("%w: who serves %s: %w", ErrUntrusted, c.RemoteAddr(), err)
	}
	if p.UID < 0 || t.Allows(p.UID, p.GID) {
		return p, nil
	}
	return p, fmt.Errorf("%w: %s is served by uid %d (pid %d), not by you (uid %d): another user may have taken the address; "+
		"set $%s to trust that user", ErrUntrusted, c.RemoteAddr(), p.UID, p.PID, os.Geteuid(), EnvTrust)
}

// Dialer connects clients to a gload server and checks, before anything is
// sent, that the server is trusted: a unix socket's path, file and peer
// credentials (CheckSocketFile, CheckPeer), a loopback TCP server's uid. It
// remembers the identity of the last server it reached (Last), the owner a
// shared-memory ring of that server must have.
type Dialer struct {
	Trust Trust

	mu   sync.Mutex
	last Peer
	err  error // the last dial's refusal
}

// Err returns why the last dial refused its server (nil if it did not).
func (d *Dialer) Err() error {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.err
}

// NewDialer returns a Dialer trusting t (besides the user and root).
func NewDialer(t Trust) *Dialer { return &Dialer{Trust: t, last: Unknown} }

// Last returns the identity of the server last reached (Unknown if none).
func (d *Dialer) Last() Peer {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.last
}

// Dial connects to addr: "unix:///abs.sock", "unix:rel.sock" or host:port (as
// gRPC passes it to a context dialer).
func (d *Dialer) Dial(ctx context.Context, addr string) (net.Conn, error) {
	network, address := "tcp", addr
	if rest, ok := strings.CutPrefix(addr, "unix:"); ok {
		network, address = "unix", rest
		if p, ok := strings.CutPrefix(rest, "//"); ok {
			address = p
		}
	}
	var nd net.Dialer
	c, err := nd.DialContext(ctx, network, address)
	if err != nil {
		return nil, err
	}
	p, err := CheckPeer(c, d.Trust)
	if err == nil && network == "unix" {
		// The path must be one only trusted users can change, so that the
		// server reached now is the one reached on every later dial.
		err = CheckSocketFile(address, append([]int{p.UID}, d.Trust.UIDs...)...)
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	d.err = err
	if err != nil {
		c.Close()
		return nil, err
	}
	d.last = p
	return c, nil
}
