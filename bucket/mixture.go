package bucket

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"math"
	"math/bits"
	"slices"
)

// Mixtures: one epoch drawn from several sources at given shares.
//
// A mixture epoch is a sequence of N slots. Every source s gets c_s of them
// (see below), the slots are dealt to sources by smooth weighted round-robin
// — at each slot every source's credit grows by c_s, the source with the most
// credit (lowest index among equals) takes the slot and pays N — so after
// any prefix of i slots source s has taken within one row of i·c_s/N
// (checked in tests), and any run of consecutive slots holds each source's
// share to within two rows.
//
// Each source is read as an endless stream: its pass k is a permutation of
// its rows (Fisher–Yates, stream 4, keyed by the source's own fingerprint,
// the seed and k), passes one after the other. Mixture epoch e takes, from
// each source, the c_s rows following those that epochs 0 … e−1 took, so a
// source seen less than once per epoch (downsampled) is a deterministic
// subset that the next epoch continues, and a source seen more than once
// (upsampled) continues with its own next permutation; no row of a source
// repeats before all of its rows were seen.
//
// The slots, in order, are then planned by the policy (mixorder.go): rows of
// a mega-batch are length-grouped within each source's slots, batches keep
// slot order, packed rows are packed per run of about MegaBatchMult batches.
// The plan is a pure function of (the sources' fingerprints and lengths in
// the order given, the weights, seed, epoch, policy and MixConfig).
const streamMixSource uint64 = 4

// MixBy says what mixture weights are shares of.
type MixBy string

const (
	// MixSamples makes weights shares of rows (documents): the default.
	MixSamples MixBy = "samples"
	// MixTokens makes weights shares of delivered tokens (after MaxLength,
	// and under packed without SplitDocs after SeqLen truncation).
	MixTokens MixBy = "tokens"
)

// MaxSources bounds the sources of one mixture.
const MaxSources = 255

// Limits of mixture planning. Every input is checked against them before
// any work, and the loops that depend on the input count their steps
// against them, so a plan either fits or fails at once with
// [ErrTooLarge] naming the limit; it never runs for an unbounded time.
const (
	// MaxMixRows is the most rows (slots) of one mixture epoch, and the
	// default of [MixConfig.MaxRows].
	MaxMixRows = math.MaxInt32
	// DefaultMixReplay is the default of [MixConfig.MaxReplay]: under
	// MixTokens, epoch e starts where epochs 0 … e−1 ended, which planning
	// finds by walking their rows again (a few ns a row: seconds).
	DefaultMixReplay = 1 << 31
	// mixCheckEvery is how many loop steps planning runs between looks at
	// its context.
	mixCheckEvery = 1 << 14
)

// Source is one dataset of a mixture.
type Source struct {
	Name        string   // for messages and reports
	Fingerprint string   // the dataset's content fingerprint: seeds its permutations
	Lengths     []uint32 // token count of every row; kept by the Mixture, do not modify
	// Weight is the source's share before normalisation: weights are
	// divided by their sum, so 6, 3, 1 means 0.6, 0.3, 0.1. A weight of 0
	// keeps the source out of the mixture.
	Weight float64
}

// MixConfig is how a mixture's epoch is measured. At most one of
// EpochSamples, EpochTokens and EpochUntil may be set; with none, an epoch
// is as long as all sources of positive weight together (rows, or tokens
// under MixTokens).
type MixConfig struct {
	// MixBy is samples (the default when empty) or tokens.
	MixBy MixBy
	// EpochSamples is the number of rows of a mixture epoch (MixSamples only).
	EpochSamples int64
	// EpochTokens is the number of tokens of a mixture epoch (MixTokens only);
	// each source gets rows until its share of them is reached.
	EpochTokens int64
	// EpochUntil names a source: the epoch ends when that source has been
	// seen exactly once (its weight sets the epoch's length).
	EpochUntil string
	// SingleSourceBatches (bucketed and tokens) makes every batch hold rows
	// of one source; batches, not rows, are then interleaved at the
	// sources' shares (see buildMixSingle).
	SingleSourceBatches bool

	// MaxRows bounds the rows of the epoch (0 or more than MaxMixRows:
	// MaxMixRows); a larger epoch fails with ErrTooLarge before anything
	// of its size is allocated. It is a limit, not part of the plan: it
	// does not change the fingerprint.
	MaxRows int64
	// MaxReplay bounds the rows walked to find where a MixTokens epoch
	// starts (0: DefaultMixReplay); past it planning fails with
	// ErrTooLarge. Not part of the plan either.
	MaxReplay int64
}

