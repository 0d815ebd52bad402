package dataset

// A gload.index file on its own, memory-mapped: what object storage downloads and checks before it renames the
// index into a cache (loader/remote), without holding the lengths in memory or reading them all.
//
// # Caveats
//
// The Lengths of an Index returned by MapIndex view the file's mapping: they are valid until Index.Close, which
// must not run concurrently with any other use of the index. The file must not be truncated or rewritten in
// place while it is mapped (a shrinking mapped file faults on access); replacing it by rename is safe.

import (
	"errors"
	"fmt"
)

// MapIndex maps the gload.index file at path read-only and decodes it the way Open does: the magic and version,
// every count against the file size (the file must end exactly where the header says the lengths end), the
// header checksum, the shard entries and the block table (O(shards + blocks)). An index of at most 2^20 rows is
// then checked in full (Verify), as Open checks it; the lengths of a larger one are not read here, and are
// checked per block on first access by whoever reads them (Dataset.LengthSource; Verify checks them all).
//
// Errors wrap ErrBadIndex (or ErrOldIndex for an older format version) and name path. The caller must Close the
// returned index once it no longer uses its Lengths (Shards, TokenizerHash and the summaries copied from the
// header stay valid after Close).
func MapIndex(path string) (*Index, error) {
	ix, m, err := mapIndex(path)
	if err != nil {
		return nil, err
	}
	ix.mapping = m
	if ix.Rows() <= eagerCheckRows {
		if err := ix.Verify(); err != nil {
			return nil, errors.Join(fmt.Errorf("read index %s: %w", path, err), ix.Close())
		}
	}
	return ix, nil
}

// CheckIndexFile checks the gload.index file at path as MapIndex does, and unmaps it.
func CheckIndexFile(path string) error {
	ix, err := MapIndex(path)
	if err != nil {
		return err
	}
	return ix.Close()
}

// Close unmaps an index returned by MapIndex; its Lengths and block table are gone afterwards (Rows is then 0).
// For any other index it does nothing. Closing twice is harmless.
func (ix *Index) Close() error {
	if ix.mapping == nil {
		return nil
	}
	m := ix.mapping
	ix.mapping, ix.Lengths, ix.blocks = nil, nil, blockTable{}
	if err := unmapFile(m); err != nil {
		return fmt.Errorf("unmap index: %w", err)
	}
	return nil
}

// RecordedFingerprint is the content fingerprint recorded in the header of the encoding ix was read from (covered
// by the header checksum; Verify compares it with the one computed from the content), printed as Fingerprint
// prints it. Unlike Fingerprint it reads no length: O(1). For an index never encoded it is Fingerprint.
func (ix *Index) RecordedFingerprint() string {
	if ix.readFP.IsZero() {
		return ix.Fingerprint()
	}
	return FingerprintString(ix.readFP)
}
