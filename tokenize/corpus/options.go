package corpus

import (
	"errors"
	"fmt"
	"strings"
)

// Format names an input format.
type Format string

// Input formats. FormatAuto picks one per file by its extension.
const (
	FormatAuto    Format = "auto"
	FormatJSONL   Format = "jsonl"
	FormatText    Format = "text"
	FormatParquet Format = "parquet"
	FormatHF      Format = "hf" // Hugging Face save_to_disk directory, or one Arrow stream file
)

// DocPer says what one document is in a plain-text input.
type DocPer string

// Document units for plain text.
const (
	DocPerLine DocPer = "line" // each non-empty line is a document
	DocPerFile DocPer = "file" // the whole file is one document
)

// Defaults used for zero Options fields (and the read batch size).
const (
	DefaultTextField   = "text"
	DefaultMaxDocBytes = 64 << 20
	DefaultChunkBytes  = 1 << 20
	DefaultSplitBytes  = 1 << 30
	defaultBatchRows   = 1024 // Parquet rows decoded per batch
	maxChunkBytes      = 64 << 20
)

// Options select the input format and what to pull out of each record. The
// zero value means: format by extension, text field "text", a document per
// line for .txt files, 64 MiB documents at most.
type Options struct {
	// Format is "auto" (or empty) to decide by extension, else the format of
	// every input.
	Format Format
	// TextField is the field or column holding the document text, dotted for
	// nested objects ("meta.body"). Default "text".
	TextField string
	// KeepColumns are fields or columns (dotted paths too) carried along as
	// strings: a JSON string's value, any other JSON value as its compact
	// JSON text, a missing or null value as "" flagged null.
	KeepColumns []string
	// DocPer is the document unit of plain-text inputs. Default "line".
	DocPer DocPer
	// MaxDocBytes is the largest record (line, file or cell) read into
	// memory; larger ones are skipped in constant memory and reported as
	// [TooLarge]. Default 64 MiB.
	MaxDocBytes int64
	// ChunkBytes is the size of the read chunks that records are sliced
	// from. Default 1 MiB; at most 64 MiB.
	ChunkBytes int
	// RowJSON makes every Parquet and Arrow row a JSON object of all its
	// columns (a JSONLine record; nested lists and structs as JSON arrays and
	// objects, struct fields in schema order), for readers of whole records
	// (chat conversations). TextField is then not used; KeepColumns are taken by [Extractor.Columns].
	RowJSON bool
	// SplitBytes is the piece size: a plain (uncompressed) JSON Lines or text-per-line file larger than this
	// is read as pieces cut at the first line end at or after each multiple of it (pieces.go), each piece a
	// [File] of the plan. Default 1 GiB. Compressed files, Parquet, Arrow and whole-file text stay whole.
	SplitBytes int64 `json:",omitempty"`
}

// withDefaults returns a copy of o with defaults filled in, or an error
// naming the first bad option.
func (o Options) withDefaults() (Options, error) {
	if o.Format == "" {
		o.Format = FormatAuto
	}
	switch o.Format {
	case FormatAuto, FormatJSONL, FormatText, FormatParquet, FormatHF:
	default:
		return o, fmt.Errorf("%w: format %q (want auto, jsonl, text, parquet or hf)", ErrOption, o.Format)
	}
	if o.TextField == "" {
		o.TextField = DefaultTextField
	}
	if err := checkPath("text field", o.TextField); err != nil {
		return o, err
	}
	for _, c := range o.KeepColumns {
		if err := checkPath("keep column", c); err != nil {
			return o, err
		}
	}
	if o.DocPer == "" {
		o.DocPer = DocPerLine
	}
	if o.DocPer != DocPerLine && o.DocPer != DocPerFile {
		return o, fmt.Errorf("%w: doc-per %q (want line or file)", ErrOption, o.DocPer)
	}
	if o.MaxDocBytes == 0 {
		o.MaxDocBytes = DefaultMaxDocBytes
	}
	if o.MaxDocBytes < 0 {
		return o, fmt.Errorf("%w: max doc bytes %d is negative", ErrOption, o.MaxDocBytes)
	}
	if o.SplitBytes == 0 {
		o.SplitBytes = DefaultSplitBytes
	}
	if o.SplitBytes < 0 {
		return o, fmt.Errorf("%w: split bytes %d is negative", ErrOption, o.SplitBytes)
	}
	if o.ChunkBytes == 0 {
		o.ChunkBytes = DefaultChunkBytes
	}
	if o.ChunkBytes < 0 || o.ChunkBytes > maxChunkBytes {
		return o, fmt.Errorf("%w: chunk bytes %d (want 1..%d)", ErrOption, o.ChunkBytes, maxChunkBytes)
	}
	return o, nil
}

// checkPath rejects empty dotted paths and empty components ("a..b").
func checkPath(what, p string) error {
	if p == "" || strings.HasPrefix(p, ".") || strings.HasSuffix(p, ".") || strings.Contains(p, "..") {
		return fmt.Errorf("%w: %s %q is not a field name or dotted path", ErrOption, what, p)
	}
	return nil
}

// Sentinel errors. Errors returned by this package wrap one of them (or an
// error of the underlying reader) with the operation and the place.
var (
	// ErrOption reports an invalid [Options] value.
	ErrOption = errors.New("corpus: invalid option")
	// ErrNotFound reports an input path or glob that matches nothing.
	ErrNotFound = errors.New("corpus: input not found")
	// ErrUnreadable reports an input that exists but cannot be opened or read.
	ErrUnreadable = errors.New("corpus: input unreadable")
	// ErrUnknownFormat reports an input whose format cannot be told or is not
	// supported.
	ErrUnknownFormat = errors.New("corpus: unknown input format")
	// ErrNoInputs reports an empty input list or a directory without inputs.
	ErrNoInputs = errors.New("corpus: no input files")
	// ErrPosition reports a resume position that does not fit the plan.
	ErrPosition = errors.New("corpus: bad resume position")
	// ErrClosed is returned by Next after Close.
	ErrClosed = errors.New("corpus: reader closed")
)
