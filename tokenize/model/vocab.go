package model

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"strconv"

	"github.com/gload/gload/tokenize/tokjson"
)

// Sentinel errors, wrapped (errors.Is) by the tokjson.InvalidError / tokjson.UnsupportedError values that FromJSON
// returns.
var (
	// ErrTokenNotInVocab: a merge or special token names a string the vocabulary lacks.
	ErrTokenNotInVocab = errors.New("model: token not in vocabulary")
	// ErrBadMerge: a merge entry is not two tokens.
	ErrBadMerge = errors.New("model: malformed merge")
	// ErrBadID: a token id is negative, too large or otherwise unusable.
	ErrBadID = errors.New("model: bad token id")
	// ErrMissingField: a field Hugging Face requires is absent.
	ErrMissingField = errors.New("model: missing field")
	// ErrBadNumber: a JSON number could not be read.
	ErrBadNumber = errors.New("model: bad number")
)

// maxID is the largest token id this package accepts (ids are int32 everywhere in gload).
const maxID = math.MaxInt32

// decodeVocabMap reads a `vocab` object (token → id). Later duplicates of a key win, as in serde's map.
func decodeVocabMap(raw json.RawMessage, path string) (map[string]int32, error) {
	if isNull(raw) {
		return nil, tokjson.Invalid(path, "%w", ErrMissingField)
	}
	sc := &scanner{data: raw}
	out := make(map[string]int32, len(raw)/24)
	var bad error
	err := sc.object(func(key []byte) error {
		num, err := sc.number()
		if err != nil {
			return err
		}
		id, ok := parseID(num)
		switch {
		case !ok:
			return fmt.Errorf("token %q: id %s: %w", key, num, ErrBadID)
		case id > maxID:
			bad = tokjson.Unsupported(path, "id %d of token %q (above 2^31-1)", id, key)
			return bad
		}
		out[string(key)] = int32(id)
		return nil
	})
	if err == nil {
		err = sc.end()
	}
	if bad != nil {
		return nil, bad
	}
	if err != nil {
		return nil, tokjson.Invalid(path, "%w", err)
	}
	return out, nil
}

// reverseVocab maps ids back to token strings. When several strings share an id (Hugging Face then keeps an
// arbitrary one) the lexicographically smallest is kept, so the answer is deterministic.
type reverseVocab struct {
	dense  []string
	has    []bool
	sparse map[int32]string
}

func newReverseVocab(vocab map[string]int32) (r reverseVocab, shared bool) {
	maxSeen := int32(-1)
	for _, id := range vocab {
		maxSeen = max(maxSeen, id)
	}
	if int64(maxSeen) < 2*int64(len(vocab))+1024 {
		r.dense = make([]string, maxSeen+1)
		r.has = make([]bool, maxSeen+1)
		for tok, id := range vocab {
			if r.has[id] {
				shared = true
				if tok > r.dense[id] {
					continue
				}
			}
			r.dense[id] = tok
			r.has[id] = true
		}
		return r, shared
	}
	r.sparse = make(map[int32]string, len(vocab))
	for tok, id := range vocab {
		old, ok := r.sparse[id]
		if ok {
			shared = true
			if tok > old {
				continue
			}
		}
		r.sparse[id] = tok
	}
	return r, shared
}

func (r *reverseVocab) lookup(id int32) (string, bool) {
	if r.sparse != nil {
		s, ok := r.sparse[id]
		return s, ok
	}
	if id < 0 || int(id) >= len(r.dense) || !r.has[id] {
		return "", false
	}
	return r.dense[id], true
}

// byteFallbackIDs returns the ids of the `<0xXX>` tokens (-1 where absent) and whether all 256 exist.
func byteFallbackIDs(lookup func(string) (int32, bool)) (ids [256]int32, all bool) {
	all = true
	for b := range 256 {
		id, ok := lookup(fmt.Sprintf("<0x%02X>", b))
		if !ok {
			id, all = -1, false
		}
		ids[b] = id
	}
	return ids, all
}

// pow10 holds 1e0 … 1e308 as float64 literals, like serde_json's POW10 table.
var pow10 = func() (t [309]float64) {
	for i := range t {
		f, err := strconv.ParseFloat("1e"+strconv.Itoa(i), 64)
		if err != nil {
			panic(err) // constant input: broken invariant
		}
		t[i] = f
	}
	return t
}()

