package normalize

import (
	"slices"
	"sync"
)

//go:generate sh -c "../../.venv/bin/python gen/gen_tables.py > tables_gen.go && gofmt -w tables_gen.go"
//go:generate sh -c "go run gen/gen_graphemes.go > graphemes_gen.go && gofmt -w graphemes_gen.go"

// Types of the generated tables (tables_gen.go).
type (
	runeRange  struct{ lo, hi rune }
	runeString struct {
		r rune
		s string
	}
	cccRange struct {
		lo, hi rune
		ccc    uint8
	}
	composePair struct{ a, b, r rune }
)

// Property flags of one code point.
const (
	fCanon     uint16 = 1 << iota // canon holds the canonical decomposition
	fCompat                       // compat holds a compatibility decomposition that differs from canon
	fSecond                       // second element of a canonical composition pair
	fLower                        // lower holds the lowercase mapping
	fCombining                    // removed by StripAccents
	fMn                           // removed by BertNormalizer's strip_accents
	fBertDrop                     // removed by BertNormalizer's clean_text
	fBertSpace                    // mapped to ' ' by BertNormalizer's clean_text
	fWhite                        // Rust char::is_whitespace
	fHangul                       // precomposed Hangul syllable (algorithmic decomposition)
	fQCD                          // NFD leaves it alone (with the ccc order check)
	fQCKD                         // NFKD leaves it alone
	fQCC                          // NFC leaves it alone
	fQCKC                         // NFKC leaves it alone
	fJoinPrev                     // can continue the grapheme cluster of the code point before it
	fJoinNext                     // can take the code point after it into its grapheme cluster
)

// runeProps is everything the normalizers need to know about one code point.
type runeProps struct {
	ccc    uint8
	flags  uint16
	canon  string // full canonical decomposition (fCanon)
	compat string // full compatibility decomposition (fCompat)
	lower  string // lowercase (fLower)
}

const (
	blockBits = 7
	blockSize = 1 << blockBits
	maxRune   = 0x110000

	hangulSBase  = 0xAC00
	hangulLBase  = 0x1100
	hangulVBase  = 0x1161
	hangulTBase  = 0x11A7
	hangulLCount = 19
	hangulVCount = 21
	hangulTCount = 28
	hangulNCount = hangulVCount * hangulTCount
	hangulSCount = hangulLCount * hangulNCount
)

// unicodeTables is a two-stage lookup from code point to runeProps, plus the composition pairs.
type unicodeTables struct {
	stage1  [maxRune >> blockBits]uint16
	stage2  []uint16
	props   []runeProps
	compose map[uint64]rune
}

// tables builds the lookup tables on first use (a few milliseconds), so that importing the package costs nothing.
var tables = sync.OnceValue(buildTables)

func (t *unicodeTables) get(r rune) *runeProps {
	if uint32(r) >= maxRune {
		return &t.props[0]
	}
	return &t.props[t.stage2[int(t.stage1[r>>blockBits])<<blockBits|int(r&(blockSize-1))]]
}

func (t *unicodeTables) ccc(r rune) uint8 {
	if r < 0x300 {
		return 0
	}
	return t.get(r).ccc
}

// composePair returns the primary composite of a followed by b.
func (t *unicodeTables) composeRunes(a, b rune) (rune, bool) {
	// Hangul: L+V -> LV, LV+T -> LVT.
	if a >= hangulLBase && a < hangulLBase+hangulLCount && b >= hangulVBase && b < hangulVBase+hangulVCount {
		return hangulSBase + ((a-hangulLBase)*hangulVCount+(b-hangulVBase))*hangulTCount, true
	}
	if a >= hangulSBase && a < hangulSBase+hangulSCount && (a-hangulSBase)%hangulTCount == 0 &&
		b > hangulTBase && b < hangulTBase+hangulTCount {
		return a + (b - hangulTBase), true
	}
	r, ok := t.compose[uint64(a)<<21|uint64(b)]
	return r, ok
}

// rangeCursor walks a sorted range table in increasing code point order.
type rangeCursor struct {
	ranges []runeRange
	i      int
	flag   uint16
}

// uniform reports whether every code point of [lo, hi] gets the same flag, and which; calls go up in lo.
func (c *rangeCursor) uniform(lo, hi rune) (uint16, bool) {
	for c.i < len(c.ranges) && c.ranges[c.i].hi < lo {
		c.i++
	}
	switch {
	case c.i == len(c.ranges) || c.ranges[c.i].lo > hi:
		return 0, true
	case c.ranges[c.i].lo <= lo && c.ranges[c.i].hi >= hi:
		return c.flag, true
	}
	return 0, false
}

func (c *rangeCursor) at(r rune) uint16 {
	for c.i < len(c.ranges) && c.ranges[c.i].hi < r {
		c.i++
	}
	if c.i < len(c.ranges) && c.ranges[c.i].lo <= r {
		return c.flag
	}
	return 0
}

