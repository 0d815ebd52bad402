package gpuwatch

import (
	"fmt"
	"math"
	"slices"
	"strings"
	"time"
)

// State is a verdict.
type State string

// Verdicts. Devices get every state but StateNoGPU; the overall verdict gets
// every state but StateLost.
const (
	StateFed              State = "fed"
	StateStarvedData      State = "starved: data"
	StateStarvedNotLoader State = "starved: not the loader"
	StateNoGPU            State = "no GPU visible"
	StateInsufficient     State = "insufficient data"
	StateLost             State = "lost"
)

// States lists every State (the one-hot label set of the verdict gauges).
var States = []State{StateFed, StateStarvedData, StateStarvedNotLoader, StateNoGPU, StateInsufficient, StateLost}

// Report is the watcher's view of the window: per-device statistics and
// verdicts, per-client statistics, and the overall verdict.
type Report struct {
	Time       time.Time  `json:"time"`
	WindowS    float64    `json:"window_s"`
	Verdict    Verdict    `json:"verdict"`
	Thresholds Thresholds `json:"thresholds"`
	// NoGPU says why no GPU is visible ("" when there are GPUs).
	NoGPU   string         `json:"no_gpu,omitempty"`
	Devices []DeviceReport `json:"devices"`
	Clients []ClientReport `json:"clients"`
	// ClientsDropped counts reports refused because Options.MaxClients
	// clients were already tracked.
	ClientsDropped int `json:"clients_dropped,omitempty"`
}

// DeviceReport is one GPU over the window. Utilisations are percentages.
type DeviceReport struct {
	Index int    `json:"index"`
	Name  string `json:"name"`
	UUID  string `json:"uuid"`
	// Samples is the number of fine-grained SM samples in the window and
	// CoveredS the time they (and the polls) span.
	Samples  int     `json:"samples"`
	CoveredS float64 `json:"covered_s"`
	SMMedian float64 `json:"sm_median"`
	SMP10    float64 `json:"sm_p10"`
	SMP90    float64 `json:"sm_p90"`
	// SMSpread is P90 − P10: large means the GPU swings between busy and
	// idle, which is worse than a steady low.
	SMSpread float64 `json:"sm_spread"`
	// SMBelowShare is the share of samples below Thresholds.Low (30%).
	SMBelowShare float64 `json:"sm_below_share"`
	MemCtlMedian float64 `json:"mem_ctl_median"`
	// MemUsed is the last reading; PCIe, power and clock are means over the
	// window's polls.
	MemUsed    uint64  `json:"mem_used_bytes"`
	MemTotal   uint64  `json:"mem_total_bytes"`
	PCIeRx     float64 `json:"pcie_rx_bytes_per_s"`
	PCIeTx     float64 `json:"pcie_tx_bytes_per_s"`
	PowerW     float64 `json:"power_w"`
	SMClockMHz float64 `json:"sm_clock_mhz"`
	// Lost is set while the device fails to answer (for good after an
	// ErrDeviceLost error); Error is the last error.
	Lost    bool    `json:"lost"`
	Error   string  `json:"error,omitempty"`
	Verdict Verdict `json:"verdict"`
}

// ClientReport is one client over the window.
type ClientReport struct {
	Client string `json:"client"`
	// Device is the device the client is tied to, -1 when none.
	Device int `json:"device"`
	Steps  int `json:"steps"`
	// WaitShare is Σwait / Σ(wait+step) over the window's step reports.
	WaitShare float64 `json:"wait_share"`
	StepMS    float64 `json:"step_ms"`
	WaitMS    float64 `json:"wait_ms"`
	// NotReady counts requests that found no batch ready.
	NotReady      int `json:"not_ready"`
	QueueDepth    int `json:"queue_depth"`
	QueueCapacity int `json:"queue_capacity"`
	// QueueOccupancy is the mean depth/capacity over the window's polls,
	// QueueEmptyShare the share of those polls that found the queue empty.
	QueueOccupancy  float64 `json:"queue_occupancy"`
	QueueEmptyShare float64 `json:"queue_empty_share"`
	// Waiting is the watcher's judgement that the client waits for data.
	Waiting bool `json:"waiting"`
	// SilentS is the time since the last step report (since the client was
	// first seen when it never sent one); Silent is set past
	// Options.SilentAfter.
	SilentS float64 `json:"silent_s"`
	Silent  bool    `json:"silent"`
	// SkewS is the client's clock minus the server's at its last step
	// report (including transit), 0 when the client sends no clock.
	SkewS float64 `json:"skew_s"`
	// Closed is set once the client's batch streams have all ended (its
	// queue is then not reported); ClosedS is how long ago the last ended.
	Closed  bool    `json:"closed,omitempty"`
	ClosedS float64 `json:"closed_s,omitempty"`
	// Notes say, in words, what stands out (waiting, silent, skewed).
	Notes []string `json:"notes,omitempty"`
}

