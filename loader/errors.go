package loader

import "errors"

// Sentinel errors. Errors returned by this package wrap one of these where one
// applies, together with the dataset, file or address concerned.
var (
	// ErrConfig means the server configuration is invalid.
	ErrConfig = errors.New("loader: invalid config")
	// ErrAddress means a listen address is malformed or not allowed.
	ErrAddress = errors.New("loader: bad listen address")
	// ErrAddrInUse means another process listens on the unix socket.
	ErrAddrInUse = errors.New("loader: address in use")
	// ErrDataset means a dataset could not be opened or changed on disk.
	ErrDataset = errors.New("loader: dataset unusable")
	// ErrDataLoss means a shard could not be read while assembling a batch
	// (memory fault on a truncated file, or a corrupt record batch).
	ErrDataLoss = errors.New("loader: data loss")
	// ErrServed means Serve was called more than once.
	ErrServed = errors.New("loader: already served")
	// ErrClosed means the server is closed.
	ErrClosed = errors.New("loader: closed")
)
