package pipeline

// Tokenizing as tasks of a cluster scheduler: `--task I/N` takes a
// deterministic, contiguous share of the input files and writes a complete
// dataset part that `gload merge` joins with the others.
//
// The unit of work is an entry of the corpus plan: an input file, or a piece
// of a large plain line file (corpus/pieces.go, cut independently of N). In a
// task every entry starts a new shard (and in any run every piece after a
// file's first does), so the shards of an entry are the same bytes whichever
// task wrote them:
// merged parts give the same shards, index and fingerprint for any N, in the
// row order of a single run over the same inputs.

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"

	"github.com/gload/gload/internal/readcap"
	"github.com/gload/gload/loader/dataset"
	"github.com/gload/gload/tokenize/corpus"
)

// TaskFile describes a dataset part: which task of how many wrote it, from what.
const TaskFile = "gload.task.json"

const taskVersion = 1

// Task is the content of gload.task.json.
type Task struct {
	Version int `json:"version"`
	Index   int `json:"task"`  // I of --task I/N
	Count   int `json:"tasks"` // N
	// Plan entries (files and pieces) [From, To) of the whole input plan are this part's.
	From int `json:"from_file"`
	To   int `json:"to_file"`
	// Inputs identifies the whole input plan (paths, sizes, mtimes), Tokenizer the
	// tokenizer (and chat template), Flags every other option that changes the
	// output: parts agree on all three or do not belong together.
	Inputs    string                `json:"inputs"`
	Tokenizer string                `json:"tokenizer"`
	Flags     string                `json:"flags"`
	Writer    dataset.WriterOptions `json:"writer"`
	FileCount int                   `json:"files"`
}

// taskRange splits files into n contiguous groups of about equal bytes and
// returns group i as [from, to): file k goes to the group its first byte's
// share of the total falls in. It depends only on the sizes and n.
func taskRange(files []corpus.File, i, n int) (from, to int) {
	var total int64
	for _, f := range files {
		total += f.Size
	}
	group := func(k int) int { // the group of file k
		var before int64
		for _, f := range files[:k] {
			before += f.Size
		}
		if total == 0 {
			return k * n / max(len(files), 1)
		}
		return int(min(int64(n-1), before*int64(n)/total))
	}
	from, to = len(files), len(files)
	for k := range files {
		g := group(k)
		if g >= i && from == len(files) {
			from = k
		}
		if g > i {
			to = k
			break
		}
	}
	if from > to {
		from = to
	}
	return from, to
}

// taskPlan narrows plan to the task's files and fills the task record.
func taskPlan(o *Options, plan *corpus.Plan) (*corpus.Plan, *Task) {
	t := &Task{Version: taskVersion, Index: o.TaskIndex, Count: o.TaskCount, FileCount: len(plan.Files)}
	t.From, t.To = taskRange(plan.Files, o.TaskIndex, o.TaskCount)
	t.Inputs, t.Tokenizer, t.Flags = taskIdentity(o, plan)
	sub := *plan
	sub.Files = plan.Files[t.From:t.To]
	sub.TotalBytes = 0
	for _, f := range sub.Files {
		sub.TotalBytes += f.Size
	}
	return &sub, t
}

// taskIdentity hashes the whole input plan, the tokenizer, and the flags, separately.
func taskIdentity(o *Options, plan *corpus.Plan) (inputs, tok, flags string) {
	sum := func(v ...any) string {
		h := sha256.New()
		enc := json.NewEncoder(h)
		for _, x := range v {
			_ = enc.Encode(x)
		}
		return hex.EncodeToString(h.Sum(nil))[:32]
	}
	var mtimes []int64
	for _, f := range plan.Files {
		if fi, err := os.Stat(f.Path); err == nil {
			mtimes = append(mtimes, fi.ModTime().UnixNano())
		}
	}
	inputs = sum(plan.Files, mtimes)
	tok = o.Engine.Hash()
	if o.Chat != nil {
		tok = sum(tok, o.Chat.Hash())
	}
	flags = sum(o.Corpus, o.AddSpecialTokens, o.AppendEOS, o.EOSID, o.MaxLength, o.Overflow, o.MinLength,
		o.ShardSize, o.RowsPerBatch, o.Special)
	return inputs, tok, flags
}

// writeTask stores the part's task record (before Finalize, so a part with gload.index always has it).
func writeTask(dir string, t *Task) error {
	b, err := json.MarshalIndent(t, "", "  ")
	if err != nil {
		return fmt.Errorf("tokenize: %s: %w", TaskFile, err)
	}
	return writeFileAtomic(filepath.Join(dir, TaskFile), append(b, '\n'))
}

// ReadTask reads a part's task record.
func ReadTask(dir string) (*Task, error) {
	b, err := readcap.File(filepath.Join(dir, TaskFile), readcap.Limit{Bytes: 16 << 20, Name: "a part's task file"})
	if err != nil {
		return nil, err
	}
	var t Task
	if err := json.Unmarshal(b, &t); err != nil {
		return nil, fmt.Errorf("%s: %w", filepath.Join(dir, TaskFile), err)
	}
	if t.Version != taskVersion {
		return nil, fmt.Errorf("%s: version %d, this build reads %d", filepath.Join(dir, TaskFile), t.Version, taskVersion)
	}
	return &t, nil
}
