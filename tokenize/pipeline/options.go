// Package pipeline is the `gload tokenize` pipeline: corpus records are read by one goroutine, extracted and
// tokenized by N workers, and written in input order into dataset shards, so the output is byte-identical for any
// number of workers. Shards are written under temporary names and renamed when complete; the dataset metadata is
// written last, so a run killed at any moment never leaves something that looks like a complete dataset, and
// --resume continues after the last complete shard.
//
// It must not know how shards are laid out on disk (package loader/dataset does) nor how files are parsed
// (package corpus does).
package pipeline

import (
	"fmt"
	"github.com/gload/gload/tokenize/chat"
	"io"
	"log/slog"
	"time"

	"github.com/gload/gload/loader/dataset"
	"github.com/gload/gload/tokenize"
	"github.com/gload/gload/tokenize/corpus"
)

// Overflow says what happens to a document longer than MaxLength tokens.
type Overflow string

// Overflow policies.
const (
	OverflowTruncate Overflow = "truncate" // keep the first MaxLength tokens
	OverflowSplit    Overflow = "split"    // cut into rows of MaxLength tokens (the last one shorter)
	OverflowDrop     Overflow = "drop"     // skip the document, counted
)

// Options configure one tokenize run.
type Options struct {
	Inputs []string       // files, directories and globs
	Out    string         // dataset directory
	Corpus corpus.Options // format, text field, kept columns, max document size

	Engine           tokenize.Engine
	AddSpecialTokens bool  // apply the tokenizer's post-processor
	AppendEOS        bool  // append EOSID to every document
	EOSID            int32 // with AppendEOS
	MaxLength        int   // 0: no limit
	Overflow         Overflow
	MinLength        int // rows shorter than this are skipped (counted); 0 keeps everything but empty rows

	Workers int // tokenizing goroutines; <= 0 means 1
	// InflightChunks bounds the chunks (<= 256 records or 1 MiB of input each) read but not yet written, which
	// bounds memory and how far workers may run ahead of the slowest chunk; <= 0 means 4 per worker.
	InflightChunks int
	ShardSize      int64 // bytes per shard before a new one starts
	RowsPerBatch   int   // Arrow record batch rows (default 1000)

	Overwrite bool // replace an existing dataset directory
	Resume    bool // continue an interrupted run in Out
	Strict    bool // stop at the first bad document instead of skipping it

	// TaskIndex of TaskCount (> 0): write only this task's share of the input files (and pieces of large files,
	// Corpus.SplitBytes) as a dataset part, every file and piece starting a new shard, for `gload merge` (see task.go). TaskCount 0: the whole input.
	TaskIndex, TaskCount int

	// Chat, when set, reads JSON records as chat conversations (package chat): rows get input_ids and labels
	// (assistant-only loss); MaxLength truncation is the encoder's own (labels stay aligned).
	Chat *chat.Encoder

	Special dataset.SpecialTokens // recorded in the dataset's metadata (the pad token the server pads with)

	// ShardDone, if set, runs after each shard is complete under its name in Out and journaled (an object-storage
	// upload takes it from there); an error stops the run like a write error.
	ShardDone func(dataset.ShardInfo) error

	Logger   *slog.Logger  // nil discards
	Progress io.Writer     // live progress (terminal bar when it is a terminal, periodic lines otherwise); nil: none
	Interval time.Duration // progress line interval when Progress is not a terminal (default 10 s)
}

func (o *Options) validate() error {
	if len(o.Inputs) == 0 {
		return fmt.Errorf("tokenize: no inputs")
	}
	if o.TaskCount < 0 || (o.TaskCount > 0 && (o.TaskIndex < 0 || o.TaskIndex >= o.TaskCount)) || (o.TaskCount == 0 && o.TaskIndex != 0) {
		return fmt.Errorf("tokenize: --task %d/%d: want I/N with 0 <= I < N", o.TaskIndex, o.TaskCount)
	}
	if o.Out == "" {
		return fmt.Errorf("tokenize: no output directory")
	}
	if o.Engine == nil {
		return fmt.Errorf("tokenize: no tokenizer")
	}
	if o.Overwrite && o.Resume {
		return fmt.Errorf("tokenize: --overwrite and --resume exclude each other")
	}
	switch o.Overflow {
	case "":
		o.Overflow = OverflowTruncate
	case OverflowTruncate, OverflowSplit, OverflowDrop:
	default:
		return fmt.Errorf("tokenize: --overflow %q: want truncate, split or drop", o.Overflow)
	}
	if o.MaxLength < 0 || o.MinLength < 0 {
		return fmt.Errorf("tokenize: --max-length and --min-length must not be negative")
	}
	if o.MaxLength > 0 && o.MinLength > o.MaxLength {
		return fmt.Errorf("tokenize: --min-length %d exceeds --max-length %d", o.MinLength, o.MaxLength)
	}
	// Refused here, before the output directory is made (e.g. --keep-columns input_ids).
	if err := (dataset.WriterOptions{Columns: o.Corpus.KeepColumns}).Check(); err != nil {
		return fmt.Errorf("tokenize: --keep-columns: %w", err)
	}
	if o.Chat != nil && o.Overflow == OverflowSplit {
		return fmt.Errorf("tokenize: --format chat: --overflow split would cut conversations apart (use truncate or drop)")
	}
	if o.Chat != nil && o.AppendEOS {
		return fmt.Errorf("tokenize: --format chat: --append-eos does not apply (the chat template writes the end-of-turn tokens)")
	}
	if o.Workers <= 0 {
		o.Workers = 1
	}
	if o.InflightChunks <= 0 {
		o.InflightChunks = 4 * o.Workers
	}
	if o.ShardSize <= 0 {
		o.ShardSize = 500 << 20
	}
	if o.RowsPerBatch <= 0 {
		o.RowsPerBatch = 1000
	}
	if o.Interval <= 0 {
		o.Interval = 10 * time.Second
	}
	return nil
}
