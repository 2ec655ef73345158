package connlimit

import "fmt"

// Defaults of a Budget.
const (
	// DefaultReserved is the descriptors a site agent needs for everything but accepted
	// HTTP connections (see [Budget]).
	DefaultReserved = 256
	// DefaultPerConn is the descriptors one accepted connection may hold: its socket and
	// the one file a handler streams from it (an iPXE build, a cached image).
	DefaultPerConn = 2
)

// maxNOFILE bounds the limit Budget reads, so that RLIM_INFINITY stays an int.
const maxNOFILE = 1 << 30

// Budget turns a descriptor limit into a cap on accepted connections, leaving room for the
// sockets other protocols need, so that a flood of HTTP connections can never take TFTP's
// or DHCP's descriptors:
//
//	Total = (NOFILE - Reserved) / PerConn
//
// DefaultReserved (256) is a site agent's other descriptors, rounded up:
//
//	  3  stdin, stdout, stderr
//	 10  the Go runtime and the process (epoll, its wake-up pipe, log and state files)
//	  8  listening sockets: proxy DHCP 67 and 4011 (and 547), TFTP 69, HTTP, metrics
//	128  TFTP transfers: tftpd.DefaultMaxTransfers (64), each a socket and an open file
//	 48  outgoing: the control plane link, image pulls (a socket and a file each),
//	     BMC sessions (Redfish over HTTP, IPMI over UDP)
//	 59  slack: atomic writes of the entries file, the cache's files, peaks
//
// A host that runs more TFTP transfers, pulls or BMC sessions adds them to Reserved; one
// that serves more than one HTTP listener splits Total between them. With the common soft
// limit of 1024 Total is 384 (DefaultTotal); with a hard limit of 524288 raised by
// [RaiseNOFILE], 262016.
type Budget struct {
	NOFILE   uint64 // the soft RLIMIT_NOFILE (after RaiseNOFILE)
	Reserved int    // DefaultReserved when 0
	PerConn  int    // DefaultPerConn when 0
}

// Total returns the cap on accepted connections the budget allows, or ErrNoRoom.
func (b Budget) Total() (int, error) {
	if b.Reserved == 0 {
		b.Reserved = DefaultReserved
	}
	if b.PerConn == 0 {
		b.PerConn = DefaultPerConn
	}
	if b.Reserved < 0 || b.PerConn < 0 {
		return 0, fmt.Errorf("%w: Reserved %d, PerConn %d", ErrLimits, b.Reserved, b.PerConn)
	}
	n := min(b.NOFILE, maxNOFILE)
	if n <= uint64(b.Reserved) {
		return 0, fmt.Errorf("%w: limit %d, %d reserved", ErrNoRoom, b.NOFILE, b.Reserved)
	}
	total := int(n-uint64(b.Reserved)) / b.PerConn
	if total == 0 {
		return 0, fmt.Errorf("%w: limit %d, %d reserved, %d per connection", ErrNoRoom, b.NOFILE, b.Reserved, b.PerConn)
	}
	return total, nil
}
