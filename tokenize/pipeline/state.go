package pipeline

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/gload/gload/loader/dataset"
	"github.com/gload/gload/tokenize/corpus"

	"github.com/gload/gload/internal/safename"
)

// journalName is the resume journal: present only while a run is unfinished.
const journalName = "gload.progress.json"

// maxJournalBytes bounds the journal read by --resume: it lists every shard with its per-row lengths, so it grows
// with the dataset (about 5 bytes a row); a gload.index of the same dataset is smaller.
const maxJournalBytes = 4 << 30

// journalVersion 3: shard content hashes are SHA-256 (2: Stats.Written; 1 held CRC-64s).
const journalVersion = 3

// journal records what an interrupted run had completed: its shards and where the input stands after them.
type journal struct {
	Version  int                 `json:"version"`
	Config   string              `json:"config"` // hash of inputs and every option that changes the output
	Shards   []dataset.ShardInfo `json:"shards"`
	Next     corpus.Position     `json:"next"`
	Stats    Stats               `json:"stats"`
	Finished bool                `json:"finished"` // every record written; only Finalize remains
	// ChatTemplateDate is the instant strftime_now() returns in the run's chat template renders (RFC 3339); a
	// --resume without --template-date takes it, so that the whole dataset has one date.
	ChatTemplateDate string `json:"chat_template_date,omitempty"`
}

type state struct {
	dir     string
	plan    *corpus.Plan
	j       journal
	wopts   dataset.WriterOptions
	task    *Task // --task: the part's record, written at finalize
	resumed bool
}

func (s *state) journalPath() string { return filepath.Join(s.dir, journalName) }

// save writes the journal atomically.
func (s *state) save() error { return saveJournal(s.journalPath(), &s.j) }

func writeFileAtomic(path string, data []byte) error {
	tmp := path + ".tmp"
	f, err := safename.OpenFile(tmp, os.O_CREATE|os.O_TRUNC|os.O_WRONLY, 0o644)
	if err != nil {
		return fmt.Errorf("tokenize: write %s: %w", path, err)
	}
	_, werr := f.Write(data)
	serr := f.Sync()
	cerr := f.Close()
	if err := errors.Join(werr, serr, cerr); err != nil {
		os.Remove(tmp)
		return fmt.Errorf("tokenize: write %s: %w", path, err)
	}
	if err := os.Rename(tmp, path); err != nil {
		os.Remove(tmp)
		return fmt.Errorf("tokenize: write %s: %w", path, err)
	}
	return nil
}

// configHash covers everything that changes the bytes of the output: the input files (name, size, mtime), the
// tokenizer and every option.
func configHash(o *Options, plan *corpus.Plan) string {
	h := sha256.New()
	enc := json.NewEncoder(h)
	_ = enc.Encode(plan.Files)
	for _, f := range plan.Files {
		if fi, err := os.Stat(f.Path); err == nil {
			_ = enc.Encode(fi.ModTime().UnixNano())
		}
	}
	_ = enc.Encode(o.Corpus)
	_ = enc.Encode([]any{o.Engine.Hash(), o.AddSpecialTokens, o.AppendEOS, o.EOSID, o.MaxLength, o.Overflow,
		o.MinLength, o.ShardSize, o.RowsPerBatch, o.Special})
	if o.Chat != nil {
		_ = enc.Encode(o.Chat.Hash())
	}
	if o.TaskCount > 0 {
		_ = enc.Encode([]int{o.TaskIndex, o.TaskCount})
	}
	return hex.EncodeToString(h.Sum(nil))
}

