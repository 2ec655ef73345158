package sendfile

import (
	"errors"
	"net"
	"os"
	"sync/atomic"
	"syscall"
	"unsafe"

	"golang.org/x/sys/unix"
)

// maxChunk bounds one sendfile(2) call, and so how long a raw call holds its P.
const maxChunk = 4 << 20

// noCachestat is set once cachestat(2) has failed as missing or refused (ENOSYS, EPERM
// under a seccomp filter): every call then goes through the scheduler.
var noCachestat atomic.Bool

// sendFile sends up to remain bytes of f (all to its end when remain < 0) from its offset,
// which it then moves past them. handled is false when nothing was sent and net's ReadFrom
// should try (sendfile(2) refused the file).
func (c *conn) sendFile(f *os.File, remain int64) (written int64, err error, handled bool) {
	sc, err := f.SyscallConn()
	if err != nil {
		return 0, nil, false
	}
	rc, err := c.TCPConn.SyscallConn()
	if err != nil {
		return 0, nil, false
	}
	var serr error // sendfile's, or the source's offset's
	cerr := sc.Read(func(src uintptr) bool {
		pos, err := unix.Seek(int(src), 0, unix.SEEK_CUR)
		if err != nil {
			serr = os.NewSyscallError("seek", err)
			return true
		}
		start := pos
		if remain < 0 {
			var st unix.Stat_t
			if err := unix.Fstat(int(src), &st); err != nil {
				serr = os.NewSyscallError("fstat", err)
				return true
			}
			remain = max(st.Size-pos, 0)
		}
		werr := rc.Write(func(dst uintptr) bool {
			for remain > 0 {
				n := min(remain, maxChunk)
				k, errno := call(dst, src, &pos, n, cached(src, pos, n))
				switch {
				case errno == unix.EAGAIN:
					return false // wait until the socket takes more
				case errno == unix.EINTR:
					continue
				case errno != 0:
					serr = os.NewSyscallError("sendfile", errno)
					return true
				case k == 0:
					return true // the end of the file
				}
				remain -= int64(k)
			}
			return true
		})
		written = pos - start
		if written > 0 {
			if _, err := unix.Seek(int(src), pos, unix.SEEK_SET); err != nil && serr == nil {
				serr = os.NewSyscallError("seek", err)
			}
		}
		if serr == nil {
			serr = werr
		}
		return true
	})
	if serr == nil {
		serr = cerr
	}
	if written == 0 && refused(serr) {
		return 0, nil, false
	}
	if serr != nil {
		serr = &net.OpError{Op: "readfrom", Net: "tcp", Source: c.LocalAddr(), Addr: c.RemoteAddr(), Err: serr}
	}
	return written, serr, true
}

// refused says whether err is the file declining sendfile(2) or an offset (a pipe, a file
// system without it): net then copies it.
func refused(err error) bool {
	return errors.Is(err, unix.EINVAL) || errors.Is(err, unix.ENOSYS) || errors.Is(err, unix.EOPNOTSUPP) || errors.Is(err, unix.ESPIPE)
}

// call makes one sendfile(2) call of up to n bytes at *pos, raw when the range is cached.
func call(dst, src uintptr, pos *int64, n int64, raw bool) (int, syscall.Errno) {
	sys := syscall.Syscall6
	if raw {
		sys = syscall.RawSyscall6
		rawCalls.Add(1)
	} else {
		schedCalls.Add(1)
	}
	k, _, errno := sys(unix.SYS_SENDFILE, dst, src, uintptr(unsafe.Pointer(pos)), uintptr(n), 0, 0)
	return int(k), errno
}

// cached says whether every page of n bytes of src at pos is in the page cache. It asks
// cachestat(2) raw, not through unix.Cachestat: the call does not block, and one that told
// the scheduler would cost the bookkeeping the raw sendfile(2) saves.
func cached(src uintptr, pos, n int64) bool {
	if noCachestat.Load() {
		return false
	}
	rng := unix.CachestatRange{Off: uint64(pos), Len: uint64(n)}
	var st unix.Cachestat_t
	_, _, errno := syscall.RawSyscall6(unix.SYS_CACHESTAT, src, uintptr(unsafe.Pointer(&rng)), uintptr(unsafe.Pointer(&st)), 0, 0, 0)
	if errno != 0 {
		if errno == unix.ENOSYS || errno == unix.EPERM {
			noCachestat.Store(true)
		}
		return false
	}
	page := int64(os.Getpagesize())
	pages := (pos+n+page-1)/page - pos/page
	return st.Cache >= uint64(pages)
}
