//go:build !unix

package safename

import "os"

const (
	oNoFollow = 0
	oNonBlock = 0
)

func isLoop(error) bool { return false }

func clearNonBlock(*os.File) error { return nil }
