package gpuwatch

import (
	"bufio"
	"bytes"
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"slices"
	"strconv"
	"time"
)

// A Trace is a recording of GPU readings and, optionally, of client reports,
// as cmd/nvmlprobe writes it and NewTraceSource and Simulate replay it.
//
// On disk a trace is JSON lines, one record per line, each with a "kind" and
// a time "t_us" (microseconds since the Unix epoch, like NVML's sample
// timestamps). Blank lines and lines starting with '#' are skipped. The first
// record must be the device list:
//
//	{"kind":"devices","t_us":T,"devices":[{"index":0,"name":"NVIDIA H200","uuid":"GPU-…","memory_total_bytes":N}]}
//	{"kind":"devices","t_us":T,"devices":[],"no_gpu":"open nvml: init: …"}
//	{"kind":"sample","t_us":T,"device":0,"sm":[[t_us,pct],…],"mem_ctl":[[t_us,pct],…],
//	 "mem_used_bytes":N,"pcie_rx_bytes_per_s":X,"pcie_tx_bytes_per_s":X,"power_w":X,"sm_clock_mhz":X}
//	{"kind":"failure","t_us":T,"device":1,"error":"nvml …: ERROR_GPU_IS_LOST","lost":true}
//	{"kind":"step","t_us":T,"client":"rank0","wait_us":N,"step_us":N,"client_t_us":T}
//	{"kind":"queue","t_us":T,"client":"rank0","depth":N,"capacity":N}
//	{"kind":"not_ready","t_us":T,"client":"rank0"}
//	{"kind":"assign","t_us":T,"client":"rank0","device":0}
//
// A sample record is one poll of one device: its "sm" and "mem_ctl" pairs are
// the fine-grained samples the poll returned (percentages, 0..100). Client
// records carry the server's receive time in t_us and the client's own clock
// in client_t_us (0 when unknown). Unknown fields are ignored; an unknown kind
// is an error.
type Trace struct {
	// Recorded is the time of the devices record.
	Recorded time.Time
	// Devices lists the devices; empty when none was visible.
	Devices []DeviceInfo
	// NoGPU is why no device was visible ("" when there were devices).
	NoGPU       string
	Samples     []TraceSample
	Failures    []TraceFailure
	Steps       []TraceStep
	Queues      []TraceQueue
	NotReady    []TraceNotReady
	Assignments []TraceAssignment
}

// TraceSample is one poll of one device; Sample.Time is the poll time.
type TraceSample struct {
	Device int
	Sample DeviceSample
}

// TraceFailure is a device error at a time; Lost marks a device gone for good.
type TraceFailure struct {
	Time   time.Time
	Device int
	Error  string
	Lost   bool
}

// TraceStep is one client step report (see [Watcher.RecordStep]).
type TraceStep struct {
	Time           time.Time
	Client         string
	WaitUS, StepUS uint64
	ClientTime     time.Time // zero when unknown
}

// TraceQueue is a client's queue state (see [Watcher.SetQueue]).
type TraceQueue struct {
	Time            time.Time
	Client          string
	Depth, Capacity int
}

// TraceNotReady is a request that found no batch ready (see [Watcher.NotReady]).
type TraceNotReady struct {
	Time   time.Time
	Client string
}

// TraceAssignment ties a client to a device (see [Watcher.SetClientDevice]).
type TraceAssignment struct {
	Time   time.Time
	Client string
	Device int
}

// maxTraceUS bounds timestamps (2^53 µs, year 2255) so that every time in a
// trace is exact as a float64 and far from time.Time's overflow.
const maxTraceUS = 1 << 53

// maxTraceLine bounds one line of a trace.
const maxTraceLine = 16 << 20

// Record kinds.
const (
	kindDevices  = "devices"
	kindSample   = "sample"
	kindFailure  = "failure"
	kindStep     = "step"
	kindQueue    = "queue"
	kindNotReady = "not_ready"
	kindAssign   = "assign"
)

