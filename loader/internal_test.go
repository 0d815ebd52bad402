package loader

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gload/gload/bucket"
	"github.com/gload/gload/proto/gloadpb"
)

func TestPolicyHash(t *testing.T) {
	base := &gloadpb.BatchPolicy{BatchSize: 8}
	h := policyHash(policyConfig(base, 1))
	if len(h) != 16 {
		t.Fatalf("hash %q", h)
	}
	// Defaults spelled out hash the same; plan_world, pad_id and
	// position_start do not enter.
	same := []*gloadpb.BatchPolicy{
		{Policy: "bucketed", BatchSize: 8, PadMultiple: 64, MegaBatchMult: 50, Remainder: "drop"},
		{BatchSize: 8, PadId: 5, PositionStart: 1},
	}
	for _, p := range same {
		if g := policyHash(policyConfig(p, 4)); g != h {
			t.Errorf("%v: hash %s, want %s", p, g, h)
		}
	}
	diff := []*gloadpb.BatchPolicy{
		{BatchSize: 9}, {BatchSize: 8, MaxLength: 10}, {BatchSize: 8, PadMultiple: 8}, {BatchSize: 8, Boundaries: []uint32{64}},
		{BatchSize: 8, AutoBuckets: 4}, {BatchSize: 8, MegaBatchMult: 2}, {BatchSize: 8, Remainder: "wrap"}, {BatchSize: 8, NoWarmup: true},
		{Policy: "tokens", TokenBudget: 8}, {Policy: "packed", BatchSize: 8, SeqLen: 64}, {Policy: "packed", BatchSize: 8, SeqLen: 64, SplitDocs: true},
	}
	seen := map[string]bool{h: true}
	for _, p := range diff {
		g := policyHash(policyConfig(p, 1))
		if seen[g] {
			t.Errorf("%v: hash %s collides", p, g)
		}
		seen[g] = true
	}
}

func TestPlanCache(t *testing.T) {
	lengths := make([]uint32, 10000)
	for i := range lengths {
		lengths[i] = uint32(i%500 + 1)
	}
	var misses, hits atomic.Int64
	c := newPlanCache(context.Background(), 2, func(_ string, _ time.Duration, hit bool) {
		if hit {
			hits.Add(1)
		} else {
			misses.Add(1)
		}
	})
	cfg := bucket.DefaultConfig()
	cfg.BatchSize = 8
	key := func(seed uint64) planKey {
		return planKey{fingerprint: "fp", seed: seed, policy: policyHash(cfg), planWorld: 1}
	}
	// Many concurrent asks for one plan: one computation.
	var wg sync.WaitGroup
	plans := make([]epochPlan, 16)
	for i := range plans {
		wg.Add(1)
		go func() {
			defer wg.Done()
			p, err := c.get(t.Context(), key(1), bucket.SliceLengths(lengths), cfg)
			if err != nil {
				t.Error(err)
			}
			plans[i] = p
		}()
	}
	wg.Wait()
	for _, p := range plans {
		if p != plans[0] {
			t.Fatal("concurrent asks got different plans")
		}
	}
	if misses.Load() != 1 {
		t.Fatalf("%d computations for one plan", misses.Load())
	}
	// LRU of 2: seeds 2 and 3 push seed 1 out.
	for _, s := range []uint64{2, 3, 1} {
		if _, err := c.get(t.Context(), key(s), bucket.SliceLengths(lengths), cfg); err != nil {
			t.Fatal(err)
		}
	}
	if misses.Load() != 4 || c.len() != 2 {
		t.Fatalf("misses %d, cached %d", misses.Load(), c.len())
	}
	if _, err := c.get(t.Context(), key(1), bucket.SliceLengths(lengths), cfg); err != nil || misses.Load() != 4 {
		t.Fatalf("seed 1 not cached: misses %d, %v", misses.Load(), err)
	}
	// Errors are not cached.
	bad := cfg
	bad.BatchSize = 0
	for range 2 {
		if _, err := c.get(t.Context(), planKey{fingerprint: "fp", policy: "bad"}, bucket.SliceLengths(lengths), bad); err == nil {
			t.Fatal("bad config planned")
		}
	}
	if c.len() != 2 {
		t.Fatalf("cached %d", c.len())
	}
}

