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
// Past [LazyThreshold] rows a bucketed sequential plan is a [SeqPlan]: the
// same batches, computed on demand (batch g is rows g·B … g·B+B−1).
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
// # Lazy plans
//
// [NewEpochPlan] plans datasets of at most [LazyThreshold] (2^27) rows with
// [NewPlan], exactly as before (golden files, plan hashes and resume states
// are unchanged), larger bucketed and tokens datasets with [NewLazyPlan]
// and larger packed ones with [NewLazyPacked] (see "Lazy packed plans"; the
// choice is [EpochPlanner]'s): a plan whose memory is O(windows) — 8 + 4 bytes per
// window of about 2^20 rows, plus the windows being served — and whose batch
// g is computed on demand. Row numbers are int64; a lazy plan has no row
// limit. Its randomness, specified here like the exact plans':
//
//   - Rows are grouped into blocks of [LazyBlockRows] (2^16) consecutive
//     rows (the last block may be shorter). The blocks are permuted by a keyed
//     permutation π (stream 5); window w holds blocks π(16w) … π(16w+15)
//     ([LazyWindowBlocks] = 16), in that order except that the dataset's
//     last block, when shorter, is moved to the window's end. Window position
//     x is row block[x div 2^16]·2^16 + x mod 2^16.
//   - The window's positions are permuted by a keyed permutation ρ_w (key:
//     SplitMix64 output w+1 of stream 6's key), then cut into mega-batches
//     (bucketed: M·B positions; tokens: the longest run whose padded lengths
//     sum to at most M·TokenBudget, at least one row), each sorted by
//     delivered length descending, ties in ρ_w order, and cut into batches
//     as [NewPlan] cuts them: the window's internal batches, in order.
//   - The window's batches are dealt in the order of a keyed permutation σ_w
//     of their indices (key: output w+1 of stream 7's key); windows follow
//     each other in order, so global batch g is in the window w with
//     end(w−1) ≤ g < end(w), end being the prefix table of batches per
//     window, and is internal batch σ_w(g − end(w−1)) there.
//   - Every keyed permutation is a 6-round balanced Feistel network over
//     2h-bit values (2^(2h) ≥ n, h ≥ 1), round r mapping (L, R) to (R, L xor
//     (mix64(R xor k_r) mod 2^h)), k_r being SplitMix64 output r+1 of the
//     permutation's key and mix64 SplitMix64's output function; values ≥ n
//     are fed through again (cycle walking). Stream keys are streamKey's
//     (above).
//
// The bucketed prefix table is arithmetic (a window of R rows has
// ⌊R/(M·B)⌋·M + ⌈(R mod M·B)/B⌉ batches); under tokens it comes from one
// counting pass over every row, window by window through the caller's
// [Runner] (parallel if it likes; the result does not depend on it). A
// bucketed batch read alone costs one mega-batch (M·B rows: length reads,
// Feistel evaluations, a radix sort); a consumer that reads a window's
// batches in turn gets the whole window built once, after R/(M·B) reads
// of it in a row (ski rental: it then pays at most twice the cheaper way;
// about 12 bytes per row of the window; the two newest windows are kept).
// Tokens plans always build the window a batch is read from.
//
// Guarantees: a pure function of (fingerprint, lengths, seed, epoch,
// policy), every row exactly once per epoch, [LazyPlan.Assign] dealing as
// [Plan.Assign] (global batch g to rank g mod world), and
// [LazyPlan.Hash] naming the algorithm ("gload/plan/lazy-blocks/v1"), so a
// lazy plan never hashes like an exact one.
//
// Warm-up (WarmupShapes) happens within the first window, which is built
// when the plan is: its batches are reordered as [Plan]'s warm-up reorders
// a whole plan (PlanWorld batches of every shape that has at least
// PlanWorld batches in window 0, longest first, then the window's other
// batches in σ_0 order). Shapes that window 0 lacks, or has fewer than
// PlanWorld batches of, are not warmed (finding every shape of the epoch
// would need a pass over all rows); with 10^6 rows in a window that is
// only the rarest lengths. When the lengths name their longest row
// ([LongestRower]: a dataset's block table does), the batch holding it
// and global batch 0 then swap places (the hash records the lead batch's
// position), so the epoch's largest batch comes at step 0 wherever it is.
//
// Not (yet) in lazy plans: automatic boundaries,
// ShuffleWindow and sequential tokens plans (those stay on [NewPlan], at
// most 2^31−1 rows), [Plan.Shapes] and [Plan.Stats]. Shuffle quality: a
// batch draws its rows from one window (about 10^6 rows from 16 random
// places of the dataset) rather than from the whole dataset; see
// docs/planning-at-scale.md for the measured effect.
//
// # Lazy packed plans
//
// [NewLazyPacked] plans packed epochs past [LazyThreshold] rows. Its blocks,
// block permutation π (stream 5), windows and window row permutations ρ_w
// (stream 6) are exactly a lazy plan's (above). Window w is packed on its
// own, by the exact packer's rules (see [NewPlan]):
//
//   - the window's rows, in ρ_w order, become items as [NewPlan] makes them
//     (truncated to MaxLength; then to SeqLen, or with SplitDocs cut into
//     SeqLen-token pieces plus a tail), sorted by length descending, ties in
//     ρ_w order (a total order);
//   - the items are placed first-fit-decreasing into rows of SeqLen tokens
//     as [NewPlan] places them (with SplitDocs, a too-long item first fills
//     the open row with the most room while any has room); the window's
//     packed rows are numbered 0 … R_w−1 in the order they are opened;
//   - packed row k goes to place π'_w(k) of the window, π'_w a keyed
//     permutation of [0, R_w) (key: SplitMix64 output w+1 of stream 9's key;
//     a Feistel network as above), and places are grouped BatchSize at a
//     time: the window has ⌈R_w / BatchSize⌉ batches, of which only the last
//     may be short; batch j of window w is global batch end(w−1) + j.
//
// R_w depends only on the multiset of the window's item lengths, not on which
// document an item comes from, so the counting pass reads each window's
// lengths (block by block), counts item lengths (a histogram, or a sort when
// SeqLen ≥ 2^20) and runs the same first-fit-decreasing over them without
// row numbers: no permutation, about 4 bytes per packed row and 8·(SeqLen+1)
// bytes per window being counted. It runs window by window through the
// caller's [Runner] (parallel if it likes; the result does not depend on it)
// and also sums the epoch's pieces and tokens ([LazyPacked.Stats] is exact)
// and the most pieces of any BatchSize packed rows of one window
// ([Bound].Pieces, for buffers sized before the batches are built).
//
// Its result, [PackedCounts], is the plan's only epoch-wide state (4 bytes
// per window plus totals). A caller may keep it ([PackedCounts.MarshalBinary],
// checksummed) under [LazyPackedKey] — a hash of everything the counts depend
// on: algorithm, block and window sizes, rows, fingerprint, seed, epoch and
// policy — and plan the same epoch again with [NewLazyPackedFrom], which
// checks the key and the window count and packs window 0 and two keyed-random
// windows again to compare, instead of counting every window. Counts depend
// on the epoch (windows are redrawn every epoch). Package bucket does no
// I/O: storing them is the caller's.
//
// [LazyPacked.Batch] packs the window of the batch asked for in full (O(rows
// of the window) time, about 90 bytes per piece while packing:
// 100 MB for 2^20 rows of web text, BenchmarkLazyPackedWindow) the first time
// one of its batches is read, and keeps the four most recently packed windows
// (8 bytes per row and 12 per piece each); callers reading a window
// being packed wait for it. Consumers read global batches in order, so each
// window is packed once per server; reads scattered over many windows cost a
// window's packing each. A window may hold at most [MaxWindowPieces] pieces
// ([ErrTooLarge] otherwise).
//
// Guarantees: a pure function of (fingerprint, lengths, seed, epoch,
// policy); every token of every row delivered exactly once per epoch with
// SplitDocs (every row once, truncated to SeqLen, without); deals as
// [Plan.Assign]; [LazyPacked.Hash] names "gload/plan/lazy-packed/v1"
// (layout as [LazyPlan.Hash], warm-up field 0). Packed rows only hold
// documents of one window: the packing efficiency (real / padded tokens) is
// within 10^-5 of the exact packer's on synthetic web lengths (see
// docs/planning-at-scale.md). Shapes lists window 0's shapes; every window's
// last batch may be short.
//
// # Lazy mixtures
//
// [NewEpochMixture] plans mixture epochs (MixSamples) of at most
// [LazyThreshold] slots whose sources have at most 2^31−1 rows each with
// [NewMixtureContext], exactly as before (same batches, fingerprints and
// resume states), and larger ones with [NewLazyMixture]: memory O(windows +
// sources) — 8 bytes per window of 2^20 slots, plus the windows being
// served — and batch g computed on demand. Sources are [MixSource]s (a
// [Lengths], int64 rows); an epoch may hold up to [MaxLazyMixRows] (2^40)
// slots, each source as many rows. The source counts c_s and the epoch's
// slots N are as for exact mixtures (largest remainder of N by the
// normalised weights; EpochSamples, EpochUntil), and the fingerprint is the
// same ([MixSourcesFingerprint] = [MixtureFingerprint]). Its randomness and
// arithmetic, specified like the exact plans':
//
//   - Source s's slot count among slots [0, x) is F_s(x). A source is tiny
//     when c_s·(2^12 − 2·MaxSources) < N (under one row per 3 586 slots), else
//     big. Tiny source number j of T (in source order) has phase φ =
//     ⌊(2j+1)·2^15/T⌋/2^16 and F_s(x) = ⌊x·c_s/N + φ⌋. The big sources share
//     B = x − Σ_tiny F_t(x): F_s(x) = ⌊B·c_s/C⌋ (C = Σ_big c_s), plus one for
//     the B − Σ_big ⌊B·c_s/C⌋ big sources of largest remainder B·c_s mod C,
//     ties to the lower index. All in exact 128-bit integer arithmetic.
//   - The slots are cut into chunks of [LazyMixChunk] (2^12); F is evaluated
//     at chunk boundaries only, where it is monotone (every big source gains
//     at least one row per chunk, every tiny one at most two), and a chunk's
//     k_s = F_s(end) − F_s(start) slots are dealt by smooth weighted
//     round-robin as the exact mixture deals its epoch (credits start at 0
//     in every chunk). So after any prefix of i slots a tiny source is within
//     2 rows of i·c_s/N, and a big source within 2 + T·c_s/C (within 2 when
//     no source is tiny); tests check it slot by slot.
//   - Source s's j-th slot of epoch e reads position u = e·c_s + j of its
//     endless stream: pass k = u div n_s, row π_{s,k}(u mod n_s), π_{s,k}
//     the keyed Feistel permutation of [0, n_s) (as in lazy plans) keyed by
//     stream 8 of (the source's fingerprint, seed, k) — streamKey with k in
//     the epoch's place. Within a pass no row repeats; epoch e+1 continues
//     where e stopped.
//   - Windows of [LazyMixWindowChunks] chunks (2^20 slots; the last may be
//     shorter) are planned as the exact mixture plans its whole epoch: cut
//     into mega-batches (bucketed M·B slots; tokens the longest run whose
//     padded lengths sum to at most M·TokenBudget), each source's rows of a
//     mega-batch sorted by delivered length descending (ties in slot order)
//     and put back into its slots, batches cut in slot order and kept in
//     slot order (no batch shuffle, no warm-up).
//
// The prefix table of batches per window is arithmetic under bucketed and
// comes from one counting pass under tokens (every window built once,
// through the caller's [Runner]; it also yields every shape, the token
// statistics and each source's tokens). A bucketed batch read alone costs
// its mega-batch (its one or two chunks dealt again); windows read in turn,
// and tokens batches, are built whole (about 13 bytes per slot; the two
// newest are kept). Not in lazy mixtures: mix_by=tokens (finding where
// epoch e starts walks every row of epochs before it), packing,
// SingleSourceBatches and automatic boundaries; [NewEpochMixture] plans
// them exactly (at most 2^31−1 rows per source). Under bucketed,
// [LazyMixture.Shapes] lists window 0's shapes only and the token counts of
// Stats and Shares are 0 ([LazyMixture.Bound] bounds every batch, from the
// sources' longest row). [LazyMixture.Hash] names the algorithm
// ("gload/mixture/lazy-chunks/v1") and costs O(windows).
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
//     It holds about 13 bytes per slot (source, row, length, inner plan);
//     a LazyMixture 8 bytes per window of 2^20 slots.
//   - Exact plans index rows by int32: at most 2^31−1 rows and pieces per
//     plan. Lazy plans index them by int64.
//   - [Plan.Batch] and [Plan.Shape] panic for an index outside [0, Len()),
//     like a slice; everything else reports bad input as an error.
package bucket
