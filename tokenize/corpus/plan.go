package corpus

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/klauspost/compress/gzip"
	"github.com/klauspost/compress/zstd"

	"github.com/gload/gload/internal/readcap"
)

// Compression names the compression of a line-based input.
type Compression string

// Compressions, told by the file extension (.gz, .zst or .zstd).
const (
	CompressNone Compression = "none"
	CompressGzip Compression = "gzip"
	CompressZstd Compression = "zstd"
)

// File is one input file of a [Plan].
type File struct {
	Path        string      // as given, or joined under the directory given
	Size        int64       // bytes on disk (compressed); of a piece, the piece's bytes
	Format      Format      // jsonl, text, parquet or hf (one Arrow stream shard)
	Compression Compression // none for parquet and hf
	// Piece numbers the pieces of a large plain line file from 1 (pieces.go), Offset is where the piece
	// starts in the file; both are 0 for a file read whole.
	Offset int64 `json:",omitempty"`
	Piece  int   `json:",omitempty"`
}

// Plan is the checked, ordered list of input files. Build it with [NewPlan];
// it is immutable afterwards and safe to share.
type Plan struct {
	Files      []File
	TotalBytes int64 // sum of Files[i].Size
	opts       Options
}

// Options returns the options the plan was built with, defaults filled in.
func (p *Plan) Options() Options { return p.opts }

// InputError is one problem with one input, as listed by a [PlanError].
type InputError struct {
	Path   string
	Err    error  // ErrNotFound, ErrUnreadable, ErrUnknownFormat or ErrNoInputs
	Detail string // what exactly is wrong
}

func (e *InputError) Error() string { return e.Path + ": " + e.Detail }

// Unwrap returns the sentinel error.
func (e *InputError) Unwrap() error { return e.Err }

// PlanError lists every bad input found by [NewPlan].
type PlanError struct {
	Problems []*InputError
}

func (e *PlanError) Error() string {
	var b strings.Builder
	if len(e.Problems) == 1 {
		b.WriteString("corpus: bad input: ")
		b.WriteString(e.Problems[0].Error())
		return b.String()
	}
	fmt.Fprintf(&b, "corpus: %d bad inputs:", len(e.Problems))
	for _, p := range e.Problems {
		b.WriteString("\n\t")
		b.WriteString(p.Error())
	}
	return b.String()
}

// Unwrap returns the problems, so errors.Is(err, ErrNotFound) tells whether
// any input was missing.
func (e *PlanError) Unwrap() []error {
	out := make([]error, len(e.Problems))
	for i, p := range e.Problems {
		out[i] = p
	}
	return out
}

// NewPlan expands and checks the inputs: files, directories (walked
// recursively; files of a known extension taken, sorted by path; names
// starting with "." skipped; a directory holding state.json read as a
// Hugging Face save_to_disk dataset) and globs ([filepath.Glob], sorted;
// matches of an unknown extension skipped). Inputs keep their order; a file
// reached twice is read once, at its first place.
//
// Every file is opened and its header checked (compression magic, first JSON
// byte, Parquet footer and Arrow schema including the text column) before
// NewPlan returns, so a bad input fails the run before any output is
// written. All problems are reported together in one [*PlanError].
func NewPlan(paths []string, opts Options) (*Plan, error) {
	opts, err := opts.withDefaults()
	if err != nil {
		return nil, err
	}
	pl := planner{opts: opts, seen: map[string]bool{}}
	if len(paths) == 0 {
		return nil, fmt.Errorf("%w: no input paths given", ErrNoInputs)
	}
	for _, p := range paths {
		pl.input(p)
	}
	if len(pl.problems) > 0 {
		return nil, &PlanError{Problems: pl.problems}
	}
	if len(pl.files) == 0 {
		return nil, fmt.Errorf("%w: %s", ErrNoInputs, strings.Join(paths, ", "))
	}
	plan := &Plan{Files: pl.files, opts: opts}
	for _, f := range plan.Files {
		plan.TotalBytes += f.Size
	}
	return plan, nil
}

type planner struct {
	opts     Options
	files    []File
	problems []*InputError
	seen     map[string]bool
}

func (pl *planner) problem(path string, sentinel error, format string, args ...any) {
	pl.problems = append(pl.problems, &InputError{Path: path, Err: sentinel, Detail: fmt.Sprintf(format, args...)})
}

// statProblem records a failed stat or open.
func (pl *planner) statProblem(path string, err error) {
	var pe *fs.PathError
	if errors.As(err, &pe) {
		err = pe.Err
	}
	if errors.Is(err, fs.ErrNotExist) {
		pl.problem(path, ErrNotFound, "not found")
		return
	}
	pl.problem(path, ErrUnreadable, "%v", err)
}

func hasGlobMeta(p string) bool { return strings.ContainsAny(p, "*?[") }