// Wire forms, one per kind.
type (
	wireHead struct {
		Kind string `json:"kind"`
		T    int64  `json:"t_us"`
	}
	wireDevices struct {
		wireHead
		Devices []DeviceInfo `json:"devices"`
		NoGPU   string       `json:"no_gpu,omitempty"`
	}
	wireSample struct {
		wireHead
		Device  int         `json:"device"`
		SM      []wirePoint `json:"sm"`
		MemCtl  []wirePoint `json:"mem_ctl"`
		MemUsed uint64      `json:"mem_used_bytes"`
		PCIeRx  float64     `json:"pcie_rx_bytes_per_s"`
		PCIeTx  float64     `json:"pcie_tx_bytes_per_s"`
		PowerW  float64     `json:"power_w"`
		SMClock float64     `json:"sm_clock_mhz"`
	}
	wireFailure struct {
		wireHead
		Device int    `json:"device"`
		Error  string `json:"error"`
		Lost   bool   `json:"lost,omitempty"`
	}
	wireStep struct {
		wireHead
		Client  string `json:"client"`
		WaitUS  uint64 `json:"wait_us"`
		StepUS  uint64 `json:"step_us"`
		ClientT int64  `json:"client_t_us,omitempty"`
	}
	wireQueue struct {
		wireHead
		Client   string `json:"client"`
		Depth    int    `json:"depth"`
		Capacity int    `json:"capacity"`
	}
	wireClient struct {
		wireHead
		Client string `json:"client"`
	}
	wireAssign struct {
		wireHead
		Client string `json:"client"`
		Device int    `json:"device"`
	}
)

// wirePoint is a Point as [t_us, value].
type wirePoint struct {
	T int64
	V float64
}

func (p wirePoint) MarshalJSON() ([]byte, error) {
	if math.IsNaN(p.V) || math.IsInf(p.V, 0) {
		return nil, fmt.Errorf("encode sample point: value %v: %w", p.V, ErrTrace)
	}
	b := append([]byte{'['}, strconv.FormatInt(p.T, 10)...)
	b = append(b, ',')
	b = strconv.AppendFloat(b, p.V, 'g', -1, 64)
	return append(b, ']'), nil
}

func (p *wirePoint) UnmarshalJSON(b []byte) error {
	var pair []json.Number
	if err := json.Unmarshal(b, &pair); err != nil {
		return fmt.Errorf("sample point %.40q: %w", b, err)
	}
	if len(pair) != 2 {
		return fmt.Errorf("sample point %.40q: want [t_us, value]", b)
	}
	t, err := strconv.ParseInt(pair[0].String(), 10, 64)
	if err != nil {
		return fmt.Errorf("sample point time %q: not an integer", pair[0])
	}
	v, err := strconv.ParseFloat(pair[1].String(), 64)
	if err != nil {
		return fmt.Errorf("sample point value %q: %w", pair[1], err)
	}
	p.T, p.V = t, v
	return nil
}

// ReadTrace parses a trace (see [Trace] for the format). Each record list of
// the result is sorted by time (stable). Errors wrap ErrTrace and name the
// line.
func ReadTrace(r io.Reader) (Trace, error) {
	var tr Trace
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 64<<10), maxTraceLine)
	haveDevices := false
	line := 0
	for sc.Scan() {
		line++
		b := bytes.TrimSpace(sc.Bytes())
		if len(b) == 0 || b[0] == '#' {
			continue
		}
		if err := tr.parseLine(b, haveDevices); err != nil {
			return Trace{}, fmt.Errorf("read trace line %d: %w", line, err)
		}
		haveDevices = true
	}
	if err := sc.Err(); err != nil {
		if errors.Is(err, bufio.ErrTooLong) {
			err = fmt.Errorf("%w: %w", ErrTrace, err)
		}
		return Trace{}, fmt.Errorf("read trace after line %d: %w", line, err)
	}
	if !haveDevices {
		return Trace{}, fmt.Errorf("read trace: no devices record: %w", ErrTrace)
	}
	sortTrace(&tr)
	return tr, nil
}

// traceErr formats a validation error wrapping ErrTrace.
func traceErr(format string, args ...any) error {
	return fmt.Errorf("%s: %w", fmt.Sprintf(format, args...), ErrTrace)
}

func traceTime(us int64) time.Time { return time.UnixMicro(us).UTC() }

func checkTime(what string, us int64) error {
	if us < 0 || us >= maxTraceUS {
		return traceErr("%s %d out of [0, 2^53)", what, us)
	}
	return nil
}

func checkGauge(what string, v float64) error {
	if math.IsNaN(v) || math.IsInf(v, 0) || v < 0 {
		return traceErr("%s %v: want a finite number >= 0", what, v)
	}
	return nil
}

func checkClient(c string) error {
	if c == "" || len(c) > 1024 {
		return traceErr("client name %.40q: want 1 to 1024 bytes", c)
	}
	return nil
}

