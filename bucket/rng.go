package bucket

import (
	"crypto/sha256"
	"encoding/binary"
	"math/bits"
)

// Random streams used by a plan. Each stream has its own generator so that a
// change in how much one phase draws never shifts another phase's numbers.
const (
	streamRows    uint64 = 1 // shuffle of row indices (bucketed, tokens, packed tie order)
	streamBatches uint64 = 2 // shuffle of batch order (bucketed, tokens)
	streamPacked  uint64 = 3 // shuffle of packed rows (packed)
)

// keyDomain separates gload's plan keys from any other use of the same hash.
// Changing it changes every plan: bump the version only with the golden files.
const keyDomain = "gload/bucket/v1"

// streamKey derives the 64-bit seed of one random stream from the plan's
// identity. The exact bytes hashed by SHA-256 are
//
//	"gload/bucket/v1" 0x00
//	uint64le(len(fingerprint)) fingerprint
//	uint64le(seed) uint64le(uint64(epoch)) uint64le(stream)
//
// and the key is the first 8 bytes of the digest read little-endian.
func streamKey(fingerprint string, seed uint64, epoch int, stream uint64) uint64 {
	h := sha256.New()
	var buf [8]byte
	h.Write([]byte(keyDomain))
	h.Write([]byte{0})
	binary.LittleEndian.PutUint64(buf[:], uint64(len(fingerprint)))
	h.Write(buf[:])
	h.Write([]byte(fingerprint))
	for _, v := range [...]uint64{seed, uint64(int64(epoch)), stream} {
		binary.LittleEndian.PutUint64(buf[:], v)
		h.Write(buf[:])
	}
	var sum [sha256.Size]byte
	return binary.LittleEndian.Uint64(h.Sum(sum[:0]))
}

// rng is SplitMix64 (Steele, Lea, Flood 2014), written out here so that plans
// never depend on the standard library's generators:
//
//	state += 0x9E3779B97F4A7C15
//	z := state
//	z = (z ^ z>>30) * 0xBF58476D1CE4E5B9
//	z = (z ^ z>>27) * 0x94D049BB133111EB
//	return z ^ z>>31
type rng struct{ state uint64 }

func newRNG(key uint64) *rng { return &rng{state: key} }

func (r *rng) next() uint64 {
	r.state += 0x9E3779B97F4A7C15
	z := r.state
	z = (z ^ z>>30) * 0xBF58476D1CE4E5B9
	z = (z ^ z>>27) * 0x94D049BB133111EB
	return z ^ z>>31
}

// below returns a uniform integer in [0, n) for n > 0 by Lemire's
// multiply-shift method with rejection ("Fast Random Integer Generation in an
// Interval", 2019): hi, lo = 128-bit product next()·n; while lo < (2^64 mod n)
// draw again; return hi.
func (r *rng) below(n uint64) uint64 {
	hi, lo := bits.Mul64(r.next(), n)
	if lo < n {
		thresh := -n % n
		for lo < thresh {
			hi, lo = bits.Mul64(r.next(), n)
		}
	}
	return hi
}

// shuffle32 permutes a by Fisher–Yates, from the last element down:
// for i = len-1 … 1, swap a[i] with a[below(i+1)].
func (r *rng) shuffle32(a []int32) {
	for i := len(a) - 1; i > 0; i-- {
		j := r.below(uint64(i + 1))
		a[i], a[j] = a[j], a[i]
	}
}
