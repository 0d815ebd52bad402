package loader

import (
	"context"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/peer"
	"google.golang.org/grpc/status"
)

func TestCallerIsOwner(t *testing.T) {
	me := uint32(os.Getuid())
	unixAddr := &net.UnixAddr{Name: "@", Net: "unix"}
	for _, tc := range []struct {
		name string
		addr net.Addr
		ok   bool
	}{
		{"same uid over unix", &PeerAddr{Addr: unixAddr, UID: me, PID: 1}, true},
		{"other uid over unix", &PeerAddr{Addr: unixAddr, UID: me + 1, PID: 1}, false},
		{"unix without credentials", unixAddr, false},
		{"tcp", &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 1}, false},
		// Another listener's wrapper around the address (as connection admission makes).
		{"wrapped same uid", &wrappedAddr{Addr: &PeerAddr{Addr: unixAddr, UID: me}}, true},
		{"wrapped other uid", &wrappedAddr{Addr: &PeerAddr{Addr: unixAddr, UID: me + 1}}, false},
		{"wrapped unix without credentials", &wrappedAddr{Addr: unixAddr}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := callerIsOwner(peer.NewContext(context.Background(), &peer.Peer{Addr: tc.addr}))
			if (err == nil) != tc.ok || (err != nil && status.Code(err) != codes.PermissionDenied) {
				t.Fatalf("callerIsOwner: %v, want ok=%v", err, tc.ok)
			}
		})
	}
	if err := callerIsOwner(context.Background()); status.Code(err) != codes.PermissionDenied {
		t.Fatalf("no peer: %v", err)
	}
}

type wrappedAddr struct {
	net.Addr
	other int
}

func TestPathName(t *testing.T) {
	for _, tc := range []struct{ path, prefix string }{
		{"/data/wiki", "wiki-"},
		{"/data/wiki/", "wiki-"},
		{"/data/my wiki (v2)", "my_wiki__v2_-"},
		{"/", "dataset-"},
		{"/data/..hidden", "hidden-"},
		{"s3://bucket/corpora/web", "web-"},
		{"/x/" + strings.Repeat("a", 100), strings.Repeat("a", 40) + "-"},
	} {
		n := pathName(tc.path)
		if !strings.HasPrefix(n, tc.prefix) || !datasetName.MatchString(n) {
			t.Errorf("pathName(%q) = %q, want prefix %q and a valid name", tc.path, n, tc.prefix)
		}
	}
	if pathName("/a/wiki") == pathName("/b/wiki") {
		t.Error("two directories share a name")
	}
}

func TestPeerCredOverUnixSocket(t *testing.T) {
	lis, err := Listen("unix://"+t.TempDir()+"/s.sock", ListenOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer lis.Close()
	cl := withPeerCred(lis)
	done := make(chan net.Conn, 1)
	go func() {
		c, _ := cl.Accept()
		done <- c
	}()
	c, err := net.Dial("unix", lis.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	sc := <-done
	if sc == nil {
		t.Fatal("accept failed")
	}
	defer sc.Close()
	pa, ok := sc.RemoteAddr().(*PeerAddr)
	if !ok || int(pa.UID) != os.Getuid() || int(pa.PID) != os.Getpid() {
		t.Fatalf("remote address %#v, want this process's credentials", sc.RemoteAddr())
	}
	// A listener wrapping this one still reads the credentials off the connection.
	if cred, err := peerCred(sc); err != nil || int(cred.Uid) != os.Getuid() {
		t.Fatalf("credentials through the wrapped connection: %v, %v", cred, err)
	}
}

// FuzzPathName: whatever path a client sends, checkPath never panics and
// accepts only clean absolute paths or URLs, and the served name is a valid
// dataset name.
func FuzzPathName(f *testing.F) {
	for _, s := range []string{"/data/wiki", "", "rel/x", "/a/../b", "s3://b/p", "/\x00", "/日本/データ", strings.Repeat("/x", 3000)} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, p string) {
		if n := pathName(p); !datasetName.MatchString(n) {
			t.Fatalf("pathName(%q) = %q: not a valid dataset name", p, n)
		}
		got, err := checkPath(p)
		if err != nil {
			if status.Code(err) == codes.OK || status.Code(err) == codes.Unknown {
				t.Fatalf("checkPath(%q): error without a status: %v", p, err)
			}
			return
		}
		if !strings.HasPrefix(got, "s3://") && (got != filepath.Clean(got) || !filepath.IsAbs(got)) {
			t.Fatalf("checkPath(%q) accepted %q", p, got)
		}
	})
}
