package loader

import (
	"container/list"
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"time"

	"github.com/gload/gload/bucket"
	"github.com/gload/gload/proto/gloadpb"
)

// policyConfig turns the wire policy into a bucket.Config for planWorld.
// Zero fields take bucket's defaults, so equal policies hash equal.
func policyConfig(p *gloadpb.BatchPolicy, planWorld int) bucket.Config {
	c := bucket.DefaultConfig()
	if p == nil {
		p = &gloadpb.BatchPolicy{}
	}
	if p.Policy != "" {
		c.Policy = bucket.Policy(p.Policy)
	}
	c.BatchSize = int(p.BatchSize)
	c.TokenBudget = int(p.TokenBudget)
	c.SeqLen = int(p.SeqLen)
	c.MaxLength = int(p.MaxLength)
	if p.PadMultiple != 0 {
		c.PadMultiple = int(p.PadMultiple)
	}
	for _, b := range p.Boundaries {
		c.Boundaries = append(c.Boundaries, int(b))
	}
	c.AutoBuckets = int(p.AutoBuckets)
	if p.MegaBatchMult != 0 {
		c.MegaBatchMult = int(p.MegaBatchMult)
	}
	if p.Remainder != "" {
		c.Remainder = bucket.Remainder(p.Remainder)
	}
	c.WarmupShapes = !p.NoWarmup
	c.SplitDocs = p.SplitDocs
	c.Sequential = p.Sequential
	c.PlanWorld = planWorld
	c.ShuffleWindow = int(p.ShuffleWindow)
	c.Planner = bucket.Planner(p.Planner)
	return c
}

// padID is the token a stream pads input_ids with: the client's pad_id when it
// set one (pad_id_set, or any non-zero pad_id from clients that predate
// pad_id_set), else the pad token recorded in the dataset, else 0.
func padID(p *gloadpb.BatchPolicy, info *gloadpb.DatasetInfo) int32 {
	if p.GetPadIdSet() || p.GetPadId() != 0 || info.GetPadFrom() == "" {
		return p.GetPadId()
	}
	return info.GetPadId()
}

// policyHash identifies the plan-shaping part of a policy: 16 hex digits of
// the SHA-256 of its fields with defaults applied (position_start and pad_id
// change batch contents, not the plan, and are left out).
func policyHash(c bucket.Config) string {
	h := sha256.New()
	var buf [8]byte
	putInt := func(v int) {
		binary.LittleEndian.PutUint64(buf[:], uint64(int64(v)))
		h.Write(buf[:])
	}
	putStr := func(s string) {
		putInt(len(s))
		h.Write([]byte(s))
	}
	putStr("gload/policy/v1")
	putStr(string(c.Policy))
	putStr(string(c.Remainder))
	for _, v := range []int{c.BatchSize, c.TokenBudget, c.SeqLen, c.MaxLength, c.PadMultiple, c.AutoBuckets, c.MegaBatchMult} {
		putInt(v)
	}
	putInt(len(c.Boundaries))
	for _, b := range c.Boundaries {
		putInt(b)
	}
	flags := 0
	if c.WarmupShapes {
		flags |= 1
	}
	if c.SplitDocs {
		flags |= 2
	}
	if c.Sequential {
		flags |= 4
	}
	putInt(flags)
	// Fields added later hash only when set, so the hashes of existing policies (and their resume states) stay.
	if c.ShuffleWindow != 0 {
		putStr("shuffle_window")
		putInt(c.ShuffleWindow)
	}
	if c.Planner != "" && c.Planner != bucket.PlannerAuto {
		putStr("planner")
		putStr(string(c.Planner))
	}
	return hex.EncodeToString(h.Sum(nil)[:8])
}

// resumeHash is the policy hash a consumer's resume state carries: policyHash for exact plans (as before lazy
// plans existed), and for a plan made by another algorithm (bucket's lazy planners, past 2^27 rows) the policy hash
// with the algorithm's name folded in, so a state saved under one planner never continues another's plan.
func resumeHash(c bucket.Config, p epochPlan) string {
	a, ok := p.(interface{ Algorithm() string })
	if !ok || a.Algorithm() == "" {
		return policyHash(c)
	}
	h := sha256.New()
	h.Write([]byte("gload/policy+algorithm/v1\x00" + policyHash(c) + "\x00" + a.Algorithm()))
	return hex.EncodeToString(h.Sum(nil)[:8])
}

// planKey identifies a cached plan.
type planKey struct {
	fingerprint string
	seed        uint64
	epoch       int
	policy      string // policyHash
	planWorld   int
}

func (k planKey) String() string {
	return k.fingerprint + "/" + strconv.FormatUint(k.seed, 10) + "/" + strconv.Itoa(k.epoch) + "/" + k.policy + "/" + strconv.Itoa(k.planWorld)
}

