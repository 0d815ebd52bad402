package gpuwatch

import (
	"context"
	"errors"
	"log/slog"
	"slices"
	"sync"
	"time"
)

// Options configure a Watcher. Zero fields take the defaults named.
type Options struct {
	// Interval is the poll period of Run (default 1 s; NVML's fine-grained
	// samples make that enough).
	Interval time.Duration
	// Window is the span of the sliding window (default 60 s).
	Window time.Duration
	// MinCoverage is how much sampled time a device needs before it gets a
	// verdict (default 10 s, at most Window); until then it is
	// "insufficient data".
	MinCoverage time.Duration
	// MinSamples is how many SM samples a device needs before a verdict
	// (default 5).
	MinSamples int
	// SilentAfter is how long without a step report makes a client silent
	// (default 10 s). A silent client's queue is no longer sampled; its
	// reports age out of the window.
	SilentAfter time.Duration
	// ForgetAfter is how long without any report (step, queue, not-ready)
	// drops a client from the report (default 2×Window).
	ForgetAfter time.Duration
	// SkewTolerance is the clock difference beyond which a client's clock
	// is reported as skewed (default 1 s).
	SkewTolerance time.Duration
	// MaxClients bounds the clients tracked (default 1024); reports from
	// clients beyond it are counted in Report.ClientsDropped and ignored.
	MaxClients int
	// MaxSamples bounds the utilisation samples kept per device and series
	// (default 100000); the oldest go first.
	MaxSamples int
	// Thresholds of the checklist and of the diagnosis.
	Thresholds Thresholds
	// Now is the clock (default time.Now). Windowing uses it for everything
	// the server receives; fine-grained GPU samples carry the host clock.
	Now func() time.Time
	// Logger receives device changes (found, lost, recovered); nil discards.
	Logger *slog.Logger
}

// Thresholds are the numbers the verdicts are made of. Zero fields take the
// defaults named; utilisations are percentages, shares are fractions.
type Thresholds struct {
	// Checklist: median SM ≥ SMMedian (70), P10 ≥ SMP10 (40), share of
	// samples below Low (30) under LowShare (0.10).
	SMMedian float64 `json:"sm_median_min"`
	SMP10    float64 `json:"sm_p10_min"`
	Low      float64 `json:"low_sm"`
	LowShare float64 `json:"low_share_max"`
	// A client waits when its data-wait share is ≥ WaitShare (0.05), when
	// the next batch was not ready for ≥ NotReadyShare (0.05) of its steps,
	// or when its queue was empty in ≥ QueueEmptyShare (0.5) of the polls.
	WaitShare       float64 `json:"wait_share_min"`
	NotReadyShare   float64 `json:"not_ready_share_min"`
	QueueEmptyShare float64 `json:"queue_empty_share_min"`
	// Diagnosis: SM swings when P90−P10 ≥ Swing (40 points); mem-ctl is
	// high at a median ≥ MemCtlHigh (40) and low under MemCtlLow (15); the
	// GPU is idle when SM P90 < Idle (5).
	Swing      float64 `json:"swing_spread_min"`
	MemCtlHigh float64 `json:"mem_ctl_high"`
	MemCtlLow  float64 `json:"mem_ctl_low"`
	Idle       float64 `json:"idle_sm_max"`
}

// DefaultThresholds returns the thresholds zero fields stand for.
func DefaultThresholds() Thresholds {
	return Thresholds{
		SMMedian: 70, SMP10: 40, Low: 30, LowShare: 0.10,
		WaitShare: 0.05, NotReadyShare: 0.05, QueueEmptyShare: 0.5,
		Swing: 40, MemCtlHigh: 40, MemCtlLow: 15, Idle: 5,
	}
}

func (t Thresholds) withDefaults() Thresholds {
	d := DefaultThresholds()
	for _, f := range []struct{ dst, def *float64 }{
		{&t.SMMedian, &d.SMMedian}, {&t.SMP10, &d.SMP10}, {&t.Low, &d.Low}, {&t.LowShare, &d.LowShare},
		{&t.WaitShare, &d.WaitShare}, {&t.NotReadyShare, &d.NotReadyShare}, {&t.QueueEmptyShare, &d.QueueEmptyShare},
		{&t.Swing, &d.Swing}, {&t.MemCtlHigh, &d.MemCtlHigh}, {&t.MemCtlLow, &d.MemCtlLow}, {&t.Idle, &d.Idle},
	} {
		if *f.dst <= 0 {
			*f.dst = *f.def
		}
	}
	return t
}

