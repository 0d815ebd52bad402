package pipeline

// The end-to-end count of a run. Two independent ledgers are kept, one by the reader goroutine (what it took out
// of the inputs) and one by the ordered writer (what it wrote or skipped); finalisation refuses unless they agree
// and the reader reached the end of every input. A lost, doubled or reordered-away chunk anywhere between the two
// therefore makes the run fail instead of finalising a complete-looking dataset.

import (
	"errors"
	"fmt"
	"io"
	"sort"
	"strings"

	"github.com/gload/gload/loader/dataset"
	"github.com/gload/gload/tokenize/corpus"
)

// tally is what one side saw of one input file.
type tally struct {
	Records int64 // records (lines, rows, files)
	Bytes   int64 // their sizes (corpus.Record.Size)
}

// readLedger is kept by the reader goroutine only; it is read after that goroutine ended.
type readLedger struct {
	perFile   map[int]tally
	eof       bool // corpus.Reader.Next returned io.EOF
	filesDone int  // corpus.Reader.FilesDone at the end
	files     int  // inputs in the plan
}

func (l *readLedger) add(file int, size int64) {
	if l.perFile == nil {
		l.perFile = make(map[int]tally)
	}
	t := l.perFile[file]
	t.Records++
	t.Bytes += size
	l.perFile[file] = t
}

// writeLedger is kept by the ordered writer only.
type writeLedger struct {
	perFile map[int]tally
	written int64            // documents that gave at least one row
	skipped map[string]int64 // documents skipped, by reason
	rows    int64            // rows appended to shards in this run
	tokens  int64
}

func (l *writeLedger) add(file int, size int64) {
	if l.perFile == nil {
		l.perFile = make(map[int]tally)
	}
	t := l.perFile[file]
	t.Records++
	t.Bytes += size
	l.perFile[file] = t
}

func (l *writeLedger) skip(reason string) {
	if l.skipped == nil {
		l.skipped = make(map[string]int64)
	}
	l.skipped[reason]++
}

// check compares the two ledgers of this run, and the journal's totals against the shards, and returns an error
// describing every disagreement; nil when the books balance.
func checkLedgers(r *readLedger, w *writeLedger, stats *Stats, shards []dataset.ShardInfo, paths func(int) string) error {
	var bad []string
	if !r.eof {
		bad = append(bad, "the reader stopped before the end of the input")
	}
	if r.filesDone != r.files {
		bad = append(bad, fmt.Sprintf("the reader finished %d of %d inputs", r.filesDone, r.files))
	}
	files := map[int]bool{}
	for f := range r.perFile {
		files[f] = true
	}
	for f := range w.perFile {
		files[f] = true
	}
	order := make([]int, 0, len(files))
	for f := range files {
		order = append(order, f)
	}
	sort.Ints(order)
	for _, f := range order {
		rt, wt := r.perFile[f], w.perFile[f]
		if rt != wt {
			bad = append(bad, fmt.Sprintf("%s: read %d records (%d bytes), accounted for %d (%d bytes)",
				paths(f), rt.Records, rt.Bytes, wt.Records, wt.Bytes))
		}
	}
	var docs, skipped int64
	for _, t := range w.perFile {
		docs += t.Records
	}
	for _, n := range w.skipped {
		skipped += n
	}
	if w.written+skipped != docs {
		bad = append(bad, fmt.Sprintf("%d documents accounted for, but %d written + %d skipped", docs, w.written, skipped))
	}
	var rows, tokens int64
	for _, s := range shards {
		rows += s.Rows
		tokens += s.Tokens
	}
	if rows != stats.Rows || tokens != stats.Tokens {
		bad = append(bad, fmt.Sprintf("the shards hold %d rows (%d tokens), the run counted %d (%d)",
			rows, tokens, stats.Rows, stats.Tokens))
	}
	if stats.Documents != stats.SkippedTotal()+stats.Written {
		bad = append(bad, fmt.Sprintf("%d documents in total (resumed parts included), but %d skipped + %d written",
			stats.Documents, stats.SkippedTotal(), stats.Written))
	}
	if len(bad) == 0 {
		return nil
	}
	return fmt.Errorf("tokenize: the end-to-end count does not balance, so the dataset was not finalized: %s",
		strings.Join(bad, "; "))
}

// proveFinished decides whether a resumed run has nothing left to read, from the input rather than from the
// journal's word: the reader opened at the journal's position must be at the end of every input. When it is, the
// journal's account must also balance against the input as a fresh run's does at its end: the input holds exactly
// the records the journal counted (one framing pass over it, no tokenizing), written + skipped = read, and the
// shards hold the rows and tokens counted. It returns false (resume the run) when more input follows, and an
// error, naming the journal's figures and the input's, when the account does not balance.
func proveFinished(plan *corpus.Plan, j *journal) (bool, error) {
	r, err := plan.Open(j.Next)
	if err != nil {
		return false, fmt.Errorf("tokenize: --resume: the journal's position: %w", err)
	}
	_, err = r.Next()
	done := r.FilesDone()
	r.Close()
	if err == nil {
		return false, nil
	}
	if !errors.Is(err, io.EOF) {
		return false, fmt.Errorf("tokenize: --resume: %w", err)
	}
	var bad []string
	if done != len(plan.Files) {
		bad = append(bad, fmt.Sprintf("the reader finished %d of %d inputs", done, len(plan.Files)))
	}
	all, err := plan.Open(corpus.Position{})
	if err != nil {
		return false, fmt.Errorf("tokenize: --resume: %w", err)
	}
	var records int64
	for {
		_, err := all.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			all.Close()
			return false, fmt.Errorf("tokenize: --resume: counting the input: %w", err)
		}
		records++
	}
	all.Close()
	s := &j.Stats
	if records != s.Documents {
		bad = append(bad, fmt.Sprintf("the input holds %d records, the journal accounts for %d", records, s.Documents))
	}
	if s.Documents != s.SkippedTotal()+s.Written {
		bad = append(bad, fmt.Sprintf("%d documents, but %d skipped + %d written", s.Documents, s.SkippedTotal(), s.Written))
	}
	var rows, tokens int64
	for _, sh := range j.Shards {
		rows += sh.Rows
		tokens += sh.Tokens
	}
	if rows != s.Rows || tokens != s.Tokens {
		bad = append(bad, fmt.Sprintf("the shards hold %d rows (%d tokens), the journal counted %d (%d)", rows, tokens, s.Rows, s.Tokens))
	}
	if len(bad) > 0 {
		return false, fmt.Errorf("tokenize: --resume: the journal's account does not balance against the input, so the dataset "+
			"was not finalized (start again with --overwrite): %s", strings.Join(bad, "; "))
	}
	return true, nil
}
