// Package loader holds gload's batch service: the gRPC server behind
// `gload serve` that plans epochs over memory-mapped datasets, assembles
// batches straight from the mapped shards into outgoing little-endian
// buffers, and streams them to data-loader clients under a credit (ack)
// flow, with Prometheus metrics and the clients' step reports.
//
// A [Server] is built from a [Config] naming datasets by directory; each is
// opened with [dataset.Open] at start and a dataset that cannot be opened
// (corrupt or truncated shard, bad state.json) fails the start with an error
// naming the file. [Listen] opens the listener with gload's address rules
// (unix sockets and loopback TCP by default, other addresses only when asked).
// [Server.Serve] runs until its context ends, then drains streams for at most
// Config.DrainTimeout and closes the datasets.
//
// Over TRANSPORT_SHM (clients on the same host) each stream gets a ring of
// package loader/shm in Config.ShmDir: one slot per granted prefetch credit,
// each sized for the largest batch of the stream's plan. A batch is assembled
// straight from the mapped shard into a free slot and its message carries
// only {seq, slot, shape}; the client's ack returns the slot. The ring file is
// removed when the stream ends, whichever way it ends (finished, client gone,
// error, drain), and NewServer removes the rings of servers that died.
//
// The wire protocol is proto/gload.proto; the Go client is loader/client.
// Epoch plans come from package bucket and are cached per (fingerprint, seed,
// epoch, policy, plan world) with an LRU bound; concurrent streams asking for
// the same plan share one computation.
//
// The package touches only the dataset directories it is given (reading
// shards, and writing gload.index there when it had to be rebuilt, unless
// Config.NoWriteIndex), the listeners it is handed, and ring files in
// Config.ShmDir (its own, and those of dead servers). It keeps no global
// state: metrics live in a registry per Server.
//
// # Caveats
//
// Shard files are memory-mapped for the life of the Server. Replacing a shard
// by rename is detected when a stream opens (the dataset is refused from then
// on); truncating a shard in place under a running stream makes reads of the
// mapping fault: the fault is recovered and the stream ends with DATA_LOSS,
// but the dataset stays unusable until the server restarts.
//
// Buffers handed to gRPC are recycled once the transport has written them;
// nothing the Server sends may be retained by stats handlers or interceptors
// that run after SendMsg returns.
//
// Memory per stream is bounded by the granted prefetch depth times the size
// of the stream's largest batch (at most Config.MaxBatchBytes), in pooled
// buffers over gRPC and in the stream's ring (tmpfs, reserved when the stream
// opens) over shared memory; the Server does not bound the number of streams.
// A server killed with SIGKILL leaves its rings in Config.ShmDir until the next
// server start there.
package loader