func (o Options) withDefaults() Options {
	def := func(d *time.Duration, v time.Duration) {
		if *d <= 0 {
			*d = v
		}
	}
	def(&o.Interval, time.Second)
	def(&o.Window, 60*time.Second)
	def(&o.MinCoverage, 10*time.Second)
	o.MinCoverage = min(o.MinCoverage, o.Window)
	def(&o.SilentAfter, 10*time.Second)
	def(&o.ForgetAfter, 2*o.Window)
	def(&o.SkewTolerance, time.Second)
	if o.MinSamples <= 0 {
		o.MinSamples = 5
	}
	if o.MaxClients <= 0 {
		o.MaxClients = 1024
	}
	if o.MaxSamples <= 0 {
		o.MaxSamples = 100_000
	}
	o.Thresholds = o.Thresholds.withDefaults()
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	return o
}

// Watcher keeps the sliding windows and builds reports. Its methods are safe
// for concurrent use.
type Watcher struct {
	src    Source
	opts   Options
	bucket time.Duration // width of a client bucket

	pollMu sync.Mutex // serialises Poll

	mu             sync.Mutex
	polled         bool
	devErr         error // Devices failed (no GPU)
	devices        []*deviceState
	clients        map[string]*clientState
	clientsDropped int
}

// deviceState is one device's window.
type deviceState struct {
	info            DeviceInfo
	sm, mem         []Point // in window, by time
	lastSM, lastMem time.Time
	gauges          []gaugePoint
	firstOK         time.Time
	err             error     // last Sample error, nil after a success
	errSince        time.Time // first failure of the current run of them
	gone            bool      // an ErrDeviceLost error: no recovery
}

// gaugePoint is one poll's gauges.
type gaugePoint struct {
	t                       time.Time
	memUsed                 uint64
	rx, tx, power, smClockM float64
}

// clientState is what the server told about one client.
type clientState struct {
	device          int // -1: not assigned
	buckets         []clientBucket
	firstSeen       time.Time
	lastStep        time.Time // zero: none yet
	lastSeen        time.Time
	depth, capacity int
	queueSet        bool
	// closedAt is when the client's last batch stream ended (zero: open, or
	// it never had one); StreamClosed sets it, SetQueue clears it.
	closedAt time.Time
	skew     time.Duration
	hasSkew  bool
}

// clientBucket sums a client's reports received in [start, start+width).
type clientBucket struct {
	start          time.Time
	steps          int
	waitUS, stepUS float64
	notReady       int
	qPolls, qEmpty int
	qOcc           float64
}

// New returns a Watcher over src (nil stands for Unavailable(nil)). It does
// not close src.
func New(src Source, opts Options) *Watcher {
	if src == nil {
		src = Unavailable(nil)
	}
	o := opts.withDefaults()
	return &Watcher{
		src:     src,
		opts:    o,
		bucket:  max(o.Window/60, time.Millisecond),
		clients: make(map[string]*clientState),
	}
}

// Run polls every Options.Interval until ctx ends, then returns nil. Source
// errors never stop it: a source without GPU is reported as such, a failing
// device as lost.
func (w *Watcher) Run(ctx context.Context) error {
	t := time.NewTicker(w.opts.Interval)
	defer t.Stop()
	w.Poll()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
			w.Poll()
		}
	}
}

