// Package merge joins the dataset parts that `gload tokenize --task I/N` writes into one dataset, without reading
// a token: shards are hard-linked under their final names, the parts' indexes are joined, and the merged dataset is
// finalized like a single run (metadata, then gload.index last). The rows come in the order of a single run over
// the same inputs, and the merged dataset — shards, index, fingerprint — is the same for any N.
//
// It refuses, naming the parts, anything that would not give that dataset: parts of other inputs, tokenizers or
// flags, a task given twice or missing, N changed between tasks, an unfinished part, a part whose shard changed
// after it was written, an output directory that exists (without Overwrite). It touches only the output
// directory; the parts stay valid (their shards are linked, not moved). A merge killed midway leaves no state.json
// (the dataset's commit point, written last by dataset.Finalize) in the output, so the directory never looks
// complete; run it again with Overwrite.
package merge

import (
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"syscall"

	"github.com/gload/gload/internal/safename"
	"github.com/gload/gload/loader/dataset"
	"github.com/gload/gload/tokenize/pipeline"
)

// ErrParts means the given parts do not make one dataset.
var ErrParts = errors.New("merge: parts do not make one dataset")

// Options control Merge.
type Options struct {
	Overwrite bool         // replace an existing output directory (only files gload writes)
	Logger    *slog.Logger // nil discards
}

// Summary describes the merged dataset.
type Summary struct {
	Parts, Shards int
	Rows          int64
	Fingerprint   string
}

type part struct {
	dir  string
	task *pipeline.Task
	ix   *dataset.Index
}

// Merge joins parts into the dataset directory out.
func Merge(out string, dirs []string, opts Options) (Summary, error) {
	if len(dirs) == 0 {
		return Summary{}, fmt.Errorf("%w: no parts given", ErrParts)
	}
	parts := make([]part, 0, len(dirs))
	for _, d := range dirs {
		p, err := readPart(d)
		if err != nil {
			return Summary{}, err
		}
		parts = append(parts, p)
	}
	ordered, err := checkParts(parts)
	if err != nil {
		return Summary{}, err
	}
	if err := prepareOut(out, opts.Overwrite); err != nil {
		return Summary{}, err
	}
	total := 0
	for _, p := range ordered {
		for _, e := range p.ix.Shards {
			if e.Rows > 0 {
				total++
			}
		}
	}
	var shards []dataset.ShardInfo
	var linked []linkedShard
	for _, p := range ordered {
		var row int64
		for _, e := range p.ix.Shards {
			lengths := p.ix.Lengths[row : row+e.Rows]
			row += e.Rows
			if e.Rows == 0 {
				continue // a part with no rows holds one empty shard; the merged dataset needs none
			}
			// Linked under its final name, so that Finalize renames nothing and the file stamped is the one hashed.
			name := dataset.DataFileName(len(shards), total)
			ls, err := linkVerified(p.dir, e, out, name)
			if err != nil {
				return Summary{}, err
			}
			linked = append(linked, ls)
			shards = append(shards, dataset.ShardInfo{
				Name: name, Rows: e.Rows, Tokens: e.Tokens, Bytes: e.Size, Hash: e.ContentHash,
				Lengths: lengths, Batches: e.Batches,
			})
		}
	}
	if err := dataset.Finalize(out, shards, ordered[0].task.Writer); err != nil {
		return Summary{}, fmt.Errorf("merge: %w", err)
	}
	// Finalize stamped the shards as they were when it ran: that vouches for the bytes hashed above only if no
	// shard changed since it was hashed. Otherwise the merge fails and takes its index and stamp away.
	for _, ls := range linked {
		fi, err := os.Lstat(ls.path)
		if err != nil || !sameStat(fi, ls.stat) {
			return Summary{}, errors.Join(
				fmt.Errorf("merge: shard %s changed while the merge ran (after it was hashed); nothing was stamped: run the merge again", ls.path),
				removeQuiet(filepath.Join(out, dataset.StateFile)), removeQuiet(filepath.Join(out, dataset.IndexFile)),
				removeQuiet(filepath.Join(out, dataset.StampFile)))
		}
	}
	ix, err := dataset.ReadIndex(out)
	if err != nil {
		return Summary{}, fmt.Errorf("merge: %w", err)
	}
	return Summary{Parts: len(parts), Shards: len(ix.Shards), Rows: ix.Rows(), Fingerprint: ix.Fingerprint()}, nil
}

// testHook, when set by a test, runs at the named points of linkVerified ("linked", "hashed") with the path of
// the shard in the output.
var testHook func(point, path string)

