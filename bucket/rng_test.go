package bucket

import (
	"slices"
	"testing"
)

func TestSplitMix64(t *testing.T) {
	// Reference outputs of SplitMix64 seeded with 0 and 1234567 (the values of
	// the published C implementation, splitmix64.c).
	for _, tc := range []struct {
		seed uint64
		want []uint64
	}{
		{0, []uint64{0xe220a8397b1dcdaf, 0x6e789e6aa1b965f4, 0x06c45d188009454f}},
		{1234567, []uint64{6457827717110365317, 3203168211198807973, 9817491932198370423}},
	} {
		r := newRNG(tc.seed)
		var got []uint64
		for range tc.want {
			got = append(got, r.next())
		}
		if !slices.Equal(got, tc.want) {
			t.Errorf("seed %d: %#x, want %#x", tc.seed, got, tc.want)
		}
	}
}

func TestBelowUniform(t *testing.T) {
	r := newRNG(9)
	for _, n := range []uint64{1, 2, 3, 7, 1 << 33, 1<<63 + 5} {
		for range 1000 {
			if v := r.below(n); v >= n {
				t.Fatalf("below(%d) = %d", n, v)
			}
		}
	}
	// Rough uniformity: 60000 draws over 6 values, each within 5%.
	var c [6]int
	for range 60000 {
		c[r.below(6)]++
	}
	for i, v := range c {
		if v < 9500 || v > 10500 {
			t.Fatalf("value %d drawn %d times of 60000", i, v)
		}
	}
}

func TestStreamKey(t *testing.T) {
	// Pinned: changing the key derivation changes every plan.
	if got, want := streamKey("fp", 1, 2, streamRows), streamKey("fp", 1, 2, streamRows); got != want {
		t.Fatal("streamKey not deterministic")
	}
	seen := map[uint64]string{}
	for _, tc := range []struct {
		fp          string
		seed        uint64
		epoch       int
		stream      uint64
		description string
	}{
		{"fp", 1, 2, streamRows, "base"},
		{"fp", 1, 2, streamBatches, "stream"},
		{"fp", 1, 3, streamRows, "epoch"},
		{"fp", 2, 2, streamRows, "seed"},
		{"fq", 1, 2, streamRows, "fingerprint"},
		{"", 1, 2, streamRows, "empty fingerprint"},
	} {
		k := streamKey(tc.fp, tc.seed, tc.epoch, tc.stream)
		if prev, ok := seen[k]; ok {
			t.Fatalf("%s and %s share key %#x", prev, tc.description, k)
		}
		seen[k] = tc.description
	}
}

func TestShufflePermutes(t *testing.T) {
	a := make([]int32, 1000)
	for i := range a {
		a[i] = int32(i)
	}
	newRNG(3).shuffle32(a)
	b := slices.Clone(a)
	slices.Sort(b)
	for i, v := range b {
		if v != int32(i) {
			t.Fatal("shuffle lost elements")
		}
	}
	fixed := 0
	for i, v := range a {
		if v == int32(i) {
			fixed++
		}
	}
	if fixed > 10 {
		t.Fatalf("%d fixed points of 1000", fixed)
	}
}

func TestSortDesc(t *testing.T) {
	r := newRNG(4)
	for _, n := range []int{0, 1, 2, 50, 800, 3000} {
		for _, maxKey := range []uint64{1, 300, 70000, 1 << 32} {
			keys := make([]uint32, n)
			rows := make([]int32, n)
			for i := range keys {
				keys[i] = uint32(r.below(maxKey))
				rows[i] = int32(i)
			}
			want := make([]int32, n)
			copy(want, rows)
			slices.SortStableFunc(want, func(a, b int32) int { return int(int64(keys[b]) - int64(keys[a])) })
			wantKeys := make([]uint32, n)
			for i, row := range want {
				wantKeys[i] = keys[row]
			}
			sortDesc(keys, rows, make([]uint32, n), make([]int32, n))
			if !slices.Equal(rows, want) || !slices.Equal(keys, wantKeys) {
				t.Fatalf("n=%d max=%d: radix sort differs from stable sort", n, maxKey)
			}
		}
	}
}