func buildTables() *unicodeTables {
	t := &unicodeTables{compose: make(map[uint64]rune, len(composeTable))}
	point := make(map[rune]runeProps, 8192)
	for _, e := range canonTable {
		p := point[e.r]
		p.flags |= fCanon
		p.canon = e.s
		point[e.r] = p
	}
	for _, e := range compatTable {
		p := point[e.r]
		p.flags |= fCompat
		p.compat = e.s
		point[e.r] = p
	}
	for _, e := range lowerTable {
		p := point[e.r]
		p.flags |= fLower
		p.lower = e.s
		point[e.r] = p
	}
	for _, e := range cccTable {
		for r := e.lo; r <= e.hi; r++ {
			p := point[r]
			p.ccc = e.ccc
			point[r] = p
		}
	}
	for _, e := range composeTable {
		t.compose[uint64(e.a)<<21|uint64(e.b)] = e.r
		p := point[e.b]
		p.flags |= fSecond
		point[e.b] = p
	}
	for r := rune(hangulVBase); r < hangulVBase+hangulVCount; r++ {
		p := point[r]
		p.flags |= fSecond
		point[r] = p
	}
	for r := rune(hangulTBase + 1); r < hangulTBase+hangulTCount; r++ {
		p := point[r]
		p.flags |= fSecond
		point[r] = p
	}

	// Quick-check flags need the decomposition and composition data above.
	firstOK := func(d string) bool {
		for _, r := range d {
			q := point[r]
			return q.ccc == 0 && q.flags&fSecond == 0
		}
		return true
	}
	for r, p := range point {
		if p.flags&fCanon == 0 {
			p.flags |= fQCD
		}
		if p.flags&(fCanon|fCompat) == 0 {
			p.flags |= fQCKD
		}
		if p.flags&fSecond == 0 {
			switch {
			case p.flags&fCanon == 0:
				p.flags |= fQCC
			case firstOK(p.canon) && composeString(t, point, p.canon) == string(r):
				p.flags |= fQCC
			}
			switch {
			case p.flags&(fCanon|fCompat) == 0:
				p.flags |= fQCKC
			case p.flags&fCompat == 0 && p.flags&fQCC != 0:
				p.flags |= fQCKC
			}
		}
		point[r] = p
	}

	cursors := []*rangeCursor{
		{ranges: combiningMarks, flag: fCombining},
		{ranges: nonspacingMarks, flag: fMn},
		{ranges: bertDrop, flag: fBertDrop},
		{ranges: bertSpace, flag: fBertSpace},
		{ranges: whiteSpace, flag: fWhite},
		{ranges: graphemeJoinPrev, flag: fJoinPrev},
		{ranges: graphemeJoinNext, flag: fJoinNext},
	}
	keys := make([]rune, 0, len(point))
	for r := range point {
		keys = append(keys, r)
	}
	slices.Sort(keys)

	const plain = fQCD | fQCKD | fQCC | fQCKC
	index := map[runeProps]uint16{}
	byFlags := map[uint16]uint16{}
	id := func(p runeProps) uint16 {
		if p.ccc == 0 && p.canon == "" && p.compat == "" && p.lower == "" {
			if id, ok := byFlags[p.flags]; ok {
				return id
			}
		} else if id, ok := index[p]; ok {
			return id
		}
		n := uint16(len(t.props))
		t.props = append(t.props, p)
		if p.ccc == 0 && p.canon == "" && p.compat == "" && p.lower == "" {
			byFlags[p.flags] = n
		} else {
			index[p] = n
		}
		return n
	}
	id(runeProps{flags: plain}) // props[0]: what an out-of-range rune gets
	blocks := map[[blockSize]uint16]uint16{}
	uniformBlocks := map[uint16]uint16{} // props index -> block of that props only
	var blk [blockSize]uint16
	k := 0
	for b := 0; b < maxRune>>blockBits; b++ {
		lo := rune(b << blockBits)
		for k < len(keys) && keys[k] < lo {
			k++
		}
		hasPoint := k < len(keys) && keys[k] < lo+blockSize
		hangul := lo+blockSize > hangulSBase && lo < hangulSBase+hangulSCount
		if !hasPoint && !hangul {
			flags, same := uint16(plain), true
			for _, c := range cursors {
				f, ok := c.uniform(lo, lo+blockSize-1)
				flags |= f
				same = same && ok
			}
			if same {
				p := id(runeProps{flags: flags})
				n, ok := uniformBlocks[p]
				if !ok {
					n = uint16(len(t.stage2) >> blockBits)
					for range blockSize {
						t.stage2 = append(t.stage2, p)
					}
					uniformBlocks[p] = n
				}
				t.stage1[b] = n
				continue
			}
		}
		for i := range blk {
			r := lo + rune(i)
			p := runeProps{flags: plain}
			if hasPoint {
				if q, ok := point[r]; ok {
					p = q
				}
			}
			if r >= hangulSBase && r < hangulSBase+hangulSCount {
				p.flags = fHangul | fQCC | fQCKC
			}
			for _, c := range cursors {
				p.flags |= c.at(r)
			}
			blk[i] = id(p)
		}
		n, ok := blocks[blk]
		if !ok {
			n = uint16(len(t.stage2) >> blockBits)
			t.stage2 = append(t.stage2, blk[:]...)
			blocks[blk] = n
		}
		t.stage1[b] = n
	}
	return t
}

// composeString recomposes an already decomposed, ordered string while the tables are being built.
func composeString(t *unicodeTables, point map[rune]runeProps, d string) string {
	buf := make([]normRune, 0, len(d))
	for _, r := range d {
		buf = append(buf, normRune{r: r, ccc: point[r].ccc})
	}
	buf = compose(t, buf)
	out := make([]rune, len(buf))
	for i, e := range buf {
		out[i] = e.r
	}
	return string(out)
}