// Verdict is a state with its likely cause, the usual fix, and the evidence.
type Verdict struct {
	State State  `json:"state"`
	Cause string `json:"cause,omitempty"`
	Fix   string `json:"fix,omitempty"`
	// Reasons are the evidence in words, with the numbers.
	Reasons []string `json:"reasons,omitempty"`
	// Checks is the checklist of a device (for the overall verdict: of the
	// first device in Devices).
	Checks []Check `json:"checks,omitempty"`
	// SecondsLeft is, for insufficient data, how long until a verdict.
	SecondsLeft float64 `json:"seconds_left,omitempty"`
	// Devices names, in the overall verdict, the GPUs (by index) in State.
	Devices []int `json:"devices,omitempty"`
}

// Check is one item of the checklist.
type Check struct {
	Name      string  `json:"name"`
	Value     float64 `json:"value"`
	Op        string  `json:"op"`
	Threshold float64 `json:"threshold"`
	Pass      bool    `json:"pass"`
}

// Report builds a report of the window as of now.
func (w *Watcher) Report() Report {
	w.mu.Lock()
	now := w.opts.Now()
	snap := w.snapshot(now)
	w.mu.Unlock()
	return buildReport(snap, w.opts)
}

// snapshot is what a report needs, copied under the lock.
type snapshot struct {
	now            time.Time
	polled         bool
	devErr         error
	devices        []deviceSnap
	clients        []ClientReport
	clientsDropped int
}

type deviceSnap struct {
	info      DeviceInfo
	sm, mem   []float64
	oldest    time.Time // earliest of firstOK and the oldest point in the window
	gauges    []gaugePoint
	err       error
	gone      bool
	lastGauge gaugePoint
}

func (w *Watcher) snapshot(now time.Time) snapshot {
	s := snapshot{now: now, polled: w.polled, devErr: w.devErr, clientsDropped: w.clientsDropped}
	from := now.Add(-w.opts.Window)
	for _, d := range w.devices {
		ds := deviceSnap{info: d.info, err: d.err, gone: d.gone, oldest: d.firstOK}
		for _, p := range dropBefore(d.sm, from) {
			if !p.Time.After(now) {
				ds.sm = append(ds.sm, p.Value)
			}
		}
		for _, p := range dropBefore(d.mem, from) {
			if !p.Time.After(now) {
				ds.mem = append(ds.mem, p.Value)
			}
		}
		if sm := dropBefore(d.sm, from); len(sm) > 0 && (ds.oldest.IsZero() || sm[0].Time.Before(ds.oldest)) {
			ds.oldest = sm[0].Time
		}
		for _, g := range d.gauges {
			if !g.t.Before(from) {
				ds.gauges = append(ds.gauges, g)
			}
		}
		if n := len(d.gauges); n > 0 {
			ds.lastGauge = d.gauges[n-1]
		}
		s.devices = append(s.devices, ds)
	}
	for name, c := range w.clients {
		s.clients = append(s.clients, w.clientReport(name, c, now))
	}
	slices.SortFunc(s.clients, func(a, b ClientReport) int { return strings.Compare(a.Client, b.Client) })
	return s
}

// clientReport sums a client's buckets in the window.
func (w *Watcher) clientReport(name string, c *clientState, now time.Time) ClientReport {
	r := ClientReport{Client: name, Device: c.device, QueueDepth: c.depth, QueueCapacity: c.capacity}
	from := now.Add(-w.opts.Window)
	var waitUS, stepUS, qOcc float64
	var qPolls, qEmpty int
	for _, b := range c.buckets {
		if !b.start.Add(w.bucket).After(from) || b.start.After(now) {
			continue
		}
		r.Steps += b.steps
		waitUS += b.waitUS
		stepUS += b.stepUS
		r.NotReady += b.notReady
		qPolls += b.qPolls
		qEmpty += b.qEmpty
		qOcc += b.qOcc
	}
	if waitUS+stepUS > 0 {
		r.WaitShare = waitUS / (waitUS + stepUS)
	}
	if r.Steps > 0 {
		r.StepMS = stepUS / float64(r.Steps) / 1000
		r.WaitMS = waitUS / float64(r.Steps) / 1000
	}
	if qPolls > 0 {
		r.QueueOccupancy = qOcc / float64(qPolls)
		r.QueueEmptyShare = float64(qEmpty) / float64(qPolls)
	}
	last := c.lastStep
	if last.IsZero() {
		last = c.firstSeen
	}
	r.SilentS = max(now.Sub(last).Seconds(), 0)
	r.Silent = now.Sub(last) >= w.opts.SilentAfter
	if c.hasSkew {
		r.SkewS = c.skew.Seconds()
	}

	th := w.opts.Thresholds
	if why := waitReasons(r, th); len(why) > 0 {
		r.Waiting = true
		r.Notes = append(r.Notes, why...)
	}
	if r.Silent {
		if c.lastStep.IsZero() {
			r.Notes = append(r.Notes, fmt.Sprintf("client %s sent no step report in %s", name, secs(r.SilentS)))
		} else {
			r.Notes = append(r.Notes, fmt.Sprintf("client %s silent for %s", name, secs(r.SilentS)))
		}
	}
	if !c.closedAt.IsZero() {
		r.Closed, r.ClosedS = true, max(now.Sub(c.closedAt).Seconds(), 0)
		r.Notes = append(r.Notes, fmt.Sprintf("client %s: stream closed %s ago", name, secs(r.ClosedS)))
	}
	if c.hasSkew && c.skew.Abs() > w.opts.SkewTolerance {
		r.Notes = append(r.Notes, fmt.Sprintf("client %s clock differs from the server's by %+.1f s (ignored: windows use receive time)", name, r.SkewS))
	}
	return r
}

