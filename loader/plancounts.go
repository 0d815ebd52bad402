package loader

// Kept counting passes. A lazy packed or tokens plan (past 2^27 rows, or planner "lazy") packs or builds every
// window once before its first batch to count the epoch's batches: tens of seconds past 10^9 rows. The result
// (bucket.PackedCounts, bucket.TokensCounts: 4 bytes per window) is kept here, one file per plan key, so that a
// restarted server, or a job resuming the same epoch, plans in a fraction of a second (bucket.NewLazyPackedFrom,
// bucket.NewLazyPlanFrom, which check the counts' key and build some windows again to compare).
//
// This room holds the directory and its files only; it does not choose planners (bucket.EpochPlanner does) and never
// fails a plan: a directory that is not private to the user, a file that does not decode, or counts the plan refuses
// are logged and the plan is counted again, and a pass over an index with a corrupt block keeps nothing. The
// directory must be private (internal/privdir): bucket checks the counts of the windows it does not build again only
// when it builds them to serve a batch (a stream then ends with INTERNAL), so another user who could write here could
// make streams fail.

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/gload/gload/bucket"
	"github.com/gload/gload/internal/privdir"
	"github.com/gload/gload/internal/safename"
)

const (
	// countsExt names the kept files: <32 hex digits of SHA-256 of the plan key>.counts.
	countsExt = ".counts"
	// countsTempPrefix names a file being written, renamed into place when complete.
	countsTempPrefix = ".counts-"
	// maxCountsFiles bounds the directory: saving beyond it removes the least recently used files (by modification
	// time, which a load refreshes).
	maxCountsFiles = 256
	// maxCountsBytes bounds a file read: 4 bytes per window of 2^20 rows up to bucket.MaxPlanRows, plus the header.
	maxCountsBytes = 4*(bucket.MaxPlanRows>>20) + 1<<16
)

// countsKeeper keeps lazy tokens and packed plans' counts in dir. A nil keeper keeps nothing.
type countsKeeper struct {
	dir string
	log *slog.Logger

	mu      sync.Mutex
	checked bool  // dir was checked (once, at first use)
	dirErr  error // why dir is not used, or nil
	loaded  int   // plans made from kept counts (tests)
}

// newCountsKeeper returns a keeper over dir, or nil when dir is "" (nothing kept).
func newCountsKeeper(dir string, log *slog.Logger) *countsKeeper {
	if dir == "" {
		return nil
	}
	return &countsKeeper{dir: dir, log: log}
}

// usable makes dir private to the user on first use (privdir.Ensure) and reports whether it can be used; the first
// failure is logged once.
func (k *countsKeeper) usable() bool {
	k.mu.Lock()
	defer k.mu.Unlock()
	if !k.checked {
		k.checked = true
		if err := privdir.Ensure(k.dir); err != nil {
			k.dirErr = err
			k.log.Warn("plan counts are not kept: the directory cannot be used; lazy tokens and packed plans count again on every start",
				"dir", k.dir, "err", err)
		}
	}
	return k.dirErr == nil
}

// path is the file of the plan key.
func (k *countsKeeper) path(key string) string {
	sum := sha256.Sum256([]byte(key))
	return filepath.Join(k.dir, hex.EncodeToString(sum[:16])+countsExt)
}

// newEpochPlan is bucket.NewEpochPlan, with the counting pass of a lazy packed or tokens plan taken from the kept
// file when there is one the plan accepts, and kept after it ran otherwise.
func (k *countsKeeper) newEpochPlan(lengths bucket.Lengths, fingerprint string, seed uint64, epoch int, cfg bucket.Config, run bucket.Runner) (bucket.EpochPlan, error) {
	kind, err := k.kindOf(lengths, fingerprint, seed, epoch, cfg, run)
	if err != nil {
		return nil, err // the configuration's own error, as NewEpochPlan would give it
	}
	if kind == nil {
		return bucket.NewEpochPlan(lengths, fingerprint, seed, epoch, cfg, run)
	}
	path := k.path(kind.key)
	data, err := k.read(path)
	var plan func() (bucket.EpochPlan, error)
	if err == nil {
		plan, err = kind.decode(data)
	}
	switch {
	case err == nil:
		p, err := plan()
		if err == nil {
			k.mu.Lock()
			k.loaded++
			k.mu.Unlock()
			now := time.Now()
			_ = os.Chtimes(path, now, now) // trim removes the least recently used first
			return p, nil
		}
		k.log.Warn("kept plan counts refused; counting again", "file", path, "err", err)
		_ = os.Remove(path)
	case !errors.Is(err, fs.ErrNotExist):
		k.log.Warn("kept plan counts unreadable; counting again", "file", path, "err", err)
		_ = os.Remove(path)
	}
	p, err := bucket.NewEpochPlan(lengths, fingerprint, seed, epoch, cfg, run)
	if err != nil {
		return nil, err
	}
	if le, ok := lengths.(interface{ Err() error }); ok && le.Err() != nil {
		// A corrupt index block read as zeros during the pass: these counts are not of the dataset's lengths (the
		// server refuses the plan), and the key, the recorded fingerprint, stays the same once the index is repaired.
		return p, nil
	}
	if data, ok := kind.encode(p); ok {
		if err := k.write(path, data); err != nil {
			k.log.Warn("plan counts not kept", "file", path, "err", err)
		}
	}
	return p, nil
}

