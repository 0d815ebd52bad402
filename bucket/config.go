package bucket

import (
	"errors"
	"fmt"
	"math"
)

// Policy names how an epoch is cut into batches.
type Policy string

// The planning policies (DESIGN "Batches").
const (
	// Bucketed follows Hugging Face's LengthGroupedSampler: shuffle, sort
	// mega-batches by length, cut batches of BatchSize rows, shuffle batches.
	Bucketed Policy = "bucketed"
	// Tokens cuts batches by a token budget (fairseq max_tokens): rows × L ≤
	// TokenBudget.
	Tokens Policy = "tokens"
	// Packed fills rows of exactly SeqLen tokens by first-fit-decreasing.
	Packed Policy = "packed"
)

// Remainder says what happens to the batches that do not divide evenly among
// ranks.
type Remainder string

const (
	// Drop drops the last (remaining mod world) batches.
	Drop Remainder = "drop"
	// Wrap extends the sequence with batches from the start of the plan until
	// it divides evenly.
	Wrap Remainder = "wrap"
	// Keep deals every batch, the last ones to the first ranks: ranks may get
	// one batch more than others (evaluation passes, where every row counts
	// once and no collective runs per batch).
	Keep Remainder = "keep"
)

// Defaults applied to zero fields by [NewPlan].
const (
	DefaultPadMultiple   = 64
	DefaultMegaBatchMult = 50
	// AutoMultiple is what automatic boundaries are multiples of.
	AutoMultiple = 8
	// MaxAutoBuckets bounds Config.AutoBuckets.
	MaxAutoBuckets = 256
	// maxWorld bounds PlanWorld and the world sizes of Assign.
	maxWorld = 1 << 24
)

// Config is the batching policy of a plan. Zero values mean the documented
// default, except WarmupShapes: a Config literal has warm-up off, so start
// from [DefaultConfig] to get DESIGN's default behaviour.
//
// Fields that only one policy uses must be zero under the others (TokenBudget
// outside tokens; SeqLen and SplitDocs outside packed; Boundaries and
// AutoBuckets under packed), so that a misplaced setting is an error rather
// than silently ignored. PadMultiple, MegaBatchMult and WarmupShapes are
// range-checked always and ignored where they do not apply.
type Config struct {
	// Policy is bucketed (the default when empty), tokens or packed.
	Policy Policy
	// BatchSize is the rows per batch for bucketed and packed (required,
	// > 0). Under tokens it is an optional cap on rows per batch (0: none).
	BatchSize int
	// TokenBudget (tokens only, required): every batch has rows × L ≤
	// TokenBudget, L being the batch's padded length.
	TokenBudget int
	// SeqLen (packed only, required) is S, the token capacity of a packed row.
	SeqLen int
	// MaxLength truncates longer rows to their first MaxLength tokens (0: no
	// limit). Under packed, a document is first truncated to MaxLength, then
	// to SeqLen unless SplitDocs.
	MaxLength int
	// PadMultiple rounds each batch's L up to a multiple of it (0: 64; 1:
	// exact lengths). Ignored when Boundaries or AutoBuckets is set, and
	// under packed (L = SeqLen).
	PadMultiple int
	// Boundaries are explicit padded lengths, strictly ascending, each > 0:
	// L is the smallest boundary ≥ the batch's longest row, and rows longer
	// than the last boundary are truncated to it.
	Boundaries []int
	// AutoBuckets K > 0 chooses K boundaries from the length histogram (see
	// [AutoBoundaries]; they are multiples of [AutoMultiple], the largest
	// covers the longest row so nothing is truncated by them). Cannot be
	// combined with Boundaries.
	AutoBuckets int
	// MegaBatchMult is M (0: 50, Hugging Face's cap). Bucketed: a mega-batch
	// is M×BatchSize rows. Tokens: a mega-batch is the run of shuffled rows
	// whose padded lengths add up to at most M×TokenBudget.
	MegaBatchMult int
	// Remainder is drop (the default when empty) or wrap; see [Plan.Assign].
	Remainder Remainder
	// WarmupShapes (bucketed, tokens) opens the epoch with PlanWorld batches
	// of every shape that has that many, longest first; see [Plan.Shapes].
	WarmupShapes bool
	// SplitDocs (packed only) lets documents be cut across packed rows; see
	// [NewPlan].
	SplitDocs bool
	// PlanWorld is the world size the warm-up prefix is laid out for (0: 1).
	PlanWorld int
	// Sequential (bucketed, tokens) keeps the dataset's order: no shuffle, no
	// length sort, no batch-order shuffle and no warm-up — batch g holds the
	// rows after batch g−1's (an evaluation pass). WarmupShapes and
	// MegaBatchMult are ignored.
	Sequential bool
	// ShuffleWindow W > 0 reads the dataset in shuffled blocks of W consecutive rows, every batch (but the
	// warm-up prefix) from one block: locality for shards fetched into a small cache; see window.go for the
	// effect on shuffle quality. 0: one global shuffle.
	ShuffleWindow int
	// Planner picks how [NewEpochPlan] and [NewEpochMixture] plan: [PlannerAuto] (the default when empty: exact up
	// to [LazyThreshold] rows or slots, lazy above), [PlannerExact] (at most 2^31−1 rows) or [PlannerLazy] (at any
	// size, for what lazy plans support). It chooses the algorithm only; [NewPlan] and the lazy constructors ignore it.
	Planner Planner
}

