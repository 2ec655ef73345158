package connlimit

import (
	"fmt"
	"io"
	"net"
	"sync"
)

// DefaultGiveWay is the open connections a [GiveWay] holds when NewGiveWay is given 0: room
// for a few scrapers and an operator's curl, far below any descriptor budget.
const DefaultGiveWay = 16

// GiveWayStats are a GiveWay's counters.
type GiveWayStats struct {
	Open     uint64 // connections open now
	Accepted uint64 // connections handed to the caller
	// GaveWay counts open connections closed to make room for a new one (the oldest open
	// at the time).
	GaveWay uint64
}

// GiveWay is a net.Listener that holds at most a fixed number of connections open: when a
// new one arrives at the cap, the oldest still open is closed and the new one accepted.
// Unlike [Listener], which refuses the newcomer, it suits a listener whose clients are
// few and short-lived (a metrics endpoint): connections held open without a request (slow
// or stalled clients, a flood of idle ones) can never keep a scraper out, since each new
// connection takes the place of the oldest.
//
// GiveWay counts connections, not sources: wrap a [Listener] (PerSource small, Total above
// the GiveWay's cap) to refuse a source that holds too many as well, so one host cannot
// push every other client out in turn:
//
//	capped, err := connlimit.New(ln, connlimit.Limits{PerSource: 4, Total: 64})
//	metrics, err := connlimit.NewGiveWay(capped, 16)
//
// A returned connection counts as open until its Close, or until it gives way.
type GiveWay struct {
	net.Listener
	max int

	mu       sync.Mutex
	conns    []*giveWayConn // oldest first
	accepted uint64
	gaveWay  uint64
}

var _ net.Listener = (*GiveWay)(nil)

// NewGiveWay wraps inner so that at most max connections are open at once, the oldest
// giving way to a new one; [DefaultGiveWay] when max is 0. A negative max is an error
// wrapping ErrLimits.
func NewGiveWay(inner net.Listener, max int) (*GiveWay, error) {
	switch {
	case max < 0:
		return nil, fmt.Errorf("%w: give-way cap %d is negative", ErrLimits, max)
	case max == 0:
		max = DefaultGiveWay
	}
	return &GiveWay{Listener: inner, max: max}, nil
}

// Max returns the cap in force.
func (l *GiveWay) Max() int { return l.max }

// Accept returns the next connection of the inner listener; when max connections are open
// already, the oldest of them is closed first.
func (l *GiveWay) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	gc := &giveWayConn{Conn: c, l: l}
	l.mu.Lock()
	var victim *giveWayConn
	if len(l.conns) >= l.max {
		victim = l.conns[0]
		l.conns = l.conns[1:]
		l.gaveWay++
	}
	l.conns = append(l.conns, gc)
	l.accepted++
	l.mu.Unlock()
	if victim != nil {
		victim.once.Do(func() {}) // already forgotten
		victim.Conn.Close()
	}
	return gc, nil
}

// Stats returns the counters.
func (l *GiveWay) Stats() GiveWayStats {
	l.mu.Lock()
	defer l.mu.Unlock()
	return GiveWayStats{Open: uint64(len(l.conns)), Accepted: l.accepted, GaveWay: l.gaveWay}
}

func (l *GiveWay) forget(c *giveWayConn) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for i, x := range l.conns {
		if x == c {
			l.conns = append(l.conns[:i:i], l.conns[i+1:]...)
			return
		}
	}
}

// giveWayConn is an accepted connection; Close takes it off its listener's list once.
type giveWayConn struct {
	net.Conn
	l    *GiveWay
	once sync.Once
}

func (c *giveWayConn) Close() error {
	err := c.Conn.Close()
	c.once.Do(func() { c.l.forget(c) })
	return err
}

// ReadFrom lets io.Copy into the connection use the wrapped connection's ReadFrom.
func (c *giveWayConn) ReadFrom(r io.Reader) (int64, error) {
	if rf, ok := c.Conn.(io.ReaderFrom); ok {
		return rf.ReadFrom(r)
	}
	return io.Copy(struct{ io.Writer }{c.Conn}, r)
}

// NetConn returns the wrapped connection.
func (c *giveWayConn) NetConn() net.Conn { return c.Conn }
