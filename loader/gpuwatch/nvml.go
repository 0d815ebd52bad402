//go:build cgo

package gpuwatch

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"slices"
	"time"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
)

// OpenNVML loads libnvidia-ml.so.1, initialises NVML and lists the devices.
// Without a driver, library or device it returns an error wrapping ErrNoGPU
// (and the NVML return code, e.g. nvml.ERROR_LIBRARY_NOT_FOUND); it never
// crashes for want of a GPU. Close shuts NVML down.
func OpenNVML() (Source, error) {
	s, err := openNVML(nvml.New(), time.Now)
	if err != nil {
		return nil, err
	}
	return s, nil
}

// nvmlLib is the part of nvml.Interface the source uses.
type nvmlLib interface {
	Init() nvml.Return
	Shutdown() nvml.Return
	DeviceGetCount() (int, nvml.Return)
	DeviceGetHandleByIndex(int) (nvml.Device, nvml.Return)
}

// nvmlSource is the Source over real devices. NVML is thread-safe, and a
// device's nvmlDev is touched only by Sample calls for that device, which
// the Watcher never overlaps.
type nvmlSource struct {
	lib  nvmlLib
	now  func() time.Time
	devs []nvmlDev
}

// nvmlDev is one device handle and what it turned out not to support (asked
// once, not on every poll).
type nvmlDev struct {
	info   DeviceInfo
	h      nvml.Device
	err    error // the handle could not be had
	noSM   bool  // no fine-grained GPU utilisation samples: coarse rates
	noMem  bool  // no fine-grained memory utilisation samples: coarse rates
	noPCIe bool
	noPow  bool
	noClk  bool
	noInfo bool
}

var _ Source = (*nvmlSource)(nil)

func openNVML(lib nvmlLib, now func() time.Time) (*nvmlSource, error) {
	if ret := lib.Init(); ret != nvml.SUCCESS {
		return nil, fmt.Errorf("open nvml: init: %w: %w", ErrNoGPU, ret)
	}
	n, ret := lib.DeviceGetCount()
	if ret != nvml.SUCCESS || n <= 0 {
		lib.Shutdown()
		if ret != nvml.SUCCESS {
			return nil, fmt.Errorf("open nvml: device count: %w: %w", ErrNoGPU, ret)
		}
		return nil, fmt.Errorf("open nvml: driver lists no device: %w", ErrNoGPU)
	}
	s := &nvmlSource{lib: lib, now: now, devs: make([]nvmlDev, n)}
	for i := range n {
		d := &s.devs[i]
		d.info.Index = i
		h, ret := lib.DeviceGetHandleByIndex(i)
		if ret != nvml.SUCCESS {
			d.err = nvmlErr(fmt.Sprintf("gpu %d: handle", i), ret)
			continue
		}
		d.h = h
		if name, ret := h.GetName(); ret == nvml.SUCCESS {
			d.info.Name = name
		}
		if uuid, ret := h.GetUUID(); ret == nvml.SUCCESS {
			d.info.UUID = uuid
		}
		if mem, ret := h.GetMemoryInfo(); ret == nvml.SUCCESS {
			d.info.MemoryTotal = mem.Total
		}
	}
	return s, nil
}

// lostReturns are the NVML codes after which a device does not come back.
func lostReturn(ret nvml.Return) bool {
	switch ret {
	case nvml.ERROR_GPU_IS_LOST, nvml.ERROR_RESET_REQUIRED, nvml.ERROR_GPU_NOT_FOUND,
		nvml.ERROR_UNINITIALIZED, nvml.ERROR_DRIVER_NOT_LOADED, nvml.ERROR_LIB_RM_VERSION_MISMATCH:
		return true
	}
	return false
}

// nvmlErr wraps an NVML return code with the operation, adding ErrDeviceLost
// for the codes after which the device is gone.
func nvmlErr(op string, ret nvml.Return) error {
	if lostReturn(ret) {
		return fmt.Errorf("nvml %s: %w: %w", op, ErrDeviceLost, ret)
	}
	return fmt.Errorf("nvml %s: %w", op, ret)
}

// Devices implements Source.
func (s *nvmlSource) Devices() ([]DeviceInfo, error) {
	out := make([]DeviceInfo, len(s.devs))
	for i := range s.devs {
		out[i] = s.devs[i].info
	}
	return out, nil
}

