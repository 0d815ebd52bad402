package bucket

// Shuffle windows: plans that read a dataset a window of consecutive rows at a time, for datasets whose shards are
// fetched from object storage into a cache smaller than the dataset (the idea of Mosaic Streaming's shuffle
// blocks).
//
// With ShuffleWindow = W > 0 the rows are cut into blocks of W consecutive row indices (the last may be shorter).
// The block order is shuffled (stream 1), then the rows inside each block (stream 1, continuing, block after
// block in the new order). Bucketed and tokens plans cut mega-batches inside blocks and shuffle the batch order
// within each block only (stream 2, block after block); packed plans pack each block on its own and shuffle its
// packed rows within it (stream 3). So the epoch reads one block after another: every bucketed or tokens batch
// holds rows of one block (the warm-up prefix, one batch of every shape, is the exception and may come from any
// block), and a packed batch holds rows of at most two consecutive blocks (BatchSize packed rows are grouped
// across a block's end).
//
// Shuffle quality: a batch draws its rows from W consecutive rows of the dataset instead of the whole of it, so
// rows that are near each other in the dataset (one source, one document split in pieces) meet in batches more
// often than under a global shuffle. Choose W well above the batch size (many shards' worth when shards are small)
// and write datasets in shuffled order when their input is sorted.

// windowOrder returns the row order of a windowed plan and, for each block in that order, the position in the
// order where it ends.
func windowOrder(n, w int, r *rng) (perm []int32, ends []int) {
	nb := (n + w - 1) / w
	blocks := make([]int32, nb)
	for i := range blocks {
		blocks[i] = int32(i)
	}
	r.shuffle32(blocks)
	perm = make([]int32, 0, n)
	ends = make([]int, 0, nb)
	for _, b := range blocks {
		lo := int(b) * w
		hi := min(lo+w, n)
		start := len(perm)
		for i := lo; i < hi; i++ {
			perm = append(perm, int32(i))
		}
		r.shuffle32(perm[start:])
		ends = append(ends, len(perm))
	}
	return perm, ends
}

// rowOrder is step 1 of every policy: the global shuffle, the windowed order, or (Sequential) the dataset's
// order. ends holds one entry (n) when the plan is not windowed.
func (p *Plan) rowOrder(n int) (perm []int32, ends []int) {
	r := newRNG(streamKey(p.fingerprint, p.seed, p.epoch, streamRows))
	if w := p.cfg.ShuffleWindow; w > 0 && n > 0 {
		return windowOrder(n, w, r)
	}
	perm = make([]int32, n)
	for i := range perm {
		perm[i] = int32(i)
	}
	if !p.cfg.Sequential {
		r.shuffle32(perm)
	}
	return perm, []int{n}
}

// shuffleWithin shuffles a[lo:hi] for each consecutive range given by ends (a[0:ends[0]], a[ends[0]:ends[1]], …)
// with one generator, range after range.
func shuffleWithin(a []int32, ends []int, r *rng) {
	lo := 0
	for _, hi := range ends {
		r.shuffle32(a[lo:hi])
		lo = hi
	}
}
