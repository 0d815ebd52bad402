//go:build !unix

package dataset

import (
	"fmt"
	"io"
	"os"
)

// mapFile reads f into memory where mmap is not available.
func mapFile(f *os.File, size int64) ([]byte, error) {
	b := make([]byte, size)
	if _, err := io.ReadFull(io.NewSectionReader(f, 0, size), b); err != nil {
		return nil, fmt.Errorf("read %s: %w", f.Name(), err)
	}
	return b, nil
}

func unmapFile([]byte) error { return nil }
