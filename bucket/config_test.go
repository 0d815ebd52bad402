package bucket

import (
	"errors"
	"math"
	"testing"
)

func TestConfigValidation(t *testing.T) {
	ok := func(c Config) Config { return c }
	for _, tc := range []struct {
		name  string
		cfg   Config
		epoch int
		want  string // "" for valid
	}{
		{"bucketed", ok(Config{BatchSize: 4}), 0, ""},
		{"default-config", func() Config { c := DefaultConfig(); c.BatchSize = 1; return c }(), 0, ""},
		{"batch-size-missing", Config{}, 0, "bucket: batch_size: must be > 0"},
		{"batch-size-negative", Config{BatchSize: -1}, 0, "bucket: batch_size: must be >= 0, got -1"},
		{"batch-size-huge", Config{BatchSize: math.MaxInt32 + 1}, 0, "bucket: batch_size: must be <= 2147483647, got 2147483648"},
		{"policy-unknown", Config{Policy: "greedy", BatchSize: 1}, 0, `bucket: policy: unknown policy "greedy" (want bucketed, tokens or packed)`},
		{"remainder-unknown", Config{BatchSize: 1, Remainder: "pad"}, 0, `bucket: remainder: unknown remainder "pad" (want drop, wrap or keep)`},
		{"keep-sequential", Config{BatchSize: 2, Remainder: Keep, Sequential: true}, 0, ""},
		{"sequential-packed", Config{Policy: Packed, BatchSize: 1, SeqLen: 8, Sequential: true}, 0, "bucket: sequential: not supported by the packed policy (first-fit-decreasing reorders rows); use bucketed or tokens for a pass in dataset order"},
		{"token-budget-missing", Config{Policy: Tokens}, 0, "bucket: token_budget: must be > 0"},
		{"token-budget-misplaced", Config{BatchSize: 1, TokenBudget: 10}, 0, "bucket: token_budget: only used by the tokens policy (policy is bucketed)"},
		{"tokens-batch-cap", Config{Policy: Tokens, TokenBudget: 100, BatchSize: 3}, 0, ""},
		{"seq-len-missing", Config{Policy: Packed, BatchSize: 1}, 0, "bucket: seq_len: must be > 0"},
		{"packed-batch-missing", Config{Policy: Packed, SeqLen: 8}, 0, "bucket: batch_size: must be > 0"},
		{"seq-len-misplaced", Config{BatchSize: 1, SeqLen: 8}, 0, "bucket: seq_len: only used by the packed policy (policy is bucketed)"},
		{"split-misplaced", Config{Policy: Tokens, TokenBudget: 8, SplitDocs: true}, 0, "bucket: split_docs: only used by the packed policy (policy is tokens)"},
		{"max-length-negative", Config{BatchSize: 1, MaxLength: -5}, 0, "bucket: max_length: must be >= 0, got -5"},
		{"pad-multiple-negative", Config{BatchSize: 1, PadMultiple: -64}, 0, "bucket: pad_multiple: must be >= 0, got -64"},
		{"bounds-zero", Config{BatchSize: 1, Boundaries: []int{0, 8}}, 0, "bucket: boundaries: boundary 0 is 0, must be > 0"},
		{"bounds-unsorted", Config{BatchSize: 1, Boundaries: []int{8, 8}}, 0, "bucket: boundaries: must be strictly ascending, got 8 after 8"},
		{"bounds-packed", Config{Policy: Packed, BatchSize: 1, SeqLen: 8, Boundaries: []int{8}}, 0, "bucket: boundaries: not used by the packed policy (rows are seq_len long)"},
		{"auto-negative", Config{BatchSize: 1, AutoBuckets: -1}, 0, "bucket: auto_buckets: must be >= 0, got -1"},
		{"auto-too-many", Config{BatchSize: 1, AutoBuckets: MaxAutoBuckets + 1}, 0, "bucket: auto_buckets: must be <= 256, got 257"},
		{"auto-and-bounds", Config{BatchSize: 1, AutoBuckets: 2, Boundaries: []int{8}}, 0, "bucket: auto_buckets: cannot be combined with boundaries"},
		{"auto-packed", Config{Policy: Packed, BatchSize: 1, SeqLen: 8, AutoBuckets: 2}, 0, "bucket: auto_buckets: not used by the packed policy (rows are seq_len long)"},
		{"mega-negative", Config{BatchSize: 1, MegaBatchMult: -1}, 0, "bucket: mega_batch_mult: must be >= 0, got -1"},
		{"plan-world-negative", Config{BatchSize: 1, PlanWorld: -2}, 0, "bucket: plan_world: must be >= 0, got -2"},
		{"plan-world-huge", Config{BatchSize: 1, PlanWorld: 1 << 25}, 0, "bucket: plan_world: must be <= 16777216, got 33554432"},
		{"epoch-negative", Config{BatchSize: 1}, -1, "bucket: epoch: must be >= 0, got -1"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := NewPlan([]uint32{3, 1, 2}, "cfg", 0, tc.epoch, tc.cfg)
			if tc.want == "" {
				if err != nil {
					t.Fatalf("unexpected error %v", err)
				}
				return
			}
			if err == nil || err.Error() != tc.want {
				t.Fatalf("err = %v, want %q", err, tc.want)
			}
			var ce *ConfigError
			if !errors.Is(err, ErrConfig) || !errors.As(err, &ce) {
				t.Fatalf("err %v is not a *ConfigError matching ErrConfig", err)
			}
		})
	}
}

func TestConfigDefaults(t *testing.T) {
	p, err := NewPlan([]uint32{1}, "d", 0, 0, Config{BatchSize: 2})
	if err != nil {
		t.Fatal(err)
	}
	c := p.Config()
	if c.Policy != Bucketed || c.PadMultiple != 64 || c.MegaBatchMult != 50 || c.Remainder != Drop || c.PlanWorld != 1 || c.WarmupShapes {
		t.Fatalf("defaults not applied: %+v", c)
	}
	if d := DefaultConfig(); !d.WarmupShapes || d.PadMultiple != 64 || d.MegaBatchMult != 50 {
		t.Fatalf("DefaultConfig %+v", d)
	}
	// The plan keeps its own copy of the boundaries.
	b := []int{8, 16}
	p, err = NewPlan([]uint32{1}, "d", 0, 0, Config{BatchSize: 2, Boundaries: b})
	if err != nil {
		t.Fatal(err)
	}
	b[0] = 1000
	if got := p.Boundaries(); got[0] != 8 {
		t.Fatalf("plan boundaries follow the caller's slice: %v", got)
	}
}
