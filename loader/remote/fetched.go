package remote

// A cache directory's record of which object its gload.index was downloaded from, so that opening a bucket dataset
// again downloads the index (4 bytes per row: tens of GB at web scale) only when the store's copy changed.

import (
	"encoding/json"
	"os"
	"path/filepath"
	"time"

	"github.com/gload/gload/internal/safename"
	"github.com/gload/gload/loader/dataset"
	"github.com/gload/gload/loader/objstore"
)

// fetchedFile is the record, beside a cached gload.index, of the object it was downloaded from (a name reserved in
// package dataset: no shard can be called so).
const fetchedFile = "gload.fetched.json"

// fetchedRecord is what the store stated about gload.index, before and after the download (the same both times).
type fetchedRecord struct {
	Size     int64     `json:"size"`
	ETag     string    `json:"etag"`
	Modified time.Time `json:"modified"`
}

func recordOf(o objstore.Object) fetchedRecord {
	return fetchedRecord{Size: o.Size, ETag: o.ETag, Modified: o.Modified}
}

// matches reports whether o is the object r describes: same size, ETag and last-modified time, none of them
// unknown. (A new upload of gload.index gets a new last-modified time, and new content a new ETag.)
func (r fetchedRecord) matches(o objstore.Object) bool {
	return r.ETag != "" && !r.Modified.IsZero() && r.Size == o.Size && r.ETag == o.ETag && r.Modified.Equal(o.Modified)
}

// cachedIndex maps dir's gload.index when dir's record says it was downloaded from the object the store now
// describes as info, and the file still has its size and decodes (dataset.MapIndex: header and block table, every
// length of a small index); otherwise it returns nil and the index is downloaded again.
func cachedIndex(dir string, info objstore.Object) *dataset.Index {
	b, err := safename.ReadFile(filepath.Join(dir, fetchedFile), 4096)
	if err != nil {
		return nil
	}
	var r fetchedRecord
	if json.Unmarshal(b, &r) != nil || !r.matches(info) {
		return nil
	}
	path := filepath.Join(dir, dataset.IndexFile)
	if fi, err := safename.LstatRegular(path); err != nil || fi.Size() != info.Size {
		return nil
	}
	ix, err := dataset.MapIndex(path)
	if err != nil {
		return nil
	}
	return ix
}

// recordFetched writes dir's record of the object gload.index was just downloaded from. A record that cannot be
// written only means the next open downloads the index again.
func recordFetched(dir string, info objstore.Object, perm os.FileMode) {
	b, err := json.Marshal(recordOf(info))
	if err == nil {
		_ = writeAtomic(filepath.Join(dir, fetchedFile), append(b, '\n'), perm)
	}
}
