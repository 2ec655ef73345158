package sitetls

import (
	"io/fs"
	"syscall"
	"time"
)

// fileID returns a file's device, inode and change time (Unix nanoseconds).
func fileID(fi fs.FileInfo) (dev, ino uint64, ctime int64) {
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return 0, 0, 0
	}
	return uint64(st.Dev), uint64(st.Ino), time.Unix(int64(st.Ctim.Sec), int64(st.Ctim.Nsec)).UnixNano()
}