// Poll takes one reading of every device and one sample of every client's
// queue, and prunes the windows. Run calls it every Interval; replays and
// tests call it directly.
func (w *Watcher) Poll() {
	w.pollMu.Lock()
	defer w.pollMu.Unlock()

	w.mu.Lock()
	known := len(w.devices) > 0
	w.mu.Unlock()
	if !known {
		devs, err := w.src.Devices() // outside the lock: may block
		if err == nil && len(devs) == 0 {
			err = ErrNoGPU
		}
		w.mu.Lock()
		first := !w.polled
		w.devErr = err
		if err == nil {
			for _, d := range devs {
				w.devices = append(w.devices, &deviceState{info: d})
			}
		}
		w.mu.Unlock()
		switch {
		case err == nil:
			w.opts.Logger.Info("gpus found", "count", len(devs))
		case first:
			w.opts.Logger.Info("no gpu visible", "err", err)
		}
	}

	w.mu.Lock()
	since := make([]time.Time, len(w.devices))
	for i, d := range w.devices {
		since[i] = d.since()
	}
	w.mu.Unlock()

	type result struct {
		s   DeviceSample
		err error
	}
	// Devices are read side by side: an NVML reading can take tens of
	// milliseconds, and eight of them in a row would skew the poll.
	res := make([]result, len(since))
	var wg sync.WaitGroup
	for i := range since {
		wg.Go(func() { res[i].s, res[i].err = w.src.Sample(i, since[i]) })
	}
	wg.Wait()

	now := w.opts.Now()
	w.mu.Lock()
	defer w.mu.Unlock()
	w.polled = true
	for i, r := range res {
		w.devices[i].apply(r.s, r.err, now, w.opts, w.opts.Logger)
	}
	for name, c := range w.clients {
		if now.Sub(c.lastSeen) >= w.opts.ForgetAfter {
			delete(w.clients, name)
			continue
		}
		if c.queueSet && !w.silent(c, now) {
			b := w.bucketAt(c, now)
			b.qPolls++
			if c.depth == 0 {
				b.qEmpty++
			}
			if c.capacity > 0 {
				b.qOcc += min(float64(c.depth)/float64(c.capacity), 1)
			}
		}
		w.pruneClient(c, now)
	}
}

// since is the `since` to ask the source with: the older of the two series'
// newest samples (the watcher drops what it has already seen).
func (d *deviceState) since() time.Time {
	switch {
	case d.lastSM.IsZero():
		return d.lastMem
	case d.lastMem.IsZero() || d.lastSM.Before(d.lastMem):
		return d.lastSM
	}
	return d.lastMem
}

// apply folds one reading (or its error) into the window.
func (d *deviceState) apply(s DeviceSample, err error, now time.Time, o Options, log *slog.Logger) {
	if err != nil {
		if d.err == nil {
			d.errSince = now
			log.Warn("gpu sample failed", "gpu", d.info.Index, "uuid", d.info.UUID, "err", err)
		}
		d.err = err
		d.gone = d.gone || errors.Is(err, ErrDeviceLost)
		d.prune(now, o)
		return
	}
	if d.gone {
		// A device lost for good stays lost even if a source answers again.
		d.prune(now, o)
		return
	}
	if d.err != nil {
		log.Info("gpu answers again", "gpu", d.info.Index, "uuid", d.info.UUID)
		d.err = nil
	}
	if d.firstOK.IsZero() {
		d.firstOK = now
	}
	d.sm, d.lastSM = appendNew(d.sm, s.SM, d.lastSM)
	d.mem, d.lastMem = appendNew(d.mem, s.MemCtl, d.lastMem)
	if !s.Time.IsZero() { // a zero Time: the source had no reading yet
		d.gauges = append(d.gauges, gaugePoint{t: now, memUsed: s.MemUsed, rx: s.PCIeRx, tx: s.PCIeTx, power: s.PowerW, smClockM: s.SMClockMHz})
	}
	d.prune(now, o)
	if over := len(d.sm) - o.MaxSamples; over > 0 {
		d.sm = d.sm[over:]
	}
	if over := len(d.mem) - o.MaxSamples; over > 0 {
		d.mem = d.mem[over:]
	}
	if over := len(d.gauges) - o.MaxSamples; over > 0 {
		d.gauges = d.gauges[over:]
	}
}

// appendNew appends the points of ps newer than last, in time order, and
// returns the new newest time.
func appendNew(dst, ps []Point, last time.Time) ([]Point, time.Time) {
	start := len(dst)
	for _, p := range ps {
		if p.Time.After(last) {
			dst = append(dst, Point{Time: p.Time, Value: clampPct(p.Value)})
		}
	}
	added := dst[start:]
	slices.SortStableFunc(added, func(a, b Point) int { return a.Time.Compare(b.Time) })
	if len(added) > 0 {
		last = added[len(added)-1].Time
	}
	return dst, last
}

// prune drops what fell out of the window.
func (d *deviceState) prune(now time.Time, o Options) {
	from := now.Add(-o.Window)
	d.sm = dropBefore(d.sm, from)
	d.mem = dropBefore(d.mem, from)
	i := 0
	for i < len(d.gauges) && d.gauges[i].t.Before(from) {
		i++
	}
	d.gauges = d.gauges[i:]
}

func dropBefore(ps []Point, from time.Time) []Point {
	i, _ := slices.BinarySearchFunc(ps, from, func(p Point, t time.Time) int { return p.Time.Compare(t) })
	return ps[i:]
}