// maxRows and maxReplay are the limits mc sets, defaults applied.
func (mc MixConfig) maxRows() int64 {
	if mc.MaxRows <= 0 || mc.MaxRows > MaxMixRows {
		return MaxMixRows
	}
	return mc.MaxRows
}

func (mc MixConfig) maxReplay() int64 {
	if mc.MaxReplay <= 0 {
		return DefaultMixReplay
	}
	return mc.MaxReplay
}

// SourceShare is what one source contributes to a mixture epoch.
type SourceShare struct {
	Name   string
	Weight float64 // normalised
	Rows   int64   // rows of this source in the epoch
	Tokens int64   // their tokens (before policy truncation)
	// Start is the source's stream position at the start of the epoch: rows
	// of it that earlier mixture epochs took (pass = Start / source rows).
	Start int64
}

// Mixture is one epoch of a weighted mixture of sources, planned by a
// batching policy. It is immutable and safe for concurrent use. Its batches
// carry in each Piece the Source (index into the sources given to
// [NewMixture]) and the row within that source.
type Mixture struct {
	plan        *Plan
	fingerprint string
	src         []uint8 // source of every slot
	row         []int32 // row within its source of every slot
	shares      []SourceShare
}

// NewMixture plans epoch epoch of the mixture of sources under cfg. The
// result is a pure function of (the sources in the order given — their
// fingerprints, lengths and weights —, seed, epoch, cfg, mc). Errors are
// *ConfigError (field "mixture", "mix_by", "epoch_samples", "epoch_tokens"
// or "epoch_until"), ErrTooLarge (an epoch beyond mc.MaxRows or a replay
// beyond mc.MaxReplay) or the policy's own errors.
//
// Warm-up prefixes do not apply to mixtures (batches keep mixture order);
// Shapes still lists every shape of the epoch.
func NewMixture(sources []Source, seed uint64, epoch int, cfg Config, mc MixConfig) (*Mixture, error) {
	return NewMixtureContext(context.Background(), sources, seed, epoch, cfg, mc)
}

