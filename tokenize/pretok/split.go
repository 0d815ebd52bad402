package pretok

// behavior is Hugging Face's SplitDelimiterBehavior: what happens to the matches of a split pattern.
type behavior uint8

const (
	removed            behavior = iota // matches dropped
	isolated                           // matches are words of their own
	mergedWithPrevious                 // a match joins the piece before it
	mergedWithNext                     // a match joins the piece after it
	contiguous                         // consecutive matches (and consecutive non-matches) join
)

// behaviorNames are the JSON spellings (serde variant names).
var behaviorNames = map[string]behavior{
	"Removed":            removed,
	"Isolated":           isolated,
	"MergedWithPrevious": mergedWithPrevious,
	"MergedWithNext":     mergedWithNext,
	"Contiguous":         contiguous,
}

// sink turns the pieces of one string — its matches and the gaps between them, in order, covering it — into
// words, as NormalizedString::split does: the behavior groups the pieces, then empty groups are dropped.
// Matches may be empty; gaps never are.
type sink struct {
	s    string
	beh  behavior
	inv  bool // invert: matches and gaps swap roles
	dst  []string
	n0   int // len(dst) on entry
	at0  bool
	open bool // a group [ps, pe) is pending (merging behaviors)
	ps   int
	pe   int
	// prev is the match flag of the last piece; pendMatch says the pending group is a lone match
	// (mergedWithNext).
	prev      bool
	pendMatch bool
	err       error // a general regex exceeded its match bound; the rest of s was passed on unmatched
}

func newSink(s string, beh behavior, inv bool, dst []string) sink {
	return sink{s: s, beh: beh, inv: inv, dst: dst, n0: len(dst)}
}

func (k *sink) emit(start, end int) {
	if end <= start {
		return
	}
	if len(k.dst) == k.n0 {
		k.at0 = start == 0
	}
	k.dst = append(k.dst, k.s[start:end])
}

// piece feeds [start, end) of s; match says whether the pattern matched it (before inversion).
func (k *sink) piece(start, end int, match bool) {
	if k.inv {
		match = !match
	}
	switch k.beh {
	case isolated:
		k.emit(start, end)
	case removed:
		if !match {
			k.emit(start, end)
		}
	case contiguous:
		if k.open && match == k.prev {
			k.pe = end
		} else {
			k.flush()
			k.ps, k.pe, k.open = start, end, true
		}
		k.prev = match
	case mergedWithPrevious:
		if k.open && match && !k.prev {
			k.pe = end
		} else {
			k.flush()
			k.ps, k.pe, k.open = start, end, true
		}
		k.prev = match
	case mergedWithNext:
		if k.open && k.pendMatch && !match {
			k.pe = end
			k.pendMatch = false
		} else {
			k.flush()
			k.ps, k.pe, k.open = start, end, true
			k.pendMatch = match
		}
	}
}

func (k *sink) flush() {
	if k.open {
		k.emit(k.ps, k.pe)
		k.open = false
	}
}

// done flushes the last group and returns dst and whether the first word it appended starts at offset 0 of s.
func (k *sink) done() ([]string, bool) {
	k.flush()
	return k.dst, len(k.dst) > k.n0 && k.at0
}

// result is done for splitAt, with the matcher's error.
func (k *sink) result() ([]string, bool, error) {
	out, first := k.done()
	return out, first, k.err
}