// prepareOut checks the output directory against --overwrite/--resume and loads or starts the journal.
func prepareOut(o *Options, plan *corpus.Plan) (*state, error) {
	st := &state{dir: o.Out, plan: plan}
	st.wopts = dataset.WriterOptions{
		Columns:       o.Corpus.KeepColumns,
		RowsPerBatch:  o.RowsPerBatch,
		TokenizerHash: o.Engine.Hash(),
		Special:       o.Special,
		Labels:        o.Chat != nil,
	}
	if o.Chat != nil && !o.Chat.TemplateDate().IsZero() {
		st.wopts.ChatTemplateDate = o.Chat.TemplateDate().UTC().Format(time.RFC3339Nano)
	}
	cfg := configHash(o, plan)
	entries, err := os.ReadDir(o.Out)
	entries = withoutLock(entries)
	switch {
	case errors.Is(err, os.ErrNotExist):
		if o.Resume {
			return nil, fmt.Errorf("tokenize: --resume: %s does not exist", o.Out)
		}
		if err := os.MkdirAll(o.Out, 0o755); err != nil {
			return nil, fmt.Errorf("tokenize: create %s: %w", o.Out, err)
		}
	case err != nil:
		return nil, fmt.Errorf("tokenize: output %s: %w", o.Out, err)
	case len(entries) == 0:
		// Nothing completed yet (a run killed at its very start, or a new directory): --resume starts afresh.
	case o.Resume:
		data, err := safename.ReadFile(st.journalPath(), maxJournalBytes)
		if errors.Is(err, os.ErrNotExist) {
			if _, serr := os.Stat(filepath.Join(o.Out, "state.json")); serr == nil {
				return nil, fmt.Errorf("tokenize: --resume: %s is already a complete dataset", o.Out)
			}
			if !onlyTempFiles(entries) {
				return nil, fmt.Errorf("tokenize: --resume: %s has no %s (not an interrupted gload run)", o.Out, journalName)
			}
			// Killed before its first journal was written: nothing was completed, start afresh.
			if err := clearDataset(o.Out, entries); err != nil {
				return nil, err
			}
			break
		}
		if err != nil {
			return nil, fmt.Errorf("tokenize: --resume: %w", err)
		}
		if err := json.Unmarshal(data, &st.j); err != nil {
			return nil, fmt.Errorf("tokenize: --resume: %s is corrupt: %v", st.journalPath(), err)
		}
		if o.Chat != nil && st.j.ChatTemplateDate != "" && !o.Chat.TemplateDateGiven() {
			d, err := time.Parse(time.RFC3339Nano, st.j.ChatTemplateDate)
			if err != nil {
				return nil, fmt.Errorf("tokenize: --resume: %s is corrupt: chat_template_date: %v", st.journalPath(), err)
			}
			o.Chat.SetTemplateDate(d)
			cfg = configHash(o, plan)
			st.wopts.ChatTemplateDate = st.j.ChatTemplateDate
		}
		if st.j.Version != journalVersion {
			return nil, fmt.Errorf("tokenize: --resume: journal version %d, want %d", st.j.Version, journalVersion)
		}
		for i, s := range st.j.Shards {
			if err := dataset.CheckShardName(s.Name); err != nil {
				return nil, fmt.Errorf("tokenize: --resume: %s: shard %d: %w", st.journalPath(), i, err)
			}
		}
		if st.j.Config != cfg {
			return nil, fmt.Errorf("tokenize: --resume: the inputs, tokenizer or flags differ from the interrupted run; start again with --overwrite")
		}
		if err := removeStray(o.Out, st.j.Shards); err != nil {
			return nil, err
		}
		if err := verifyJournaled(o.Out, st.j.Shards); err != nil {
			return nil, err
		}
		st.resumed = true
		return st, nil
	case o.Overwrite:
		if err := clearDataset(o.Out, entries); err != nil {
			return nil, err
		}
	default:
		if onlyDatasetFiles(entries) {
			if _, err := os.Stat(st.journalPath()); err == nil {
				return nil, fmt.Errorf("tokenize: output %s holds an interrupted run (its journal %s): --resume continues "+
					"it, --overwrite starts again (it deletes only files gload wrote)", o.Out, journalName)
			}
			return nil, fmt.Errorf("tokenize: output %s already holds a complete dataset: --overwrite replaces it (it "+
				"deletes only files gload wrote), or choose another --out", o.Out)
		}
		return nil, fmt.Errorf("tokenize: output %s exists and is not empty (use --overwrite to replace it or --resume to continue an interrupted run)", o.Out)
	}
	st.j = journal{Version: journalVersion, Config: cfg}
	if o.Chat != nil {
		st.j.ChatTemplateDate = st.wopts.ChatTemplateDate
	}
	if err := st.save(); err != nil {
		return nil, err
	}
	return st, nil
}

