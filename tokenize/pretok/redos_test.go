package pretok

import (
	"errors"
	"strings"
	"testing"
	"time"
)

// Regression (issue 10 item 3): a Split pattern that backtracks catastrophically ((a+)+$) hung encode (57 s for
// 28 a's, doubling with each more). The general engine now stops at its match bound with a *MatchError naming the
// pattern's JSON path, as Hugging Face stops at Oniguruma's retry-limit-in-match.
func TestCatastrophicRegexStopsAtMatchBound(t *testing.T) {
	defer func(d time.Duration) { regexMatchTimeout = d }(regexMatchTimeout)
	regexMatchTimeout = 100 * time.Millisecond
	split := `{"type": "Split", "pattern": {"Regex": "(a+)+$"}, "behavior": "Isolated", "invert": false}`
	cases := []struct {
		name, json, path string
	}{
		{"split", split, "pre_tokenizer.pattern"},
		{"in a sequence", `{"type": "Sequence", "pretokenizers": [{"type": "Whitespace"}, ` + split + `]}`,
			"pre_tokenizer.pretokenizers[1].pattern"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			p, _, err := FromJSON([]byte(tc.json), "pre_tokenizer")
			if err != nil {
				t.Fatal(err)
			}
			// The pattern still works on ordinary text.
			if got, err := SplitPieceErr(p, "aaa", true, nil); err != nil || strings.Join(got, "|") != "aaa" {
				t.Fatalf("aaa: %q, %v", got, err)
			}
			start := time.Now()
			text := "x " + strings.Repeat("a", 40) + "b"
			_, err = SplitPieceErr(p, text, true, nil)
			var me *MatchError
			if !errors.As(err, &me) || me.Path != tc.path || me.Pattern != "(a+)+$" {
				t.Fatalf("err = %v, want a MatchError at %s", err, tc.path)
			}
			if !strings.Contains(err.Error(), tc.path) || !strings.Contains(err.Error(), "retry-limit-in-match") {
				t.Errorf("message %q does not name the path and the HF equivalent", err)
			}
			if el := time.Since(start); el > 20*regexMatchTimeout {
				t.Errorf("took %v with a %v bound", el, regexMatchTimeout)
			}
			// Split (no error result) keeps its old contract: the rest is one unmatched gap.
			if got := p.Split(text, nil); len(got) == 0 {
				t.Error("Split returned nothing")
			}
		})
	}
}
