package bucket

import (
	"fmt"
	"slices"
)

// buildGrouped plans the bucketed and tokens policies:
//
//  1. rows are shuffled (Fisher–Yates, stream 1);
//  2. the shuffled sequence is cut into mega-batches (bucketed: M×B rows;
//     tokens: the longest run whose padded lengths sum to ≤ M×TokenBudget,
//     at least one row);
//  3. each mega-batch is sorted by delivered length descending, ties in
//     shuffled order (a stable radix sort; any sort by this total order
//     gives the same result);
//  4. each mega-batch is cut into batches (bucketed: B rows, the last batch
//     of the epoch may be smaller; tokens: greedily, as many rows as
//     rows × L ≤ TokenBudget allows, L fixed by the batch's first, longest
//     row, at most B rows when B > 0);
//  5. the batch order is shuffled (Fisher–Yates, stream 2);
//  6. the warm-up prefix is moved to the front (see warmup).
//
// Sequential plans skip steps 1, 3, 5 and 6 and take the whole dataset as one
// mega-batch: batches are consecutive runs of rows in dataset order.
func (p *Plan) buildGrouped(lengths []uint32) error {
	c := p.cfg
	n := len(lengths)
	p.lengths = lengths
	if c.Policy == Tokens {
		if err := p.checkBudget(lengths); err != nil {
			return err
		}
	}
	perm, blockEnds := p.rowOrder(n)
	batchEnds := make([]int, 0, len(blockEnds)) // internal batch index where each block's batches end
	block := 0

	estBatches := 1
	if c.BatchSize > 0 {
		estBatches += n / c.BatchSize
	}
	p.boff = make([]int32, 0, estBatches+1)
	p.blen = make([]int, 0, estBatches)
	var effs, tk []uint32
	var tr []int32
	budget := int64(c.TokenBudget)
	megaTokens := int64(c.MegaBatchMult) * budget
	megaRows := int64(c.MegaBatchMult) * int64(c.BatchSize)
	for start := 0; start < n; {
		for start >= blockEnds[block] {
			block++
		}
		limit := blockEnds[block] // a mega-batch never crosses a shuffle-window block
		end := 0
		if c.Sequential {
			end = n
		} else if c.Policy == Bucketed {
			end = start + int(min(megaRows, int64(limit-start)))
		} else {
			sum := p.pd.pad(p.pd.eff(lengths[perm[start]]))
			end = start + 1
			for end < limit {
				v := p.pd.pad(p.pd.eff(lengths[perm[end]]))
				if sum+v > megaTokens {
					break
				}
				sum += v
				end++
			}
		}
		mega := perm[start:end]
		m := len(mega)
		if cap(effs) < m {
			effs, tk, tr = make([]uint32, m), make([]uint32, m), make([]int32, m)
		}
		effs = effs[:m]
		for k, r := range mega {
			effs[k] = uint32(p.pd.eff(lengths[r]))
		}
		if !c.Sequential {
			sortDesc(effs, mega, tk, tr)
		}
		for s := 0; s < m; {
			cnt, l := p.cut(effs[s:], budget)
			p.boff = append(p.boff, int32(start+s))
			p.blen = append(p.blen, int(l))
			p.stats.PaddedTokens += int64(cnt) * l
			s += cnt
		}
		start = end
		if end == limit {
			batchEnds = append(batchEnds, len(p.blen))
		}
	}
	p.boff = append(p.boff, int32(n))
	p.rows = perm
	p.nbatch = len(p.blen)
	for _, l := range lengths {
		p.stats.RealTokens += p.pd.eff(l)
	}

	p.seq = make([]int32, p.nbatch)
	for i := range p.seq {
		p.seq[i] = int32(i)
	}
	if !c.Sequential {
		// Without a shuffle window batchEnds is [nbatch]: one global shuffle, as before windows existed.
		shuffleWithin(p.seq, batchEnds, newRNG(streamKey(p.fingerprint, p.seed, p.epoch, streamBatches)))
	}
	p.warmup()
	return nil
}

