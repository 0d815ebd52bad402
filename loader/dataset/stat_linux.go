package dataset

import (
	"os"
	"syscall"
)

// statOf is the freshness key of a file: size, mtime, ctime and inode.
func statOf(fi os.FileInfo) fileStat {
	fs := fileStat{Size: fi.Size(), MTime: fi.ModTime().UnixNano()}
	if st, ok := fi.Sys().(*syscall.Stat_t); ok {
		fs.CTime = int64(st.Ctim.Sec)*1e9 + int64(st.Ctim.Nsec)
		fs.Inode = uint64(st.Ino)
	}
	return fs
}
