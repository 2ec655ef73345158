package connlimit

import (
	"errors"
	"fmt"
	"io"
	"net"
	"net/netip"
	"sync"
	"sync/atomic"

	"github.com/bettercompute/siteboot/internal/errname"
)

// Defaults used for zero Limits fields.
const (
	// DefaultPerSource is the open connections one source may hold: enough for a booting
	// machine (iPXE fetches one file at a time; a ramdisk's ranged image reads a few in
	// parallel), far too few for one host to fill the table.
	DefaultPerSource = 16
	// DefaultTotal is the open connections in all: (1024 - DefaultReserved) /
	// DefaultPerConn, what a process under the common soft RLIMIT_NOFILE of 1024 can hold
	// (see [Budget]).
	DefaultTotal = 384
	// DefaultIPv6PrefixBits is the prefix that groups IPv6 sources: a /64, the block one
	// host draws its SLAAC and privacy addresses from.
	DefaultIPv6PrefixBits = 64
	// DefaultReserveDivisor sets the share of Total kept for preferred sources when
	// Limits.Reserve is 0 and a [Preferrer] is set: Total/4.
	DefaultReserveDivisor = 4
)

// Errors.
var (
	// ErrLimits is wrapped when Limits are out of range.
	ErrLimits = errors.New("connlimit: bad limits")
	// ErrNoRoom is returned by Budget.Total when the descriptor limit leaves no room for
	// any connection.
	ErrNoRoom = errors.New("connlimit: descriptor limit leaves no room for connections")
)

// Limits caps a Listener's open connections. Zero fields take their defaults.
type Limits struct {
	// PerSource caps the open connections from one source address (IPv4), or one IPv6
	// prefix of IPv6PrefixBits. DefaultPerSource when 0.
	PerSource int
	// Total caps the open connections from all sources. DefaultTotal when 0; derive it
	// from the process's descriptors with [Budget].
	Total int
	// IPv6PrefixBits groups IPv6 sources; DefaultIPv6PrefixBits when 0, 128 for one
	// address each.
	IPv6PrefixBits int
	// Reserve is the part of Total only preferred sources may take (see
	// [Listener.SetPreferred]): a source that is not preferred is refused once
	// Total-Reserve connections are open, so that a few hosts holding PerSource each cannot
	// take the room the machines being booted need. Total/DefaultReserveDivisor when 0; at
	// most Total. It has no effect while no Preferrer is set.
	Reserve int
}

// withDefaults fills zero fields and checks the result.
func (l Limits) withDefaults() (Limits, error) {
	if l.PerSource == 0 {
		l.PerSource = DefaultPerSource
	}
	if l.Total == 0 {
		l.Total = DefaultTotal
	}
	if l.IPv6PrefixBits == 0 {
		l.IPv6PrefixBits = DefaultIPv6PrefixBits
	}
	if l.Reserve == 0 {
		l.Reserve = l.Total / DefaultReserveDivisor
	}
	switch {
	case l.PerSource < 0:
		return l, fmt.Errorf("%w: PerSource %d is negative", ErrLimits, l.PerSource)
	case l.Total < 0:
		return l, fmt.Errorf("%w: Total %d is negative", ErrLimits, l.Total)
	case l.IPv6PrefixBits < 0 || l.IPv6PrefixBits > 128:
		return l, fmt.Errorf("%w: IPv6PrefixBits %d is not 0 to 128", ErrLimits, l.IPv6PrefixBits)
	case l.Reserve < 0 || l.Reserve > l.Total:
		return l, fmt.Errorf("%w: Reserve %d is not 0 to Total (%d)", ErrLimits, l.Reserve, l.Total)
	}
	return l, nil
}

// Validate reports negative or out-of-range fields.
func (l Limits) Validate() error {
	_, err := l.withDefaults()
	return err
}

