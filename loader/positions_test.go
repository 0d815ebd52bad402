package loader_test

import (
	"math"
	"testing"

	"github.com/gload/gload/loader"
	"github.com/gload/gload/proto/gloadpb"
)

// TestPositionStartAtTheLimit: the largest position_start that fits (start +
// seq_len - 1 = 2^31-1) streams position ids that never wrap negative; one
// more is refused (TestOpenErrors).
func TestPositionStartAtTheLimit(t *testing.T) {
	dir := t.TempDir()
	writeDataset(t, dir, genLengths(200, 100, 128, 41), 200, 50)
	ts := startServer(t, loader.Config{Datasets: map[string]string{"d": dir}, NoGPUWatch: true}, "unix")
	c := dial(t, ts.addr)
	start := int32(math.MaxInt32 - 127)
	open := &gloadpb.Open{Dataset: "d", Policy: &gloadpb.BatchPolicy{Policy: "packed", BatchSize: 2, SeqLen: 128, PositionStart: start}}
	bs, _, _, err := pullAll(t.Context(), c, open, -1)
	if err != nil {
		t.Fatal(err)
	}
	top := int32(0)
	for _, b := range bs {
		for _, p := range b.pos {
			if p < start {
				t.Fatalf("batch %d: position id %d below the start %d (wrapped)", b.global, p, start)
			}
			top = max(top, p)
		}
	}
	if top != math.MaxInt32 {
		t.Fatalf("largest position id %d, want %d", top, int32(math.MaxInt32))
	}
}