// Planner names how an epoch is planned; see [Config.Planner].
type Planner string

// Planners.
const (
	PlannerAuto  Planner = "auto"
	PlannerExact Planner = "exact"
	PlannerLazy  Planner = "lazy"
)

// DefaultConfig returns DESIGN's defaults: bucketed, PadMultiple 64,
// MegaBatchMult 50, drop, warm-up on, PlanWorld 1. BatchSize is left 0 and
// must be set.
func DefaultConfig() Config {
	return Config{
		Policy:        Bucketed,
		PadMultiple:   DefaultPadMultiple,
		MegaBatchMult: DefaultMegaBatchMult,
		Remainder:     Drop,
		WarmupShapes:  true,
		PlanWorld:     1,
	}
}

// Sentinel errors. Every error NewPlan and Assign return wraps one of them.
var (
	// ErrConfig marks an invalid Config field or argument; the error is a
	// *ConfigError naming the field.
	ErrConfig = errors.New("bucket: invalid config")
	// ErrTokenBudget marks a row whose padded length alone exceeds the
	// token budget.
	ErrTokenBudget = errors.New("bucket: token budget too small")
	// ErrTooLarge marks a dataset or plan beyond the package's int32 limits.
	ErrTooLarge = errors.New("bucket: too large")
)

// ConfigError is an invalid field: its message reads
// "bucket: batch_size: must be > 0". It matches [ErrConfig] under errors.Is.
type ConfigError struct {
	Field string // snake_case name, as in the wire protocol
	Msg   string
}

func (e *ConfigError) Error() string { return "bucket: " + e.Field + ": " + e.Msg }

// Is reports whether target is ErrConfig.
func (e *ConfigError) Is(target error) bool { return target == ErrConfig }

func cfgErr(field, format string, args ...any) error {
	return &ConfigError{Field: field, Msg: fmt.Sprintf(format, args...)}
}