// parseLine decodes one record by its kind and appends it to tr.
func (tr *Trace) parseLine(b []byte, haveDevices bool) error {
	var head wireHead
	if err := json.Unmarshal(b, &head); err != nil {
		return traceErr("%v", err)
	}
	if err := checkTime("t_us", head.T); err != nil {
		return err
	}
	t := traceTime(head.T)
	if head.Kind != kindDevices && !haveDevices {
		return traceErr("kind %q before the devices record", head.Kind)
	}
	checkDevice := func(d int) error {
		if d < 0 || d >= len(tr.Devices) {
			return traceErr("%s: device %d not in the %d listed", head.Kind, d, len(tr.Devices))
		}
		return nil
	}
	switch head.Kind {
	case kindDevices:
		if haveDevices {
			return traceErr("second devices record")
		}
		var w wireDevices
		if err := json.Unmarshal(b, &w); err != nil {
			return traceErr("devices: %v", err)
		}
		if w.NoGPU != "" && len(w.Devices) > 0 {
			return traceErr("devices: no_gpu %q with %d devices listed", w.NoGPU, len(w.Devices))
		}
		for _, d := range w.Devices {
			if d.Index < 0 {
				return traceErr("devices: index %d < 0", d.Index)
			}
		}
		tr.Recorded, tr.Devices, tr.NoGPU = t, w.Devices, w.NoGPU
		if tr.Devices == nil {
			tr.Devices = []DeviceInfo{}
		}
	case kindSample:
		var w wireSample
		if err := json.Unmarshal(b, &w); err != nil {
			return traceErr("sample: %v", err)
		}
		if err := checkDevice(w.Device); err != nil {
			return err
		}
		s := DeviceSample{Time: t, MemUsed: w.MemUsed, PCIeRx: w.PCIeRx, PCIeTx: w.PCIeTx, PowerW: w.PowerW, SMClockMHz: w.SMClock}
		for _, g := range []struct {
			name string
			v    float64
		}{{"pcie_rx_bytes_per_s", s.PCIeRx}, {"pcie_tx_bytes_per_s", s.PCIeTx}, {"power_w", s.PowerW}, {"sm_clock_mhz", s.SMClockMHz}} {
			if err := checkGauge(g.name, g.v); err != nil {
				return err
			}
		}
		var err error
		if s.SM, err = tracePoints("sm", w.SM, head.T); err != nil {
			return err
		}
		if s.MemCtl, err = tracePoints("mem_ctl", w.MemCtl, head.T); err != nil {
			return err
		}
		tr.Samples = append(tr.Samples, TraceSample{Device: w.Device, Sample: s})
	case kindFailure:
		var w wireFailure
		if err := json.Unmarshal(b, &w); err != nil {
			return traceErr("failure: %v", err)
		}
		if err := checkDevice(w.Device); err != nil {
			return err
		}
		tr.Failures = append(tr.Failures, TraceFailure{Time: t, Device: w.Device, Error: w.Error, Lost: w.Lost})
	case kindStep:
		var w wireStep
		if err := json.Unmarshal(b, &w); err != nil {
			return traceErr("step: %v", err)
		}
		if err := checkClient(w.Client); err != nil {
			return err
		}
		if err := checkTime("client_t_us", w.ClientT); err != nil {
			return err
		}
		if w.WaitUS >= maxTraceUS || w.StepUS >= maxTraceUS {
			return traceErr("step: wait_us %d or step_us %d out of [0, 2^53)", w.WaitUS, w.StepUS)
		}
		st := TraceStep{Time: t, Client: w.Client, WaitUS: w.WaitUS, StepUS: w.StepUS}
		if w.ClientT != 0 {
			st.ClientTime = traceTime(w.ClientT)
		}
		tr.Steps = append(tr.Steps, st)
	case kindQueue:
		var w wireQueue
		if err := json.Unmarshal(b, &w); err != nil {
			return traceErr("queue: %v", err)
		}
		if err := checkClient(w.Client); err != nil {
			return err
		}
		if w.Depth < 0 || w.Capacity < 0 {
			return traceErr("queue: depth %d, capacity %d: want >= 0", w.Depth, w.Capacity)
		}
		tr.Queues = append(tr.Queues, TraceQueue{Time: t, Client: w.Client, Depth: w.Depth, Capacity: w.Capacity})
	case kindNotReady:
		var w wireClient
		if err := json.Unmarshal(b, &w); err != nil {
			return traceErr("not_ready: %v", err)
		}
		if err := checkClient(w.Client); err != nil {
			return err
		}
		tr.NotReady = append(tr.NotReady, TraceNotReady{Time: t, Client: w.Client})
	case kindAssign:
		var w wireAssign
		if err := json.Unmarshal(b, &w); err != nil {
			return traceErr("assign: %v", err)
		}
		if err := checkClient(w.Client); err != nil {
			return err
		}
		if err := checkDevice(w.Device); err != nil {
			return err
		}
		tr.Assignments = append(tr.Assignments, TraceAssignment{Time: t, Client: w.Client, Device: w.Device})
	default:
		return traceErr("unknown kind %.40q", head.Kind)
	}
	return nil
}