// waitReasons says why a client counts as waiting for data (none: it does
// not).
func waitReasons(r ClientReport, th Thresholds) []string {
	var why []string
	if r.Steps > 0 && r.WaitShare >= th.WaitShare {
		why = append(why, fmt.Sprintf("client %s waits %s of its time for data (≥ %s)", r.Client, pct(r.WaitShare), pct(th.WaitShare)))
	}
	switch {
	case r.NotReady > 0 && r.Steps == 0:
		why = append(why, fmt.Sprintf("client %s found no batch ready %d times and finished no step", r.Client, r.NotReady))
	case r.NotReady > 0 && float64(r.NotReady)/float64(r.Steps) >= th.NotReadyShare:
		why = append(why, fmt.Sprintf("client %s found no batch ready %d times in %d steps (≥ %s)", r.Client, r.NotReady, r.Steps, pct(th.NotReadyShare)))
	}
	if r.QueueEmptyShare > 0 && r.QueueEmptyShare >= th.QueueEmptyShare {
		why = append(why, fmt.Sprintf("client %s queue empty in %s of polls (≥ %s)", r.Client, pct(r.QueueEmptyShare), pct(th.QueueEmptyShare)))
	}
	return why
}

// pct formats a share as a percentage.
func pct(share float64) string { return fmt.Sprintf("%.1f%%", share*100) }

// secs formats seconds for reasons.
func secs(s float64) string { return fmt.Sprintf("%.0f s", math.Round(s)) }

func buildReport(s snapshot, o Options) Report {
	th := o.Thresholds
	r := Report{
		Time:           s.now,
		WindowS:        o.Window.Seconds(),
		Thresholds:     th,
		Devices:        []DeviceReport{},
		Clients:        s.clients,
		ClientsDropped: s.clientsDropped,
	}
	if r.Clients == nil {
		r.Clients = []ClientReport{}
	}
	for _, d := range s.devices {
		r.Devices = append(r.Devices, deviceReport(d, s, r.Clients, o))
	}
	if s.devErr != nil {
		r.NoGPU = s.devErr.Error()
	}
	r.Verdict = overall(r, s, o)
	return r
}

// deviceReport computes one device's statistics and verdict.
func deviceReport(d deviceSnap, s snapshot, clients []ClientReport, o Options) DeviceReport {
	th := o.Thresholds
	st := summarize(d.sm, th.Low)
	mem := summarize(d.mem, th.Low)
	r := DeviceReport{
		Index: d.info.Index, Name: d.info.Name, UUID: d.info.UUID, MemTotal: d.info.MemoryTotal,
		Samples: st.n, SMMedian: st.median, SMP10: st.p10, SMP90: st.p90, SMSpread: st.p90 - st.p10,
		SMBelowShare: st.below, MemCtlMedian: mem.median, MemUsed: d.lastGauge.memUsed,
		Lost: d.err != nil || d.gone,
	}
	if d.err != nil {
		r.Error = d.err.Error()
	}
	if !d.oldest.IsZero() {
		r.CoveredS = min(max(s.now.Sub(d.oldest).Seconds(), 0), o.Window.Seconds())
	}
	var rx, tx, pw, clk []float64
	for _, g := range d.gauges {
		rx, tx, pw, clk = append(rx, g.rx), append(tx, g.tx), append(pw, g.power), append(clk, g.smClockM)
	}
	r.PCIeRx, r.PCIeTx, r.PowerW, r.SMClockMHz = mean(rx), mean(tx), mean(pw), mean(clk)
	// Clients that bear on this device: those tied to it, and those tied to
	// none.
	var mine []ClientReport
	for _, c := range clients {
		if c.Device < 0 || c.Device == d.info.Index {
			mine = append(mine, c)
		}
	}
	r.Verdict = judgeDevice(r, mine, o)
	return r
}
