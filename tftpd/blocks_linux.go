package tftpd

import (
	"io/fs"
	"os"
	"sync"
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
	fd := fileFD(f)
	if fd < 0 {
		return nil
	}
	return &vecSource{fd: fd}
}

// fileFD is f's descriptor, -1 when it has none.
func fileFD(f fs.File) int {
	sc, ok := f.(syscall.Conn)
	if !ok {
		return -1
	}
	rc, err := sc.SyscallConn()
	if err != nil {
		return -1
	}
	fd := -1
	if rc.Control(func(d uintptr) { fd = int(d) }) != nil {
		return -1
	}
	return fd
}

// fileMaps shares read-only mappings of the files transfers send, one per file (device,
// inode and size), held while a transfer sends from it. A window's blocks are then sent
// from the page cache where they lie, without a read into a buffer of the transfer's: in a
// boot storm every machine fetches the same iPXE build, one preadv(2) per window each.
//
// The process never reads a mapping itself; only the kernel does, in sendmsg(2). A file
// cut short while mapped makes the send of its missing pages fail with EFAULT (the
// transfer ends, failed), where a read of them by the process would be a fatal SIGBUS.
type fileMaps struct {
	mu sync.Mutex
	m  map[mapKey]*fileMap
}

type mapKey struct {
	dev, ino uint64
	size     int64
}

type fileMap struct {
	data []byte
	refs int
}

// take maps f, or shares the mapping of it already made, and returns its bytes and the
// function that gives it back; no bytes (and a release that does nothing) when f is not a
// regular file of the operating system of 1 to maxMapped bytes, or cannot be mapped.
//
// A live mapping keeps its inode allocated, so no other file can take its number: a file
// replaced by another (renamed over, or removed and written again) is mapped anew.
func (fm *fileMaps) take(f fs.File) (data []byte, release func()) {
	fd := fileFD(f)
	if fd < 0 {
		return nil, func() {}
	}
	var st unix.Stat_t
	if unix.Fstat(fd, &st) != nil || st.Mode&unix.S_IFMT != unix.S_IFREG || st.Size <= 0 || st.Size > maxMapped {
		return nil, func() {}
	}
	key := mapKey{dev: st.Dev, ino: st.Ino, size: st.Size}
	fm.mu.Lock()
	defer fm.mu.Unlock()
	m := fm.m[key]
	if m == nil {
		// MAP_POPULATE: the page tables are filled now, not by a fault per page in the
		// first sends.
		data, err := unix.Mmap(fd, 0, int(st.Size), unix.PROT_READ, unix.MAP_SHARED|unix.MAP_POPULATE)
		if err != nil {
			return nil, func() {}
		}
		if fm.m == nil {
			fm.m = make(map[mapKey]*fileMap)
		}
		m = &fileMap{data: data}
		fm.m[key] = m
	}
	m.refs++
	return m.data, func() { fm.give(key, m) }
}

// give drops a transfer's hold of m, unmapping it after the last.
func (fm *fileMaps) give(key mapKey, m *fileMap) {
	fm.mu.Lock()
	defer fm.mu.Unlock()
	if m.refs--; m.refs > 0 {
		return
	}
	delete(fm.m, key)
	unix.Munmap(m.data)
}

// mapped is how many mappings are held, for tests.
func (fm *fileMaps) mapped() int {
	fm.mu.Lock()
	defer fm.mu.Unlock()
	return len(fm.m)
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