// NewMixtureContext is [NewMixture] that stops early, returning an error
// wrapping ctx's cause, once ctx is done (a plan nobody waits for).
func NewMixtureContext(ctx context.Context, sources []Source, seed uint64, epoch int, cfg Config, mc MixConfig) (*Mixture, error) {
	c, err := cfg.normalize()
	if err != nil {
		return nil, err
	}
	if epoch < 0 {
		return nil, cfgErr("epoch", "must be >= 0, got %d", epoch)
	}
	if c.ShuffleWindow > 0 {
		return nil, cfgErr("shuffle_window", "not used by mixtures (rows come in mixture order)")
	}
	if c.Sequential {
		return nil, cfgErr("sequential", "not used by mixtures (rows come in mixture order)")
	}
	w, until, err := checkMix(sources, mc, c)
	if err != nil {
		return nil, err
	}
	eff := effLimit(c)
	m := &Mixture{shares: make([]SourceShare, len(sources))}
	m.fingerprint = mixFingerprint(mixInputs(sources), w, until, mc)
	streams := make([]*sourceStream, len(sources))
	for i, s := range sources {
		streams[i] = &sourceStream{lengths: s.Lengths, fp: s.Fingerprint, seed: seed, pass: -1}
		m.shares[i] = SourceShare{Name: s.Name, Weight: w[i]}
	}

	// Rows per source of epochs 0 … epoch; the last is this epoch's.
	var counts []int64
	base := make([]int64, len(sources))
	maxRows := mc.maxRows()
	if mc.MixBy == MixTokens {
		targets, err := tokenTargets(sources, w, until, mc, eff, epoch)
		if err != nil {
			return nil, err
		}
		if counts, err = replayTokens(ctx, streams, targets, epoch, eff, base, maxRows, mc.maxReplay()); err != nil {
			return nil, err
		}
	} else {
		if counts, err = sampleCounts(mixInputs(sources), w, until, mc, maxRows); err != nil {
			return nil, err
		}
		for i := range base {
			hi, lo := bits.Mul64(uint64(epoch), uint64(counts[i]))
			if hi != 0 || lo > math.MaxInt64 {
				return nil, fmt.Errorf("mixture epoch %d: %w (source %q's stream position passes 2^63)", epoch, ErrTooLarge, sources[i].Name)
			}
			base[i] = int64(lo)
		}
	}
	var n int64
	for _, k := range counts {
		n += k
	}
	if n > maxRows {
		return nil, fmt.Errorf("mixture epoch of %d rows: %w (at most %d rows per mixture epoch)", n, ErrTooLarge, maxRows)
	}

	// Each source's rows of this epoch, in stream order.
	lists := make([][]int32, len(sources))
	for i, st := range streams {
		lists[i] = st.take(base[i], counts[i])
	}
	// Smooth weighted round-robin over the slots.
	m.src = make([]uint8, n)
	m.row = make([]int32, n)
	lengths := make([]uint32, n) // kept by the inner plan
	credit := make([]int64, len(sources))
	taken := make([]int, len(sources))
	active := make([]int, 0, len(sources))
	for i, k := range counts {
		if k > 0 {
			active = append(active, i)
		}
	}
	for slot := range n {
		if slot%mixCheckEvery == 0 && ctx.Err() != nil {
			return nil, fmt.Errorf("mixture plan: %w", context.Cause(ctx))
		}
		best := swrrNext(active, credit, counts, n)
		r := lists[best][taken[best]]
		taken[best]++
		m.src[slot] = uint8(best)
		m.row[slot] = r
	}
	lists = nil
	// Lengths in a second, branch-free loop: the random reads overlap.
	srcLens := make([][]uint32, len(sources))
	for i, s := range sources {
		srcLens[i] = s.Lengths
	}
	for slot, r := range m.row {
		lengths[slot] = srcLens[m.src[slot]][r]
	}
	for slot, l := range lengths {
		m.shares[m.src[slot]].Tokens += int64(l)
	}
	for i := range m.shares {
		m.shares[i].Rows = counts[i]
		m.shares[i].Start = base[i]
	}
	m.plan, err = newMixPlan(lengths, m.fingerprint, seed, epoch, c, m.src, mc.SingleSourceBatches)
	if err != nil {
		return nil, err
	}
	return m, nil
}

// checkMix validates sources and mc and returns the normalised weights and
// the index of EpochUntil's source (-1 when unset).
func checkMix(sources []Source, mc MixConfig, cfg Config) ([]float64, int, error) {
	return checkMixIn(mixInputs(sources), mc, cfg, math.MaxInt32)
}

// mixIn is what planning needs of a source besides its lengths.
type mixIn struct {
	name, fp string
	rows     int64
	weight   float64
}

func mixInputs(sources []Source) []mixIn {
	out := make([]mixIn, len(sources))
	for i, s := range sources {
		out[i] = mixIn{name: s.Name, fp: s.Fingerprint, rows: int64(len(s.Lengths)), weight: s.Weight}
	}
	return out
}