func TestClientLabels(t *testing.T) {
	var forgotten []string
	l := newClientLabels(2, func(c string) { forgotten = append(forgotten, c) })
	if l.acquire("a") != "a" || l.acquire("b") != "b" {
		t.Fatal("first two ids not labelled")
	}
	if got := l.acquire("c"); got != otherClient {
		t.Fatalf("third id with two active: %q", got)
	}
	l.release(otherClient)
	l.release("a")
	if got := l.acquire("c"); got != "c" || len(forgotten) != 1 || forgotten[0] != "a" {
		t.Fatalf("after a released: %q, forgotten %v", got, forgotten)
	}
	if got := l.acquire("b"); got != "b" {
		t.Fatalf("known id: %q", got)
	}
	for i := range 100 {
		id := fmt.Sprint(i)
		l.release(l.acquire(id))
	}
	if len(l.ids) > 2 {
		t.Fatalf("%d labels kept", len(l.ids))
	}
}

func TestClientTable(t *testing.T) {
	now := time.Unix(1000, 0)
	tab := newClientTable(func() time.Time { return now })
	k := clientKey{"d", "x"}
	cs := tab.open(k)
	cs.queue.Add(3)
	share := tab.report(k, 10*time.Millisecond, 30*time.Millisecond, now.Add(-time.Second), 1)
	if share != 0.25 {
		t.Fatalf("share %v", share)
	}
	share = tab.report(k, 0, 40*time.Millisecond, time.Time{}, 1)
	if share != 0.25*0.9 {
		t.Fatalf("share %v", share)
	}
	st := tab.snapshot()
	if len(st) != 1 || st[0].QueueDepth != 3 || st[0].Streams != 1 || st[0].Reports != 2 || st[0].ClockSkew != time.Second {
		t.Fatalf("%+v", st)
	}
	tab.close(k)
	for i := range maxIdleClients + 10 {
		tab.open(clientKey{"d", fmt.Sprint(i)})
		tab.close(clientKey{"d", fmt.Sprint(i)})
	}
	if n := len(tab.snapshot()); n != maxIdleClients {
		t.Fatalf("%d idle clients kept", n)
	}
}

// TestPlanCacheAbandon: a computation ends (its context cancelled) when the
// last caller waiting for it leaves, not before; a later caller starts a
// fresh one; and the cache's base context ends every computation.
func TestPlanCacheAbandon(t *testing.T) {
	base, stop := context.WithCancel(t.Context())
	c := newPlanCache(base, 2, func(string, time.Duration, bool) {})
	k := planKey{fingerprint: "fp", planWorld: 1}
	started := make(chan struct{}, 4)
	ended := make(chan error, 4)
	block := func(ctx context.Context) (epochPlan, error) {
		started <- struct{}{}
		<-ctx.Done()
		ended <- context.Cause(ctx)
		return nil, context.Cause(ctx)
	}
	ctx1, cancel1 := context.WithCancel(t.Context())
	ctx2, cancel2 := context.WithCancel(t.Context())
	errs := make(chan error, 2)
	go func() { _, err := c.getWith(ctx1, k, "p", block); errs <- err }()
	<-started
	go func() { _, err := c.getWith(ctx2, k, "p", block); errs <- err }()
	for { // wait until the second caller joined the flight
		c.mu.Lock()
		n := c.flights[k].waiters
		c.mu.Unlock()
		if n == 2 {
			break
		}
		time.Sleep(time.Millisecond)
	}
	cancel1()
	if err := <-errs; !errors.Is(err, context.Canceled) {
		t.Fatalf("first caller: %v", err)
	}
	select {
	case err := <-ended:
		t.Fatalf("the computation ended while a caller still waited: %v", err)
	default:
	}
	cancel2()
	if err := <-errs; !errors.Is(err, context.Canceled) {
		t.Fatalf("second caller: %v", err)
	}
	if err := <-ended; !errors.Is(err, errPlanAbandoned) {
		t.Fatalf("computation ended with %v, want errPlanAbandoned", err)
	}
	// A new caller starts afresh; the base context ends it.
	go func() { _, err := c.getWith(t.Context(), k, "p", block); errs <- err }()
	<-started
	stop()
	if err := <-ended; !errors.Is(err, context.Canceled) {
		t.Fatalf("computation ended with %v, want the base's cancellation", err)
	}
	if err := <-errs; !errors.Is(err, context.Canceled) {
		t.Fatalf("caller: %v", err)
	}
	c.wait()
}
