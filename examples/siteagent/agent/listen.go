package agent

import (
	"fmt"

	"github.com/bettercompute/siteboot/connlimit"
	"github.com/bettercompute/siteboot/internal/sendfile"
	"github.com/bettercompute/siteboot/tftpd"
)

// Connection caps of the agent's HTTP listeners (DESIGN.md S4). The metrics listener gets
// a small share; the boot HTTP server the rest of the descriptor budget.
const (
	metricsPerSource = 4
	metricsTotal     = 16
	// maxPreferred bounds the addresses the boot HTTP listener keeps room for.
	maxPreferred = 4096
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
	if n := a.cfg.Boot.TFTPLimits.MaxTransfers; a.cfg.Boot.TFTP && n > tftpd.DefaultMaxTransfers {
		reserved += 2 * (n - tftpd.DefaultMaxTransfers)
	}
	if a.metricsLn != nil {
		reserved += metricsTotal * connlimit.DefaultPerConn
	}
	total, err := connlimit.Budget{NOFILE: soft, Reserved: reserved}.Total()
	if err != nil {
		return fmt.Errorf("agent: descriptor limit %d: %w", soft, err)
	}
	if a.socks.HTTPS != nil {
		// The HTTPS side gets three quarters of the budget: with it, plain HTTP carries only
		// the iPXE builds for UEFI HTTP boot (and refusals, when the site refuses it).
		https := max(total-total/4, 1)
		total = max(total/4, 1)
		if a.httpsLimit, err = connlimit.New(a.socks.HTTPS, connlimit.Limits{Total: https, PerSource: min(connlimit.DefaultPerSource, https)}); err != nil {
			return err
		}
	}
	// Images go out by sendfile(2) without the scheduler's bookkeeping (internal/sendfile).
	if a.httpLimit, err = connlimit.New(sendfile.Listener(a.socks.HTTP), connlimit.Limits{Total: total, PerSource: min(connlimit.DefaultPerSource, total)}); err != nil {
		return err
	}
	// The machines being booted (answered by proxy DHCP, bound to their nonce, or served a
	// live entry's script) keep a share of the connections a flood from other sources
	// cannot take.
	if a.prefer, err = connlimit.NewRecent(connlimit.RecentConfig{Window: a.nonceWindow(), Max: maxPreferred, Clock: a.clock}); err != nil {
		return err
	}
	a.httpLimit.SetPreferred(a.prefer)
	a.socks.HTTP = a.httpLimit
	if a.httpsLimit != nil {
		a.httpsLimit.SetPreferred(a.prefer)
		a.socks.HTTPS = a.httpsLimit
	}
	if a.metricsLn != nil {
		// Per source capped by connlimit; in all, the oldest connection gives way to a new one
		// (16 slow connections never take /metrics down).
		if a.metricLimit, err = connlimit.New(a.metricsLn, connlimit.Limits{Total: 4 * metricsTotal, PerSource: metricsPerSource}); err != nil {
			return err
		}
		if a.metricsLn, err = connlimit.NewGiveWay(a.metricLimit, metricsTotal); err != nil {
			return err
		}
	}
	a.log.Debug("http connection caps", "nofile", soft, "total", total, "per_source", a.httpLimit.Limits().PerSource)
	return nil
}
