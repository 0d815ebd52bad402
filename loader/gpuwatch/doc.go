// Package gpuwatch samples GPUs through NVML, keeps sliding-window statistics
// of their utilisation beside what the batch server knows about its clients
// (data-wait share, not-ready batches, queue occupancy), and turns both into
// the starvation verdict of DESIGN.md "Watching the GPU": fed, starved: data,
// starved: not the loader, no GPU visible (plus insufficient data while the
// window fills, and lost for a device that fell off the bus), each with the
// likely cause and the usual fix.
//
// The pieces:
//
//   - [Source] is the seam to the hardware: [OpenNVML] reads real GPUs through
//     github.com/NVIDIA/go-nvml, [NewTraceSource] replays a recorded trace
//     (JSON lines, see [ReadTrace]), [Unavailable] stands for "no GPU".
//   - [Watcher] polls a Source every Options.Interval from [Watcher.Run],
//     records what the server knows about each client ([Watcher.RecordStep],
//     [Watcher.SetQueue], [Watcher.NotReady], optionally
//     [Watcher.SetClientDevice]; [Watcher.Forget] when its stream ends) and
//     builds a [Report] on demand.
//   - [Format] renders a Report as a compact table; [Collector] exports it to
//     Prometheus (gload_gpu_* and gload_watch_* series, distinct from the
//     server's gload_client_* ones); [Simulate] replays a whole trace, client
//     records included, on a simulated clock; cmd/nvmlprobe records one.
//   - [ReadEvidence] parses the per-step phase timings and profiler summaries
//     the Python helper gload.doctor writes; [Diagnose] (and
//     [SimulateDiagnosis] over a trace) names the cause that idles the GPU
//     for gload doctor — input pipeline, optimizer/gradient sync, host work
//     and sync points, padding, kernel-launch overhead or compute bound —
//     with the numbers, the evidence it had and remedies cheapest first.
//
// The package touches nothing but the Source it is given: it opens no files
// (cmd/nvmlprobe writes traces to stdout), keeps no global state and starts no
// goroutine of its own outside [Watcher.Run]. It does not close the Source it
// is handed; its caller does, after Run has returned.
//
// # Statistics
//
// Percentiles are computed over the fine-grained utilisation samples in the
// window, each sample weighted equally, by linear interpolation between
// closest ranks (numpy.percentile's default). "Below 30%" counts samples
// strictly below the threshold. Client reports are windowed by the time the
// server received them, never by the client's clock, in buckets of
// Options.Window/60: a window's edge is exact to one bucket. The first poll
// of a device gets NVML's buffer of recent samples (about 15 s on an H200),
// so a verdict can come before the watcher has run MinCoverage itself.
//
// # Caveats
//
// A Report is a snapshot: it shares no memory with the Watcher and stays valid
// after later polls. Slices inside a [DeviceSample] returned by a Source belong
// to the caller. NVML calls can take tens of milliseconds (the driver
// measures PCIe throughput over 20 ms); the Watcher never holds its lock
// across a Source call, so RecordStep and Report do not wait on the GPU.
//
// Without cgo, OpenNVML always fails with [ErrNoGPU] (go-nvml needs cgo).
package gpuwatch
