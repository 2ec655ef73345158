//go:build unix

package connlimit

import "syscall"

// NOFILE returns the process's soft and hard RLIMIT_NOFILE.
func NOFILE() (soft, hard uint64, err error) {
	var r syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &r); err != nil {
		return 0, 0, err
	}
	return uint64(r.Cur), uint64(r.Max), nil
}

// RaiseNOFILE raises the soft RLIMIT_NOFILE to the hard limit and returns the soft limit
// now in force. The Go runtime already does this at start on Linux (since Go 1.19); calling
// it makes the limit explicit, covers a process whose limit was lowered after start, and
// gives the figure to derive connection caps from ([Budget]).
func RaiseNOFILE() (uint64, error) {
	var r syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &r); err != nil {
		return 0, err
	}
	if r.Cur < r.Max {
		r.Cur = r.Max
		if err := syscall.Setrlimit(syscall.RLIMIT_NOFILE, &r); err != nil {
			return 0, err
		}
	}
	return uint64(r.Cur), nil
}