// tracePoints converts a sample record's points, which must not be later
// than the record (t_us).
func tracePoints(name string, ws []wirePoint, t int64) ([]Point, error) {
	if len(ws) == 0 {
		return nil, nil
	}
	out := make([]Point, len(ws))
	for i, w := range ws {
		if err := checkTime(fmt.Sprintf("%s[%d] time", name, i), w.T); err != nil {
			return nil, err
		}
		if w.T > t {
			return nil, traceErr("%s[%d] time %d after the record's t_us %d", name, i, w.T, t)
		}
		if math.IsNaN(w.V) || w.V < 0 || w.V > 100 {
			return nil, traceErr("%s[%d] value %v out of [0, 100]", name, i, w.V)
		}
		out[i] = Point{Time: traceTime(w.T), Value: w.V}
	}
	return out, nil
}

func sortTrace(tr *Trace) {
	slices.SortStableFunc(tr.Samples, func(a, b TraceSample) int { return a.Sample.Time.Compare(b.Sample.Time) })
	slices.SortStableFunc(tr.Failures, func(a, b TraceFailure) int { return a.Time.Compare(b.Time) })
	slices.SortStableFunc(tr.Steps, func(a, b TraceStep) int { return a.Time.Compare(b.Time) })
	slices.SortStableFunc(tr.Queues, func(a, b TraceQueue) int { return a.Time.Compare(b.Time) })
	slices.SortStableFunc(tr.NotReady, func(a, b TraceNotReady) int { return a.Time.Compare(b.Time) })
	slices.SortStableFunc(tr.Assignments, func(a, b TraceAssignment) int { return a.Time.Compare(b.Time) })
}

// TraceWriter writes trace records as JSON lines, one call per record; the
// caller writes the devices record first. It does not buffer.
type TraceWriter struct {
	enc *json.Encoder
}

// NewTraceWriter returns a TraceWriter writing to w.
func NewTraceWriter(w io.Writer) *TraceWriter { return &TraceWriter{enc: json.NewEncoder(w)} }

func (tw *TraceWriter) write(kind string, v any) error {
	if err := tw.enc.Encode(v); err != nil {
		return fmt.Errorf("write trace %s record: %w", kind, err)
	}
	return nil
}

func head(kind string, t time.Time) wireHead { return wireHead{Kind: kind, T: t.UnixMicro()} }

// Devices writes the devices record; noGPU, when not nil, says why there is
// no device.
func (tw *TraceWriter) Devices(t time.Time, devs []DeviceInfo, noGPU error) error {
	w := wireDevices{wireHead: head(kindDevices, t), Devices: devs}
	if w.Devices == nil {
		w.Devices = []DeviceInfo{}
	}
	if noGPU != nil {
		w.NoGPU = noGPU.Error()
	}
	return tw.write(kindDevices, w)
}

// Sample writes one poll of device dev, at s.Time.
func (tw *TraceWriter) Sample(dev int, s DeviceSample) error {
	return tw.write(kindSample, wireSample{
		wireHead: head(kindSample, s.Time), Device: dev,
		SM: wirePoints(s.SM), MemCtl: wirePoints(s.MemCtl),
		MemUsed: s.MemUsed, PCIeRx: s.PCIeRx, PCIeTx: s.PCIeTx, PowerW: s.PowerW, SMClock: s.SMClockMHz,
	})
}

func wirePoints(ps []Point) []wirePoint {
	out := make([]wirePoint, len(ps))
	for i, p := range ps {
		out[i] = wirePoint{T: p.Time.UnixMicro(), V: p.Value}
	}
	return out
}

// Failure writes a device error; errors wrapping ErrDeviceLost are marked
// lost.
func (tw *TraceWriter) Failure(t time.Time, dev int, err error) error {
	return tw.write(kindFailure, wireFailure{
		wireHead: head(kindFailure, t), Device: dev, Error: err.Error(), Lost: errors.Is(err, ErrDeviceLost),
	})
}

