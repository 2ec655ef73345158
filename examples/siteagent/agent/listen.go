package agent

import (
	"context"
	"fmt"
	"net"
	"sync"
	"syscall"

	"github.com/bettercompute/siteboot/connlimit"
	"github.com/bettercompute/siteboot/internal/sendfile"
	"github.com/bettercompute/siteboot/tftpd"
)

// listenUDP binds a UDP socket for proxy DHCP: broadcast allowed, and tied to one interface
// when iface is set, so the agent answers only the segment it serves (on Linux only: see
// bindUDP).
func listenUDP(addr, iface string) (net.PacketConn, error) {
	lc := net.ListenConfig{Control: func(network, address string, c syscall.RawConn) error {
		var serr error
		err := c.Control(func(fd uintptr) { serr = bindUDP(fd, iface) })
		if err != nil {
			return err
		}
		return serr
	}}
	c, err := lc.ListenPacket(context.Background(), "udp4", addr)
	if err != nil {
		return nil, fmt.Errorf("agent: proxy dhcp %s: %w", addr, err)
	}
	return c, nil
}

// Connection caps of the agent's HTTP listeners (DESIGN.md S4). The metrics listener gets
// a small share; the boot HTTP server the rest of the descriptor budget.
const (
	metricsPerSource = 4
	metricsTotal     = 16
)

// limitListeners puts the HTTP and metrics listeners behind connlimit: per-source and total
// caps derived from the process's descriptor budget (the soft RLIMIT_NOFILE, less what
// proxy DHCP, TFTP's transfers and the agent's own files need), so that a flood of held
// HTTP connections can never take the descriptors TFTP and proxy DHCP need.
func (a *Agent) limitListeners() error {
	soft, _, err := connlimit.NOFILE()
	if err != nil {
		return fmt.Errorf("agent: descriptor limit: %w", err)
	}
	reserved := connlimit.DefaultReserved
	// DefaultReserved counts tftpd's default 64 transfers, a socket and a file each.
	if n := a.cfg.Boot.TFTPMaxTransfers; a.cfg.Boot.TFTP && n > tftpd.DefaultMaxTransfers {
		reserved += 2 * (n - tftpd.DefaultMaxTransfers)
	}
	if a.metricsLn != nil {
		reserved += metricsTotal * connlimit.DefaultPerConn
	}
	total, err := connlimit.Budget{NOFILE: soft, Reserved: reserved}.Total()
	if err != nil {
		return fmt.Errorf("agent: descriptor limit %d: %w", soft, err)
	}
	// Images go out by sendfile(2) without the scheduler's bookkeeping (internal/sendfile).
	if a.httpLimit, err = connlimit.New(sendfile.Listener(a.httpLn), connlimit.Limits{Total: total, PerSource: min(connlimit.DefaultPerSource, total)}); err != nil {
		return err
	}
	// The machines being booted (answered by proxy DHCP, bound to their nonce, or served a
	// live entry's script) keep a share of the connections a flood from other sources
	// cannot take.
	a.prefer = newPreferred(a.clock.Now, a.nonceWindow())
	a.httpLimit.SetPreferred(a.prefer)
	a.httpLn = a.httpLimit
	if a.metricsLn != nil {
		// Per source capped by connlimit; in all, the oldest connection gives way to a new one
		// (16 slow connections never take /metrics down).
		if a.metricLimit, err = connlimit.New(a.metricsLn, connlimit.Limits{Total: 4 * metricsTotal, PerSource: metricsPerSource}); err != nil {
			return err
		}
		a.metricsLn = &oldestGivesWay{Listener: a.metricLimit, max: metricsTotal}
	}
	a.log.Debug("http connection caps", "nofile", soft, "total", total, "per_source", a.httpLimit.Limits().PerSource)
	return nil
}

// oldestGivesWay is a listener that holds at most max connections open: when a new one
// arrives at the cap, the oldest still open is closed. The metrics listener uses it, so that
// connections held open without a request (slow or stalled clients) cannot keep a scraper
// out: each new connection takes the place of the oldest.
type oldestGivesWay struct {
	net.Listener
	max int

	mu    sync.Mutex
	conns []*givesWayConn // oldest first
}

type givesWayConn struct {
	net.Conn
	l    *oldestGivesWay
	once sync.Once
}

func (c *givesWayConn) Close() error {
	err := c.Conn.Close()
	c.once.Do(func() { c.l.forget(c) })
	return err
}

func (l *oldestGivesWay) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	gc := &givesWayConn{Conn: c, l: l}
	l.mu.Lock()
	var victim *givesWayConn
	if len(l.conns) >= l.max {
		victim = l.conns[0]
		l.conns = l.conns[1:]
	}
	l.conns = append(l.conns, gc)
	l.mu.Unlock()
	if victim != nil {
		victim.once.Do(func() {})
		victim.Conn.Close()
	}
	return gc, nil
}

func (l *oldestGivesWay) forget(c *givesWayConn) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for i, x := range l.conns {
		if x == c {
			l.conns = append(l.conns[:i:i], l.conns[i+1:]...)
			return
		}
	}
}
