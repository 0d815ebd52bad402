package tokenize

import (
	"fmt"
	"math/rand/v2"
	"runtime"
	"strings"
	"testing"
)

// addedList returns n added tokens of size bytes each (distinct, random
// letters after a '<' so they share a first byte, as special tokens do).
func addedList(n, size int) []addedTokenJSON {
	r := rand.New(rand.NewPCG(uint64(n), uint64(size)))
	out := make([]addedTokenJSON, n)
	var b strings.Builder
	for i := range out {
		b.Reset()
		b.WriteByte('<')
		for b.Len() < size {
			b.WriteByte(byte('a' + r.IntN(26)))
		}
		id := int32(100_000 + i)
		out[i] = addedTokenJSON{ID: &id, Content: b.String(), Special: true}
	}
	return out
}

// liveBytes is the heap a built matcher keeps (beyond the list itself).
func liveBytes(b *testing.B, list []addedTokenJSON) uint64 {
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	v, err := newAddedVocab(list, nil, false)
	if err != nil {
		b.Fatal(err)
	}
	runtime.GC()
	runtime.ReadMemStats(&after)
	runtime.KeepAlive(v)
	return after.HeapAlloc - min(before.HeapAlloc, after.HeapAlloc)
}

// BenchmarkAddedVocab measures building the added-token matcher (B/op is its
// memory: 10 MB of added tokens) and matching text with it (MB/s of text,
// one added token every ~1 KB).
func BenchmarkAddedVocab(b *testing.B) {
	for _, tc := range []struct{ n, size int }{{256, 30}, {10_240, 1024}, {1 << 20, 10}} {
		list := addedList(tc.n, tc.size)
		b.Run(fmt.Sprintf("build/%dx%dB", tc.n, tc.size), func(b *testing.B) {
			b.ReportAllocs()
			b.SetBytes(int64(tc.n * tc.size))
			for b.Loop() {
				if _, err := newAddedVocab(list, nil, false); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(liveBytes(b, list)), "live-B")
		})
		v, err := newAddedVocab(list, nil, false)
		if err != nil {
			b.Fatal(err)
		}
		var text strings.Builder
		r := rand.New(rand.NewPCG(1, 2))
		for text.Len() < 4<<20 {
			for range 1000 {
				text.WriteByte(" abcdefgh<ij"[r.IntN(12)])
			}
			text.WriteString(list[r.IntN(len(list))].Content)
		}
		s := text.String()
		b.Run(fmt.Sprintf("match/%dx%dB", tc.n, tc.size), func(b *testing.B) {
			b.ReportAllocs()
			b.SetBytes(int64(len(s)))
			var dst []piece
			for b.Loop() {
				dst, _ = v.split(dst[:0], s, false)
			}
		})
	}
}
