package loader

// Connection admission: who may hold the server's connections (issue 34
// item 9). Without it, idle connections of a user without the token filled
// MaxConns and locked token holders out.
//
// The listener Serve wraps admits a connection only while its peer (a uid:
// SO_PEERCRED on unix sockets, /proc/net/tcp for loopback TCP; else the
// remote IP address) holds fewer than MaxConnsPerPeer connections; one more
// closes the peer's oldest connection still pending authentication, or is
// closed at once if it has none (the server's own uid is not bounded so). With an auth token, a connection is pending until its
// first call carrying the token; one still pending after AuthTimeout is
// closed, and pending connections may fill MaxConns less ConnReserve: a new
// connection beyond that (or beyond MaxConns) closes the oldest pending one
// instead of waiting, so a token holder's connection is always accepted and
// authenticates within milliseconds. Authenticated connections may use the
// whole of MaxConns; when they do, more wait to be accepted (as before).

import (
	"container/list"
	"context"
	"fmt"
	"net"
	"os"
	"strconv"
	"sync"
	"time"

	"google.golang.org/grpc/stats"

	"github.com/gload/gload/loader/access"
)

// Defaults of the admission limits.
const (
	// DefaultAuthTimeout is how long a connection may stay without a call
	// carrying the token.
	DefaultAuthTimeout = 10 * time.Second
)

// DefaultMaxConnsPerPeer and DefaultConnReserve derive from MaxConns: a
// quarter of it per peer (at least 1), an eighth kept for authenticated
// connections (at least 1 when MaxConns > 1).
func defaultPerPeer(maxConns int) int { return max(maxConns/4, 1) }
func defaultReserve(maxConns int) int { return min(max(maxConns/8, 1), maxConns-1) }

type admitConfig struct {
	maxConns, perPeer, reserve int
	authTimeout                time.Duration
	needAuth                   bool
	onRefuse                   func(why string) // counts refusals (metrics); nil: none
}

// admitListener applies admitConfig to the connections of a listener.
type admitListener struct {
	net.Listener
	cfg admitConfig

	mu      sync.Mutex
	freed   *sync.Cond // a connection ended
	total   int
	pending *list.List // of *admitConn, oldest first
	perPeer map[string]int
	closed  bool
	self    string // the server's own uid's key: not bounded per peer
}

func newAdmitListener(l net.Listener, cfg admitConfig) *admitListener {
	a := &admitListener{Listener: l, cfg: cfg, pending: list.New(), perPeer: map[string]int{},
		self: "uid " + strconv.Itoa(os.Geteuid())}
	a.freed = sync.NewCond(&a.mu)
	return a
}

// admitConn is an admitted connection. Its RemoteAddr is a *connAddr, by
// which the server finds it again from a call (peer.Addr, stats.ConnTagInfo).
type admitConn struct {
	net.Conn
	l        *admitListener
	peer     string
	addr     *connAddr
	elem     *list.Element // in l.pending while pending
	timer    *time.Timer
	released bool // under l.mu
}

// connAddr is an admitted connection's remote address.
type connAddr struct {
	net.Addr
	c *admitConn
}

func (c *admitConn) RemoteAddr() net.Addr { return c.addr }

// peerKey names the peer whose connections count together.
func peerKey(c net.Conn) string {
	if p, err := access.ConnPeer(c); err == nil && p.UID >= 0 {
		return "uid " + strconv.Itoa(p.UID)
	}
	if a, ok := c.RemoteAddr().(*net.TCPAddr); ok {
		return "address " + a.IP.String()
	}
	return "address " + c.RemoteAddr().String()
}

func (l *admitListener) refused(why string) {
	if l.cfg.onRefuse != nil {
		l.cfg.onRefuse(why)
	}
}