// checkMixIn is checkMix over sources described by mixIn, each of at most
// maxSourceRows rows.
func checkMixIn(sources []mixIn, mc MixConfig, cfg Config, maxSourceRows int64) ([]float64, int, error) {
	if len(sources) == 0 {
		return nil, -1, cfgErr("mixture", "has no sources")
	}
	if len(sources) > MaxSources {
		return nil, -1, cfgErr("mixture", "has %d sources, at most %d", len(sources), MaxSources)
	}
	switch mc.MixBy {
	case "", MixSamples, MixTokens:
	default:
		return nil, -1, cfgErr("mix_by", "unknown value %q (want samples or tokens)", string(mc.MixBy))
	}
	if mc.EpochSamples < 0 {
		return nil, -1, cfgErr("epoch_samples", "must be >= 0, got %d", mc.EpochSamples)
	}
	if mc.EpochTokens < 0 {
		return nil, -1, cfgErr("epoch_tokens", "must be >= 0, got %d", mc.EpochTokens)
	}
	if mc.SingleSourceBatches && cfg.Policy == Packed {
		return nil, -1, cfgErr("single_source_batches", "not offered for packed batches yet (bucketed and tokens only)")
	}
	if mc.MixBy == MixTokens && mc.EpochSamples > 0 {
		return nil, -1, cfgErr("epoch_samples", "measures rows: with mix_by=tokens give epoch_tokens")
	}
	if mc.MixBy != MixTokens && mc.EpochTokens > 0 {
		return nil, -1, cfgErr("epoch_tokens", "only with mix_by=tokens (mix_by is samples)")
	}
	set := 0
	for _, on := range []bool{mc.EpochSamples > 0, mc.EpochTokens > 0, mc.EpochUntil != ""} {
		if on {
			set++
		}
	}
	if set > 1 {
		return nil, -1, cfgErr("epoch_until", "give at most one of epoch_samples, epoch_tokens and epoch_until")
	}
	var sum float64
	until := -1
	seen := map[string]bool{}
	for i, s := range sources {
		if s.name == "" {
			return nil, -1, cfgErr("mixture", "source %d has no name", i)
		}
		if seen[s.name] {
			return nil, -1, cfgErr("mixture", "source %q is named twice", s.name)
		}
		seen[s.name] = true
		if math.IsNaN(s.weight) || math.IsInf(s.weight, 0) || s.weight < 0 {
			return nil, -1, cfgErr("mixture", "source %q: weight %v must be a finite number >= 0", s.name, s.weight)
		}
		if s.weight > 0 && s.rows == 0 {
			return nil, -1, cfgErr("mixture", "source %q has weight %v but no rows", s.name, s.weight)
		}
		if s.rows > maxSourceRows {
			return nil, -1, fmt.Errorf("mixture source %q of %d rows: %w (at most %d rows)", s.name, s.rows, ErrTooLarge, maxSourceRows)
		}
		if s.name == mc.EpochUntil {
			until = i
		}
		sum += s.weight
	}
	if !(sum > 0) || math.IsInf(sum, 0) {
		return nil, -1, cfgErr("mixture", "weights sum to %v; at least one must be > 0", sum)
	}
	if mc.EpochUntil != "" {
		if until < 0 {
			return nil, -1, cfgErr("epoch_until", "%q is not a source of the mixture", mc.EpochUntil)
		}
		if sources[until].weight == 0 {
			return nil, -1, cfgErr("epoch_until", "source %q has weight 0: it is never exhausted", mc.EpochUntil)
		}
	}
	// Normalised weights are rounded to 12 decimals, so that 6:3:1 and
	// 0.6:0.3:0.1 are the same mixture whatever the float rounding.
	w := make([]float64, len(sources))
	for i, s := range sources {
		w[i] = math.Round(s.weight/sum*1e12) / 1e12
		if s.weight > 0 && w[i] == 0 {
			return nil, -1, cfgErr("mixture", "source %q: weight %v is less than 1e-12 of the sum %v, which rounds its share to 0; give it weight 0 or more", s.name, s.weight, sum)
		}
	}
	return w, until, nil
}

// effLimit is the most tokens a row delivers under c (truncation by
// MaxLength, the last explicit boundary, or SeqLen when packed without
// SplitDocs).
func effLimit(c Config) int64 {
	limit := lengthLimit(c.MaxLength)
	if n := len(c.Boundaries); n > 0 {
		limit = min(limit, int64(c.Boundaries[n-1]))
	}
	if c.Policy == Packed && !c.SplitDocs {
		limit = min(limit, int64(c.SeqLen))
	}
	return limit
}

