// Package sendfile wraps a TCP listener so that a file copied into an accepted connection
// (io.Copy, http.ServeContent: the connection's ReadFrom with an *os.File, or an
// *io.LimitedReader of one) is sent by sendfile(2) as net's own ReadFrom does, but, on
// Linux, without telling Go's scheduler when the bytes to send are in the page cache.
//
// net calls sendfile(2) through syscall.Syscall6, which marks the goroutine's P as in a
// system call. On loopback, or on a fast link, one call moves up to the socket's send
// buffer (megabytes) and does the TCP and delivery work on the calling thread, so it runs
// for hundreds of microseconds; Go's sysmon sees the P in a system call for longer than its
// 20 µs tick, hands it to another thread and keeps polling at that tick, and the thread that
// made the call then parks, since its P is gone. In the agent's boot storm that was some
// 3,000 Ps handed over, twice the futex(2) calls and 30-50% more of sysmon's sleeps than
// without (bench/results/HISTORY.md, "Images sent without the scheduler's bookkeeping").
// A call that cannot block needs none of it: the socket does not block (it is in Go's
// network poller), and a read from the page cache does not wait for a disk. So each call
// first asks cachestat(2) (Linux 6.5) whether every page of the range it is about to send
// is cached, and if so makes the call with syscall.RawSyscall6; otherwise,
// or where cachestat is missing, with syscall.Syscall6 as net does, so that a read from disk
// lets the scheduler run other goroutines on the P meanwhile. A page evicted between the
// two calls is read from disk while the P is held, as a read of a mapped file would be. A
// call sends at most 4 MiB, so a P is held for what that costs at most.
//
// The connection is the *net.TCPConn with ReadFrom replaced: its deadlines, Close and
// everything else are net's. The file's offset moves past what was sent, as with net's
// ReadFrom. A reader that is not a file, a file without an offset (a pipe), one that
// sendfile(2) refuses before it sent anything (a file system without it), and other
// systems than Linux take net's ReadFrom.
package sendfile