type linkedShard struct {
	path string
	stat os.FileInfo // after hashing
}

// linkVerified hard-links part shard e (a regular file, never through a symbolic link) into out under name and
// hashes the linked file from the descriptor it opened, so the bytes checked against the part's index are the
// bytes of the file now in out. It returns the file's stat after hashing.
func linkVerified(partDir string, e dataset.ShardEntry, out, name string) (linkedShard, error) {
	src, err := dataset.ShardPath(partDir, e.Name)
	if err != nil {
		return linkedShard{}, fmt.Errorf("%w: part %s: %w", ErrParts, partDir, err)
	}
	f, fi, err := safename.OpenRegular(src)
	if err != nil {
		return linkedShard{}, fmt.Errorf("%w: part %s: shard %s: %w", ErrParts, partDir, e.Name, err)
	}
	defer f.Close()
	dst := filepath.Join(out, name)
	if err := os.Link(src, dst); err != nil {
		return linkedShard{}, fmt.Errorf("merge: link %s into %s (parts and output must be on one filesystem): %w", src, out, err)
	}
	// The name may have been swapped between the open and the link: the link must be the file opened.
	lfi, err := os.Lstat(dst)
	if err != nil || !lfi.Mode().IsRegular() || !os.SameFile(fi, lfi) {
		return linkedShard{}, fmt.Errorf("%w: part %s: shard %s was replaced while it was linked", ErrParts, partDir, src)
	}
	if testHook != nil {
		testHook("linked", dst)
	}
	h := sha256.New()
	n, err := io.Copy(h, io.NewSectionReader(f, 0, math.MaxInt64))
	if err != nil {
		return linkedShard{}, fmt.Errorf("merge: hash %s: %w", src, err)
	}
	var d dataset.Digest
	h.Sum(d[:0])
	if n != e.Size || d != e.ContentHash {
		return linkedShard{}, fmt.Errorf("%w: part %s: shard %s was modified after it was written (%d bytes, sha256 %s; its gload.index says %d, %s)",
			ErrParts, partDir, src, n, d, e.Size, e.ContentHash)
	}
	if testHook != nil {
		testHook("hashed", dst)
	}
	after, err := f.Stat()
	if err != nil {
		return linkedShard{}, fmt.Errorf("merge: %w", err)
	}
	if !sameStat(after, lfi) {
		return linkedShard{}, fmt.Errorf("%w: part %s: shard %s changed while it was hashed", ErrParts, partDir, src)
	}
	return linkedShard{path: dst, stat: after}, nil
}

// sameStat: the same file, unchanged (size, modification and change times).
func sameStat(a, b os.FileInfo) bool {
	if !os.SameFile(a, b) || a.Size() != b.Size() || !a.ModTime().Equal(b.ModTime()) {
		return false
	}
	sa, ok1 := a.Sys().(*syscall.Stat_t)
	sb, ok2 := b.Sys().(*syscall.Stat_t)
	return !ok1 || !ok2 || sa.Ctim == sb.Ctim
}

func removeQuiet(path string) error {
	if err := os.Remove(path); err != nil && !errors.Is(err, os.ErrNotExist) {
		return err
	}
	return nil
}

// readPart loads a part's task record and index and checks that its shards are what it wrote.
func readPart(dir string) (part, error) {
	if _, err := os.Stat(filepath.Join(dir, "gload.progress.json")); err == nil {
		return part{}, fmt.Errorf("%w: part %s is incomplete (its task did not finish: run it again with --resume)", ErrParts, dir)
	}
	t, err := pipeline.ReadTask(dir)
	if errors.Is(err, os.ErrNotExist) {
		return part{}, fmt.Errorf("%w: %s has no %s: not a part written by gload tokenize --task (or it does not exist)",
			ErrParts, dir, pipeline.TaskFile)
	}
	if err != nil {
		return part{}, fmt.Errorf("%w: part %s: %w", ErrParts, dir, err)
	}
	ix, err := dataset.ReadIndex(dir)
	if err != nil {
		return part{}, fmt.Errorf("%w: part %s is incomplete (no valid gload.index: run its task again with --resume): %w", ErrParts, dir, err)
	}
	// Shards whose stat changed since they were written are hashed against the index here.
	ds, err := dataset.Open(dir, dataset.OpenOptions{})
	if err != nil {
		return part{}, fmt.Errorf("%w: part %s: %w", ErrParts, dir, err)
	}
	defer ds.Close()
	if names := ds.ScannedShards(); len(names) > 0 {
		return part{}, fmt.Errorf("%w: part %s: shard %s was modified after it was written (its content no longer matches gload.index)",
			ErrParts, dir, filepath.Join(dir, names[0]))
	}
	return part{dir: dir, task: t, ix: ix}, nil
}

