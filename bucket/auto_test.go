package bucket

import (
	"math"
	"slices"
	"testing"
)

// bruteBoundaries is the O(k·D²) dynamic program the fast one must match.
func bruteBoundaries(lengths []uint32, k, multiple int) (cost uint64, bounds []int) {
	vals, counts := roundedHistogram(lengths, math.MaxInt64, int64(max(multiple, 1)))
	d := len(vals)
	if k >= d {
		for i, v := range vals {
			cost += v * counts[i]
			bounds = append(bounds, int(v))
		}
		return cost, bounds
	}
	c := make([]uint64, d+1)
	for i, n := range counts {
		c[i+1] = c[i] + n
	}
	const inf = math.MaxUint64
	f := make([][]uint64, k+1)
	arg := make([][]int, k+1)
	for t := range f {
		f[t] = make([]uint64, d+1)
		arg[t] = make([]int, d+1)
		for j := range f[t] {
			f[t][j] = inf
		}
	}
	f[0][0] = 0
	for t := 1; t <= k; t++ {
		for j := 1; j <= d; j++ {
			for i := 0; i < j; i++ {
				if f[t-1][i] == inf {
					continue
				}
				if v := f[t-1][i] + vals[j-1]*(c[j]-c[i]); v < f[t][j] {
					f[t][j], arg[t][j] = v, i
				}
			}
		}
	}
	j := d
	for t := k; t >= 1; t-- {
		bounds = append(bounds, int(vals[j-1]))
		j = arg[t][j]
	}
	slices.Reverse(bounds)
	return f[k][d], bounds
}

// paddedTotal is Σ boundary(l) over rows.
func paddedTotal(lengths []uint32, bounds []int) uint64 {
	var sum uint64
	for _, l := range lengths {
		v := max(int(l), 1)
		i, _ := slices.BinarySearch(bounds, v)
		if i == len(bounds) {
			return math.MaxUint64
		}
		sum += uint64(bounds[i])
	}
	return sum
}

func TestAutoBoundariesExact(t *testing.T) {
	for _, tc := range []struct {
		name     string
		lengths  []uint32
		k, mult  int
		wantLast int
	}{
		{"uniform", uniformLengths(3000, 1, 2000, 1), 5, 8, 2000},
		{"lognormal", logNormalLengths(5000, 400, 1, 8000, 2), 8, 8, 0},
		{"lognormal-k1", logNormalLengths(5000, 400, 1, 8000, 2), 1, 8, 0},
		{"exact-lengths", uniformLengths(500, 0, 300, 3), 7, 1, 0},
		{"few-distinct", []uint32{5, 5, 5, 100, 100, 3000}, 8, 8, 3000},
		{"zeros", []uint32{0, 0, 0}, 3, 8, 8},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := AutoBoundaries(tc.lengths, tc.k, tc.mult)
			wantCost, want := bruteBoundaries(tc.lengths, tc.k, tc.mult)
			if gotCost := paddedTotal(tc.lengths, got); gotCost != wantCost {
				t.Fatalf("boundaries %v pad to %d tokens; optimum %v pads to %d", got, gotCost, want, wantCost)
			}
			if !slices.Equal(got, want) {
				// Equal cost is what matters; both break ties the same way here.
				t.Fatalf("boundaries %v, brute force %v (same cost)", got, want)
			}
			if len(got) > tc.k || !slices.IsSorted(got) {
				t.Fatalf("boundaries %v: want ≤ %d ascending", got, tc.k)
			}
			for _, b := range got {
				if b%max(tc.mult, 1) != 0 {
					t.Fatalf("boundary %d not a multiple of %d", b, tc.mult)
				}
			}
			if tc.wantLast > 0 && got[len(got)-1] != tc.wantLast {
				t.Fatalf("last boundary %d, want %d", got[len(got)-1], tc.wantLast)
			}
		})
	}
	if AutoBoundaries(nil, 8, 8) != nil || AutoBoundaries([]uint32{1}, 0, 8) != nil {
		t.Fatal("want nil for no rows or k = 0")
	}
}

func TestAutoBoundariesCoarsens(t *testing.T) {
	// Many distinct huge lengths: the histogram is coarsened, the result stays
	// valid (ascending multiples of 8 covering the longest row).
	lengths := uniformLengths(200_000, 1, math.MaxInt32, 4)
	got := AutoBoundaries(lengths, 8, 8)
	if len(got) != 8 || !slices.IsSorted(got) || got[7] < int(slices.Max(lengths)) {
		t.Fatalf("boundaries %v for max length %d", got, slices.Max(lengths))
	}
}

func TestComparePadding(t *testing.T) {
	// Realistic synthetic: log-normal, mean ~400, long tail, trained with
	// max_length 2048 (pad-128 then has 16 lengths, pad-64 32).
	lengths := logNormalLengths(100_000, 400, 1, 1<<20, 42)
	const maxLength = 2048
	for _, k := range []int{8, 16} {
		reports := ComparePadding(lengths, k, maxLength)
		for _, r := range reports {
			t.Logf("row-level   %s", r)
		}
		auto, p64, p128 := reports[0], reports[1], reports[2]
		if auto.Lengths != k || p128.Lengths != 16 || p64.Lengths != 32 {
			t.Fatalf("lengths: auto %d pad-64 %d pad-128 %d", auto.Lengths, p64.Lengths, p128.Lengths)
		}
		if p64.Share >= p128.Share {
			t.Fatalf("pad-64 %v should pad less than pad-128 %v", p64, p128)
		}
		if k == p128.Lengths && auto.Share >= p128.Share {
			t.Fatalf("auto-%d %v should beat pad-128 with as many lengths %v", k, auto, p128)
		}
	}
	// Batch-level padding of bucketed plans (B = 16) under each rule.
	for _, cfg := range []Config{
		{BatchSize: 16, MaxLength: maxLength, AutoBuckets: 8},
		{BatchSize: 16, MaxLength: maxLength, AutoBuckets: 16},
		{BatchSize: 16, MaxLength: maxLength, PadMultiple: 64},
		{BatchSize: 16, MaxLength: maxLength, PadMultiple: 128},
	} {
		p, err := NewPlan(lengths, "cmp", 1, 0, cfg)
		if err != nil {
			t.Fatal(err)
		}
		st := p.Stats()
		t.Logf("batch-level auto=%-2d pad=%-3d: padding %.2f%%, %d shapes, boundaries %v",
			cfg.AutoBuckets, cfg.PadMultiple, 100*st.PaddingShare, st.Shapes, p.Boundaries())
	}
}