// client returns the state of name, creating it; nil when MaxClients is
// reached. Called with w.mu held.
func (w *Watcher) client(name string, now time.Time) *clientState {
	c := w.clients[name]
	if c == nil {
		if len(w.clients) >= w.opts.MaxClients {
			w.clientsDropped++
			return nil
		}
		c = &clientState{device: -1, firstSeen: now}
		w.clients[name] = c
	}
	c.lastSeen = now
	return c
}

// bucketAt returns the bucket receiving reports at now.
func (w *Watcher) bucketAt(c *clientState, now time.Time) *clientBucket {
	start := now.Truncate(w.bucket)
	if n := len(c.buckets); n > 0 && !start.After(c.buckets[n-1].start) {
		return &c.buckets[n-1] // same bucket, or a clock that stepped back
	}
	c.buckets = append(c.buckets, clientBucket{start: start})
	return &c.buckets[len(c.buckets)-1]
}

func (w *Watcher) pruneClient(c *clientState, now time.Time) {
	from := now.Add(-w.opts.Window)
	i := 0
	for i < len(c.buckets) && !c.buckets[i].start.Add(w.bucket).After(from) {
		i++
	}
	c.buckets = c.buckets[i:]
}

func (w *Watcher) silent(c *clientState, now time.Time) bool {
	last := c.lastStep
	if last.IsZero() {
		last = c.firstSeen
	}
	return now.Sub(last) >= w.opts.SilentAfter
}

// RecordStep records one training step of client: how long it waited for
// its batch and how long the step took after that, in microseconds, and the
// client's clock when it sent the report (zero when unknown). Windowing uses
// the server's receive time; clientTime only serves to report clock skew.
func (w *Watcher) RecordStep(client string, waitUS, stepUS uint64, clientTime time.Time) {
	w.mu.Lock()
	defer w.mu.Unlock()
	now := w.opts.Now()
	c := w.client(client, now)
	if c == nil {
		return
	}
	b := w.bucketAt(c, now)
	b.steps++
	b.waitUS += float64(waitUS)
	b.stepUS += float64(stepUS)
	c.lastStep = now
	if !clientTime.IsZero() {
		c.skew, c.hasSkew = clientTime.Sub(now), true
	}
	w.pruneClient(c, now)
}

// SetQueue records client's queue: depth batches ready ahead of it (sent
// and not yet consumed) out of capacity. Each poll samples the last state
// set, so a queue that sits empty counts as often as it is polled.
func (w *Watcher) SetQueue(client string, depth, capacity int) {
	w.mu.Lock()
	defer w.mu.Unlock()
	c := w.client(client, w.opts.Now())
	if c == nil {
		return
	}
	c.depth, c.capacity, c.queueSet = max(depth, 0), max(capacity, 0), true
	c.closedAt = time.Time{}
}

// NotReady records that client asked for its next batch and none was ready.
func (w *Watcher) NotReady(client string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	now := w.opts.Now()
	c := w.client(client, now)
	if c == nil {
		return
	}
	w.bucketAt(c, now).notReady++
	w.pruneClient(c, now)
}

// SetClientDevice ties client to device (its index in the report): that
// device's verdict then weighs this client's waits, and no longer those of
// clients tied to other devices. Clients never tied count for every device.
// A negative device unties the client.
func (w *Watcher) SetClientDevice(client string, device int) {
	w.mu.Lock()
	defer w.mu.Unlock()
	c := w.client(client, w.opts.Now())
	if c == nil {
		return
	}
	c.device = max(device, -1)
}

// StreamClosed records that client's last batch stream ended (whatever
// way: finished, cancelled, or the client killed): its queue is no longer
// reported or sampled, and the report marks it closed until it opens a
// stream again (SetQueue) or its step reports leave the window. A client
// with no step report in the window is dropped at once.
func (w *Watcher) StreamClosed(client string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	c := w.clients[client]
	if c == nil {
		return
	}
	now := w.opts.Now()
	w.pruneClient(c, now)
	steps := 0
	for _, b := range c.buckets {
		steps += b.steps
	}
	if steps == 0 {
		delete(w.clients, client)
		return
	}
	c.depth, c.capacity, c.queueSet, c.closedAt = 0, 0, false, now
}

// Forget drops client (its stream ended).
func (w *Watcher) Forget(client string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	delete(w.clients, client)
}
