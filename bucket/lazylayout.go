package bucket

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"math"
	"slices"
	"sort"
	"sync"
)

// What every lazy block plan ([LazyPlan], [LazyPacked]) shares: the blocks of a dataset, their keyed permutation
// into windows, each window's row permutation, the prefix table of batches per window, the plan hash's layout and
// the cache of built windows.

// lazyLayout is one epoch's blocks and windows (see the package documentation, "Lazy plans") and the prefix table
// of batches per window.
type lazyLayout struct {
	n        int64 // rows
	nblocks  int64
	lastRows int64 // rows of block nblocks−1
	blocks   feistel
	keyRows  uint64
	winEnd   []int64 // global batches of windows 0 … w: winEnd[w]
	rem      Remainder
}

// newLazyLayout lays out n rows for (fingerprint, seed, epoch): streams 5 (blocks) and 6 (rows of each window);
// rem is the plan's remainder policy (for dealing).
func newLazyLayout(n int64, fingerprint string, seed uint64, epoch int, rem Remainder) (lazyLayout, error) {
	if n < 0 {
		return lazyLayout{}, fmt.Errorf("lazy plan: %d rows", n)
	}
	if n > MaxPlanRows {
		return lazyLayout{}, fmt.Errorf("plan %d rows: %w (at most %d rows)", n, ErrTooLarge, int64(MaxPlanRows))
	}
	l := lazyLayout{n: n, rem: rem}
	l.nblocks = (n + LazyBlockRows - 1) / LazyBlockRows
	l.lastRows = n - (l.nblocks-1)*LazyBlockRows
	l.blocks = newFeistel(uint64(l.nblocks), streamKey(fingerprint, seed, epoch, streamLazyBlocks))
	l.keyRows = streamKey(fingerprint, seed, epoch, streamLazyRows)
	return l, nil
}

// windows returns the number of windows.
func (l *lazyLayout) windows() int { return int((l.nblocks + LazyWindowBlocks - 1) / LazyWindowBlocks) }

// setCounts sets the prefix table from the batches of every window.
func (l *lazyLayout) setCounts(counts []int64) error {
	l.winEnd = make([]int64, len(counts))
	var sum int64
	for w, k := range counts {
		sum += k
		l.winEnd[w] = sum
	}
	if sum > math.MaxInt {
		return fmt.Errorf("lazy plan: %w: %d batches", ErrTooLarge, sum)
	}
	return nil
}

// Len returns the number of global batches.
func (l *lazyLayout) Len() int {
	if len(l.winEnd) == 0 {
		return 0
	}
	return int(l.winEnd[len(l.winEnd)-1])
}

// Assign deals the plan's batches exactly as [Plan.Assign] does.
func (l *lazyLayout) Assign(start, rank, world, worker, workers int) ([]int, error) {
	return assign(l.Len(), l.rem, start, rank, world, worker, workers)
}

// PerRank is [Plan.PerRank].
func (l *lazyLayout) PerRank(start, world int) int {
	return perRank(l.Len(), l.rem, start, world)
}

// Rows returns the dataset's rows.
func (l *lazyLayout) Rows() int64 { return l.n }

// Windows returns the number of windows.
func (l *lazyLayout) Windows() int { return len(l.winEnd) }

// WindowBatches returns the global batches [lo, hi) of window w.
func (l *lazyLayout) WindowBatches(w int) (lo, hi int) {
	if w > 0 {
		lo = int(l.winEnd[w-1])
	}
	return lo, int(l.winEnd[w])
}

// WindowBlocks returns the blocks of window w (block b holds rows [b·LazyBlockRows, min((b+1)·LazyBlockRows, rows))).
func (l *lazyLayout) WindowBlocks(w int) []int64 {
	var blk [LazyWindowBlocks]int64
	k, _ := l.windowBlocks(int64(w), &blk)
	return append([]int64(nil), blk[:k]...)
}

// windowOf returns the window holding global batch g; it panics, like a slice index, for g outside [0, Len()).
func (l *lazyLayout) windowOf(g int) int {
	if g < 0 || g >= l.Len() {
		panic(fmt.Sprintf("bucket: batch index %d out of range [0:%d)", g, l.Len()))
	}
	return sort.Search(len(l.winEnd), func(i int) bool { return l.winEnd[i] > int64(g) })
}

