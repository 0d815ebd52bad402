package dataset

import (
	"context"
	"errors"
	"path/filepath"
	"slices"
	"sync"
	"testing"
)

// dirSource hands out the shard files of a directory, counting pins (what loader/shardcache does over a bucket).
type dirSource struct {
	dir  string
	mu   sync.Mutex
	pins map[string]int
}

func (s *dirSource) Acquire(_ context.Context, name string, _ func()) (string, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.pins[name]++
	return filepath.Join(s.dir, name), nil
}

func (s *dirSource) Release(name string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.pins[name]--
}

// A dataset opened with shards on demand plans from the index alone, reads rows only of acquired shards (tokens,
// labels and string columns equal to an ordinary open), and reads nothing of an evicted shard until it is acquired
// again.
func TestLazyShards(t *testing.T) {
	rows, labels := labeledRows(600, 50)
	dir := t.TempDir()
	opts := WriterOptions{Labels: true, Columns: []string{"id"}, RowsPerBatch: 40}
	writeLabeled(t, dir, rows, labels, opts, 200)
	eager, err := Open(dir, OpenOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer eager.Close()
	src := &dirSource{dir: dir, pins: map[string]int{}}
	d, err := Open(dir, OpenOptions{Shards: src})
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	if !d.Lazy() || d.Len() != eager.Len() || d.Fingerprint() != eager.Fingerprint() || !d.HasLabels() ||
		!slices.Equal(d.Columns(), eager.Columns()) || d.ZeroCopy() != eager.ZeroCopy() {
		t.Fatalf("lazy open: len %d fp %s labels %v columns %v zero-copy %v; eager: %d %s %v %v %v", d.Len(), d.Fingerprint(),
			d.HasLabels(), d.Columns(), d.ZeroCopy(), eager.Len(), eager.Fingerprint(), eager.HasLabels(), eager.Columns(), eager.ZeroCopy())
	}
	if !slices.Equal(d.Lengths(), eager.Lengths()) {
		t.Fatal("lengths differ")
	}
	if _, err := d.Tokens(250); !errors.Is(err, ErrNotAcquired) {
		t.Fatalf("Tokens of an unacquired shard = %v, want ErrNotAcquired", err)
	}
	release, err := d.Acquire(context.Background(), []int{250, 10, 399}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if src.pins[d.ShardName(0)] != 1 || src.pins[d.ShardName(1)] != 1 || src.pins[d.ShardName(2)] != 0 {
		t.Fatalf("pins %v after acquiring rows of shards 0 and 1", src.pins)
	}
	for _, i := range []int{10, 250, 399, 0, 200} {
		got, err := d.Tokens(i)
		if err != nil {
			t.Fatal(err)
		}
		want, _ := eager.Tokens(i)
		gl, err := d.Labels(i)
		if err != nil {
			t.Fatal(err)
		}
		wl, _ := eager.Labels(i)
		gc, _, err := d.Column("id", i)
		if err != nil {
			t.Fatal(err)
		}
		wc, _, _ := eager.Column("id", i)
		if !slices.Equal(got, want) || !slices.Equal(gl, wl) || gc != wc {
			t.Fatalf("row %d differs from an eager open", i)
		}
	}
	release()
	if src.pins[d.ShardName(0)] != 0 || src.pins[d.ShardName(1)] != 0 {
		t.Fatalf("pins %v after release", src.pins)
	}
	d.Evict(d.ShardName(1))
	if _, err := d.Tokens(250); !errors.Is(err, ErrNotAcquired) {
		t.Fatalf("Tokens of an evicted shard = %v, want ErrNotAcquired", err)
	}
	release, err = d.Acquire(context.Background(), []int{250}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer release()
	got, _ := d.Tokens(250)
	want, _ := eager.Tokens(250)
	if !slices.Equal(got, want) {
		t.Fatal("row 250 differs after the shard came back")
	}
	if _, err := d.Acquire(context.Background(), []int{600}, nil); !errors.Is(err, ErrRange) {
		t.Fatalf("Acquire of row 600 of 600 = %v", err)
	}
}
