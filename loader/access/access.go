package access

import (
	"crypto/subtle"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// Environment variables the clients and the server read.
const (
	// EnvAddr overrides DefaultAddress.
	EnvAddr = "GLOAD_ADDR"
	// EnvToken holds a bearer token for clients that are given none.
	EnvToken = "GLOAD_AUTH_TOKEN"
	// EnvTokenFile names a file holding it (EnvToken wins).
	EnvTokenFile = "GLOAD_AUTH_TOKEN_FILE"
)

// MetadataKey is the gRPC metadata key (and HTTP header) carrying the token.
const MetadataKey = "authorization"

// scheme prefixes the token in MetadataKey's value.
const scheme = "Bearer "

// MinTokenLen is the shortest token accepted: 16 bytes, e.g. from
// `openssl rand -hex 16` (32 characters).
const MinTokenLen = 16

// maxTokenFile bounds what ReadTokenFile reads.
const maxTokenFile = 4 << 10

// ErrToken means a token or token file is unusable.
var ErrToken = errors.New("access: bad auth token")

// DefaultAddress is where `gload serve` listens and clients connect when no
// address is given: $GLOAD_ADDR, else a unix socket in $XDG_RUNTIME_DIR
// (a per-user 0700 directory on systemd hosts), else in /tmp/gload-<uid>.
func DefaultAddress() string {
	if a := os.Getenv(EnvAddr); a != "" {
		return a
	}
	return "unix://" + DefaultSocketPath()
}

// DefaultSocketPath is the socket path of DefaultAddress without $GLOAD_ADDR.
func DefaultSocketPath() string {
	if d := os.Getenv("XDG_RUNTIME_DIR"); d != "" && filepath.IsAbs(d) {
		return filepath.Join(d, "gload.sock")
	}
	return filepath.Join(os.TempDir(), "gload-"+strconv.Itoa(os.Getuid()), "gload.sock")
}

// ReadTokenFile reads a bearer token from path: its content with surrounding
// white space removed, at least MinTokenLen bytes of printable ASCII. The
// file must be a regular file (a FIFO, device or directory is refused before
// it is opened, and the open never blocks) not readable by group or others
// (like an ssh key). A symbolic link is followed (Kubernetes mounts secrets
// as links), to a file that must pass the same checks.
func ReadTokenFile(path string) (string, error) {
	pre, err := os.Stat(path)
	if err != nil {
		return "", fmt.Errorf("%w: %w", ErrToken, err)
	}
	if !pre.Mode().IsRegular() {
		return "", fmt.Errorf("%w: %s is a %s, not a regular file", ErrToken, path, typeName(pre.Mode()))
	}
	// O_NONBLOCK: if it was replaced by a FIFO meanwhile, open does not wait for a writer.
	fd, err := unix.Open(path, unix.O_RDONLY|unix.O_NONBLOCK|unix.O_CLOEXEC|unix.O_NOCTTY, 0)
	if err != nil {
		return "", fmt.Errorf("%w: %w", ErrToken, &os.PathError{Op: "open", Path: path, Err: err})
	}
	f := os.NewFile(uintptr(fd), path)
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return "", fmt.Errorf("%w: %w", ErrToken, err)
	}
	if !st.Mode().IsRegular() {
		return "", fmt.Errorf("%w: %s is a %s, not a regular file", ErrToken, path, typeName(st.Mode()))
	}
	if m := st.Mode().Perm(); m&0o077 != 0 {
		return "", fmt.Errorf("%w: %s has mode %04o: others can read it; chmod 600 %s", ErrToken, path, m, path)
	}
	if st.Size() > maxTokenFile {
		return "", fmt.Errorf("%w: %s: %d bytes, a token file holds one token (at most %d bytes)", ErrToken, path, st.Size(), maxTokenFile)
	}
	b := make([]byte, st.Size())
	if _, err := f.ReadAt(b, 0); err != nil && st.Size() > 0 {
		return "", fmt.Errorf("%w: read %s: %w", ErrToken, path, err)
	}
	tok := strings.TrimSpace(string(b))
	if err := CheckToken(tok); err != nil {
		return "", fmt.Errorf("%s: %w", path, err)
	}
	return tok, nil
}

// CheckToken validates a token's form: at least MinTokenLen bytes, printable
// ASCII without spaces (it travels in a header).
func CheckToken(tok string) error {
	if len(tok) < MinTokenLen {
		return fmt.Errorf("%w: %d bytes, want at least %d (e.g. openssl rand -hex 16)", ErrToken, len(tok), MinTokenLen)
	}
	for i := 0; i < len(tok); i++ {
		if c := tok[i]; c <= ' ' || c > '~' {
			return fmt.Errorf("%w: byte %d is %#x: want printable ASCII without spaces", ErrToken, i, c)
		}
	}
	return nil
}

// EnvTokenValue returns the token clients send when given none: $GLOAD_AUTH_TOKEN,
// else the content of $GLOAD_AUTH_TOKEN_FILE, else "" (none).
func EnvTokenValue() (string, error) {
	if t := os.Getenv(EnvToken); t != "" {
		return strings.TrimSpace(t), nil
	}
	if p := os.Getenv(EnvTokenFile); p != "" {
		t, err := ReadTokenFile(p)
		if err != nil {
			return "", fmt.Errorf("$%s: %w", EnvTokenFile, err)
		}
		return t, nil
	}
	return "", nil
}

// Header is the MetadataKey value that carries tok.
func Header(tok string) string { return scheme + tok }

// Allowed reports whether the MetadataKey values of a request carry want.
// It compares in constant time (for a given length of want).
func Allowed(values []string, want string) bool {
	ok := 0
	for _, v := range values {
		got, found := strings.CutPrefix(v, scheme)
		if !found {
			// Schemes are case-insensitive (RFC 9110).
			if len(v) >= len(scheme) && strings.EqualFold(v[:len(scheme)], scheme) {
				got, found = v[len(scheme):], true
			}
		}
		if found {
			ok |= subtle.ConstantTimeCompare([]byte(got), []byte(want))
		}
	}
	return ok == 1
}
