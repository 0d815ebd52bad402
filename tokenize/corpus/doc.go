// Package corpus turns the input files of `gload tokenize` into one
// deterministic stream of records: it plans the inputs (files, directories,
// globs; JSON Lines, plain text, Parquet and Hugging Face save_to_disk
// directories, plain or gzip/zstd compressed), frames records in a single
// reader goroutine, and extracts document text from records in the workers.
//
// The work is split in two on purpose. [Reader.Next] only frames records
// (finds line ends, decompresses, slices Arrow columns) so that one goroutine
// can feed many tokenizer workers; [Extractor.Extract] does the expensive part
// (validating JSON, pulling the text field and kept columns, repairing invalid
// UTF-8) and is safe for concurrent use. Neither ever holds a whole corpus in
// memory: lines are read in chunks, Parquet row group by row group, Arrow
// streams record batch by record batch, and a line longer than
// [Options.MaxDocBytes] is skipped in constant memory.
//
// The package must not know about tokenizers, the Arrow output or the
// pipeline's ordering: it hands out records and positions, nothing else.
//
// Line rules: lines end at '\n'; a trailing '\r' is dropped; a UTF-8 byte
// order mark opening a file is dropped; JSON Lines skip blank (whitespace
// only) lines silently, text skips empty lines; line numbers count every
// physical line. Text and kept columns are repaired to valid UTF-8 with
// Python's errors="replace" rule (package utf8fix) and flagged.
//
// Record order is a pure function of the inputs and options, so the same
// corpus always yields the same sequence, and [Plan.Open] can resume at any
// [Position] a previous run reported.
//
// # Caveats
//
//   - [Record.Raw] is never reused or modified by the package: each record's
//     bytes stay valid after the next call to [Reader.Next] and after
//     [Reader.Close], so records can be handed to other goroutines. Raw slices
//     are carved out of shared chunks of about [Options.ChunkBytes] (1 MiB by
//     default); a chunk is freed only when no record of it is referenced, so
//     holding one record pins its whole chunk. Do not write to Raw: other
//     records share the chunk.
//   - [Doc] values from [Extractor.Extract] own their memory; they do not
//     alias the record. [Extractor.ExtractScratch] gives a Text that aliases
//     the record or the caller's scratch buffer, for a caller done with it
//     before the next document.
//   - A [Reader] is not safe for concurrent use; an [Extractor] is.
//   - For a compressed file the Reader runs one goroutine that decompresses
//     ahead (at most 6 blocks of 256 KiB) or, for a file of independent
//     frames (zstd frames stating their size, BGZF gzip), a few goroutines
//     that decode frames ahead in order (package framedio, at most 64 MiB
//     decoded); moving to the next file or [Reader.Close] stops them. Always
//     Close a Reader you stop reading early.
package corpus