// Accept returns the next admitted connection.
func (l *admitListener) Accept() (net.Conn, error) {
	for {
		raw, err := l.Listener.Accept()
		if err != nil {
			return nil, err
		}
		key := peerKey(raw)
		var evict []net.Conn
		l.mu.Lock()
		if l.perPeer[key] >= l.cfg.perPeer && key != l.self {
			// Room for this one from the peer's oldest pending connection,
			// if it has one; else it is refused.
			old := l.oldestPendingLocked(key)
			if old == nil {
				l.mu.Unlock()
				raw.Close()
				l.refused("per_peer")
				continue
			}
			old.releaseLocked()
			evict = append(evict, old.Conn)
		}
		if l.cfg.needAuth {
			for l.pending.Len() > 0 && (l.pending.Len() >= l.cfg.maxConns-l.cfg.reserve || l.total >= l.cfg.maxConns) {
				evict = append(evict, l.evictOldestLocked())
			}
		}
		for l.total >= l.cfg.maxConns && !l.closed {
			l.freed.Wait()
		}
		if l.closed {
			l.mu.Unlock()
			raw.Close()
			closeAll(evict)
			return nil, net.ErrClosed
		}
		c := &admitConn{Conn: raw, l: l, peer: key}
		c.addr = &connAddr{Addr: raw.RemoteAddr(), c: c}
		l.total++
		l.perPeer[key]++
		if l.cfg.needAuth {
			c.elem = l.pending.PushBack(c)
			c.timer = time.AfterFunc(l.cfg.authTimeout, c.expire)
		}
		l.mu.Unlock()
		closeAll(evict)
		for range evict {
			l.refused("evicted_unauthenticated")
		}
		return c, nil
	}
}

func closeAll(cs []net.Conn) {
	for _, c := range cs {
		c.Close()
	}
}

// oldestPendingLocked returns the peer's oldest pending connection (nil: none).
func (l *admitListener) oldestPendingLocked(peer string) *admitConn {
	for e := l.pending.Front(); e != nil; e = e.Next() {
		if c := e.Value.(*admitConn); c.peer == peer {
			return c
		}
	}
	return nil
}

// evictOldestLocked releases the oldest pending connection and returns its
// raw connection for the caller to close (outside the lock).
func (l *admitListener) evictOldestLocked() net.Conn {
	c := l.pending.Front().Value.(*admitConn)
	c.releaseLocked()
	return c.Conn
}

// releaseLocked ends c's accounting (once).
func (c *admitConn) releaseLocked() {
	if c.released {
		return
	}
	c.released = true
	l := c.l
	l.total--
	if l.perPeer[c.peer]--; l.perPeer[c.peer] <= 0 {
		delete(l.perPeer, c.peer)
	}
	if c.elem != nil {
		l.pending.Remove(c.elem)
		c.elem = nil
	}
	if c.timer != nil {
		c.timer.Stop()
	}
	l.freed.Signal()
}

// expire closes c if it is still pending after AuthTimeout.
func (c *admitConn) expire() {
	c.l.mu.Lock()
	pending := c.elem != nil
	if pending {
		c.releaseLocked()
	}
	c.l.mu.Unlock()
	if pending {
		c.Conn.Close()
		c.l.refused("auth_timeout")
	}
}

// authenticated moves c out of the pending connections (its call carried the token).
func (c *admitConn) authenticated() {
	c.l.mu.Lock()
	defer c.l.mu.Unlock()
	if c.elem != nil {
		c.l.pending.Remove(c.elem)
		c.elem = nil
		c.timer.Stop()
	}
}

func (c *admitConn) Close() error {
	c.l.mu.Lock()
	c.releaseLocked()
	c.l.mu.Unlock()
	return c.Conn.Close()
}

func (l *admitListener) Close() error {
	l.mu.Lock()
	l.closed = true
	l.freed.Broadcast()
	l.mu.Unlock()
	return l.Listener.Close()
}

// String describes the listener's state (for logs and tests).
func (l *admitListener) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return fmt.Sprintf("%d connections (%d pending authentication, %d peers)", l.total, l.pending.Len(), len(l.perPeer))
}

// counts returns the admitted and pending connections.
func (l *admitListener) counts() (total, pending int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.total, l.pending.Len()
}

// admitKey holds a connection's *admitConn in the contexts of its calls.
type admitKey struct{}

// tagAdmitted puts the admitted connection of info into ctx (stats.Handler's TagConn).
func tagAdmitted(ctx context.Context, info *stats.ConnTagInfo) context.Context {
	if a, ok := info.RemoteAddr.(*connAddr); ok {
		return context.WithValue(ctx, admitKey{}, a.c)
	}
	return ctx
}

// markAuthenticated records that a call of ctx's connection carried the token.
func markAuthenticated(ctx context.Context) {
	if c, ok := ctx.Value(admitKey{}).(*admitConn); ok {
		c.authenticated()
	}
}
