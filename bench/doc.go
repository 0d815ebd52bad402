// Package bench holds the measurement code behind `gload bench`: [Feed]
// measures the highest sustained feed rate of a gload server per transport
// and number of concurrent clients (batches/s, tokens/s, GB/s, next()
// latency), with an optional simulated training step to report headroom;
// [Run] wraps a training command, samples the GPUs through NVML (package
// loader/gpuwatch) and the server's client reports (its Watch RPC) while the
// command runs, and judges the span in which clients stepped; [WriteSVG] and
// [WritePNG] draw SM utilisation and feed rate over time; [PlanBench] times
// one epoch plan over synthetic lengths (`gload bench plan`).
//
// The package talks to servers only through their gRPC API (loader/client
// and the generated stubs) and starts no server of its own: callers that
// want an in-process server (cmd/gload) start it and pass its address. It
// reads no files (but /proc/self/status, for [PlanBench]'s peak RSS); it writes only to the writers it is handed, and [Run]
// starts the one command it is given, passing its stdin, stdout and stderr
// through.
//
// # Measuring
//
// Latency percentiles come from a log-bucketed histogram (2% buckets from
// 100 ns to about 100 s): p50 and p99 are exact to about 1%. Tokens count
// real tokens (the rows' lengths), not padding; bytes count every batch
// buffer a client receives (input_ids, lengths, index, and for packed
// batches position_ids and cu_seqlens), whether they arrive inside gRPC
// messages or in a shared-memory slot. A simulated step is a sleep.
//
// # Caveats
//
// A RunResult's series and reports are the caller's; Run keeps nothing after
// it returns. The GPU samples Run records are bounded (MaxPoints): a longer
// run stops recording new samples and says so in the result.
package bench
