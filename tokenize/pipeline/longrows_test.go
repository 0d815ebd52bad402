package pipeline

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestLongRowsCounted: a document far longer than any model's context, tokenized without --max-length, is counted
// (LongRows, LongestRow) so that the summary can warn; with --max-length it is cut and not counted.
func TestLongRowsCounted(t *testing.T) {
	tok := loadTok(t)
	dir := t.TempDir()
	long := strings.Repeat("human rights dignity ", LongRowTokens/2) // well over LongRowTokens tokens
	var lines []byte
	for _, text := range []string{"short one", long, "another short one"} {
		b, _ := json.Marshal(map[string]string{"text": text})
		lines = append(append(lines, b...), '\n')
	}
	in := filepath.Join(dir, "c.jsonl")
	if err := os.WriteFile(in, lines, 0o644); err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name      string
		maxLength int
		overflow  Overflow
		wantLong  int64
	}{
		{"no max length", 0, "", 1},
		{"split at 4096", 4096, OverflowSplit, 0},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			s := run(t, Options{Inputs: []string{in}, Out: filepath.Join(t.TempDir(), "ds"), Engine: tok, Workers: 2,
				MaxLength: tc.maxLength, Overflow: tc.overflow})
			if s.LongRows != tc.wantLong {
				t.Errorf("LongRows = %d, want %d", s.LongRows, tc.wantLong)
			}
			if tc.maxLength == 0 && s.LongestRow <= LongRowTokens {
				t.Errorf("LongestRow = %d, want above %d", s.LongestRow, LongRowTokens)
			}
			if tc.maxLength > 0 && s.LongestRow != int64(tc.maxLength) {
				t.Errorf("LongestRow = %d, want %d", s.LongestRow, tc.maxLength)
			}
		})
	}
}