// sampleCounts is the rows per source of every epoch under MixSamples: N·w
// by largest remainder (ties to the lower index), N being EpochSamples, the
// sum of the positive-weight sources' rows, or under EpochUntil
// ⌈rows(S)/w(S)⌉ with S getting exactly its rows. N beyond maxRows is
// ErrTooLarge, found before anything of its size is done.
func sampleCounts(sources []mixIn, w []float64, until int, mc MixConfig, maxRows int64) ([]int64, error) {
	var n int64
	switch {
	case mc.EpochSamples > 0:
		n = mc.EpochSamples
	case until >= 0:
		rows := sources[until].rows
		f := math.Ceil(float64(rows) / w[until])
		if !(f <= float64(maxRows)) {
			return nil, fmt.Errorf("mixture epoch of %.0f rows (%q's %d rows at weight %v): %w (at most %d rows per mixture epoch)",
				f, sources[until].name, rows, w[until], ErrTooLarge, maxRows)
		}
		n = max(int64(f), rows)
		rest := slices.Clone(w)
		rest[until] = 0
		counts := apportion(n-rows, rest)
		counts[until] = rows
		return counts, nil
	default:
		for i, s := range sources {
			if w[i] > 0 {
				n += s.rows // at most MaxSources × the largest source
			}
		}
	}
	if n > maxRows {
		return nil, fmt.Errorf("mixture epoch of %d rows: %w (at most %d rows per mixture epoch)", n, ErrTooLarge, maxRows)
	}
	return apportion(n, w), nil
}

// apportion splits n into integer parts proportional to w (largest
// remainder, ties to the lower index); zero weights get zero. n must be at
// most 2^53 (callers bound it by MaxMixRows), so that every product is
// exact to within one and the loops below run at most len(w) times.
func apportion(n int64, w []float64) []int64 {
	out := make([]int64, len(w))
	var sum float64
	for _, x := range w {
		sum += x
	}
	if n <= 0 || sum <= 0 {
		return out
	}
	rem := make([]float64, len(w))
	var given int64
	for i, x := range w {
		q := float64(n) * x / sum
		out[i] = int64(math.Floor(q))
		rem[i] = q - float64(out[i])
		given += out[i]
	}
	order := make([]int, 0, len(w))
	for i, x := range w {
		if x > 0 {
			order = append(order, i)
		}
	}
	slices.SortStableFunc(order, func(a, b int) int {
		switch {
		case rem[a] > rem[b]:
			return -1
		case rem[a] < rem[b]:
			return 1
		}
		return 0
	})
	for k := 0; given < n; k++ {
		out[order[k%len(order)]]++
		given++
	}
	for given > n { // float rounding overshoot: take back from the largest
		i := slices.Index(out, slices.Max(out))
		out[i]--
		given--
	}
	return out
}

// tokenTargets is the tokens per source of every epoch under MixTokens. It
// refuses, before any walking, targets that cannot fit: a source's target
// needs at least target / (its longest row, truncated) rows, which must fit
// maxRows in one epoch and mc.MaxReplay over the epochs replayed.
func tokenTargets(sources []Source, w []float64, until int, mc MixConfig, eff int64, epoch int) ([]int64, error) {
	total := make([]int64, len(sources))
	longest := make([]int64, len(sources))
	for i, s := range sources {
		for _, l := range s.Lengths {
			d := min(int64(l), eff)
			total[i] += d // at most 2^31 rows × 2^32 tokens
			longest[i] = max(longest[i], d)
		}
		if w[i] > 0 && total[i] == 0 {
			return nil, cfgErr("mixture", "source %q has no tokens to give its token share", s.Name)
		}
	}
	var t float64
	switch {
	case mc.EpochTokens > 0:
		t = float64(mc.EpochTokens)
	case until >= 0:
		t = float64(total[until]) / w[until]
	default:
		for i := range sources {
			if w[i] > 0 {
				t += float64(total[i])
			}
		}
	}
	maxRows, maxReplay := mc.maxRows(), mc.maxReplay()
	out := make([]int64, len(sources))
	var rows float64 // at least this many rows per epoch
	for i := range sources {
		if w[i] == 0 {
			continue
		}
		x := math.Round(t * w[i])
		rows += math.Ceil(x / float64(longest[i]))
		if !(rows <= float64(maxRows)) {
			return nil, fmt.Errorf("mixture epoch of %.0f tokens: %w (source %q alone needs at least %.0f rows of at most %d tokens; at most %d rows per mixture epoch)",
				t, ErrTooLarge, sources[i].Name, math.Ceil(x/float64(longest[i])), longest[i], maxRows)
		}
		out[i] = int64(x) // x < 2^31 · 2^32: exact
	}
	if until >= 0 {
		out[until] = total[until]
	}
	if replay := rows * float64(epoch); !(replay <= float64(maxReplay)) {
		return nil, fmt.Errorf("mixture epoch %d under mix_by=tokens: %w (it starts where epochs 0…%d ended, found by walking at least %.0f rows again; at most %d)",
			epoch, ErrTooLarge, epoch-1, replay, maxReplay)
	}
	return out, nil
}

