package bucket

import (
	"encoding/binary"
	"errors"
	"testing"
)

// configFromBytes derives a small config, lengths and an assignment from
// fuzz input. Some field values are invalid on purpose.
func configFromBytes(data []byte) (cfg Config, lengths []uint32, start, world, workers int) {
	at := 0
	next := func() int {
		if at >= len(data) {
			return 0
		}
		at++
		return int(data[at-1])
	}
	cfg.Policy = []Policy{Bucketed, Tokens, Packed, "", "bogus"}[next()%5]
	cfg.BatchSize = next()%10 - 1
	cfg.TokenBudget = next() * 16
	cfg.SeqLen = next()*2 - 1
	cfg.MaxLength = next()*4 - 8
	cfg.PadMultiple = []int{0, 1, 8, 64, 100, -1}[next()%6]
	if nb := next() % 5; nb > 0 {
		b := 0
		for range nb {
			b += next() + 1
			cfg.Boundaries = append(cfg.Boundaries, b)
		}
		if next()%8 == 0 {
			cfg.Boundaries[0] = 0
		}
	}
	cfg.AutoBuckets = next()%6 - 1
	cfg.MegaBatchMult = next() % 6
	cfg.Remainder = []Remainder{"", Drop, Wrap, "x"}[next()%4]
	flags := next()
	cfg.WarmupShapes = flags&1 != 0
	cfg.SplitDocs = flags&2 != 0
	cfg.PlanWorld = next() % 7
	world = next()%65 + 1
	workers = next() % 9
	start = next()
	// Field-specific values only where they belong most of the time, so that
	// valid configs are common.
	if flags&4 == 0 {
		switch cfg.Policy {
		case Tokens:
			cfg.SeqLen, cfg.SplitDocs = 0, false
		case Packed:
			cfg.TokenBudget, cfg.Boundaries, cfg.AutoBuckets = 0, nil, 0
		default:
			cfg.TokenBudget, cfg.SeqLen, cfg.SplitDocs = 0, 0, false
		}
	}
	if flags&8 == 0 && cfg.AutoBuckets > 0 {
		cfg.Boundaries = nil
	}
	for at+2 <= len(data) {
		lengths = append(lengths, uint32(binary.LittleEndian.Uint16(data[at:]))%1500)
		at += 2
	}
	return cfg, lengths, start, world, workers
}

func FuzzNewPlan(f *testing.F) {
	f.Add([]byte{0, 4, 0, 0, 0, 3, 0, 0, 2, 1, 1, 2, 5, 2, 1, 10, 0, 200, 1, 44, 0})
	f.Add([]byte{1, 0, 64, 0, 100, 2, 1, 0, 0, 3, 2, 5, 1, 9, 3, 0, 1, 2, 3, 4, 5, 6, 7, 8, 9})
	f.Add([]byte{2, 3, 0, 40, 0, 0, 0, 0, 0, 2, 3, 2, 64, 8, 0, 255, 255, 1, 0, 0, 0, 17, 3})
	f.Add([]byte{2, 9, 0, 100, 50, 1, 0, 0, 0, 2, 0, 0, 7, 3, 5, 100, 5, 80, 6, 70})
	f.Fuzz(func(t *testing.T, data []byte) {
		cfg, lengths, start, world, workers := configFromBytes(data)
		p, err := NewPlan(lengths, "fuzz", uint64(len(data)), 0, cfg)
		if err != nil {
			if !errors.Is(err, ErrConfig) && !errors.Is(err, ErrTokenBudget) {
				t.Fatalf("unexpected error kind: %v", err)
			}
			return
		}
		batches := checkPlan(t, p, lengths)
		checkAssign(t, p, batches, lengths, min(start, p.Len()+3), world, workers)
	})
}

// TestRandomConfigs runs the fuzz body over deterministic pseudo-random
// inputs, so plain `go test` covers many random configurations.
func TestRandomConfigs(t *testing.T) {
	r := newRNG(77)
	valid := 0
	for i := range 1500 {
		data := make([]byte, 20+r.below(400))
		for j := range data {
			data[j] = byte(r.next())
		}
		cfg, lengths, start, world, workers := configFromBytes(data)
		p, err := NewPlan(lengths, "random", uint64(i), i%3, cfg)
		if err != nil {
			if !errors.Is(err, ErrConfig) && !errors.Is(err, ErrTokenBudget) {
				t.Fatalf("input %d: unexpected error kind: %v", i, err)
			}
			continue
		}
		valid++
		batches := checkPlan(t, p, lengths)
		checkAssign(t, p, batches, lengths, min(start, p.Len()+3), world, workers)
	}
	if valid < 150 {
		t.Fatalf("only %d of 1500 random configs were valid", valid)
	}
	t.Logf("%d of 1500 random configs valid", valid)
}
