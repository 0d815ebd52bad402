package main

import (
	"strings"
	"testing"

	"github.com/gload/gload/tokenize/chat"
	"github.com/gload/gload/tokenize/pipeline"
)

// TestSummaryWarnings: a run that exits 0 still says when its dataset is not what its user expects.
func TestSummaryWarnings(t *testing.T) {
	sum := func(f func(s *pipeline.Summary)) pipeline.Summary {
		var s pipeline.Summary
		s.Documents, s.Rows = 100, 100
		f(&s)
		return s
	}
	cases := []struct {
		name string
		s    pipeline.Summary
		want []string // substrings of the one warning; nil: no warning
	}{
		{"clean run", sum(func(s *pipeline.Summary) {}), nil},
		{"long rows", sum(func(s *pipeline.Summary) { s.LongRows, s.LongestRow = 2, 2388096 }),
			[]string{"2 rows", "2388096", "--max-length", "max_length"}},
		{"few unstable conversations", sum(func(s *pipeline.Summary) {
			s.Skipped = map[string]int64{chat.KindUnstable: 3}
		}), nil},
		{"most conversations unstable", sum(func(s *pipeline.Summary) {
			s.Skipped = map[string]int64{chat.KindUnstable: 64}
		}), []string{"64 of 100", "64%", "--last-turn-only"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got := summaryWarnings(tc.s)
			if tc.want == nil {
				if len(got) != 0 {
					t.Fatalf("warnings %q, want none", got)
				}
				return
			}
			if len(got) != 1 {
				t.Fatalf("warnings %q, want one", got)
			}
			for _, w := range tc.want {
				if !strings.Contains(got[0], w) {
					t.Errorf("warning %q does not mention %q", got[0], w)
				}
			}
		})
	}
}
