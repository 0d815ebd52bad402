package pipeline

import (
	"encoding/json"
	"fmt"
	"maps"
	"time"

	"github.com/gload/gload/loader/dataset"
)

// shardCloser finishes shards off the ordered writer's goroutine: a full shard's Close (flush, fsync, rename,
// directory fsync), then its journal entry and the ShardDone callback, while the writer fills the next shard.
// One close is in flight at a time, so shards are journaled in order and at most two shards' buffers exist.
//
// The journal a close saves is the writer's journal as it stood when the shard was cut (Next is the input
// position right after the shard's last document, the stats count up to it), plus the shards closed so far: a
// run killed while the next shard is being written resumes from that shard's end, exactly as before. This file
// holds only the hand-off; what a shard or a journal holds is the writer's and state.go's.
type shardCloser struct {
	st     *state
	done   func(dataset.ShardInfo) error // Options.ShardDone, may be nil
	shards []dataset.ShardInfo           // closed and journaled, in order
	wait   chan error                    // the close in flight; nil when none
	waited time.Duration                 // how long start waited, in all, for the close before its own
}

func newShardCloser(st *state, done func(dataset.ShardInfo) error) *shardCloser {
	return &shardCloser{st: st, done: done, shards: st.j.Shards}
}

// start waits for the previous close, then closes sw in the background with a snapshot of the journal j.
func (c *shardCloser) start(sw *dataset.ShardWriter, j journal) error {
	t0 := time.Now()
	err := c.flush()
	c.waited += time.Since(t0)
	if err != nil {
		sw.Abort()
		return err
	}
	j.Stats.Skipped = maps.Clone(j.Stats.Skipped) // the writer keeps counting into its own map
	j.Shards = nil
	ch := make(chan error, 1)
	c.wait = ch
	go func() { ch <- c.close(sw, j) }()
	return nil
}

// close runs on the closer's goroutine; c.shards is touched only here while a close is in flight.
func (c *shardCloser) close(sw *dataset.ShardWriter, j journal) error {
	info, err := sw.Close()
	if err != nil {
		return err
	}
	c.shards = append(c.shards, info)
	j.Shards = c.shards
	if err := saveJournal(c.st.journalPath(), &j); err != nil {
		return err
	}
	if c.done != nil {
		if err := c.done(info); err != nil {
			return err
		}
	}
	if testHookShardClosed != nil {
		testHookShardClosed()
	}
	return nil
}

// flush waits for the close in flight, if any, and returns its error.
func (c *shardCloser) flush() error {
	if c.wait == nil {
		return nil
	}
	err := <-c.wait
	c.wait = nil
	return err
}

func saveJournal(path string, j *journal) error {
	data, err := json.Marshal(j)
	if err != nil {
		return fmt.Errorf("tokenize: journal: %w", err)
	}
	return writeFileAtomic(path, data)
}
