// Package access holds what the gload server and its clients must agree on
// about reaching the service: the default address (a unix socket private to
// the user) and the bearer token that guards TCP listeners.
//
// DefaultAddress is $GLOAD_ADDR when set, else unix://$XDG_RUNTIME_DIR/gload.sock,
// else unix:///tmp/gload-<uid>/gload.sock. Tokens travel as the gRPC metadata
// "authorization: Bearer <token>" (and the same HTTP header for /metrics);
// the server compares them in constant time.
//
// The package reads only the environment and the token files it is asked
// to; it opens no connection and keeps no state.
//
// # Caveats
//
// A bearer token over plaintext TCP protects against other users of the same
// host (loopback), not against anyone who can watch the network: listen on
// other hosts only with TLS.
package access
