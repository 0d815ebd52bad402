package pipeline

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestRerunIntoExistingOutput: a second run into a finished dataset says it is complete and offers --overwrite (not
// --resume, which refuses a complete dataset); into an interrupted run's directory it offers --resume.
func TestRerunIntoExistingOutput(t *testing.T) {
	tok := loadTok(t)
	dir := t.TempDir()
	in, _ := writeCorpus(t, dir, 50)
	out := filepath.Join(dir, "ds")
	opts := Options{Inputs: []string{in}, Out: out, Engine: tok, Workers: 2}
	run(t, opts)
	cases := []struct {
		name    string
		prepare func(t *testing.T)
		want    []string
		notWant string
	}{
		{"complete dataset", func(t *testing.T) {}, []string{"complete dataset", "--overwrite"}, "--resume"},
		{"interrupted run", func(t *testing.T) {
			// What a run killed before finalising leaves: its journal beside shards, no state.json yet.
			if err := os.WriteFile(filepath.Join(out, journalName), []byte("{}"), 0o644); err != nil {
				t.Fatal(err)
			}
			if err := os.Remove(filepath.Join(out, "state.json")); err != nil {
				t.Fatal(err)
			}
		}, []string{"interrupted run", "--resume"}, "complete dataset"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			tc.prepare(t)
			_, err := Run(context.Background(), opts)
			if err == nil {
				t.Fatal("a run into an existing dataset succeeded without --overwrite or --resume")
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not mention %q", err, w)
				}
			}
			if strings.Contains(err.Error(), tc.notWant) {
				t.Errorf("error %q mentions %q", err, tc.notWant)
			}
		})
	}
}
