package gpuwatch

import "errors"

// Sentinel errors. Errors returned by this package wrap one of these where one
// applies, together with the device, trace line or operation concerned.
var (
	// ErrNoGPU means no GPU can be seen: no driver, no NVML library, no device,
	// or a binary built without cgo.
	ErrNoGPU = errors.New("gpuwatch: no GPU visible")
	// ErrDeviceLost means a device stopped answering (NVML ERROR_GPU_IS_LOST,
	// ERROR_RESET_REQUIRED and the like).
	ErrDeviceLost = errors.New("gpuwatch: device lost")
	// ErrNoDevice means a device index outside the source's device list.
	ErrNoDevice = errors.New("gpuwatch: no such device")
	// ErrTrace means a trace file is malformed.
	ErrTrace = errors.New("gpuwatch: bad trace")
)