// normalize checks every field and returns the config with defaults applied.
func (c Config) normalize() (Config, error) {
	switch c.Policy {
	case "":
		c.Policy = Bucketed
	case Bucketed, Tokens, Packed:
	default:
		return c, cfgErr("policy", "unknown policy %q (want bucketed, tokens or packed)", string(c.Policy))
	}
	switch c.Planner {
	case "":
		c.Planner = PlannerAuto
	case PlannerAuto, PlannerExact, PlannerLazy:
	default:
		return c, cfgErr("planner", "unknown planner %q (want auto, exact or lazy)", string(c.Planner))
	}
	switch c.Remainder {
	case "":
		c.Remainder = Drop
	case Drop, Wrap, Keep:
	default:
		return c, cfgErr("remainder", "unknown remainder %q (want drop, wrap or keep)", string(c.Remainder))
	}
	type bound struct {
		name string
		v    *int
	}
	for _, f := range []bound{
		{"batch_size", &c.BatchSize}, {"token_budget", &c.TokenBudget}, {"seq_len", &c.SeqLen},
		{"max_length", &c.MaxLength}, {"pad_multiple", &c.PadMultiple}, {"auto_buckets", &c.AutoBuckets},
		{"mega_batch_mult", &c.MegaBatchMult}, {"plan_world", &c.PlanWorld}, {"shuffle_window", &c.ShuffleWindow},
	} {
		if *f.v < 0 {
			return c, cfgErr(f.name, "must be >= 0, got %d", *f.v)
		}
		if *f.v > math.MaxInt32 {
			return c, cfgErr(f.name, "must be <= %d, got %d", math.MaxInt32, *f.v)
		}
	}
	if c.PadMultiple == 0 {
		c.PadMultiple = DefaultPadMultiple
	}
	if c.MegaBatchMult == 0 {
		c.MegaBatchMult = DefaultMegaBatchMult
	}
	if c.PlanWorld == 0 {
		c.PlanWorld = 1
	}
	if c.PlanWorld > maxWorld {
		return c, cfgErr("plan_world", "must be <= %d, got %d", maxWorld, c.PlanWorld)
	}
	if c.AutoBuckets > MaxAutoBuckets {
		return c, cfgErr("auto_buckets", "must be <= %d, got %d", MaxAutoBuckets, c.AutoBuckets)
	}
	for i, b := range c.Boundaries {
		if b <= 0 {
			return c, cfgErr("boundaries", "boundary %d is %d, must be > 0", i, b)
		}
		if b > math.MaxInt32 {
			return c, cfgErr("boundaries", "boundary %d is %d, must be <= %d", i, b, math.MaxInt32)
		}
		if i > 0 && b <= c.Boundaries[i-1] {
			return c, cfgErr("boundaries", "must be strictly ascending, got %d after %d", b, c.Boundaries[i-1])
		}
	}
	if len(c.Boundaries) > 0 {
		c.Boundaries = append([]int(nil), c.Boundaries...)
	}
	if c.AutoBuckets > 0 && len(c.Boundaries) > 0 {
		return c, cfgErr("auto_buckets", "cannot be combined with boundaries")
	}

	if c.Policy != Tokens && c.TokenBudget != 0 {
		return c, cfgErr("token_budget", "only used by the tokens policy (policy is %s)", c.Policy)
	}
	if c.Policy != Packed {
		if c.SeqLen != 0 {
			return c, cfgErr("seq_len", "only used by the packed policy (policy is %s)", c.Policy)
		}
		if c.SplitDocs {
			return c, cfgErr("split_docs", "only used by the packed policy (policy is %s)", c.Policy)
		}
	}
	switch c.Policy {
	case Bucketed:
		if c.BatchSize == 0 {
			return c, cfgErr("batch_size", "must be > 0")
		}
	case Tokens:
		if c.TokenBudget == 0 {
			return c, cfgErr("token_budget", "must be > 0")
		}
	case Packed:
		if c.BatchSize == 0 {
			return c, cfgErr("batch_size", "must be > 0")
		}
		if c.SeqLen == 0 {
			return c, cfgErr("seq_len", "must be > 0")
		}
		if c.Sequential {
			return c, cfgErr("sequential", "not supported by the packed policy (first-fit-decreasing reorders rows); use bucketed or tokens for a pass in dataset order")
		}
		if len(c.Boundaries) > 0 {
			return c, cfgErr("boundaries", "not used by the packed policy (rows are seq_len long)")
		}
		if c.AutoBuckets > 0 {
			return c, cfgErr("auto_buckets", "not used by the packed policy (rows are seq_len long)")
		}
	}
	if c.Sequential && c.ShuffleWindow > 0 {
		return c, cfgErr("shuffle_window", "cannot be combined with sequential (a sequential pass reads the dataset in order already)")
	}
	return c, nil
}
