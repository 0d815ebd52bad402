package remote

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/gload/gload/loader/dataset"
	"github.com/gload/gload/loader/objstore"
)

// journalFile is gload tokenize's resume journal (tokenize/pipeline), uploaded beside the shards so that a bucket
// holding it reads as an unfinished dataset and --resume can continue from the bucket alone.
const journalFile = "gload.progress.json"

// uploadDir holds shards uploaded while a tokenize run is still going, named by content, until the run's final
// names are known.
const uploadDir = ".gload-upload"

// StagedUpload uploads a gload tokenize run to object storage while it runs: the run writes into a local stage
// directory, each completed shard is uploaded at once (ShardDone), and Finish publishes the dataset under its final
// names with gload.index last. Until Finish returns, the bucket holds no gload.index, so nothing reads it as
// complete.
type StagedUpload struct {
	st    *objstore.Store
	stage string
}

// StageOptions control NewStagedUpload.
type StageOptions struct {
	Overwrite bool // replace a complete dataset already at the URL
	Resume    bool // continue an interrupted run (from the stage, or from the bucket when the stage is gone)
}

// NewStagedUpload prepares stage for a run that uploads to st. A complete dataset already in the bucket is refused
// without Overwrite; with Resume and no journal in the stage, the journal and the shards it lists are downloaded
// from the bucket into the stage (verified), so the run continues where the bucket stands.
func NewStagedUpload(ctx context.Context, st *objstore.Store, stage string, opts StageOptions) (*StagedUpload, error) {
	u := &StagedUpload{st: st, stage: stage}
	_, ixErr := st.Stat(ctx, dataset.IndexFile)
	switch {
	case ixErr == nil && !opts.Overwrite && !opts.Resume:
		return nil, fmt.Errorf("tokenize: %s already holds a complete dataset (use --overwrite to replace it)", st.URL())
	case ixErr != nil && !errors.Is(ixErr, objstore.ErrNotFound):
		return nil, ixErr
	}
	if !opts.Resume {
		return u, nil
	}
	if _, err := os.Stat(filepath.Join(stage, journalFile)); err == nil {
		return u, nil // the stage has the journal: the run resumes from it, the uploads already made are reused
	}
	jb, err := st.ReadSmall(ctx, journalFile, maxJournalBytes)
	if errors.Is(err, objstore.ErrNotFound) {
		return u, nil // nothing to resume from: the run starts afresh
	}
	if err != nil {
		return nil, err
	}
	var j struct {
		Shards []dataset.ShardInfo `json:"shards"`
	}
	if err := json.Unmarshal(jb, &j); err != nil {
		return nil, fmt.Errorf("tokenize: %s/%s: %w", st.URL(), journalFile, err)
	}
	// Every name in the bucket's journal is checked before anything is written: a hostile journal must not make
	// a download land outside the stage (../../x, /abs, a/b) or on one of the stage's own files.
	paths := make([]string, len(j.Shards))
	seen := make(map[string]bool, len(j.Shards))
	for i, s := range j.Shards {
		p, err := dataset.ShardPath(stage, s.Name)
		if err != nil {
			return nil, fmt.Errorf("tokenize --resume from %s: %s shard %d: %w", st.URL(), journalFile, i, err)
		}
		if seen[s.Name] {
			return nil, fmt.Errorf("tokenize --resume from %s: %s lists shard %s twice", st.URL(), journalFile, s.Name)
		}
		if s.Bytes < 0 {
			return nil, fmt.Errorf("tokenize --resume from %s: %s: shard %s has %d bytes", st.URL(), journalFile, s.Name, s.Bytes)
		}
		seen[s.Name] = true
		paths[i] = p
	}
	if err := os.MkdirAll(stage, 0o700); err != nil {
		return nil, fmt.Errorf("tokenize: %w", err)
	}
	for i, s := range j.Shards {
		e := dataset.ShardEntry{Name: s.Name, Size: s.Bytes, ContentHash: s.Hash}
		if _, err := st.Download(ctx, stagedName(s), paths[i], objstore.DownloadOptions{
			Size:   s.Bytes,
			Perm:   0o600,
			Verify: func(p string) error { return VerifyShard(p, e) },
		}); err != nil {
			return nil, fmt.Errorf("tokenize --resume from %s: %w", st.URL(), err)
		}
	}
	if err := writeAtomic(filepath.Join(stage, journalFile), jb, 0o600); err != nil {
		return nil, err
	}
	return u, nil
}

// Stage is the local directory the run writes into.
func (u *StagedUpload) Stage() string { return u.stage }

func stagedName(s dataset.ShardInfo) string {
	return fmt.Sprintf("%s/%s-%d.arrow", uploadDir, s.Hash, s.Bytes)
}

// ShardDone uploads a shard the run has just completed and journaled, then the journal itself.
func (u *StagedUpload) ShardDone(ctx context.Context, s dataset.ShardInfo) error {
	if err := u.st.Upload(ctx, stagedName(s), filepath.Join(u.stage, s.Name)); err != nil {
		return err
	}
	if _, err := os.Stat(filepath.Join(u.stage, journalFile)); err == nil {
		return u.st.Upload(ctx, journalFile, filepath.Join(u.stage, journalFile))
	}
	return nil
}

// Finish publishes the finalized dataset in the stage: every shard under its final name (copied inside the store
// from its staged upload, uploaded when that is missing), the Hugging Face metadata, gload.index last; then it
// removes the staged uploads, the journal and final-named shards of an older dataset the new one does not list.
func (u *StagedUpload) Finish(ctx context.Context) error {
	shards, err := indexShards(u.stage, false) // written by this run's Finalize: header and block table checked
	if err != nil {
		return fmt.Errorf("tokenize: upload: %w", err)
	}
	objs, err := u.st.List(ctx)
	if err != nil {
		return err
	}
	have := map[string]int64{}
	for _, o := range objs {
		have[o.Name] = o.Size
	}
	if _, ok := have[dataset.IndexFile]; ok {
		if err := u.st.Remove(ctx, dataset.IndexFile); err != nil {
			return err
		}
	}
	keep := map[string]bool{}
	for _, e := range shards {
		keep[e.Name] = true
		staged := stagedName(dataset.ShardInfo{Hash: e.ContentHash, Bytes: e.Size})
		if size, ok := have[staged]; ok && size == e.Size {
			if err := u.st.Copy(ctx, staged, e.Name); err != nil {
				return err
			}
			continue
		}
		if err := u.st.Upload(ctx, e.Name, filepath.Join(u.stage, e.Name)); err != nil {
			return err
		}
	}
	if err := uploadMeta(ctx, u.stage, u.st); err != nil {
		return err
	}
	for _, o := range objs {
		stale := strings.HasPrefix(o.Name, uploadDir+"/") || o.Name == journalFile ||
			(strings.HasPrefix(o.Name, "data-") && strings.HasSuffix(o.Name, ".arrow") && !keep[o.Name])
		if stale {
			if err := u.st.Remove(ctx, o.Name); err != nil {
				return err
			}
		}
	}
	return nil
}
