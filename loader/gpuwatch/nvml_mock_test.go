//go:build cgo

package gpuwatch

import (
	"encoding/binary"
	"errors"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock"
)

// mockGPU is a scripted device behind go-nvml's generated mocks.
type mockGPU struct {
	vt          nvml.ValueType
	sm, mem     []nvml.Sample
	smRet       nvml.Return // GetSamples(GPU_UTILIZATION_SAMPLES) result
	memRet      nvml.Return
	rates       nvml.Utilization
	pcieRet     nvml.Return
	powerRet    nvml.Return
	lastSeen    []uint64
	pcieAsked   int
	coarseAsked int
}

func sample(tsUS uint64, v uint32) nvml.Sample {
	var s nvml.Sample
	s.TimeStamp = tsUS
	binary.NativeEndian.PutUint32(s.SampleValue[:4], v)
	return s
}

func (g *mockGPU) device() *mock.Device {
	return &mock.Device{
		GetNameFunc:       func() (string, nvml.Return) { return "NVIDIA H200", nvml.SUCCESS },
		GetUUIDFunc:       func() (string, nvml.Return) { return "GPU-mock", nvml.SUCCESS },
		GetMemoryInfoFunc: func() (nvml.Memory, nvml.Return) { return nvml.Memory{Total: 100, Used: 40}, nvml.SUCCESS },
		GetSamplesFunc: func(typ nvml.SamplingType, last uint64) (nvml.ValueType, []nvml.Sample, nvml.Return) {
			g.lastSeen = append(g.lastSeen, last)
			src, ret := g.sm, g.smRet
			if typ == nvml.MEMORY_UTILIZATION_SAMPLES {
				src, ret = g.mem, g.memRet
			}
			if ret != nvml.SUCCESS {
				return 0, nil, ret
			}
			var out []nvml.Sample
			for _, s := range src {
				if s.TimeStamp > last {
					out = append(out, s)
				}
			}
			if len(out) == 0 {
				return g.vt, nil, nvml.ERROR_NOT_FOUND
			}
			return g.vt, out, nvml.SUCCESS
		},
		GetUtilizationRatesFunc: func() (nvml.Utilization, nvml.Return) {
			g.coarseAsked++
			return g.rates, nvml.SUCCESS
		},
		GetPcieThroughputFunc: func(c nvml.PcieUtilCounter) (uint32, nvml.Return) {
			g.pcieAsked++
			if c == nvml.PCIE_UTIL_RX_BYTES {
				return 2000, g.pcieRet
			}
			return 1000, g.pcieRet
		},
		GetPowerUsageFunc: func() (uint32, nvml.Return) { return 650_000, g.powerRet },
		GetClockInfoFunc:  func(nvml.ClockType) (uint32, nvml.Return) { return 1980, nvml.SUCCESS },
	}
}

func mockLib(initRet nvml.Return, devs ...*mock.Device) *mock.Interface {
	return &mock.Interface{
		InitFunc:           func() nvml.Return { return initRet },
		ShutdownFunc:       func() nvml.Return { return nvml.SUCCESS },
		DeviceGetCountFunc: func() (int, nvml.Return) { return len(devs), nvml.SUCCESS },
		DeviceGetHandleByIndexFunc: func(i int) (nvml.Device, nvml.Return) {
			return devs[i], nvml.SUCCESS
		},
	}
}

func TestOpenNVMLFailures(t *testing.T) {
	tests := []struct {
		name string
		lib  *mock.Interface
		ret  nvml.Return
	}{
		{"no library", mockLib(nvml.ERROR_LIBRARY_NOT_FOUND), nvml.ERROR_LIBRARY_NOT_FOUND},
		{"no driver", mockLib(nvml.ERROR_DRIVER_NOT_LOADED), nvml.ERROR_DRIVER_NOT_LOADED},
		{"no device", mockLib(nvml.SUCCESS), nvml.SUCCESS},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := openNVML(tc.lib, time.Now)
			if !errors.Is(err, ErrNoGPU) {
				t.Fatalf("err %v, want ErrNoGPU", err)
			}
			if tc.ret != nvml.SUCCESS && !errors.Is(err, tc.ret) {
				t.Errorf("err %v does not carry %v", err, tc.ret)
			}
			if tc.ret == nvml.SUCCESS && len(tc.lib.ShutdownCalls()) != 1 {
				t.Errorf("NVML not shut down after finding no device")
			}
		})
	}
}