// input expands one command-line input.
func (pl *planner) input(p string) {
	st, err := os.Stat(p)
	if err == nil {
		if st.IsDir() {
			pl.dir(p)
		} else {
			pl.file(p, st, true)
		}
		return
	}
	if !errors.Is(err, fs.ErrNotExist) || !hasGlobMeta(p) {
		pl.statProblem(p, err)
		return
	}
	matches, gerr := filepath.Glob(p)
	if gerr != nil {
		pl.problem(p, ErrNotFound, "bad glob pattern: %v", gerr)
		return
	}
	sort.Strings(matches)
	before := len(pl.files) + len(pl.problems)
	for _, m := range matches {
		st, err := os.Stat(m)
		switch {
		case err != nil:
			pl.statProblem(m, err)
		case st.IsDir():
			pl.dir(m)
		default:
			pl.file(m, st, false)
		}
	}
	if len(pl.files)+len(pl.problems) == before {
		if len(matches) == 0 {
			pl.problem(p, ErrNotFound, "glob matches nothing")
		} else {
			pl.problem(p, ErrNoInputs, "glob matches %d paths, none of a known input format", len(matches))
		}
	}
}

// dir expands a directory: a Hugging Face dataset, or a tree walked for files
// of known extensions.
func (pl *planner) dir(d string) {
	if isHFDir(d) {
		if pl.opts.Format != FormatAuto && pl.opts.Format != FormatHF {
			pl.problem(d, ErrUnknownFormat, "is a Hugging Face dataset directory, but format is %s", pl.opts.Format)
			return
		}
		pl.hfDir(d)
		return
	}
	if fileExists(filepath.Join(d, "dataset_dict.json")) {
		pl.problem(d, ErrUnknownFormat, "is a Hugging Face DatasetDict; pass one split's directory (e.g. %s)", filepath.Join(d, "train"))
		return
	}
	type unit struct {
		path string
		st   fs.FileInfo
		hf   bool
	}
	var units []unit
	problems := len(pl.problems)
	walkErr := filepath.WalkDir(d, func(p string, de fs.DirEntry, err error) error {
		if err != nil {
			pl.statProblem(p, err)
			if de != nil && de.IsDir() {
				return fs.SkipDir
			}
			return nil
		}
		if p != d && strings.HasPrefix(de.Name(), ".") {
			if de.IsDir() {
				return fs.SkipDir
			}
			return nil
		}
		if de.IsDir() {
			if p != d && isHFDir(p) {
				if pl.opts.Format == FormatAuto || pl.opts.Format == FormatHF {
					units = append(units, unit{path: p, hf: true})
				}
				return fs.SkipDir
			}
			return nil
		}
		if _, _, ok := classify(p, pl.opts.Format, false); !ok {
			return nil
		}
		st, err := os.Stat(p) // follows symlinks
		if err != nil {
			pl.statProblem(p, err)
			return nil
		}
		if st.Mode().IsRegular() {
			units = append(units, unit{path: p, st: st})
		}
		return nil
	})
	if walkErr != nil {
		pl.problem(d, ErrUnreadable, "walk: %v", walkErr)
		return
	}
	sort.SliceStable(units, func(i, j int) bool { return units[i].path < units[j].path })
	if len(units) == 0 {
		if len(pl.problems) == problems {
			pl.problem(d, ErrNoInputs, "directory holds no input files of a known format")
		}
		return
	}
	for _, u := range units {
		if u.hf {
			pl.hfDir(u.path)
		} else {
			pl.file(u.path, u.st, false)
		}
	}
}

// file checks one file. explicit is true for a file named on the command
// line: it must be of a known format (or the format given); files found by
// a walk or glob with unknown extensions are skipped silently.
func (pl *planner) file(p string, st fs.FileInfo, explicit bool) {
	format, comp, ok := classify(p, pl.opts.Format, explicit)
	if !ok {
		if explicit {
			pl.problem(p, ErrUnknownFormat, "unknown extension %q (want .jsonl, .json, .ndjson or .txt, optionally .gz or .zst; .parquet; .arrow)", filepath.Ext(p))
		}
		return
	}
	if !st.Mode().IsRegular() {
		pl.problem(p, ErrUnreadable, "not a regular file")
		return
	}
	pl.add(File{Path: p, Size: st.Size(), Format: format, Compression: comp})
}

func (pl *planner) add(f File) {
	key := f.Path
	if abs, err := filepath.Abs(f.Path); err == nil {
		key = abs
	}
	if pl.seen[key] {
		return
	}
	pl.seen[key] = true
	if detail, sentinel := pl.check(f); detail != "" {
		pl.problem(f.Path, sentinel, "%s", detail)
		return
	}
	pieces, err := splitPieces(f, pl.opts)
	if err != nil {
		pl.problem(f.Path, ErrUnreadable, "%v", err)
		return
	}
	pl.files = append(pl.files, pieces...)
}

