//go:build !linux

package dataset

import "os"

// statOf is the freshness key of a file: size and mtime where ctime and inode are not available.
func statOf(fi os.FileInfo) fileStat {
	return fileStat{Size: fi.Size(), MTime: fi.ModTime().UnixNano()}
}