// planCache is an LRU of epoch plans; concurrent misses for one key share a
// single computation (a flight), which runs in a goroutine the cache owns
// under a context that ends when the last caller waiting for it has left
// or when the cache is closed: a plan nobody waits for stops (mixture
// planning looks at its context; dataset plans are bounded by the
// dataset's rows and finish).
type planCache struct {
	mu      sync.Mutex
	cap     int
	ll      *list.List // of *planEntry, most recent first
	items   map[planKey]*list.Element
	flights map[planKey]*planFlight
	base    context.Context // ends every flight when the server stops
	wg      sync.WaitGroup  // the flights' goroutines

	observe func(policy string, d time.Duration, hit bool)
	counts  *countsKeeper // lazy tokens and packed plans' counting passes, kept across restarts (nil: none)
}

type planEntry struct {
	key  planKey
	plan epochPlan
}

// planFlight is one computation of a plan and the callers waiting for it.
type planFlight struct {
	done    chan struct{} // closed when plan and err are set
	plan    epochPlan
	err     error
	waiters int // guarded by planCache.mu
	cancel  context.CancelCauseFunc
}

// errPlanAbandoned is the cause a flight is cancelled with when its last
// waiter left.
var errPlanAbandoned = errors.New("loader: every caller waiting for this plan left")

// newPlanCache makes a cache whose flights end when base does.
func newPlanCache(base context.Context, capacity int, observe func(string, time.Duration, bool)) *planCache {
	return &planCache{cap: capacity, ll: list.New(), items: map[planKey]*list.Element{}, flights: map[planKey]*planFlight{},
		base: base, observe: observe}
}

func (c *planCache) lookup(k planKey) epochPlan {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.lookupLocked(k)
}

func (c *planCache) lookupLocked(k planKey) epochPlan {
	if e, ok := c.items[k]; ok {
		c.ll.MoveToFront(e)
		return e.Value.(*planEntry).plan
	}
	return nil
}

func (c *planCache) storeLocked(k planKey, p epochPlan) {
	if e, ok := c.items[k]; ok {
		c.ll.MoveToFront(e)
		return
	}
	c.items[k] = c.ll.PushFront(&planEntry{key: k, plan: p})
	for c.ll.Len() > c.cap {
		old := c.ll.Back()
		c.ll.Remove(old)
		delete(c.items, old.Value.(*planEntry).key)
	}
}

// get returns the plan for k, computing it with lengths and cfg on a miss: an exact plan up to
// bucket.LazyThreshold rows, a lazy block plan above (bucket.NewEpochPlan; cfg.Planner may choose either), whose
// counting pass runs on every core or is read from the kept counts (plancounts.go).
func (c *planCache) get(ctx context.Context, k planKey, lengths bucket.Lengths, cfg bucket.Config) (epochPlan, error) {
	return c.getWith(ctx, k, string(cfg.Policy), func(context.Context) (epochPlan, error) {
		p, err := c.counts.newEpochPlan(lengths, k.fingerprint, k.seed, k.epoch, cfg, bucket.Parallel)
		if err != nil {
			return nil, err
		}
		ep, ok := p.(epochPlan)
		if !ok {
			return nil, fmt.Errorf("plan %s: internal error: unexpected %T", k, p)
		}
		return ep, nil
	})
}

// getWith returns the plan for k, computing it with build on a miss. It
// returns ctx's error once ctx ends, whether or not the plan is done; build
// gets a context that ends when every caller waiting for it has left (or
// the cache is closed).
func (c *planCache) getWith(ctx context.Context, k planKey, policy string, build func(context.Context) (epochPlan, error)) (epochPlan, error) {
	c.mu.Lock()
	if p := c.lookupLocked(k); p != nil {
		c.mu.Unlock()
		c.observe(policy, 0, true)
		return p, nil
	}
	f, ok := c.flights[k]
	if !ok {
		fctx, cancel := context.WithCancelCause(c.base)
		f = &planFlight{done: make(chan struct{}), cancel: cancel}
		c.flights[k] = f
		c.wg.Add(1)
		go c.fly(fctx, k, f, policy, build)
	}
	f.waiters++
	c.mu.Unlock()

	select {
	case <-f.done:
		c.mu.Lock()
		f.waiters--
		c.mu.Unlock()
		return f.plan, f.err
	case <-ctx.Done():
		c.mu.Lock()
		f.waiters--
		if f.waiters == 0 {
			// Nobody waits: stop it, and let a later caller start afresh.
			f.cancel(errPlanAbandoned)
			if c.flights[k] == f {
				delete(c.flights, k)
			}
		}
		c.mu.Unlock()
		return nil, ctx.Err()
	}
}

// fly computes one flight's plan and publishes it.
func (c *planCache) fly(ctx context.Context, k planKey, f *planFlight, policy string, build func(context.Context) (epochPlan, error)) {
	defer c.wg.Done()
	defer f.cancel(nil)
	t0 := time.Now()
	p, err := build(ctx)
	if err == nil {
		c.observe(policy, time.Since(t0), false)
	}
	c.mu.Lock()
	if c.flights[k] == f {
		delete(c.flights, k)
	}
	if err == nil {
		c.storeLocked(k, p)
	}
	f.plan, f.err = p, err
	c.mu.Unlock()
	close(f.done)
}

// wait waits for every flight's goroutine to end (once base has ended,
// mixture flights end within one check interval).
func (c *planCache) wait() { c.wg.Wait() }

// len returns the number of cached plans.
func (c *planCache) len() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.ll.Len()
}
