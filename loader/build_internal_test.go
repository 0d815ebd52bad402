package loader

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/gload/gload/bucket"
	"github.com/gload/gload/loader/dataset"
	"github.com/gload/gload/loader/shm"
	"github.com/gload/gload/proto/gloadpb"
)

// panicSource panics when batch assembly reads a row.
type panicSource struct{ with func() }

func (p panicSource) ZeroCopy() bool                             { return true }
func (p panicSource) Tokens(int) ([]int32, error)                { p.with(); return nil, nil }
func (p panicSource) AppendTokens([]int32, int) ([]int32, error) { p.with(); return nil, nil }

// panickingPlan is a plan whose Batch panics with.
type panickingPlan struct {
	epochPlan
	with func()
}

func (p panickingPlan) Batch(int) bucket.Batch { p.with(); return bucket.Batch{} }

type fakeFault struct{}

func (fakeFault) Error() string { return "unexpected fault address" }
func (fakeFault) RuntimeError() {}
func (fakeFault) Addr() uintptr { return 0xdead }

// serveOne is a server over dir as dataset "d" (closed at the test's end) and its consumer of 4-row batches.
func serveOne(t *testing.T, dir string) (*Server, *consumer) {
	t.Helper()
	s, err := NewServer(Config{Datasets: map[string]string{"d": dir}, NoGPUWatch: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	c, err := s.resolve(t.Context(), &gloadpb.Open{Dataset: "d", Policy: &gloadpb.BatchPolicy{BatchSize: 4}})
	if err != nil {
		t.Fatal(err)
	}
	return s, c
}

// TestBuildRecoversEveryPanic: no panic of batch assembly escapes build (it
// would take the whole server down): a memory fault or a runtime error over
// a shard that changed on disk is DATA_LOSS naming it, anything else
// INTERNAL.
func TestBuildRecoversEveryPanic(t *testing.T) {
	dir := t.TempDir()
	writeRows(t, dir, 40, dataset.WriterOptions{}, func(i int) []int32 { return []int32{int32(i), 1, 2} })
	shard := filepath.Join(dir, dataset.DataFileName(0, 1))
	for _, tc := range []struct {
		name    string
		panic   func()
		touch   bool
		code    codes.Code
		mention string
		inPlan  bool
	}{
		{"internal invariant", func() { panic("loader: broken invariant") }, false, codes.Internal, "internal error", false},
		{"index out of range, files unchanged", func() { _ = []int{}[len(os.Args)+5] }, false, codes.Internal, "internal error", false},
		{"index out of range over a changed shard", func() { _ = []int{}[len(os.Args)+5] }, true, codes.DataLoss, shard, false},
		{"memory fault", func() { panic(fakeFault{}) }, false, codes.DataLoss, "memory fault", false},
		// The same panics while the plan computes the batch (planBatch: a lazy plan reading mapped lengths, a lazy
		// packed plan on wrong kept counts).
		{"plan: internal invariant", func() { panic("bucket: kept counts disagree") }, false, codes.Internal, "internal error", true},
		{"plan: memory fault", func() { panic(fakeFault{}) }, false, codes.DataLoss, "memory fault", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, c := serveOne(t, dir)
			if tc.touch {
				later := time.Now().Add(time.Hour)
				if err := os.Chtimes(shard, later, later); err != nil {
					t.Fatal(err)
				}
			}
			asm := newAssembler(panicSource{tc.panic}, s.pool, s.cfg.MaxBatchBytes)
			g := c.assigned.At(0)
			var err error
			if tc.inPlan {
				c.plan = panickingPlan{c.plan, tc.panic}
				_, err = s.planBatch(asm, c, g)
			} else {
				_, err = s.build(asm, c, g, c.plan.Batch(g), batchHeader{}, nil, slotNone, shm.Layout{})
			}
			if status.Code(err) != tc.code || !strings.Contains(err.Error(), tc.mention) {
				t.Fatalf("build: %v; want %s mentioning %q", err, tc.code, tc.mention)
			}
		})
	}
}

// TestRemoteFeedRecoversPlanPanics: the object-storage feed's look-ahead computes the next batches of the plan
// outside planBatch; a panic there is an error wrapping errPlanPanicked (the stream ends with INTERNAL), never a
// panic out of the stream's goroutine, which nothing recovers.
func TestRemoteFeedRecoversPlanPanics(t *testing.T) {
	dir := t.TempDir()
	writeRows(t, dir, 40, dataset.WriterOptions{}, func(i int) []int32 { return []int32{int32(i), 1, 2} })
	s, c := serveOne(t, dir)
	for _, with := range []func(){
		func() { panic("bucket: lazy plan: window 5 has 3 batches, its counts say 4") },
		func() { _ = []int{}[len(os.Args)+5] },
	} {
		f := &remoteFeed{plan: panickingPlan{c.plan, with}, assigned: c.assigned}
		err := f.register(0)
		if !errors.Is(err, errPlanPanicked) || !strings.Contains(err.Error(), "batches 0 to") {
			t.Fatalf("register: %v; want an error wrapping errPlanPanicked naming the batches", err)
		}
		if _, err := f.acquire(t.Context(), f.end, bucket.Batch{}, func() {}); !errors.Is(err, errPlanPanicked) {
			t.Fatalf("acquire past the registered batches: %v; want errPlanPanicked", err)
		}
		if st := status.Convert(s.planPanicked(c, err)); st.Code() != codes.Internal || !strings.Contains(st.Message(), "dataset d") {
			t.Fatalf("the stream's error: %v; want INTERNAL naming the dataset", st)
		}
	}
}
