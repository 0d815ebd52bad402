package dataset

import "errors"

// Sentinel errors. Errors returned by this package wrap one of these (where one
// applies) together with the file, batch or row concerned.
var (
	// ErrClosed is returned by methods of a closed Dataset or ShardWriter.
	ErrClosed = errors.New("dataset: closed")
	// ErrCorrupt means a shard file is malformed or inconsistent with its index.
	ErrCorrupt = errors.New("dataset: corrupt shard")
	// ErrBadIndex means gload.index is malformed, truncated or fails its checksum.
	ErrBadIndex = errors.New("dataset: bad index")
	// ErrOldIndex means gload.index was written in an older format version
	// (version 1 identified datasets by mtime, version 2 had no block table);
	// `gload index DIR` rewrites it. Open reads a valid version 2 in full and
	// rebuilds a version 1 from the shards.
	ErrOldIndex = errors.New("dataset: index of an older format")
	// ErrStaleIndex means gload.index does not describe the shards on disk.
	ErrStaleIndex = errors.New("dataset: stale index")
	// ErrUnsupported means the data is valid Arrow but uses a feature gload
	// does not read (compression, big-endian, non-integer input_ids, ...).
	ErrUnsupported = errors.New("dataset: unsupported")
	// ErrNotZeroCopy is returned by Dataset.Tokens when the input_ids values
	// are not little-endian int32 in place; use Dataset.AppendTokens.
	ErrNotZeroCopy = errors.New("dataset: tokens are not int32 in place")
	// ErrRange means a row index is out of range.
	ErrRange = errors.New("dataset: row out of range")
	// ErrNoColumn means the asked-for column does not exist or is not a string column.
	ErrNoColumn = errors.New("dataset: no such string column")
	// ErrBadInput means the caller passed invalid options or rows to the writer.
	ErrBadInput = errors.New("dataset: bad input")
	// ErrNotDataset means the directory is not a dataset (no state.json, or a DatasetDict).
	ErrNotDataset = errors.New("dataset: not a dataset directory")
)
