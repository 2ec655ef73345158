// Package connlimit caps the connections a server accepts, per source and in total, below
// the process's file descriptor budget, so that a flood of connections to one protocol (a
// host holding hundreds of idle HTTP keep-alives) can never take the descriptors another
// needs (TFTP's transfer sockets, proxy DHCP's) (DESIGN.md S4).
//
// # Wiring
//
// Raise the soft RLIMIT_NOFILE to the hard limit at start, derive the total cap from it,
// and wrap the listener the HTTP server serves:
//
//	nofile, err := connlimit.RaiseNOFILE()
//	total, err := connlimit.Budget{NOFILE: nofile}.Total()
//	ln, err := net.Listen("tcp", addr)
//	limited, err := connlimit.New(ln, connlimit.Limits{Total: total})
//	go srv.Serve(limited)
//
// [Listener.Stats] gives the counters a host exports (open, refused per source, refused for
// the total). The caps bound how many connections are held, not for how long: the HTTP
// server's read-header, read and idle timeouts are what free a slot held by an idle peer.
//
// # Limits
//
// Defaults: 16 connections per source ([DefaultPerSource]), 384 in all ([DefaultTotal],
// what fits under a soft limit of 1024; see [Budget] for the arithmetic). IPv6 sources are
// counted per /64, since one host holds a whole /64 of addresses. A connection beyond a
// cap is accepted and closed at once with a TCP reset: it holds a descriptor for that
// instant only, and the kernel's listen backlog is drained rather than left full. Caps may
// be changed while serving ([Listener.SetLimits]).
//
// The caps are counted per Listener: a host with several listeners divides its budget
// between them.
//
// [NOFILE] and [RaiseNOFILE] read and raise RLIMIT_NOFILE on Unix systems; elsewhere
// (Windows) they return errors.ErrUnsupported, and a host sets the caps itself.
package connlimit