// checkParts checks that the parts are the N tasks of one run and returns them in task order.
func checkParts(parts []part) ([]part, error) {
	first := parts[0]
	n := first.task.Count
	for _, p := range parts[1:] {
		a, b := first.task, p.task
		switch {
		case a.Count != b.Count:
			return nil, fmt.Errorf("%w: %s is task %d/%d, %s is task %d/%d: N changed between tasks",
				ErrParts, first.dir, a.Index, a.Count, p.dir, b.Index, b.Count)
		case a.Tokenizer != b.Tokenizer:
			return nil, fmt.Errorf("%w: %s and %s were tokenized with different tokenizers (%s, %s)",
				ErrParts, first.dir, p.dir, a.Tokenizer, b.Tokenizer)
		case a.Flags != b.Flags || !reflect.DeepEqual(a.Writer, b.Writer):
			return nil, fmt.Errorf("%w: %s and %s were tokenized with different flags", ErrParts, first.dir, p.dir)
		case a.Inputs != b.Inputs || a.FileCount != b.FileCount:
			return nil, fmt.Errorf("%w: %s and %s were tokenized from different inputs", ErrParts, first.dir, p.dir)
		}
	}
	byTask := make([]*part, n)
	for i := range parts {
		p := &parts[i]
		k := p.task.Index
		if k < 0 || k >= n {
			return nil, fmt.Errorf("%w: %s says task %d/%d", ErrParts, p.dir, k, n)
		}
		if byTask[k] != nil {
			return nil, fmt.Errorf("%w: %s and %s are both task %d/%d", ErrParts, byTask[k].dir, p.dir, k, n)
		}
		byTask[k] = p
	}
	var missing []string
	for k, p := range byTask {
		if p == nil {
			missing = append(missing, fmt.Sprintf("%d/%d", k, n))
		}
	}
	if len(missing) > 0 {
		return nil, fmt.Errorf("%w: no part for task %s", ErrParts, strings.Join(missing, ", "))
	}
	out := make([]part, n)
	next := 0
	for k, p := range byTask {
		if p.task.From != next {
			return nil, fmt.Errorf("%w: %s (task %d/%d) starts at input file %d, the tasks before it end at %d",
				ErrParts, p.dir, k, n, p.task.From, next)
		}
		next = p.task.To
		out[k] = *p
	}
	if next != first.task.FileCount {
		return nil, fmt.Errorf("%w: the parts cover %d of the %d input files", ErrParts, next, first.task.FileCount)
	}
	return out, nil
}

// prepareOut makes an empty output directory; an existing one is refused without overwrite, and with it emptied
// only of files gload writes.
func prepareOut(out string, overwrite bool) error {
	ents, err := os.ReadDir(out)
	switch {
	case errors.Is(err, os.ErrNotExist):
		if err := os.MkdirAll(out, 0o755); err != nil {
			return fmt.Errorf("merge: %w", err)
		}
		return nil
	case err != nil:
		return fmt.Errorf("merge: output %s: %w", out, err)
	case len(ents) == 0:
		return nil
	case !overwrite:
		return fmt.Errorf("merge: output %s exists and is not empty (use --overwrite to replace it)", out)
	}
	for _, e := range ents {
		n := e.Name()
		ours := n == dataset.StateFile || n == dataset.InfoFile || n == dataset.IndexFile || n == dataset.StampFile ||
			strings.HasSuffix(n, ".arrow") || strings.HasSuffix(n, ".tmp")
		if e.IsDir() || !ours {
			return fmt.Errorf("merge: --overwrite: %s holds %s, which gload did not write; refusing to empty it", out, n)
		}
	}
	// The commit point (state.json) and the index first: from here on the directory does not look complete.
	for _, n := range append([]string{dataset.StateFile, dataset.IndexFile}, names(ents)...) {
		if err := os.Remove(filepath.Join(out, n)); err != nil && !errors.Is(err, os.ErrNotExist) {
			return fmt.Errorf("merge: --overwrite: %w", err)
		}
	}
	return nil
}

func names(ents []os.DirEntry) []string {
	out := make([]string, len(ents))
	for i, e := range ents {
		out[i] = e.Name()
	}
	return out
}