// replayTokens walks the source streams epoch by epoch, each source taking
// rows until its target of tokens is reached, and returns the rows per
// source of epoch epoch; base becomes where that epoch starts in each
// stream. It counts its steps: epoch epoch beyond maxRows (the caller
// checks the exact count) or a walk of the earlier epochs beyond maxReplay
// is ErrTooLarge, and it stops once ctx is done.
func replayTokens(ctx context.Context, streams []*sourceStream, targets []int64, epoch int, eff int64, base []int64, maxRows, maxReplay int64) ([]int64, error) {
	var counts []int64
	var walked, steps int64 // rows of earlier epochs; every row looked at
	for e := 0; e <= epoch; e++ {
		counts = make([]int64, len(streams))
		var rows int64
		for i, st := range streams {
			if targets[i] <= 0 {
				continue
			}
			var got int64
			for got < targets[i] {
				got += min(int64(st.length(base[i]+counts[i])), eff)
				counts[i]++
				rows++
				if steps++; steps%mixCheckEvery == 0 {
					if e == epoch && rows > maxRows {
						return nil, fmt.Errorf("mixture epoch %d: %w (more than %d rows per mixture epoch)", e, ErrTooLarge, maxRows)
					}
					if e < epoch && walked+rows > maxReplay {
						return nil, fmt.Errorf("mixture epoch %d under mix_by=tokens: %w (finding its start walks more than %d rows of epochs 0…%d)",
							epoch, ErrTooLarge, maxReplay, epoch-1)
					}
					if ctx.Err() != nil {
						return nil, fmt.Errorf("mixture plan: %w", context.Cause(ctx))
					}
				}
			}
		}
		if e < epoch {
			if walked += rows; walked > maxReplay {
				return nil, fmt.Errorf("mixture epoch %d under mix_by=tokens: %w (finding its start walks more than %d rows of epochs 0…%d)",
					epoch, ErrTooLarge, maxReplay, epoch-1)
			}
			for i := range base {
				base[i] += counts[i]
			}
		}
	}
	return counts, nil
}

// mixFingerprint identifies a mixture's plan: SHA-256 over the sources'
// fingerprints and row counts in order, the normalised weights and mc.
func mixFingerprint(sources []mixIn, w []float64, until int, mc MixConfig) string {
	h := sha256.New()
	var buf [8]byte
	putU := func(v uint64) {
		binary.LittleEndian.PutUint64(buf[:], v)
		h.Write(buf[:])
	}
	putS := func(s string) {
		putU(uint64(len(s)))
		h.Write([]byte(s))
	}
	putS("gload/mixture/v1")
	by := mc.MixBy
	if by == "" {
		by = MixSamples
	}
	putS(string(by))
	putU(uint64(mc.EpochSamples))
	putU(uint64(mc.EpochTokens))
	putU(uint64(int64(until)))
	if mc.SingleSourceBatches {
		putS("single-source-batches") // absent otherwise, so older fingerprints stay
	}
	putU(uint64(len(sources)))
	for i, s := range sources {
		putS(s.fp)
		putU(uint64(s.rows))
		putU(math.Float64bits(w[i]))
	}
	return "mix-" + hex.EncodeToString(h.Sum(nil)[:16])
}

