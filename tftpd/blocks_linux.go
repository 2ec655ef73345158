package tftpd

import (
	"io/fs"
	"os"
	"syscall"
	"unsafe"

	"golang.org/x/sys/unix"
)

// vecSource reads consecutive blocks of an open file with one preadv(2) for all of them.
type vecSource struct {
	fd   int // the file's descriptor, open until the transfer closes the file (after release)
	off  int64
	iovs []unix.Iovec
}

// newVecSource returns a vecSource for f, or nil when f has no descriptor.
func newVecSource(f fs.File) blockSource {
	sc, ok := f.(syscall.Conn)
	if !ok {
		return nil
	}
	rc, err := sc.SyscallConn()
	if err != nil {
		return nil
	}
	fd := -1
	if rc.Control(func(d uintptr) { fd = int(d) }) != nil || fd < 0 {
		return nil
	}
	return &vecSource{fd: fd}
}

func (s *vecSource) read(bufs [][]byte) (int, error) {
	total, want := 0, 0
	for _, b := range bufs {
		want += len(b)
	}
	for total < want {
		// The buffers not filled yet, the first from where the last read stopped.
		s.iovs = s.iovs[:0]
		skip := total
		for _, b := range bufs {
			if skip >= len(b) {
				skip -= len(b)
				continue
			}
			b = b[skip:]
			skip = 0
			v := unix.Iovec{Base: unsafe.SliceData(b)}
			v.SetLen(len(b))
			s.iovs = append(s.iovs, v)
		}
		n, _, e := unix.Syscall6(unix.SYS_PREADV, uintptr(s.fd), uintptr(unsafe.Pointer(unsafe.SliceData(s.iovs))),
			uintptr(len(s.iovs)), uintptr(s.off), uintptr(uint64(s.off)>>(longBits-1)>>1), 0)
		if e == unix.EINTR {
			continue
		}
		if e != 0 {
			return total, os.NewSyscallError("preadv", e)
		}
		if n == 0 {
			break
		}
		s.off += int64(n)
		total += int(n)
	}
	return total, nil
}

func (s *vecSource) release() {}

// longBits is the width of the system call's offset halves (preadv takes the offset as two
// longs; on 64-bit systems the high one is ignored).
const longBits = unsafe.Sizeof(uintptr(0)) * 8