// Step writes a client step report received at t.
func (tw *TraceWriter) Step(t time.Time, client string, waitUS, stepUS uint64, clientTime time.Time) error {
	w := wireStep{wireHead: head(kindStep, t), Client: client, WaitUS: waitUS, StepUS: stepUS}
	if !clientTime.IsZero() {
		w.ClientT = clientTime.UnixMicro()
	}
	return tw.write(kindStep, w)
}

// Queue writes a client's queue state at t.
func (tw *TraceWriter) Queue(t time.Time, client string, depth, capacity int) error {
	return tw.write(kindQueue, wireQueue{wireHead: head(kindQueue, t), Client: client, Depth: depth, Capacity: capacity})
}

// NotReady writes a not-ready event at t.
func (tw *TraceWriter) NotReady(t time.Time, client string) error {
	return tw.write(kindNotReady, wireClient{wireHead: head(kindNotReady, t), Client: client})
}

// Assign writes a client-to-device assignment at t.
func (tw *TraceWriter) Assign(t time.Time, client string, dev int) error {
	return tw.write(kindAssign, wireAssign{wireHead: head(kindAssign, t), Client: client, Device: dev})
}

// traceEvent is one record of a Trace in the merged, time-ordered view that
// WriteTrace and Simulate walk.
type traceEvent struct {
	t    time.Time
	rank int // kind order at equal times
	i    int // index in its list
}

// Kind ranks at equal times: assignments first, then device readings, then
// client reports.
const (
	rankAssign = iota
	rankSample
	rankFailure
	rankQueue
	rankNotReady
	rankStep
)

// events returns every record of tr except the devices one, ordered by time,
// then kind rank, then position.
func (tr *Trace) events() []traceEvent {
	n := len(tr.Assignments) + len(tr.Samples) + len(tr.Failures) + len(tr.Queues) + len(tr.NotReady) + len(tr.Steps)
	ev := make([]traceEvent, 0, n)
	for i, a := range tr.Assignments {
		ev = append(ev, traceEvent{a.Time, rankAssign, i})
	}
	for i, s := range tr.Samples {
		ev = append(ev, traceEvent{s.Sample.Time, rankSample, i})
	}
	for i, f := range tr.Failures {
		ev = append(ev, traceEvent{f.Time, rankFailure, i})
	}
	for i, q := range tr.Queues {
		ev = append(ev, traceEvent{q.Time, rankQueue, i})
	}
	for i, r := range tr.NotReady {
		ev = append(ev, traceEvent{r.Time, rankNotReady, i})
	}
	for i, s := range tr.Steps {
		ev = append(ev, traceEvent{s.Time, rankStep, i})
	}
	slices.SortFunc(ev, func(a, b traceEvent) int {
		if c := a.t.Compare(b.t); c != 0 {
			return c
		}
		if c := cmp.Compare(a.rank, b.rank); c != 0 {
			return c
		}
		return cmp.Compare(a.i, b.i)
	})
	return ev
}

// WriteTrace writes tr in the trace format: the devices record, then every
// other record in time order.
func WriteTrace(w io.Writer, tr Trace) error {
	bw := bufio.NewWriter(w)
	tw := NewTraceWriter(bw)
	var noGPU error
	if tr.NoGPU != "" {
		noGPU = errors.New(tr.NoGPU)
	}
	if err := tw.Devices(tr.Recorded, tr.Devices, noGPU); err != nil {
		return err
	}
	for _, e := range tr.events() {
		var err error
		switch e.rank {
		case rankAssign:
			a := tr.Assignments[e.i]
			err = tw.Assign(a.Time, a.Client, a.Device)
		case rankSample:
			s := tr.Samples[e.i]
			err = tw.Sample(s.Device, s.Sample)
		case rankFailure:
			f := tr.Failures[e.i]
			err = tw.write(kindFailure, wireFailure{wireHead: head(kindFailure, f.Time), Device: f.Device, Error: f.Error, Lost: f.Lost})
		case rankQueue:
			q := tr.Queues[e.i]
			err = tw.Queue(q.Time, q.Client, q.Depth, q.Capacity)
		case rankNotReady:
			r := tr.NotReady[e.i]
			err = tw.NotReady(r.Time, r.Client)
		case rankStep:
			s := tr.Steps[e.i]
			err = tw.Step(s.Time, s.Client, s.WaitUS, s.StepUS, s.ClientTime)
		}
		if err != nil {
			return err
		}
	}
	if err := bw.Flush(); err != nil {
		return fmt.Errorf("write trace: %w", err)
	}
	return nil
}