// sourceStream reads one source's endless row stream, pass after pass. It
// keeps the permutation of one pass; reads must move forward.
type sourceStream struct {
	lengths []uint32
	fp      string
	seed    uint64
	pass    int64
	perm    []int32
}

// at returns the source row at stream position u.
func (s *sourceStream) at(u int64) int32 {
	n := int64(len(s.lengths))
	if k := u / n; k != s.pass {
		s.load(k)
	}
	return s.perm[u%n]
}

// load makes pass k's permutation the current one.
func (s *sourceStream) load(k int64) {
	if s.perm == nil {
		s.perm = make([]int32, len(s.lengths))
	}
	for i := range s.perm {
		s.perm[i] = int32(i)
	}
	newRNG(streamKey(s.fp, s.seed, int(k), streamMixSource)).shuffle32(s.perm)
	s.pass = k
}

// take returns the rows at stream positions [u, u+count).
func (s *sourceStream) take(u, count int64) []int32 {
	out := make([]int32, 0, count)
	n := int64(len(s.lengths))
	for int64(len(out)) < count {
		if k := u / n; k != s.pass {
			s.load(k)
		}
		off := u % n
		end := min(n, off+count-int64(len(out)))
		out = append(out, s.perm[off:end]...)
		u += end - off
	}
	return out
}

// length returns the token count of the row at stream position u.
func (s *sourceStream) length(u int64) uint32 { return s.lengths[s.at(u)] }

// MixtureFingerprint is what [Mixture.Fingerprint] will be for these
// sources and mc, without planning (it reads no lengths but their count).
func MixtureFingerprint(sources []Source, mc MixConfig) (string, error) {
	w, until, err := checkMix(sources, mc, Config{})
	if err != nil {
		return "", err
	}
	return mixFingerprint(mixInputs(sources), w, until, mc), nil
}

// Fingerprint identifies the mixture's plan (what resume states name).
func (m *Mixture) Fingerprint() string { return m.fingerprint }

// Shares returns what each source contributes to this epoch, in the order
// the sources were given.
func (m *Mixture) Shares() []SourceShare { return slices.Clone(m.shares) }

// Plan returns the inner plan over the epoch's slots; its batches index
// slots, not source rows: use [Mixture.Batch].
func (m *Mixture) Plan() *Plan { return m.plan }

// Len returns the number of global batches, before remainder handling.
func (m *Mixture) Len() int { return m.plan.Len() }

// PerRank is [Plan.PerRank].
func (m *Mixture) PerRank(start, world int) int { return m.plan.PerRank(start, world) }

// Assign is [Plan.Assign]: the same dealing to ranks and workers.
func (m *Mixture) Assign(start, rank, world, worker, workers int) ([]int, error) {
	return m.plan.Assign(start, rank, world, worker, workers)
}

// Shape is [Plan.Shape].
func (m *Mixture) Shape(g int) Shape { return m.plan.Shape(g) }

// Shapes is [Plan.Shapes].
func (m *Mixture) Shapes() []Shape { return m.plan.Shapes() }

// Stats is [Plan.Stats]; Rows counts the epoch's slots.
func (m *Mixture) Stats() Stats { return m.plan.Stats() }

// Config is [Plan.Config].
func (m *Mixture) Config() Config { return m.plan.Config() }

// Batch builds global batch g with every piece naming its source and the
// row within it; it panics for g outside [0, Len()), like [Plan.Batch].
func (m *Mixture) Batch(g int) Batch {
	b := m.plan.Batch(g)
	for k := range b.Pieces {
		slot := b.Pieces[k].Index
		b.Pieces[k].Source = int(m.src[slot])
		b.Pieces[k].Index = int(m.row[slot])
	}
	return b
}

// swrrNext deals one slot by smooth weighted round-robin: every active source's credit grows by its count, and the
// source with the most credit (the lowest index among equals, active being ascending) takes the slot and pays total,
// the counts' sum. It returns that source.
func swrrNext(active []int, credit, counts []int64, total int64) int {
	best := active[0]
	credit[best] += counts[best]
	for _, s := range active[1:] {
		credit[s] += counts[s]
		if credit[s] > credit[best] {
			best = s
		}
	}
	credit[best] -= total
	return best
}