// classify tells a file's format and compression from its name. With a
// format other than auto, an explicit file is taken whatever its extension.
func classify(p string, want Format, explicit bool) (Format, Compression, bool) {
	name := strings.ToLower(filepath.Base(p))
	comp := CompressNone
	switch {
	case strings.HasSuffix(name, ".gz"):
		comp, name = CompressGzip, strings.TrimSuffix(name, ".gz")
	case strings.HasSuffix(name, ".zst"):
		comp, name = CompressZstd, strings.TrimSuffix(name, ".zst")
	case strings.HasSuffix(name, ".zstd"):
		comp, name = CompressZstd, strings.TrimSuffix(name, ".zstd")
	}
	var f Format
	switch filepath.Ext(name) {
	case ".jsonl", ".json", ".ndjson":
		f = FormatJSONL
	case ".txt":
		f = FormatText
	case ".parquet":
		f = FormatParquet
	case ".arrow":
		f = FormatHF
	}
	if want != FormatAuto && f != want {
		if !explicit {
			return "", "", false
		}
		f = want
	}
	if f == "" {
		return "", "", false
	}
	if (f == FormatParquet || f == FormatHF) && comp != CompressNone {
		return "", "", false
	}
	return f, comp, true
}

func fileExists(p string) bool {
	st, err := os.Stat(p)
	return err == nil && st.Mode().IsRegular()
}

// isHFDir reports whether d looks like a datasets save_to_disk directory.
func isHFDir(d string) bool { return fileExists(filepath.Join(d, "state.json")) }

// hfState is the part of a save_to_disk state.json that gload reads.
type hfState struct {
	DataFiles []struct {
		Filename string `json:"filename"`
	} `json:"_data_files"`
}

// hfDir adds the shards of a save_to_disk directory in state.json order.
func (pl *planner) hfDir(d string) {
	statePath := filepath.Join(d, "state.json")
	raw, err := readcap.File(statePath, readcap.Limit{Bytes: 64 << 20, Name: "a Hugging Face state.json"})
	if err != nil {
		pl.statProblem(statePath, err)
		return
	}
	var st hfState
	if err := json.Unmarshal(raw, &st); err != nil {
		pl.problem(statePath, ErrUnknownFormat, "parse state.json: %v", err)
		return
	}
	if len(st.DataFiles) == 0 {
		pl.problem(statePath, ErrNoInputs, "_data_files lists no shards")
		return
	}
	for _, df := range st.DataFiles {
		name := df.Filename
		if name == "" || !filepath.IsLocal(name) {
			pl.problem(statePath, ErrUnknownFormat, "shard name %q is not a file inside the dataset directory", name)
			continue
		}
		p := filepath.Join(d, name)
		fst, err := os.Stat(p)
		if err != nil {
			pl.statProblem(p, err)
			continue
		}
		if !fst.Mode().IsRegular() {
			pl.problem(p, ErrUnreadable, "not a regular file")
			continue
		}
		pl.add(File{Path: p, Size: fst.Size(), Format: FormatHF, Compression: CompressNone})
	}
}

// check opens f and looks at its header. It returns "" when f looks usable.
func (pl *planner) check(f File) (detail string, sentinel error) {
	fh, err := os.Open(f.Path)
	if err != nil {
		var pe *fs.PathError
		if errors.As(err, &pe) {
			err = pe.Err
		}
		if errors.Is(err, fs.ErrNotExist) {
			return "not found", ErrNotFound
		}
		return err.Error(), ErrUnreadable
	}
	defer fh.Close()
	switch f.Format {
	case FormatJSONL, FormatText:
		return checkLines(fh, f)
	case FormatParquet:
		return checkParquet(fh, pl.opts)
	case FormatHF:
		return checkArrow(fh, pl.opts)
	}
	return fmt.Sprintf("unsupported format %q", f.Format), ErrUnknownFormat
}

// checkLines checks the compression header and, for JSON Lines, that the
// data does not open a JSON array.
func checkLines(fh *os.File, f File) (string, error) {
	if f.Size == 0 {
		return "", nil
	}
	rd, closeFn, err := decompressorN(bufio.NewReaderSize(fh, 64<<10), f.Compression, 1)
	if err != nil {
		return fmt.Sprintf("not %s data: %v", f.Compression, err), ErrUnknownFormat
	}
	defer closeFn()
	head := make([]byte, 4096)
	n, err := io.ReadFull(rd, head)
	if err != nil && err != io.EOF && err != io.ErrUnexpectedEOF {
		if f.Compression == CompressNone {
			return fmt.Sprintf("read: %v", err), ErrUnreadable
		}
		if errors.Is(err, zstd.ErrMagicMismatch) || errors.Is(err, gzip.ErrHeader) {
			return fmt.Sprintf("not %s data: %v", f.Compression, err), ErrUnknownFormat
		}
		return fmt.Sprintf("corrupt %s data: %v", f.Compression, err), ErrUnknownFormat
	}
	if f.Format != FormatJSONL {
		return "", nil
	}
	head = bytes.TrimPrefix(head[:n], bom)
	head = bytes.TrimLeft(head, " \t\r\n")
	if len(head) > 0 && head[0] == '[' {
		return "starts with '[': a JSON array file, not JSON Lines (one object per line)", ErrUnknownFormat
	}
	return "", nil
}

var bom = []byte("\xef\xbb\xbf")
