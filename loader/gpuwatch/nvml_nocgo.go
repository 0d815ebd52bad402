//go:build !cgo

package gpuwatch

import "fmt"

// OpenNVML always fails in a build without cgo: go-nvml loads
// libnvidia-ml.so.1 through cgo.
func OpenNVML() (Source, error) {
	return nil, fmt.Errorf("open nvml: built without cgo: %w", ErrNoGPU)
}
