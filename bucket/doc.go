// Package bucket plans epochs: it turns a dataset's per-row token lengths into
// a deterministic sequence of batches — length-bucketed (Hugging Face
// LengthGroupedSampler), token-budget (fairseq max_tokens) or packed
// (first-fit-decreasing, Multipack) — and deals that sequence to ranks and
// dataloader workers, including after an elastic resume.
//
// It is pure computation over lengths it is given: it must not import any
// other gload package, do I/O, start goroutines or read clocks (DESIGN: bucket
// and proto import nothing of ours). The loader reads lengths from the dataset
// index, calls [NewPlan], and serves [Plan.Assign]'s batch indices.
//
// # Determinism
//
// A plan is a pure function of (fingerprint, lengths, seed, epoch, [Config]),
// so every server of a multi-node job computes the same plan on its own. The
// randomness is specified here so that it stays stable across Go versions and
// machines, and golden files in testdata pin it:
//
//   - Each random stream (1: row shuffle, 2: batch-order shuffle, 3: packed-row
//     shuffle) is seeded with the first 8 bytes, little-endian, of
//     SHA-256("gload/bucket/v1" 0x00 ‖ u64le(len(fingerprint)) ‖ fingerprint ‖
//     u64le(seed) ‖ u64le(epoch) ‖ u64le(stream)).
//   - The generator is SplitMix64; bounded draws use Lemire's multiply-shift
//     with rejection; shuffles are Fisher–Yates from the last element down.
//   - Every sort is by a total order (length descending, then shuffled
//     position), so results never depend on the sort algorithm.
//
// # Padding
//
// A batch's length L is its longest delivered row padded: rounded up to
// PadMultiple (default 64), or to the smallest of the explicit Boundaries ≥
// it (rows above the last boundary are truncated to it), or to automatic
// boundaries ([AutoBoundaries] with K = AutoBuckets, multiples of 8, the
// largest covering the longest row). Rows are truncated to MaxLength first.
// An empty row pads like a one-token row, so no batch has L = 0. Packed
// batches have L = SeqLen.
//
// # Warm-up
//
// With WarmupShapes (bucketed and tokens; packed plans have at most two
// shapes and ignore it) the epoch opens with PlanWorld batches of every shape
// that has at least PlanWorld batches, in [Plan.Shapes] order (Length
// descending, then Rows descending): global batches i·PlanWorld …
// (i+1)·PlanWorld−1 all have the i-th such shape, so with world size
// PlanWorld every rank meets every frequent shape, longest first, in its first
// steps. A job running with another world size still gets the same plan; only
// the per-rank guarantee is lost. Under tokens, partial batches at mega-batch
// ends give shapes of their own; with PlanWorld 1 they are warmed too.
//
// # Remainder and resume
//
// See [Plan.Assign]: the only resume state is the number of global batches
// consumed, and what is dropped or wrapped is a function of that number and
// the world size of the segment being dealt. Under keep nothing is dropped:
// ranks may get unequal counts (at most one apart), which suits evaluation
// passes but hangs collectives run once per batch.
//
// # Sequential plans
//
// Config.Sequential (bucketed, tokens) is an evaluation pass: rows in dataset
// order, cut into consecutive batches, each padded to its own longest row; no
// randomness, no warm-up. With remainder keep every row is dealt exactly once.
//
// # Mixtures
//
// [NewMixture] plans one epoch of a weighted mixture of sources (datasets of
// one tokenizer): weights are shares of rows ([MixSamples], the default) or
// of tokens ([MixTokens]), normalised to sum 1. The epoch's slots are dealt
// to sources by smooth weighted round-robin, each source read as an endless
// stream of its own permutations (stream 4, keyed by the source's
// fingerprint), so a source never repeats a row before all were seen and
// epochs continue where the last one stopped. The slots are then planned in
// that order (no row or batch shuffle; length grouping within each source's
// slots of a mega-batch; packing per run of about MegaBatchMult batches).
// Bounds (rows; documents under packed): after any prefix of slots a source
// is within 1 row of its share; over any W consecutive bucketed or tokens
// batches within 2 rows; over W packed batches within 2 + 2·D documents, D
// the documents of one pack window. See mixture.go for the exact rules.
//
// # Caveats
//
//   - A bucketed or tokens Plan keeps the lengths slice it was given (piece
//     lengths are read from it on demand): do not modify it while the Plan is
//     in use. Packed plans keep their own copy of piece starts and lengths.
//   - [Plan.Batch] allocates a fresh Batch on each call; the caller owns it.
//   - Memory: a bucketed plan holds 4 bytes per row plus about 16 bytes per
//     batch; a packed plan 12 bytes per piece plus 4 per packed row. Planning
//     needs transient memory of the same order (packed: about 3× that).
//   - A Mixture keeps its sources' Lengths slices: do not modify them.
//     It holds about 13 bytes per slot (source, row, length, inner plan).
//   - Rows are indexed by int32: at most 2^31−1 rows and pieces per plan.
//   - [Plan.Batch] and [Plan.Shape] panic for an index outside [0, Len()),
//     like a slice; everything else reports bad input as an error.
package bucket
