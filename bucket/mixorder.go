package bucket

// This file holds the inner planning of a Mixture: the rows arrive in mixture
// order (every source interleaved at its share, see mixture.go) and must keep
// that order at the scale of a mega-batch, so that every run of batches holds
// its share of every source.

// buildMixGrouped plans bucketed and tokens batches over rows in mixture
// order:
//
//  1. the rows (slots) are cut into mega-batches as by buildGrouped, but
//     without a shuffle (the mixture order already is one);
//  2. inside a mega-batch the rows of each source are sorted by delivered
//     length descending (ties in slot order) and put back into that source's
//     slots, so the slot→source pattern, and with it every batch's source
//     counts, is unchanged while the j-th batch of the mega-batch gets the
//     j-th length quantile of every source;
//  3. batches are cut in slot order (bucketed: B rows; tokens: greedily, as
//     many rows as rows × L ≤ TokenBudget allows with L the padded longest
//     row so far, at most B rows when B > 0), and keep that order (no batch
//     shuffle, no warm-up reordering: HF LengthGroupedSampler's order).
func (p *Plan) buildMixGrouped(lengths []uint32) error {
	c := p.cfg
	n := len(lengths)
	p.lengths = lengths
	if c.Policy == Tokens {
		if err := p.checkBudget(lengths); err != nil {
			return err
		}
	}
	perm := make([]int32, n)
	for i := range perm {
		perm[i] = int32(i)
	}
	estBatches := 1
	if c.BatchSize > 0 {
		estBatches += n / c.BatchSize
	}
	p.boff = make([]int32, 0, estBatches+1)
	p.blen = make([]int, 0, estBatches)
	budget := int64(c.TokenBudget)
	megaTokens := int64(c.MegaBatchMult) * budget
	megaRows := int64(c.MegaBatchMult) * int64(c.BatchSize)

	sources := 0
	for _, s := range p.mixSrc {
		sources = max(sources, int(s)+1)
	}
	count := make([]int, sources+1)
	var pos []int32 // slots of the mega-batch grouped by source
	var keys, tk []uint32
	var rows, tr []int32
	for start := 0; start < n; {
		end := 0
		if c.Policy == Bucketed {
			end = start + int(min(megaRows, int64(n-start)))
		} else {
			sum := p.pd.pad(p.pd.eff(lengths[start]))
			end = start + 1
			for end < n {
				v := p.pd.pad(p.pd.eff(lengths[end]))
				if sum+v > megaTokens {
					break
				}
				sum += v
				end++
			}
		}
		m := end - start
		if cap(pos) < m {
			pos, keys, tk, rows, tr = make([]int32, m), make([]uint32, m), make([]uint32, m), make([]int32, m), make([]int32, m)
		}
		pos, keys, tk, rows, tr = pos[:m], keys[:m], tk[:m], rows[:m], tr[:m]
		clear(count)
		for i := start; i < end; i++ {
			count[p.mixSrc[i]+1]++
		}
		for s := 1; s <= sources; s++ {
			count[s] += count[s-1]
		}
		for i := start; i < end; i++ {
			s := p.mixSrc[i]
			at := count[s]
			count[s]++
			pos[at] = int32(i)
			rows[at] = perm[i]
			keys[at] = uint32(p.pd.eff(lengths[perm[i]]))
		}
		lo := 0
		for s := 0; s < sources; s++ {
			hi := count[s]
			sortDesc(keys[lo:hi], rows[lo:hi], tk, tr)
			lo = hi
		}
		for k, at := range pos {
			perm[at] = rows[k]
		}
		for s := start; s < end; {
			var l int64
			cnt := 0
			if c.Policy == Bucketed {
				cnt = min(c.BatchSize, end-s)
				for _, r := range perm[s : s+cnt] {
					l = max(l, p.pd.pad(p.pd.eff(lengths[r])))
				}
			} else {
				for s+cnt < end && (c.BatchSize == 0 || cnt < c.BatchSize) {
					nl := max(l, p.pd.pad(p.pd.eff(lengths[perm[s+cnt]])))
					if int64(cnt+1)*nl > budget {
						break
					}
					l = nl
					cnt++
				}
			}
			p.boff = append(p.boff, int32(s))
			p.blen = append(p.blen, int(l))
			p.stats.PaddedTokens += int64(cnt) * l
			s += cnt
		}
		start = end
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
	p.warmup() // shapes only: mixtures have no warm-up prefix
	return nil
}

// packWindows cuts rows in mixture order into the runs buildPacked packs on
// their own: consecutive rows whose delivered tokens first reach
// MegaBatchMult × BatchSize × SeqLen. It returns the run boundaries,
// starting with 0 and ending with len(lengths).
func (p *Plan) packWindows(lengths []uint32, s int64) []int {
	c := p.cfg
	limit := int64(c.MegaBatchMult) * int64(c.BatchSize) * s
	out := []int{0}
	var sum int64
	for i, l := range lengths {
		e := p.pd.eff(l)
		if !c.SplitDocs {
			e = min(e, s)
		}
		sum += e
		if sum >= limit {
			out = append(out, i+1)
			sum = 0
		}
	}
	if out[len(out)-1] != len(lengths) || len(out) == 1 {
		out = append(out, len(lengths))
	}
	return out
}

// buildMixSingle plans bucketed and tokens batches that each hold rows of
// one source (MixConfig.SingleSourceBatches):
//
//  1. each source's slots, in slot order, are cut into mega-batches of its
//     own (bucketed: M×B rows; tokens: as in buildGrouped), sorted by
//     delivered length descending (ties in slot order) and cut into batches
//     as buildGrouped does (only a source's last batch of the epoch may be
//     short);
//  2. the sources' batches are interleaved by smooth weighted round-robin
//     over their batch counts, each source's batches in their order, so any
//     run of W batches holds each source's share of batches to within two.
func (p *Plan) buildMixSingle(lengths []uint32) error {
	c := p.cfg
	n := len(lengths)
	p.lengths = lengths
	if c.Policy == Tokens {
		if err := p.checkBudget(lengths); err != nil {
			return err
		}
	}
	sources := 0
	for _, s := range p.mixSrc {
		sources = max(sources, int(s)+1)
	}
	slots := make([][]int32, sources)
	for i, s := range p.mixSrc {
		slots[s] = append(slots[s], int32(i))
	}
	type batch struct{ lo, hi, l int }
	var rows []int32 // rows of every source's batches, source after source
	per := make([][]batch, sources)
	budget := int64(c.TokenBudget)
	megaTokens := int64(c.MegaBatchMult) * budget
	megaRows := int64(c.MegaBatchMult) * int64(c.BatchSize)
	var keys, tk []uint32
	var tr []int32
	for s, list := range slots {
		for start := 0; start < len(list); {
			end := 0
			if c.Policy == Bucketed {
				end = start + int(min(megaRows, int64(len(list)-start)))
			} else {
				sum := p.pd.pad(p.pd.eff(lengths[list[start]]))
				end = start + 1
				for end < len(list) {
					v := p.pd.pad(p.pd.eff(lengths[list[end]]))
					if sum+v > megaTokens {
						break
					}
					sum += v
					end++
				}
			}
			mega := list[start:end]
			m := len(mega)
			if cap(keys) < m {
				keys, tk, tr = make([]uint32, m), make([]uint32, m), make([]int32, m)
			}
			keys = keys[:m]
			for k, r := range mega {
				keys[k] = uint32(p.pd.eff(lengths[r]))
			}
			sortDesc(keys, mega, tk, tr)
			for at := 0; at < m; {
				l := p.pd.pad(int64(keys[at]))
				cnt := c.BatchSize
				if c.Policy == Tokens {
					cnt = int(budget / l)
					if c.BatchSize > 0 {
						cnt = min(cnt, c.BatchSize)
					}
				}
				cnt = min(cnt, m-at)
				lo := len(rows)
				rows = append(rows, mega[at:at+cnt]...)
				per[s] = append(per[s], batch{lo, len(rows), int(l)})
				p.stats.PaddedTokens += int64(cnt) * l
				at += cnt
			}
			start = end
		}
	}
	total := 0
	for _, b := range per {
		total += len(b)
	}
	credit := make([]int64, sources)
	next := make([]int, sources)
	p.rows = make([]int32, 0, n)
	p.boff = make([]int32, 0, total+1)
	p.blen = make([]int, 0, total)
	for range total {
		best := -1
		for s := range per {
			if len(per[s]) == 0 {
				continue
			}
			credit[s] += int64(len(per[s]))
			if best < 0 || credit[s] > credit[best] {
				best = s
			}
		}
		credit[best] -= int64(total)
		b := per[best][next[best]]
		next[best]++
		p.boff = append(p.boff, int32(len(p.rows)))
		p.blen = append(p.blen, b.l)
		p.rows = append(p.rows, rows[b.lo:b.hi]...)
	}
	p.boff = append(p.boff, int32(len(p.rows)))
	p.nbatch = total
	for _, l := range lengths {
		p.stats.RealTokens += p.pd.eff(l)
	}
	p.seq = make([]int32, p.nbatch)
	for i := range p.seq {
		p.seq[i] = int32(i)
	}
	p.warmup()
	return nil
}