// hash is a lazy plan's hash (see [LazyPlan.Hash]): 32 hex digits of SHA-256 over
//
//	alg 0x00 ‖ u64le(LazyBlockRows) ‖ u64le(LazyWindowBlocks) ‖ u64le(rows) ‖ u64le(len(fingerprint)) ‖
//	fingerprint ‖ u64le(seed) ‖ u64le(epoch) ‖ the policy (see appendPolicy) ‖ u64le(warm) ‖
//	u64le(windows) ‖ (with ends) u64le(global batches after window w) for every window
func (l *lazyLayout) hash(alg, fingerprint string, seed uint64, epoch int, cfg Config, warm uint64, ends bool) string {
	h := sha256.New()
	var b []byte
	u := func(v uint64) { b = binary.LittleEndian.AppendUint64(b, v) }
	b = append(b, alg...)
	b = append(b, 0)
	u(LazyBlockRows)
	u(LazyWindowBlocks)
	u(uint64(l.n))
	u(uint64(len(fingerprint)))
	b = append(b, fingerprint...)
	u(seed)
	u(uint64(epoch))
	b = cfg.appendPolicy(b)
	u(warm)
	u(uint64(l.windows()))
	if ends {
		for _, e := range l.winEnd {
			u(uint64(e))
			if len(b) > 60<<10 {
				h.Write(b)
				b = b[:0]
			}
		}
	}
	h.Write(b)
	return hex.EncodeToString(h.Sum(nil)[:16])
}

// windowBlocks writes the blocks of window w to blk — the permuted blocks w·LazyWindowBlocks … in permuted order,
// except that the dataset's last block, when it is shorter, goes last — and returns their count and rows.
func (p *lazyLayout) windowBlocks(w int64, blk *[LazyWindowBlocks]int64) (k int, rows int64) {
	lo := w * LazyWindowBlocks
	hi := min(lo+LazyWindowBlocks, p.nblocks)
	short := -1
	for i := lo; i < hi; i++ {
		b := int64(p.blocks.at(uint64(i)))
		blk[k] = b
		if b == p.nblocks-1 {
			short = k
			rows += p.lastRows
		} else {
			rows += LazyBlockRows
		}
		k++
	}
	if short >= 0 {
		blk[short], blk[k-1] = blk[k-1], blk[short]
	}
	return k, rows
}

// window is what building a batch of one window needs: its blocks and its row permutation.
type window struct {
	blk  [LazyWindowBlocks]int64
	rows int64
	perm feistel
}

func (p *lazyLayout) window(w int64) *window {
	win := &window{}
	_, win.rows = p.windowBlocks(w, &win.blk)
	win.perm = newFeistel(uint64(win.rows), splitmixAt(p.keyRows, uint64(w)+1))
	return win
}

// row returns the dataset row at shuffled position q of the window.
func (win *window) row(q int64) int64 {
	x := int64(win.perm.at(uint64(q)))
	return win.blk[x>>lazyBlockBits]<<lazyBlockBits | x&(LazyBlockRows-1)
}

// orSerial returns r, or for nil a Runner that runs f(0) … f(n−1) in turn.
func (r Runner) orSerial() Runner {
	if r != nil {
		return r
	}
	return func(n int, f func(int)) {
		for i := range n {
			f(i)
		}
	}
}

// winCache keeps the keep most recently built tables of a lazy plan's windows. A table being built is waited for,
// not built again, by other callers. It is safe for concurrent use.
type winCache[T any] struct {
	mu     sync.Mutex
	keep   int
	ents   []*winEntry[T] // newest last
	last   int64          // window of the last call that found no table
	streak int32          // such calls in a row for window last
}

type winEntry[T any] struct {
	w    int64
	done chan struct{} // closed when t is set or building it failed
	ok   bool          // t is set
	t    T
}

func newWinCache[T any](keep int) winCache[T] { return winCache[T]{keep: keep, last: -1} }

// put adds window w's table.
func (c *winCache[T]) put(w int64, t T) {
	e := &winEntry[T]{w: w, done: make(chan struct{}), ok: true, t: t}
	close(e.done)
	c.mu.Lock()
	c.add(e)
	c.mu.Unlock()
}

func (c *winCache[T]) add(e *winEntry[T]) {
	if len(c.ents) >= c.keep {
		c.ents = append(c.ents[:0], c.ents[1:]...)
	}
	c.ents = append(c.ents, e)
}

// get returns window w's table: a cached one (waiting while another caller builds it), else the one build
// returns when want(streak) — streak counting the calls in a row for window w that found no table, this one
// included — else the zero T and false. A build that panics leaves nothing in the cache (its waiters try again).
func (c *winCache[T]) get(w int64, want func(streak int32) bool, build func() T) (T, bool) {
	c.mu.Lock()
	for _, e := range c.ents {
		if e.w == w {
			c.mu.Unlock()
			<-e.done
			if !e.ok {
				return c.get(w, want, build)
			}
			return e.t, true
		}
	}
	if c.last == w {
		c.streak++
	} else {
		c.last, c.streak = w, 1
	}
	if !want(c.streak) {
		c.mu.Unlock()
		var zero T
		return zero, false
	}
	e := &winEntry[T]{w: w, done: make(chan struct{})}
	c.add(e)
	c.mu.Unlock()
	defer func() {
		if !e.ok {
			c.mu.Lock()
			c.ents = slices.DeleteFunc(c.ents, func(x *winEntry[T]) bool { return x == e })
			c.mu.Unlock()
		}
		close(e.done)
	}()
	e.t = build()
	e.ok = true
	return e.t, true
}
