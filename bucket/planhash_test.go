package bucket

import "testing"

// TestPlanHash: the hash is a pure function of the plan's inputs and changes
// with any of them.
func TestPlanHash(t *testing.T) {
	lengths := make([]uint32, 3000)
	for i := range lengths {
		lengths[i] = uint32(1 + (i*7919)%500)
	}
	b := DefaultConfig()
	b.BatchSize = 8
	cfgs := map[string]Config{"bucketed": b, "packed": DefaultConfig()}
	c := cfgs["packed"]
	c.Policy, c.SeqLen, c.BatchSize = Packed, 1024, 4
	cfgs["packed"] = c
	for name, cfg := range cfgs {
		t.Run(name, func(t *testing.T) {
			mk := func(fp string, lens []uint32, seed uint64, epoch int, cfg Config) string {
				p, err := NewPlan(lens, fp, seed, epoch, cfg)
				if err != nil {
					t.Fatal(err)
				}
				h := p.Hash()
				if slow := HashBatches(p.Len(), p.Batch); slow != h {
					t.Fatalf("Plan.Hash %s, HashBatches over Batch %s", h, slow)
				}
				return h
			}
			base := mk("fp", lengths, 1, 0, cfg)
			if again := mk("fp", append([]uint32(nil), lengths...), 1, 0, cfg); again != base {
				t.Fatalf("same inputs, hashes %s and %s", base, again)
			}
			other := append([]uint32(nil), lengths...)
			other[5]++
			bigger := cfg
			bigger.BatchSize++
			for what, h := range map[string]string{
				"fingerprint": mk("fp2", lengths, 1, 0, cfg),
				"seed":        mk("fp", lengths, 2, 0, cfg),
				"epoch":       mk("fp", lengths, 1, 1, cfg),
				"lengths":     mk("fp", other, 1, 0, cfg),
				"batch_size":  mk("fp", lengths, 1, 0, bigger),
			} {
				if h == base {
					t.Errorf("hash ignores the %s", what)
				}
			}
		})
	}
}
