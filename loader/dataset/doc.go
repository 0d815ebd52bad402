// Package dataset holds the gload dataset directory format: the writer used by
// `gload tokenize` and the zero-copy reader used by `gload serve`, so that the
// two can never drift apart.
//
// A dataset is a directory that Hugging Face `datasets.load_from_disk` opens
// unchanged:
//
//	data-00000-of-0000N.arrow   Arrow IPC stream files, uncompressed
//	dataset_info.json           HF DatasetInfo (features)
//	state.json                  HF state (_data_files, _fingerprint, ...)
//	gload.index                 gload's sidecar: per-row token lengths, record
//	                            batch offsets, shard content hashes (SHA-256),
//	                            tokenizer hash, content fingerprint, and a
//	                            summary per block of 2^16 rows (index.go)
//	gload.verified              freshness stamp (a cache): shard stat results
//	                            when their content last matched the index
//
// Writing: [CreateShard] writes one shard under a temporary name and renames it
// to "shard-NNNNN.arrow" on [ShardWriter.Close]; [Finalize] turns complete
// shards into a dataset (renames, dataset_info.json, gload.index, state.json
// last). Both are
// crash-safe: no half-written file ever carries a final name, and Finalize can
// be re-run after a crash at any point ([RecoverShards] rebuilds the shard list
// from the files when the caller lost it).
//
// # Finalisation: what a reader may trust, and when
//
// state.json is the commit point. [Finalize] first removes any old state.json
// (then any old gload.index), renames the shards to their final names,
// writes dataset_info.json, gload.index and the freshness stamp, and renames
// state.json into place last, each file through a temporary name, fsync and
// rename. So, at every instant:
//
//   - No state.json: not a dataset, for any reader. Hugging Face datasets
//     cannot load it and [Open] refuses it; gload.index, dataset_info.json or
//     data-*.arrow files may already be there and mean nothing yet.
//   - state.json: a complete dataset. Every file it lists is final and
//     gload.index (and the stamp) describe them. Whatever else is beside it is
//     bookkeeping of the run that wrote it: gload tokenize removes its journal
//     (gload.progress.json) only after Finalize returns, so a crash in between
//     leaves a complete dataset with a stale journal; `gload tokenize --resume`
//     finalizes again (idempotently: same bytes) and removes it, and readers
//     (serve, inspect, Hugging Face) ignore it.
//
// gload sync keeps the same order when it writes a local copy. Object storage
// uses its own commit point: a bucket holds a complete dataset once gload.index
// is uploaded, which is always the last object written.
//
// Reading: [Open] memory-maps every shard and serves rows without copying token
// data. With a valid gload.index it touches no token data at all (lengths come
// from the index, record batches are decoded lazily on first use). The index
// is memory-mapped too, and opening reads only its header and block table:
// a block's lengths are read, and checked, when a row of it is first read
// ([Dataset.LengthSource]), so opening costs O(shards + blocks) at any row
// count. It also
// opens datasets written by Hugging Face itself (input_ids as list, large_list
// or fixed_size_list of any integer width, any batch size, extra columns of any
// type). The Arrow IPC framing and flatbuffer metadata are parsed by this
// package with every offset bounds-checked: a corrupt file yields an error that
// names the file, the batch and what is wrong, never a panic and never
// garbage tokens.
//
// The package touches only the dataset directory it is given; it owns no
// goroutines after a call returns and keeps no global state.
//
// # Caveats
//
// Slices returned by [Dataset.Tokens] and [Dataset.Lengths], and
// [Dataset.LengthSource], point into the memory maps: they are read-only and
// valid until [Dataset.Close]. Close must not run concurrently
// with other methods; every other method of [Dataset] is safe for concurrent
// use. Shard files must not be truncated or rewritten while a Dataset has them
// open, nor gload.index (a shrinking mapped file faults on access); gload itself only ever
// replaces files by rename, which is safe.
//
// Identity is content (identity.go): a dataset's fingerprint is a pure
// function of its shards' content hashes in order and its per-row lengths, so
// copies, moves and touches keep it, and gload.index is byte-identical between
// two runs over the same input. Only gload.verified holds times and inodes;
// it is a cache that Open checks shards against before trusting the index, and
// hashes the shards it cannot vouch for. Indexes of datasets this package did
// not write go to an index cache directory (OpenOptions.IndexDir), never into
// the dataset directory.
package dataset
