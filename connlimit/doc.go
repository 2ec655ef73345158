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
// the total, refused for the reserve). The caps bound how many connections are held, not for how long: the HTTP
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
// # Room for the machines being booted
//
// The total cap alone lets a handful of hosts take every slot: 10 sources holding 16
// connections each fill a total of 156, and every machine that then asks for its script is
// reset. A host that knows which sources it is booting says so with [Listener.SetPreferred]
// (a [Preferrer], or a [PreferFunc]); a share of Total (Limits.Reserve, a quarter by
// default) is then kept for them: other sources are refused once Total-Reserve connections
// are open (counted in Stats.RefusedReserve), while a preferred source may take any free
// slot up to its PerSource cap. A site agent prefers the addresses it answered by DHCP
// within the boot binding's window, and those of machines with a live boot entry:
//
//	limited.SetPreferred(connlimit.PreferFunc(func(a netip.Addr) bool {
//		return answered(a) // the host's own record: a live boot nonce was sent to a
//	}))
//
// [Recent] is such a record, bounded and on an injected clock: Add an address when proxy
// DHCP answers it (or it presents its boot nonce, or a live entry's script goes to it) and
// it is preferred for a window (RecentConfig.Window, five minutes by default):
//
//	answered, err := connlimit.NewRecent(connlimit.RecentConfig{Window: nonceWindow, Clock: clk})
//	limited.SetPreferred(answered)
//	answered.Add(addr) // on each answer
//
// The reserve is shared by the preferred sources, each still within PerSource: a reserve
// of 39 (a quarter of 156) holds a machine's ramdisk reading 16 ranges at once and a score
// of machines fetching one file each. It is only as good as the preference: an address any
// host can claim (one that merely asked for a script) gains a flood nothing, one that proxy
// DHCP answered on the provisioning segment does.
//
// # The oldest gives way
//
// A listener whose clients are few and short-lived (a metrics endpoint) is better served
// by [GiveWay] than by a total cap that refuses the newcomer: at its cap the oldest open
// connection is closed for the new one, so connections held open without a request cannot
// keep a scraper out. Put it over a [Listener] whose PerSource cap stops one host from
// pushing everyone else out in turn.
//
// [NOFILE] and [RaiseNOFILE] read and raise RLIMIT_NOFILE on Unix systems; elsewhere
// (Windows) they return errors.ErrUnsupported, and a host sets the caps itself.
package connlimit