// Stats are a Listener's counters.
type Stats struct {
	Open     uint64 // connections open now
	Sources  uint64 // sources (addresses or IPv6 prefixes) with a connection open
	PeakOpen uint64 // the most connections open at once
	// Accepted counts connections handed to the caller.
	Accepted uint64
	// RefusedPerSource and RefusedTotal count connections closed at once because their
	// source, or the listener, was at its cap.
	RefusedPerSource, RefusedTotal uint64
	// RefusedReserve counts connections from sources that are not preferred, closed at
	// once because only the room kept for preferred sources (Limits.Reserve) was left.
	RefusedReserve uint64
	// AcceptedPreferred counts the accepted connections whose source was preferred.
	AcceptedPreferred uint64
}

// Refused is the number of connections refused for any cap.
func (s Stats) Refused() uint64 { return s.RefusedPerSource + s.RefusedTotal + s.RefusedReserve }

// Preferrer says which sources a Listener keeps room for: the machines a host is booting
// (an address it answered by DHCP within a window, or one of a machine with a live boot
// entry). Preferred is called in Accept, once per connection, with the source address
// (IPv4 unmapped, no zone); it must be fast and must not block.
type Preferrer interface {
	Preferred(netip.Addr) bool
}

// PreferFunc adapts a function to a Preferrer.
type PreferFunc func(netip.Addr) bool

// Preferred returns f(a).
func (f PreferFunc) Preferred(a netip.Addr) bool { return f(a) }

// Listener is a net.Listener that caps open connections per source and in total. A
// connection beyond either cap is closed as soon as it is accepted (with a TCP reset, so
// neither side keeps state for it), counted, and never returned by Accept. A returned
// connection counts as open until its Close.
type Listener struct {
	net.Listener

	mu       sync.Mutex
	lim      Limits
	open     int
	peak     int
	bySource map[netip.Prefix]int
	accepted uint64
	refPer   uint64
	refTotal uint64
	refRes   uint64
	accPref  uint64
	prefer   Preferrer
}

var _ net.Listener = (*Listener)(nil)

// New wraps inner with lim.
func New(inner net.Listener, lim Limits) (*Listener, error) {
	lim, err := lim.withDefaults()
	if err != nil {
		return nil, err
	}
	return &Listener{Listener: inner, lim: lim, bySource: make(map[netip.Prefix]int)}, nil
}

// SetLimits changes the caps. Connections already open stay open; new ones are refused
// until the counts are under the new caps.
func (l *Listener) SetLimits(lim Limits) error {
	lim, err := lim.withDefaults()
	if err != nil {
		return err
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if lim.IPv6PrefixBits != l.lim.IPv6PrefixBits && l.open > 0 {
		return fmt.Errorf("%w: IPv6PrefixBits cannot change while connections are open", ErrLimits)
	}
	l.lim = lim
	return nil
}

// SetPreferred sets the sources that may take the room Limits.Reserve keeps; nil (the
// default) prefers none and keeps no room. Connections already open are not re-examined.
func (l *Listener) SetPreferred(p Preferrer) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.prefer = p
}

// Limits returns the caps in force, defaults filled in.
func (l *Listener) Limits() Limits {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.lim
}

// Stats returns the counters.
func (l *Listener) Stats() Stats {
	l.mu.Lock()
	defer l.mu.Unlock()
	return Stats{Open: uint64(l.open), Sources: uint64(len(l.bySource)), PeakOpen: uint64(l.peak),
		Accepted: l.accepted, RefusedPerSource: l.refPer, RefusedTotal: l.refTotal,
		RefusedReserve: l.refRes, AcceptedPreferred: l.accPref}
}

// Accept returns the next connection within the caps, refusing (closing) those beyond.
func (l *Listener) Accept() (net.Conn, error) {
	for {
		c, err := l.Listener.Accept()
		if err != nil {
			return nil, err
		}
		if lc := l.admit(c); lc != nil {
			return lc, nil
		}
		if tc, ok := c.(interface{ SetLinger(int) error }); ok { // a *net.TCPConn, or a wrapper of one
			tc.SetLinger(0) // reset: no FIN_WAIT or TIME_WAIT kept for a refused peer
		}
		c.Close()
	}
}