func TestNVMLSample(t *testing.T) {
	base := uint64(at(10).UnixMicro())
	g := &mockGPU{
		vt:  nvml.VALUE_TYPE_UNSIGNED_INT,
		sm:  []nvml.Sample{sample(base-500_000, 80), sample(base-333_333, 90), sample(base-166_667, 250)},
		mem: []nvml.Sample{sample(base-500_000, 40)},
	}
	clk := newClock()
	clk.Set(10)
	s, err := openNVML(mockLib(nvml.SUCCESS, g.device()), clk.Now)
	if err != nil {
		t.Fatal(err)
	}
	devs, _ := s.Devices()
	if len(devs) != 1 || devs[0].Name != "NVIDIA H200" || devs[0].UUID != "GPU-mock" || devs[0].MemoryTotal != 100 {
		t.Errorf("devices %+v", devs)
	}
	got, err := s.Sample(0, at(9.55))
	if err != nil {
		t.Fatal(err)
	}
	if len(got.SM) != 2 || got.SM[0].Value != 90 || got.SM[1].Value != 100 || !got.SM[0].Time.Equal(time.UnixMicro(int64(base-333_333))) {
		t.Errorf("SM %+v: want the two samples after since, 250 clamped to 100", got.SM)
	}
	if len(got.MemCtl) != 0 {
		t.Errorf("MemCtl %+v: nothing new (ERROR_NOT_FOUND)", got.MemCtl)
	}
	if got.MemUsed != 40 || got.PCIeRx != 2000*1024 || got.PCIeTx != 1000*1024 || got.PowerW != 650 || got.SMClockMHz != 1980 {
		t.Errorf("gauges %+v", got)
	}
	if !got.Time.Equal(at(10)) {
		t.Errorf("time %v, want the clock", got.Time)
	}
	if want := uint64(at(9.55).UnixMicro()); g.lastSeen[0] != want {
		t.Errorf("lastSeen %d, want %d", g.lastSeen[0], want)
	}
	if _, err := s.Sample(1, time.Time{}); !errors.Is(err, ErrNoDevice) {
		t.Errorf("device 1: %v", err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
}

func TestNVMLFallbacksAndLoss(t *testing.T) {
	g := &mockGPU{smRet: nvml.ERROR_NOT_SUPPORTED, memRet: nvml.ERROR_NOT_SUPPORTED, rates: nvml.Utilization{Gpu: 70, Memory: 30},
		pcieRet: nvml.ERROR_NOT_SUPPORTED, powerRet: nvml.ERROR_UNKNOWN}
	clk := newClock()
	s, err := openNVML(mockLib(nvml.SUCCESS, g.device()), clk.Now)
	if err != nil {
		t.Fatal(err)
	}
	for range 2 {
		got, err := s.Sample(0, time.Time{})
		if err != nil {
			t.Fatal(err)
		}
		if len(got.SM) != 1 || got.SM[0].Value != 70 || len(got.MemCtl) != 1 || got.MemCtl[0].Value != 30 {
			t.Errorf("coarse fallback: SM %+v MemCtl %+v", got.SM, got.MemCtl)
		}
		if got.PCIeRx != 0 || got.PowerW != 0 || got.SMClockMHz != 1980 {
			t.Errorf("unsupported readings stay zero: %+v", got)
		}
	}
	// Over two polls: fine samples asked once per series, PCIe once per
	// direction; unsupported readings are not asked again.
	if len(g.lastSeen) != 2 || g.pcieAsked != 2 || g.coarseAsked != 4 {
		t.Errorf("fine samples asked %d times, PCIe %d, coarse rates %d; want 2, 2, 4", len(g.lastSeen), g.pcieAsked, g.coarseAsked)
	}

	g.rates = nvml.Utilization{}
	lostDev := g.device()
	lostDev.GetUtilizationRatesFunc = func() (nvml.Utilization, nvml.Return) { return nvml.Utilization{}, nvml.ERROR_GPU_IS_LOST }
	s, err = openNVML(mockLib(nvml.SUCCESS, lostDev), clk.Now)
	if err != nil {
		t.Fatal(err)
	}
	_, err = s.Sample(0, time.Time{})
	if !errors.Is(err, ErrDeviceLost) || !errors.Is(err, nvml.ERROR_GPU_IS_LOST) {
		t.Fatalf("err %v, want ErrDeviceLost and ERROR_GPU_IS_LOST", err)
	}

	// Through a Watcher: the device is reported lost, the watcher goes on.
	w := New(s, Options{Now: clk.Now})
	w.Poll()
	r := w.Report()
	if d := r.Devices[0]; !d.Lost || d.Verdict.State != StateLost || !strings.Contains(d.Error, "ERROR_GPU_IS_LOST") {
		t.Errorf("report %+v", d)
	}
}

func TestSampleValue(t *testing.T) {
	var b [8]byte
	put := func(f func([]byte)) [8]byte { b = [8]byte{}; f(b[:]); return b }
	e := binary.NativeEndian
	tests := []struct {
		vt   nvml.ValueType
		raw  [8]byte
		want float64
		ok   bool
	}{
		{nvml.VALUE_TYPE_DOUBLE, put(func(p []byte) { e.PutUint64(p, math.Float64bits(42.5)) }), 42.5, true},
		{nvml.VALUE_TYPE_DOUBLE, put(func(p []byte) { e.PutUint64(p, math.Float64bits(math.NaN())) }), 0, false},
		{nvml.VALUE_TYPE_UNSIGNED_INT, put(func(p []byte) { e.PutUint32(p, 77) }), 77, true},
		{nvml.VALUE_TYPE_UNSIGNED_LONG, put(func(p []byte) { e.PutUint64(p, 12) }), 12, true},
		{nvml.VALUE_TYPE_UNSIGNED_LONG_LONG, put(func(p []byte) { e.PutUint64(p, 13) }), 13, true},
		{nvml.VALUE_TYPE_SIGNED_LONG_LONG, put(func(p []byte) { e.PutUint64(p, uint64(0xffffffffffffffff)) }), -1, true},
		{nvml.VALUE_TYPE_SIGNED_INT, put(func(p []byte) { e.PutUint32(p, 0xfffffffe) }), -2, true},
		{nvml.VALUE_TYPE_UNSIGNED_SHORT, put(func(p []byte) { e.PutUint16(p, 9) }), 9, true},
		{nvml.VALUE_TYPE_COUNT, [8]byte{}, 0, false},
	}
	for _, tc := range tests {
		got, ok := sampleValue(tc.vt, tc.raw)
		if ok != tc.ok || (ok && got != tc.want) {
			t.Errorf("sampleValue(%d) = %v, %v; want %v, %v", tc.vt, got, ok, tc.want, tc.ok)
		}
	}
}
