// Package client is the Go client of the gload batch service (package loader,
// `gload serve`): it lists datasets, describes plans and pulls one consumer's
// batches over a gRPC stream, acknowledging each batch so the server can run
// ahead by the granted prefetch depth, and reporting the training loop's wait
// and step times.
//
// Over gRPC, batch buffers are decoded straight from gRPC's receive buffers
// into one 8-byte-aligned block per batch; InputIDs, Lengths, Index, PositionIDs and
// CuSeqlens are views of that block (no per-element decoding on
// little-endian hosts). The package touches nothing but the connection it
// dials and keeps no global state.
//
// # Caveats
//
// A Stream is used by one goroutine (Next, State, Close); Batch.Release may be
// called from any goroutine. The slices a Batch returns are valid until its
// Release: Release hands the memory back for reuse. A batch acknowledged by
// the next call to Next (the default, see AckOnNext) but never released stays
// valid and is left to the garbage collector.
//
// Over the shm transport (Opened names a ring; the client must run on the
// server's host) the slices point into the server's ring, mapped read-only:
// they are valid until the batch is acknowledged — its Release, or with
// AckOnNext the next call to Next — since the server then reuses the slot, and
// never after Close, which unmaps the ring.
//
// State matches the last batch Next returned, not batches read ahead.
package client