func (l *Listener) admit(c net.Conn) *conn {
	ip := sourceAddr(c.RemoteAddr())
	l.mu.Lock()
	p := l.prefer
	l.mu.Unlock()
	// Asked outside the lock: the host's answer may take locks of its own.
	preferred := p != nil && ip.IsValid() && p.Preferred(ip)

	l.mu.Lock()
	defer l.mu.Unlock()
	src := prefixOf(ip, l.lim.IPv6PrefixBits)
	switch {
	case l.open >= l.lim.Total:
		l.refTotal++
		return nil
	case p != nil && !preferred && l.open >= l.lim.Total-l.lim.Reserve:
		l.refRes++
		return nil
	case l.bySource[src] >= l.lim.PerSource:
		l.refPer++
		return nil
	}
	l.open++
	l.peak = max(l.peak, l.open)
	l.bySource[src]++
	l.accepted++
	if preferred {
		l.accPref++
	}
	return &conn{Conn: c, l: l, src: src}
}

func (l *Listener) release(src netip.Prefix) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.open--
	if n := l.bySource[src] - 1; n > 0 {
		l.bySource[src] = n
	} else {
		delete(l.bySource, src)
	}
}

// source is the bucket a remote address counts in: the IPv4 address, or the IPv6 prefix.
// Addresses that are not IP (a Unix socket) share the zero bucket.
func source(a net.Addr, v6bits int) netip.Prefix {
	return prefixOf(sourceAddr(a), v6bits)
}

// sourceAddr is a remote address's IP, unmapped and without a zone; invalid when a is
// not IP.
func sourceAddr(a net.Addr) netip.Addr {
	var ip netip.Addr
	switch a := a.(type) {
	case *net.TCPAddr:
		ip, _ = netip.AddrFromSlice(a.IP)
	case *net.UDPAddr:
		ip, _ = netip.AddrFromSlice(a.IP)
	default:
		if ap, err := netip.ParseAddrPort(a.String()); err == nil {
			ip = ap.Addr()
		}
	}
	return ip.Unmap().WithZone("")
}

// prefixOf is the bucket of ip: the IPv4 address, or its IPv6 prefix of v6bits.
func prefixOf(ip netip.Addr, v6bits int) netip.Prefix {
	if !ip.IsValid() {
		return netip.Prefix{}
	}
	bits := 32
	if ip.Is6() {
		bits = v6bits
	}
	p, _ := ip.Prefix(bits)
	return p
}

// conn is an admitted connection; Close gives its slot back once.
type conn struct {
	net.Conn
	l      *Listener
	src    netip.Prefix
	closed atomic.Bool
}

func (c *conn) Close() error {
	err := c.Conn.Close()
	if c.closed.CompareAndSwap(false, true) {
		c.l.release(c.src)
	}
	return err
}

// ReadFrom lets io.Copy into the connection use the wrapped connection's ReadFrom (sendfile
// and splice for a *net.TCPConn, as http.ServeContent's copies take).
func (c *conn) ReadFrom(r io.Reader) (int64, error) {
	if rf, ok := c.Conn.(io.ReaderFrom); ok {
		return rf.ReadFrom(r)
	}
	return io.Copy(struct{ io.Writer }{c.Conn}, r)
}

// NetConn returns the wrapped connection.
func (c *conn) NetConn() net.Conn { return c.Conn }

// ReasonOf names the first of the package's errors in err's chain in a word a host can count:
// "limits", "no-room"; "" for nil or an error of another package.
func ReasonOf(err error) string { return reasons.Of(err) }

var reasons = errname.Table{
	{Err: ErrLimits, Name: "limits"},
	{Err: ErrNoRoom, Name: "no-room"},
}