// Sample implements Source.
func (s *nvmlSource) Sample(i int, since time.Time) (DeviceSample, error) {
	if i < 0 || i >= len(s.devs) {
		return DeviceSample{}, fmt.Errorf("sample gpu %d of %d: %w", i, len(s.devs), ErrNoDevice)
	}
	d := &s.devs[i]
	if d.err != nil {
		return DeviceSample{}, d.err
	}
	var last uint64
	if !since.IsZero() && since.UnixMicro() > 0 {
		last = uint64(since.UnixMicro())
	}
	var out DeviceSample
	var err error
	if out.SM, d.noSM, err = s.samples(d, i, nvml.GPU_UTILIZATION_SAMPLES, last, d.noSM, true); err != nil {
		return DeviceSample{}, err
	}
	if out.MemCtl, d.noMem, err = s.samples(d, i, nvml.MEMORY_UTILIZATION_SAMPLES, last, d.noMem, false); err != nil {
		return DeviceSample{}, err
	}
	// The remaining readings are optional: a code other than "lost" leaves
	// the reading at zero; "not supported" stops asking.
	optional := func(op string, ret nvml.Return, unsupported *bool) error {
		switch {
		case ret == nvml.SUCCESS:
			return nil
		case lostReturn(ret):
			return nvmlErr(fmt.Sprintf("gpu %d: %s", i, op), ret)
		case ret == nvml.ERROR_NOT_SUPPORTED:
			*unsupported = true
		}
		return nil
	}
	if !d.noInfo {
		mem, ret := d.h.GetMemoryInfo()
		if err := optional("memory info", ret, &d.noInfo); err != nil {
			return DeviceSample{}, err
		}
		if ret == nvml.SUCCESS {
			out.MemUsed = mem.Used
		}
	}
	if !d.noPCIe {
		for _, c := range []struct {
			counter nvml.PcieUtilCounter
			dst     *float64
		}{{nvml.PCIE_UTIL_RX_BYTES, &out.PCIeRx}, {nvml.PCIE_UTIL_TX_BYTES, &out.PCIeTx}} {
			kbps, ret := d.h.GetPcieThroughput(c.counter)
			if err := optional("pcie throughput", ret, &d.noPCIe); err != nil {
				return DeviceSample{}, err
			}
			if ret == nvml.SUCCESS {
				*c.dst = float64(kbps) * 1024 // NVML reports KB/s
			}
		}
	}
	if !d.noPow {
		mw, ret := d.h.GetPowerUsage()
		if err := optional("power usage", ret, &d.noPow); err != nil {
			return DeviceSample{}, err
		}
		if ret == nvml.SUCCESS {
			out.PowerW = float64(mw) / 1000
		}
	}
	if !d.noClk {
		mhz, ret := d.h.GetClockInfo(nvml.CLOCK_SM)
		if err := optional("sm clock", ret, &d.noClk); err != nil {
			return DeviceSample{}, err
		}
		if ret == nvml.SUCCESS {
			out.SMClockMHz = float64(mhz)
		}
	}
	// The reading's time is no earlier than any sample it holds (the
	// driver's timestamps and the Go clock are both the host's wall clock,
	// read at slightly different moments).
	out.Time = s.now()
	for _, ps := range [][]Point{out.SM, out.MemCtl} {
		if len(ps) > 0 && ps[len(ps)-1].Time.After(out.Time) {
			out.Time = ps[len(ps)-1].Time
		}
	}
	return out, nil
}

// samples reads one fine-grained utilisation series newer than last. When
// the device has no such samples it falls back to the coarse utilisation
// rate (one point at now) and reports noFine so later polls go there first.
func (s *nvmlSource) samples(d *nvmlDev, i int, typ nvml.SamplingType, last uint64, noFine, gpu bool) ([]Point, bool, error) {
	name := "memory utilisation samples"
	if gpu {
		name = "gpu utilisation samples"
	}
	if !noFine {
		vt, raw, ret := d.h.GetSamples(typ, last)
		switch {
		case ret == nvml.SUCCESS:
			pts := make([]Point, 0, len(raw))
			for _, r := range raw {
				v, ok := sampleValue(vt, r.SampleValue)
				if !ok || r.TimeStamp >= maxTraceUS || r.TimeStamp <= last {
					continue
				}
				pts = append(pts, Point{Time: time.UnixMicro(int64(r.TimeStamp)).UTC(), Value: clampPct(v)})
			}
			slices.SortStableFunc(pts, func(a, b Point) int { return a.Time.Compare(b.Time) })
			return pts, false, nil
		case ret == nvml.ERROR_NOT_FOUND:
			return nil, false, nil // nothing new since last
		case ret != nvml.ERROR_NOT_SUPPORTED:
			return nil, false, nvmlErr(fmt.Sprintf("gpu %d: %s", i, name), ret)
		}
	}
	u, ret := d.h.GetUtilizationRates()
	if ret != nvml.SUCCESS {
		return nil, true, nvmlErr(fmt.Sprintf("gpu %d: utilisation rates", i), ret)
	}
	v := u.Memory
	if gpu {
		v = u.Gpu
	}
	return []Point{{Time: s.now(), Value: clampPct(float64(v))}}, true, nil
}

// sampleValue decodes an NVML sample union by its value type.
func sampleValue(vt nvml.ValueType, b [8]byte) (float64, bool) {
	e := binary.NativeEndian
	switch vt {
	case nvml.VALUE_TYPE_DOUBLE:
		v := math.Float64frombits(e.Uint64(b[:]))
		return v, !math.IsNaN(v) && !math.IsInf(v, 0)
	case nvml.VALUE_TYPE_UNSIGNED_INT:
		return float64(e.Uint32(b[:4])), true
	case nvml.VALUE_TYPE_UNSIGNED_LONG, nvml.VALUE_TYPE_UNSIGNED_LONG_LONG:
		return float64(e.Uint64(b[:])), true
	case nvml.VALUE_TYPE_SIGNED_LONG_LONG:
		return float64(int64(e.Uint64(b[:]))), true
	case nvml.VALUE_TYPE_SIGNED_INT:
		return float64(int32(e.Uint32(b[:4]))), true
	case nvml.VALUE_TYPE_UNSIGNED_SHORT:
		return float64(e.Uint16(b[:2])), true
	}
	return 0, false
}

// Close implements Source.
func (s *nvmlSource) Close() error {
	if ret := s.lib.Shutdown(); ret != nvml.SUCCESS && !errors.Is(ret, nvml.ERROR_UNINITIALIZED) {
		return fmt.Errorf("close nvml: shutdown: %w", ret)
	}
	return nil
}
