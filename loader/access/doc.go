// Package access holds what the gload server and its clients must agree on
// about reaching the service: the default address (a unix socket private to
// the user) and the bearer token that guards TCP listeners.
//
// DefaultAddress is $GLOAD_ADDR when set, else unix://$XDG_RUNTIME_DIR/gload.sock,
// else unix:///tmp/gload-<uid>/gload.sock. Tokens travel as the gRPC metadata
// "authorization: Bearer <token>" (and the same HTTP header for /metrics);
// the server compares them in constant time.
//
// It also holds the checks that keep other local users out (sockdir.go,
// peer.go): PrepareSocketDir makes or checks the server's socket directory
// (owned by the user or root, writable by nobody else unless sticky, up to
// /); CheckSocketFile, PeerCred/ConnPeer and Dialer let a client verify,
// before it sends a byte, that a trusted user serves the socket (its own uid,
// root, or $GLOAD_TRUST_SERVER) and that nobody else can replace it.
//
// The package reads the environment, the token files and the socket paths it
// is asked to; it keeps no state beyond a Dialer's last peer.
//
// # Caveats
//
// A bearer token over plaintext TCP protects against other users of the same
// host (loopback), not against anyone who can watch the network: listen on
// other hosts only with TLS.
package access
