package gpuwatch

import (
	"errors"
	"fmt"
	"time"
)

// Source reads GPUs. Implementations: [OpenNVML] (real devices),
// [NewTraceSource] (a recorded trace) and [Unavailable] (no GPU).
//
// A Watcher calls Devices until it succeeds, then Sample for each device on
// every poll: one poll at a time, the devices of a poll concurrently (so
// Sample must be safe to call concurrently for different devices).
type Source interface {
	// Devices lists the visible devices; an error wrapping ErrNoGPU (or an
	// empty list) means there is none.
	Devices() ([]DeviceInfo, error)
	// Sample returns what happened on device i (an index into the slice
	// Devices returned) since `since`: the fine-grained utilisation samples
	// taken after it, and the current memory, PCIe, power and clock readings.
	// An error wrapping ErrDeviceLost means the device is gone for good.
	Sample(i int, since time.Time) (DeviceSample, error)
	// Close releases the source.
	Close() error
}

// DeviceInfo names one device.
type DeviceInfo struct {
	Index       int    `json:"index"`
	Name        string `json:"name"`
	UUID        string `json:"uuid"`
	MemoryTotal uint64 `json:"memory_total_bytes"`
}

// Point is one utilisation sample: a percentage (0..100) at a time.
type Point struct {
	Time  time.Time
	Value float64
}

// DeviceSample is one reading of a device. A reading the device does not
// support is left at zero.
type DeviceSample struct {
	// Time is when the source read the device; zero when it had no reading
	// yet (a replay before its first record): the gauges are then unset.
	Time time.Time
	// SM holds the fine-grained SM (kernel-active) utilisation samples taken
	// after the `since` passed to Sample, oldest first (NVML GetSamples,
	// GPU_UTILIZATION_SAMPLES: several per second).
	SM []Point
	// MemCtl holds memory-controller utilisation samples the same way
	// (MEMORY_UTILIZATION_SAMPLES).
	MemCtl []Point
	// MemUsed is the device memory in use, in bytes.
	MemUsed uint64
	// PCIeRx and PCIeTx are the PCIe throughputs, in bytes per second.
	PCIeRx, PCIeTx float64
	// PowerW is the power draw in watts.
	PowerW float64
	// SMClockMHz is the current SM clock.
	SMClockMHz float64
}

// Unavailable returns a Source with no devices: Devices returns err (wrapped
// in ErrNoGPU when it is not already). A server that could not open NVML
// hands it to [New] so the watcher reports "no GPU visible" and keeps
// serving client statistics. A nil err stands for plain ErrNoGPU.
func Unavailable(err error) Source {
	switch {
	case err == nil:
		err = ErrNoGPU
	case !errors.Is(err, ErrNoGPU):
		err = fmt.Errorf("%w: %w", ErrNoGPU, err)
	}
	return unavailable{err: err}
}

type unavailable struct{ err error }

func (u unavailable) Devices() ([]DeviceInfo, error) { return nil, u.err }

func (u unavailable) Sample(i int, _ time.Time) (DeviceSample, error) {
	return DeviceSample{}, fmt.Errorf("sample gpu %d: %w", i, ErrNoDevice)
}

func (u unavailable) Close() error { return nil }

var _ Source = unavailable{}
