package shm

import "errors"

// Sentinel errors; errors returned by this package wrap one of these (or an
// error of the operating system) together with the path concerned.
var (
	// ErrLayout means a slot layout cannot be built (sizes overflow or are
	// out of range).
	ErrLayout = errors.New("shm: bad slot layout")
	// ErrRing means a ring file is not what its mapping asks for (wrong
	// size, not a regular file).
	ErrRing = errors.New("shm: bad ring file")
	// ErrClosed means the ring or mapping was closed.
	ErrClosed = errors.New("shm: closed")
)
