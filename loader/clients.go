package loader

import (
	"math"
	"sort"
	"sync"
	"time"
)

// ClientStat is what the server knows about one client: the streams of one
// client_id on one dataset, and its latest step reports.
type ClientStat struct {
	Dataset  string
	ClientID string
	// Streams is the number of open streams.
	Streams int
	// QueueDepth is the batches sent and not yet acknowledged, over its streams.
	QueueDepth int
	// Reports counts step reports received.
	Reports uint64
	// LastWait and LastStep are from the latest report.
	LastWait, LastStep time.Duration
	// WaitShare is a moving average of wait / (wait + step), over about the
	// last 20 reports.
	WaitShare float64
	// MeanStep is a moving average of the step time.
	MeanStep time.Duration
	// LastReport is when the latest report arrived (zero: none yet).
	LastReport time.Time
	// ClockSkew is server time minus client time at the latest report.
	ClockSkew time.Duration
}

// ewmaAlpha weights the newest report in the moving averages.
const ewmaAlpha = 0.1

// maxIdleClients bounds how many clients without open streams are remembered.
const maxIdleClients = 256

type clientKey struct{ dataset, id string }

type clientState struct {
	stat  ClientStat // QueueDepth unused: see queue
	queue queueCount // batches sent and not acked, over the client's streams (watch.go)
	seen  time.Time
}

// clientTable records per-client state for metrics and the starvation watch.
type clientTable struct {
	mu      sync.Mutex
	clients map[clientKey]*clientState
	now     func() time.Time
	// onReport, onDrained and onClosed feed the GPU watch (watch.go); set
	// before use. onClosed is called, with mu held, when the last open
	// stream of a watch name ends.
	onReport  func(id string, wait, step time.Duration, clientTime time.Time)
	onDrained func(id string)
	onClosed  func(name string)
}

func newClientTable(now func() time.Time) *clientTable {
	return &clientTable{clients: map[clientKey]*clientState{}, now: now}
}

func (t *clientTable) get(k clientKey) *clientState {
	c, ok := t.clients[k]
	if !ok {
		c = &clientState{stat: ClientStat{Dataset: k.dataset, ClientID: k.id}}
		if t.onDrained != nil {
			c.queue.drained = func() { t.onDrained(k.id) }
		}
		t.clients[k] = c
	}
	c.seen = t.now()
	return c
}

// open counts a new stream of client k and returns its state, whose queue
// the stream updates without locking.
func (t *clientTable) open(k clientKey) *clientState {
	t.mu.Lock()
	defer t.mu.Unlock()
	c := t.get(k)
	c.stat.Streams++
	return c
}

// close ends a stream (its queue contribution was already taken back) and,
// when it was the last open stream of its watch name (over every dataset),
// tells the watch.
func (t *clientTable) close(k clientKey) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.get(k).stat.Streams--
	if t.onClosed != nil {
		name, open := watchName(k.id), false
		for k2, c := range t.clients {
			if c.stat.Streams > 0 && watchName(k2.id) == name {
				open = true
				break
			}
		}
		if !open {
			t.onClosed(name)
		}
	}
	t.prune()
}

// report hands a step report to the watch, then records it, and returns the new wait share. The watch goes
// first so that a report counted in Reports has been seen by the watch too (the replay tests wait on the count
// and then move the watch's clock on).
func (t *clientTable) report(k clientKey, wait, step time.Duration, clientTime time.Time, steps int) float64 {
	if t.onReport != nil {
		t.onReport(k.id, wait, step, clientTime)
	}
	return t.record(k, wait, step, clientTime, steps)
}

// record takes one report of the mean wait and step over steps steps (a
// coalesced report counts as that many: the moving averages move as far).
func (t *clientTable) record(k clientKey, wait, step time.Duration, clientTime time.Time, steps int) float64 {
	t.mu.Lock()
	defer t.mu.Unlock()
	c := t.get(k)
	s := &c.stat
	share := 0.0
	if wait+step > 0 {
		share = float64(wait) / float64(wait+step)
	}
	if s.Reports == 0 {
		s.WaitShare, s.MeanStep = share, step
	} else {
		alpha := 1 - math.Pow(1-ewmaAlpha, float64(max(steps, 1)))
		s.WaitShare += alpha * (share - s.WaitShare)
		s.MeanStep += time.Duration(alpha * float64(step-s.MeanStep))
	}
	s.Reports += uint64(max(steps, 1))
	s.LastWait, s.LastStep = wait, step
	s.LastReport = c.seen
	if !clientTime.IsZero() {
		s.ClockSkew = c.seen.Sub(clientTime)
	}
	return s.WaitShare
}

// prune forgets the longest-idle clients without streams beyond maxIdleClients.
func (t *clientTable) prune() {
	var idle []clientKey
	for k, c := range t.clients {
		if c.stat.Streams == 0 {
			idle = append(idle, k)
		}
	}
	if len(idle) <= maxIdleClients {
		return
	}
	sort.Slice(idle, func(i, j int) bool { return t.clients[idle[i]].seen.Before(t.clients[idle[j]].seen) })
	for _, k := range idle[:len(idle)-maxIdleClients] {
		delete(t.clients, k)
	}
}

func (t *clientTable) snapshot() []ClientStat {
	t.mu.Lock()
	out := make([]ClientStat, 0, len(t.clients))
	for _, c := range t.clients {
		st := c.stat
		st.QueueDepth = int(c.queue.Load())
		out = append(out, st)
	}
	t.mu.Unlock()
	sort.Slice(out, func(i, j int) bool {
		if out[i].Dataset != out[j].Dataset {
			return out[i].Dataset < out[j].Dataset
		}
		return out[i].ClientID < out[j].ClientID
	})
	return out
}