// countsKind is how one kind of plan's counts are keyed, decoded into a plan and encoded from one.
type countsKind struct {
	key    string
	decode func(data []byte) (plan func() (bucket.EpochPlan, error), err error)
	encode func(p bucket.EpochPlan) ([]byte, bool)
}

// kindOf returns how the plan NewEpochPlan would make keeps its counts, or nil when it has none to keep (exact and
// bucketed plans) or when nothing is kept.
func (k *countsKeeper) kindOf(lengths bucket.Lengths, fingerprint string, seed uint64, epoch int, cfg bucket.Config, run bucket.Runner) (*countsKind, error) {
	if k == nil {
		return nil, nil
	}
	n := lengths.Len()
	switch planner := bucket.EpochPlanner(n, cfg); {
	case planner == "lazy-packed" && k.usable():
		key, err := bucket.LazyPackedKey(n, fingerprint, seed, epoch, cfg)
		return &countsKind{key: key,
			decode: func(data []byte) (func() (bucket.EpochPlan, error), error) {
				var c bucket.PackedCounts
				if err := c.UnmarshalBinary(data); err != nil {
					return nil, err
				}
				return func() (bucket.EpochPlan, error) {
					return bucket.NewLazyPackedFrom(lengths, fingerprint, seed, epoch, cfg, c)
				}, nil
			},
			encode: func(p bucket.EpochPlan) ([]byte, bool) {
				lp, ok := p.(*bucket.LazyPacked)
				if !ok {
					return nil, false
				}
				b, err := lp.Counts().MarshalBinary()
				return b, err == nil
			},
		}, err
	case planner == "lazy" && cfg.Policy == bucket.Tokens && k.usable():
		key, err := bucket.LazyTokensKey(n, fingerprint, seed, epoch, cfg)
		return &countsKind{key: key,
			decode: func(data []byte) (func() (bucket.EpochPlan, error), error) {
				var c bucket.TokensCounts
				if err := c.UnmarshalBinary(data); err != nil {
					return nil, err
				}
				return func() (bucket.EpochPlan, error) {
					return bucket.NewLazyPlanFrom(lengths, fingerprint, seed, epoch, cfg, c, run)
				}, nil
			},
			encode: func(p bucket.EpochPlan) ([]byte, bool) {
				lp, ok := p.(*bucket.LazyPlan)
				if !ok {
					return nil, false
				}
				c, ok := lp.Counts()
				if !ok {
					return nil, false
				}
				b, err := c.MarshalBinary()
				return b, err == nil
			},
		}, err
	}
	return nil, nil
}

// read returns the file at path: a regular file (no symbolic link followed) of at most maxCountsBytes; bucket
// checks its checksum and sizes when it decodes it.
func (k *countsKeeper) read(path string) ([]byte, error) {
	f, _, err := safename.OpenRegular(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, maxCountsBytes+1))
	if err != nil {
		return nil, err
	}
	if len(data) > maxCountsBytes {
		return nil, fmt.Errorf("%s is larger than %d bytes", path, maxCountsBytes)
	}
	return data, nil
}

// write keeps data at path (a temporary file renamed into place, 0600), then trims the directory to
// maxCountsFiles files.
func (k *countsKeeper) write(path string, data []byte) error {
	tmp, err := os.CreateTemp(k.dir, countsTempPrefix+"*")
	if err != nil {
		return err
	}
	_, werr := tmp.Write(data)
	if cerr := tmp.Close(); werr == nil {
		werr = cerr
	}
	if werr == nil {
		werr = os.Rename(tmp.Name(), path)
	}
	if werr != nil {
		_ = os.Remove(tmp.Name())
		return werr
	}
	k.trim()
	return nil
}

// trim removes the least recently used kept files beyond maxCountsFiles, and temporary files a crash left (older
// than an hour).
func (k *countsKeeper) trim() {
	ents, err := os.ReadDir(k.dir)
	if err != nil {
		return
	}
	type kept struct {
		name string
		mod  int64
	}
	var files []kept
	for _, e := range ents {
		if !e.Type().IsRegular() {
			continue
		}
		if strings.HasPrefix(e.Name(), countsTempPrefix) {
			if fi, err := e.Info(); err == nil && time.Since(fi.ModTime()) > time.Hour {
				_ = os.Remove(filepath.Join(k.dir, e.Name()))
			}
			continue
		}
		if !strings.HasSuffix(e.Name(), countsExt) {
			continue
		}
		if fi, err := e.Info(); err == nil {
			files = append(files, kept{e.Name(), fi.ModTime().UnixNano()})
		}
	}
	if len(files) <= maxCountsFiles {
		return
	}
	slices.SortFunc(files, func(a, b kept) int {
		if a.mod != b.mod {
			return int(min(max(a.mod-b.mod, -1), 1))
		}
		return strings.Compare(a.name, b.name)
	})
	for _, f := range files[:len(files)-maxCountsFiles] {
		_ = os.Remove(filepath.Join(k.dir, f.name))
	}
}

// loadedCount is how many plans were made from kept counts.
func (k *countsKeeper) loadedCount() int {
	if k == nil {
		return 0
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.loaded
}
