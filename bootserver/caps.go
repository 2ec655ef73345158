package bootserver

import (
	"fmt"
	"time"

	"github.com/bettercompute/siteboot/clock"
	"github.com/bettercompute/siteboot/connlimit"
	"github.com/bettercompute/siteboot/internal/sendfile"
	"github.com/bettercompute/siteboot/tftpd"
)

// CapsConfig says how [Listeners.Cap] caps a boot server's HTTP listeners.
type CapsConfig struct {
	// NOFILE is the process's descriptor budget, the soft RLIMIT_NOFILE; zero reads it
	// (connlimit.NOFILE).
	NOFILE uint64
	// Reserved are descriptors the host needs for itself besides what
	// connlimit.DefaultReserved counts (proxy DHCP, tftpd's default transfers, files): its
	// own listeners' connections, such as a metrics server's.
	Reserved int
	// TFTPTransfers is the TFTP server's tftpd.Limits.MaxTransfers (zero: no TFTP, or its
	// default); each transfer beyond tftpd.DefaultMaxTransfers takes a socket and a file.
	TFTPTransfers int
	// Window is how long an address stays preferred once added to Caps.Prefer (a machine
	// answered by proxy DHCP, bound to its nonce or served a script: its next requests
	// come within the nonce window). Zero means connlimit.DefaultRecentWindow; at most
	// connlimit.DefaultRecentMax addresses are kept.
	Window time.Duration
	// Clock is Window's clock; nil means [clock.Real].
	Clock clock.Clock
}

// Caps are the caps [Listeners.Cap] put on the listeners: each one's counters (Stats,
// Limits), and the addresses they keep room for, which the host adds to as it answers
// machines.
type Caps struct {
	HTTP, HTTPS *connlimit.Listener // HTTPS nil without an HTTPS listener
	Prefer      *connlimit.Recent
	NOFILE      uint64 // the budget they were derived from
}

// Cap puts l's HTTP and HTTPS listeners behind connlimit (DESIGN.md S4): per-source and
// total caps derived from the process's descriptor budget, less what proxy DHCP, TFTP's
// transfers and the host need, so that a flood of held HTTP connections can never take
// the descriptors TFTP and proxy DHCP need. With an HTTPS listener, it gets three quarters
// of the total: plain HTTP then carries only the iPXE builds for UEFI HTTP boot (and
// refusals, when the site refuses it). A share of each is kept for the machines being
// booted (Caps.Prefer), which a flood from other sources cannot take. Images go out by
// sendfile(2) on the HTTP listener. It returns l with the capped listeners in place.
func (l Listeners) Cap(c CapsConfig) (Listeners, Caps, error) {
	caps := Caps{NOFILE: c.NOFILE}
	if caps.NOFILE == 0 {
		soft, _, err := connlimit.NOFILE()
		if err != nil {
			return l, caps, fmt.Errorf("bootserver: descriptor limit: %w", err)
		}
		caps.NOFILE = soft
	}
	reserved := connlimit.DefaultReserved + c.Reserved
	// DefaultReserved counts tftpd's default 64 transfers, a socket and a file each.
	if n := c.TFTPTransfers; n > tftpd.DefaultMaxTransfers {
		reserved += 2 * (n - tftpd.DefaultMaxTransfers)
	}
	total, err := connlimit.Budget{NOFILE: caps.NOFILE, Reserved: reserved}.Total()
	if err != nil {
		return l, caps, fmt.Errorf("bootserver: descriptor limit %d: %w", caps.NOFILE, err)
	}
	if l.HTTPS != nil {
		https := max(total-total/4, 1)
		total = max(total/4, 1)
		if caps.HTTPS, err = connlimit.New(l.HTTPS, connlimit.Limits{Total: https, PerSource: min(connlimit.DefaultPerSource, https)}); err != nil {
			return l, caps, err
		}
	}
	if caps.HTTP, err = connlimit.New(sendfile.Listener(l.HTTP), connlimit.Limits{Total: total, PerSource: min(connlimit.DefaultPerSource, total)}); err != nil {
		return l, caps, err
	}
	if caps.Prefer, err = connlimit.NewRecent(connlimit.RecentConfig{Window: c.Window, Clock: c.Clock}); err != nil {
		return l, caps, err
	}
	caps.HTTP.SetPreferred(caps.Prefer)
	l.HTTP = caps.HTTP
	if caps.HTTPS != nil {
		caps.HTTPS.SetPreferred(caps.Prefer)
		l.HTTPS = caps.HTTPS
	}
	return l, caps, nil
}
