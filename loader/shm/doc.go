// Package shm manages the shared-memory rings of gload's TRANSPORT_SHM: one
// file per stream under a tmpfs directory (/dev/shm), holding a fixed number
// of fixed-size slots into which the server assembles batches and from which
// a client on the same host copies them (to a GPU, typically).
//
// The server side is [Create] (a new, unique, 0600 ring mapped read-write,
// its space reserved up front) and [Ring.Close] (unmap and unlink); [Sweep]
// removes the rings of dead servers, whose owner pid and process start time
// are encoded in the file name. [NewLayout] places the buffers of a batch in
// a slot. The client side is [Map] (an existing ring mapped read-only).
//
// The package touches only the files it creates, the rings it is asked to
// map, and, in [Sweep], files of the ring name pattern owned by the calling
// user whose owner process is gone. It keeps no global state beyond the
// calling process's own start time, read once.
//
// # Caveats
//
// Slices returned by [Ring.Slot] and [Mapping.Slot] point into the mapping:
// they are valid until Close, and touching them after Close faults. A client
// must not keep a view of a slot after acknowledging the batch in it: the
// server reuses the slot for a later batch.
//
// Owner detection reads /proc/PID/stat. Two servers in different pid
// namespaces that share one /dev/shm can mistake each other's rings for
// stale ones; give each its own ring directory (loader.Config.ShmDir).
package shm