// cut returns the row count and padded length of the batch that starts with
// effs[0] (delivered lengths of the rows left in the mega-batch, in order).
// Sorted mega-batches have their longest row first, which fixes L; in a
// sequential plan L grows with the rows taken, and a tokens batch ends before
// the row that would take rows × L over the budget.
func (p *Plan) cut(effs []uint32, budget int64) (int, int64) {
	c := p.cfg
	l := p.pd.pad(int64(effs[0]))
	if !c.Sequential {
		cnt := c.BatchSize
		if c.Policy == Tokens {
			cnt = int(budget / l)
			if c.BatchSize > 0 {
				cnt = min(cnt, c.BatchSize)
			}
		}
		return min(cnt, len(effs)), l
	}
	if c.Policy == Bucketed {
		cnt := min(c.BatchSize, len(effs))
		for _, e := range effs[:cnt] {
			l = max(l, p.pd.pad(int64(e)))
		}
		return cnt, l
	}
	cnt := 1
	for cnt < len(effs) && (c.BatchSize == 0 || cnt < c.BatchSize) {
		nl := max(l, p.pd.pad(int64(effs[cnt])))
		if int64(cnt+1)*nl > budget {
			break
		}
		cnt, l = cnt+1, nl
	}
	return cnt, l
}

// checkBudget fails on the lowest-indexed row whose padded length alone
// exceeds the token budget.
func (p *Plan) checkBudget(lengths []uint32) error {
	budget := int64(p.cfg.TokenBudget)
	var longest int64
	for _, l := range lengths {
		longest = max(longest, p.pd.eff(l))
	}
	if p.pd.pad(longest) <= budget {
		return nil
	}
	for i, l := range lengths {
		if v := p.pd.pad(p.pd.eff(l)); v > budget {
			return fmt.Errorf("%w: token_budget %d is smaller than row %d (length %d, padded %d)",
				ErrTokenBudget, budget, i, l, v)
		}
	}
	return nil
}

// warmup computes the epoch's shapes and, with WarmupShapes, reorders seq:
// for each shape in warm-up order (Length descending, then Rows descending)
// that has at least PlanWorld batches, the first PlanWorld of them in
// shuffled order move to the front, shape after shape, so global batches
// i·PlanWorld … (i+1)·PlanWorld−1 all have the i-th such shape. Every other
// batch keeps its shuffled relative order.
func (p *Plan) warmup() {
	ids := make(map[Shape]int32)
	shapeOf := make([]int32, p.nbatch) // internal batch → shape id (first-seen order)
	var shapes []Shape
	var counts []int
	for b := 0; b < p.nbatch; b++ {
		s := Shape{Rows: int(p.boff[b+1] - p.boff[b]), Length: p.blen[b]}
		id, ok := ids[s]
		if !ok {
			id = int32(len(shapes))
			ids[s] = id
			shapes = append(shapes, s)
			counts = append(counts, 0)
		}
		shapeOf[b] = id
		counts[id]++
	}
	p.shapes = slices.Clone(shapes)
	sortShapes(p.shapes)
	if !p.cfg.WarmupShapes || p.cfg.Sequential || p.nbatch == 0 {
		return
	}
	w := p.cfg.PlanWorld
	picked := make([][]int32, len(shapes))
	moved := 0
	for _, b := range p.seq {
		id := shapeOf[b]
		if counts[id] >= w && len(picked[id]) < w {
			picked[id] = append(picked[id], b)
			moved++
		}
	}
	if moved == 0 {
		return
	}
	out := make([]int32, 0, p.nbatch)
	for _, s := range p.shapes {
		out = append(out, picked[ids[s]]...)
	}
	for _, b := range p.seq {
		id := shapeOf[b]
		if counts[id] >= w && len(picked[id]) > 0 && picked[id][0] == b {
			picked[id] = picked[id][1:]
			continue
		}
		out = append(out, b)
	}
	p.seq = out
}
