package dataset

// Row lengths read per block from the memory-mapped gload.index: IndexLengths checks a block's lengths against
// the block table (crc32c and summary) the first time any of its rows is read, so opening a dataset reads no
// length and a corrupt block is reported, naming the index file and the block, instead of being planned from.

import (
	"fmt"
	"sync/atomic"
)

// Per-block states of IndexLengths.
const (
	blockUnchecked = iota
	blockGood
	blockBad
)

// IndexLengths gives the token length of every row of an open dataset by row number (it implements
// bucket.Lengths: Len() int64, Length(i int64) uint32). Lengths are read from the memory-mapped index; the
// first read of a row of a block checks the whole block against its entry in the block table (its crc32c and
// summary; once per block, whoever reads it first). It is safe for concurrent use, and valid until the
// Dataset is closed.
//
// A block that fails its check is not served: Length returns 0 for every row of it, and Err returns an error
// wrapping ErrBadIndex that names the index file and the first such block. A caller that plans from these
// lengths must check Err after it has read them (after each batch it assembles, or after a whole plan) and
// fail with that error; `gload index --rebuild DIR` rewrites the index from the shards.
type IndexLengths struct {
	lengths []uint32
	tab     blockTable
	state   []atomic.Uint32 // per block: blockUnchecked, blockGood or blockBad
	path    string          // the index file, for errors
	fix     string          // what to do about a corrupt block, for errors
	err     atomic.Pointer[error]
	tokens  int64
	maxLen  uint32
}

// newIndexLengths serves lengths with tab as their block table; checked says that the lengths were already
// checked (an index read in full, or built from the shards).
func newIndexLengths(path string, lengths []uint32, tab blockTable, checked bool) *IndexLengths {
	s := &IndexLengths{lengths: lengths, tab: tab, path: path, state: make([]atomic.Uint32, tab.len()),
		fix: "`gload index --rebuild DIR` rewrites it from the shards"}
	for b := range tab.len() {
		if checked {
			s.state[b].Store(blockGood)
		}
		bs := tab.at(b)
		s.tokens += bs.Tokens
		s.maxLen = max(s.maxLen, bs.MaxLength)
	}
	return s
}

// Len returns the number of rows.
func (s *IndexLengths) Len() int64 { return int64(len(s.lengths)) }

// Length returns the token count of row i, or 0 when row i's block fails its check (Err then says so). It
// panics if i is out of range, like a slice index.
func (s *IndexLengths) Length(i int64) uint32 {
	b := i >> blockBits
	st := s.state[b].Load()
	if st == blockUnchecked {
		st = s.check(b)
	}
	if st == blockBad {
		_ = s.lengths[i] // the range check
		return 0
	}
	return s.lengths[i]
}

// check checks block b, records the result and returns it.
func (s *IndexLengths) check(b int64) uint32 {
	want := s.tab.at(b)
	got := summarize(s.lengths[b<<blockBits : b<<blockBits+want.Rows])
	if got == want {
		s.state[b].Store(blockGood)
		return blockGood
	}
	err := fmt.Errorf("index %s: %w: block %d (rows %d to %d): lengths have crc32c %08x and %d tokens, the block table says %08x and %d: "+
		"the index is corrupt; %s",
		s.path, ErrBadIndex, b, b<<blockBits, b<<blockBits+want.Rows, got.CRC, got.Tokens, want.CRC, want.Tokens, s.fix)
	s.err.CompareAndSwap(nil, &err)
	s.state[b].Store(blockBad)
	return blockBad
}

// CheckAll checks every block not checked yet (reading all the lengths once) and returns Err.
func (s *IndexLengths) CheckAll() error {
	for b := range s.state {
		if s.state[b].Load() == blockUnchecked {
			s.check(int64(b))
		}
	}
	return s.Err()
}

// View returns every length as one slice, a view of the mapped index (valid until the dataset is closed), after
// checking every block not checked yet: rows of a block that failed keep their corrupt values here (Length reads
// them as 0), so a caller of View must look at Err before using what it planned (bucket.Viewer: exact plans read it
// instead of copying the lengths).
func (s *IndexLengths) View() []uint32 {
	_ = s.CheckAll()
	return s.lengths
}

// LongestRow returns the first row of the greatest length (bucket.LongestRower), from the block table and one
// block's lengths; −1 for an empty dataset.
func (s *IndexLengths) LongestRow() int64 {
	n := s.tab.len()
	for b := range n {
		sum := s.tab.at(b)
		if sum.MaxLength != s.maxLen {
			continue
		}
		for i := b << blockBits; i < b<<blockBits+sum.Rows; i++ {
			if s.Length(i) == s.maxLen {
				return i
			}
		}
	}
	return -1
}

// Err returns the error of the first block found corrupt, or nil.
func (s *IndexLengths) Err() error {
	if p := s.err.Load(); p != nil {
		return *p
	}
	return nil
}

// NumBlocks is the number of blocks of BlockRows rows (the last may be shorter).
func (s *IndexLengths) NumBlocks() int64 { return s.tab.len() }

// Block returns block b's summary from the block table (no length is read).
func (s *IndexLengths) Block(b int64) BlockSummary { return s.tab.at(b) }

// Tokens returns the sum of every row's length, from the block table.
func (s *IndexLengths) Tokens() int64 { return s.tokens }

// MaxLength returns the longest row's length, from the block table.
func (s *IndexLengths) MaxLength() uint32 { return s.maxLen }