// serdeFloat parses a JSON number exactly as serde_json 1.x does without its `float_roundtrip` feature, which
// is how Hugging Face tokenizers reads Unigram scores: the decimal significand is accumulated in a u64 (digits
// past u64 range are dropped and counted in the exponent), converted to f64, then multiplied or divided once by
// 10^|exp|. The result can differ from the correctly rounded value by one ulp; matching it keeps Viterbi ties
// identical.
func serdeFloat(raw []byte) (float64, error) {
	s := bytes.TrimSpace(raw)
	bad := func() (float64, error) { return 0, fmt.Errorf("%w: %q", ErrBadNumber, s) }
	i := 0
	positive := true
	if i < len(s) && s[i] == '-' {
		positive = false
		i++
	}
	if i >= len(s) || s[i] < '0' || s[i] > '9' {
		return bad()
	}
	var sig uint64
	exp := 0
	fits := func(d byte) bool { return sig <= (math.MaxUint64-uint64(d))/10 }
	isInt, overflowed := true, false
	if s[i] == '0' {
		i++
		if i < len(s) && s[i] >= '0' && s[i] <= '9' {
			return bad()
		}
	} else {
		for ; i < len(s) && s[i] >= '0' && s[i] <= '9'; i++ {
			if overflowed || !fits(s[i]-'0') {
				overflowed = true // serde's parse_long_integer: the remaining digits only scale by ten
				exp++
				continue
			}
			sig = sig*10 + uint64(s[i]-'0')
		}
	}
	if i < len(s) && s[i] == '.' {
		isInt = false
		i++
		start := i
		skip := false // serde's parse_decimal_overflow: once a digit does not fit, the rest are ignored
		for ; i < len(s) && s[i] >= '0' && s[i] <= '9'; i++ {
			if skip || !fits(s[i]-'0') {
				skip = true
				continue
			}
			sig = sig*10 + uint64(s[i]-'0')
			exp--
		}
		if i == start {
			return bad()
		}
	}
	if i < len(s) && (s[i] == 'e' || s[i] == 'E') {
		isInt = false
		i++
		expPositive := true
		if i < len(s) && (s[i] == '+' || s[i] == '-') {
			expPositive = s[i] == '+'
			i++
		}
		if i >= len(s) || s[i] < '0' || s[i] > '9' {
			return bad()
		}
		var e int64
		for ; i < len(s) && s[i] >= '0' && s[i] <= '9'; i++ {
			e = e*10 + int64(s[i]-'0')
			if e > math.MaxInt32 {
				if sig != 0 && expPositive {
					return bad() // serde: number out of range
				}
				for i < len(s) && s[i] >= '0' && s[i] <= '9' {
					i++
				}
				if i != len(s) {
					return bad()
				}
				if positive {
					return 0, nil
				}
				return math.Copysign(0, -1), nil
			}
		}
		if expPositive {
			exp = satAdd(exp, int(e))
		} else {
			exp = satAdd(exp, -int(e))
		}
	}
	if i != len(s) {
		return bad()
	}
	if isInt && !overflowed {
		// serde keeps plain integers as u64 / i64 and converts with `as f64`.
		if positive {
			return float64(sig), nil
		}
		if sig == 0 {
			return math.Copysign(0, -1), nil
		}
		return -float64(sig), nil
	}
	f := float64(sig)
	for {
		a := exp
		if a < 0 {
			a = -a
		}
		if a < len(pow10) {
			if exp >= 0 {
				f *= pow10[a]
				if math.IsInf(f, 0) {
					return bad()
				}
			} else {
				f /= pow10[a]
			}
			break
		}
		if f == 0 {
			break
		}
		if exp >= 0 {
			return bad()
		}
		f /= 1e308
		exp += 308
	}
	if !positive {
		f = -f
	}
	return f, nil
}

func satAdd(a, b int) int {
	const lo, hi = math.MinInt32, math.MaxInt32
	s := int64(a) + int64(b)
	return int(min(max(s, lo), hi))
}

// isNull reports whether raw is absent or the JSON literal null. (tokjson.IsNull indexes raw[len(raw)-4:] and
// panics on values shorter than four bytes such as `0`, so this package keeps its own.)
func isNull(raw json.RawMessage) bool {
	t := bytes.TrimSpace(raw)
	return len(t) == 0 || string(t) == "null"
}
