package pipeline

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"sync/atomic"
	"testing"

	"github.com/gload/gload/loader/dataset"
)

// TestShardDoneSeesEveryShardInOrder: the closer finishes shards on its own goroutine, one at a time, so the
// callback sees each complete shard once, in order, already under its final name and journaled.
func TestShardDoneSeesEveryShardInOrder(t *testing.T) {
	tok := loadTok(t)
	dir := t.TempDir()
	in, _ := writeCorpus(t, dir, 800)
	out := filepath.Join(dir, "out")
	var seen []dataset.ShardInfo
	o := Options{Inputs: []string{in}, Engine: tok, Workers: 2, ShardSize: 15000, Out: out}
	o.ShardDone = func(s dataset.ShardInfo) error {
		if _, err := os.Stat(filepath.Join(out, s.Name)); err != nil {
			t.Errorf("ShardDone(%s): not under its name: %v", s.Name, err)
		}
		if s.Name != dataset.ShardName(len(seen)) {
			t.Errorf("ShardDone got %s, want %s", s.Name, dataset.ShardName(len(seen)))
		}
		seen = append(seen, s)
		return nil
	}
	sum := run(t, o)
	if sum.Shards < 3 || len(seen) != sum.Shards {
		t.Fatalf("%d shards written, ShardDone saw %d", sum.Shards, len(seen))
	}
}

// TestCloseErrorStopsTheRun: an error in a background close (here the callback's) fails the run with that
// error, and the run can be resumed to the same dataset.
func TestCloseErrorStopsTheRun(t *testing.T) {
	tok := loadTok(t)
	dir := t.TempDir()
	in, _ := writeCorpus(t, dir, 800)
	ref := filepath.Join(dir, "ref")
	run(t, Options{Inputs: []string{in}, Engine: tok, Workers: 2, ShardSize: 15000, Out: ref})

	out := filepath.Join(dir, "out")
	boom := errors.New("upload refused")
	var calls atomic.Int32
	o := Options{Inputs: []string{in}, Engine: tok, Workers: 2, ShardSize: 15000, Out: out}
	o.ShardDone = func(dataset.ShardInfo) error {
		if calls.Add(1) == 2 {
			return boom
		}
		return nil
	}
	if _, err := Run(context.Background(), o); !errors.Is(err, boom) {
		t.Fatalf("Run: err = %v, want %v", err, boom)
	}
	o.ShardDone = nil
	o.Resume = true
	run(t, o)
	sameDirs(t, ref, out)
}
