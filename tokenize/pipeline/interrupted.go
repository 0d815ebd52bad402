package pipeline

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
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

// maxJournalBytes bounds what Interrupted reads: a journal lists one small entry per shard (a few hundred bytes).
const maxJournalBytes = 64 << 20

// Interrupted reads dir's tokenize journal. It returns (nil, nil) when dir has none.
func Interrupted(dir string) (*InterruptedRun, error) {
	path := filepath.Join(dir, journalName)
	f, err := os.Open(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, maxJournalBytes+1))
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", path, err)
	}
	if len(data) > maxJournalBytes {
		return nil, fmt.Errorf("%s: larger than %d bytes, not a gload journal", path, maxJournalBytes)
	}
	var j journal
	if err := json.Unmarshal(data, &j); err != nil {
		return nil, fmt.Errorf("%s: corrupt journal: %v", path, err)
	}
	return &InterruptedRun{Journal: path, Shards: len(j.Shards), Documents: j.Stats.Documents, Rows: j.Stats.Rows,
		Tokens: j.Stats.Tokens, Finished: j.Finished}, nil
}