// withoutLock drops the run's own lock file from a directory listing.
func withoutLock(entries []os.DirEntry) []os.DirEntry {
	out := entries[:0:0]
	for _, e := range entries {
		if e.Name() != lockName {
			out = append(out, e)
		}
	}
	return out
}

// verifyJournaled checks that every shard the journal lists still holds the
// bytes that were hashed when it was written (renamed to its data file name by
// an interrupted Finalize, or not yet).
func verifyJournaled(dir string, shards []dataset.ShardInfo) error {
	for i, s := range shards {
		if _, err := os.Lstat(filepath.Join(dir, s.Name)); errors.Is(err, os.ErrNotExist) {
			s.Name = dataset.DataFileName(i, len(shards))
		}
		if err := dataset.VerifyShard(dir, s); err != nil {
			return fmt.Errorf("tokenize: --resume: %w; the shard was modified after it was written: start again with --overwrite", err)
		}
	}
	return nil
}

// isDatasetFile reports whether a directory entry is something a gload run writes.
func isDatasetFile(name string) bool {
	switch name {
	case "state.json", "dataset_info.json", "gload.index", dataset.StampFile, journalName, TaskFile:
		return true
	}
	return strings.HasSuffix(name, ".arrow") || strings.HasSuffix(name, ".tmp") || strings.Contains(name, ".arrow.")
}

// onlyTempFiles reports whether every entry is a temporary file a gload run writes (name.tmp).
func onlyTempFiles(entries []os.DirEntry) bool {
	for _, e := range entries {
		if e.IsDir() || !strings.HasSuffix(e.Name(), ".tmp") || !isDatasetFile(e.Name()) {
			return false
		}
	}
	return true
}

// onlyDatasetFiles reports whether every entry is a file gload writes.
func onlyDatasetFiles(entries []os.DirEntry) bool {
	for _, e := range entries {
		if e.IsDir() || !isDatasetFile(e.Name()) {
			return false
		}
	}
	return true
}

// clearDataset removes what a previous run wrote; anything else in the directory makes --overwrite refuse.
func clearDataset(dir string, entries []os.DirEntry) error {
	for _, e := range entries {
		if e.IsDir() || !isDatasetFile(e.Name()) {
			return fmt.Errorf("tokenize: --overwrite: %s holds %s, which gload did not write; refusing to delete the directory", dir, e.Name())
		}
	}
	for _, e := range entries {
		if err := os.Remove(filepath.Join(dir, e.Name())); err != nil {
			return fmt.Errorf("tokenize: --overwrite: %w", err)
		}
	}
	return nil
}

// removeStray deletes shards and temporary files that the journal does not list (written after the last journal
// save of the interrupted run); they are rewritten identically.
func removeStray(dir string, keep []dataset.ShardInfo) error {
	known := make(map[string]bool, len(keep))
	for _, s := range keep {
		known[s.Name] = true
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		return fmt.Errorf("tokenize: --resume: %w", err)
	}
	for _, e := range entries {
		n := e.Name()
		if n == journalName || n == lockName || known[n] || !isDatasetFile(n) {
			continue
		}
		if strings.HasPrefix(n, "data-") && strings.HasSuffix(n, ".arrow") {
			continue // renamed by an interrupted Finalize; Finalize handles it
		}
		if err := os.Remove(filepath.Join(dir, n)); err != nil {
			return fmt.Errorf("tokenize: --resume: remove %s: %w", n, err)
		}
	}
	return nil
}
