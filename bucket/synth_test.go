package bucket

import (
	"slices"
	"testing"
)

func TestSyntheticLengths(t *testing.T) {
	s := Synthetic{Rows: 200_000, Seed: 7}
	got := make([]uint32, s.Rows)
	s.Fill(0, got)
	var sum float64
	for i, l := range got {
		if l < 1 || l > SyntheticMaxLength {
			t.Fatalf("row %d: length %d outside [1, %d]", i, l, SyntheticMaxLength)
		}
		if l != s.Length(int64(i)) {
			t.Fatalf("row %d: Fill %d, Length %d", i, l, s.Length(int64(i)))
		}
		sum += float64(l)
	}
	sorted := slices.Clone(got)
	slices.Sort(sorted)
	med, p99, mean := sorted[len(sorted)/2], sorted[len(sorted)*99/100], sum/float64(len(got))
	// Log-normal(ln 300, 1.2): median 300, mean 300·e^0.72 ≈ 616, p99 300·e^(1.2·2.326) ≈ 4 890.
	if med < 290 || med > 310 || mean < 590 || mean > 640 || p99 < 4600 || p99 > 5200 {
		t.Fatalf("median %d, mean %.0f, p99 %d: not the documented distribution", med, mean, p99)
	}
	if other := (Synthetic{Rows: s.Rows, Seed: 8}); other.Length(5) == s.Length(5) && other.Length(6) == s.Length(6) && other.Length(7) == s.Length(7) {
		t.Fatal("the seed does not change the lengths")
	}
	// Far rows need no array: row 3e9 is computed like row 0.
	if l := s.Length(3_000_000_000); l < 1 || l > SyntheticMaxLength {
		t.Fatalf("row 3e9: length %d", l)
	}
}
