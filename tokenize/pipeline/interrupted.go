package pipeline

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/gload/gload/internal/safename"
)

// InterruptedRun describes a dataset directory that a tokenize run has not finished (killed, failed, or still
// running): what its journal says was completed. gload inspect shows it instead of "not a dataset".
type InterruptedRun struct {
	Journal   string // the journal's path
	Shards    int    // shards completed and journaled
	Documents int64  // records read so far
	Rows      int64  // rows in the completed shards
	Tokens    int64
	Finished  bool // every record was written; only finalisation remained
}

// Interrupted reads dir's tokenize journal. It returns (nil, nil) when dir has none.
func Interrupted(dir string) (*InterruptedRun, error) {
	path := filepath.Join(dir, journalName)
	data, err := safename.ReadFile(path, maxJournalBytes)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var j journal
	if err := json.Unmarshal(data, &j); err != nil {
		return nil, fmt.Errorf("%s: corrupt journal: %v", path, err)
	}
	return &InterruptedRun{Journal: path, Shards: len(j.Shards), Documents: j.Stats.Documents, Rows: j.Stats.Rows,
		Tokens: j.Stats.Tokens, Finished: j.Finished}, nil
}
