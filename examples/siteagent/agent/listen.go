package agent

import (
	"fmt"

	"github.com/bettercompute/siteboot/bootserver"
	"github.com/bettercompute/siteboot/connlimit"
)

// Connection caps of the agent's metrics listener (DESIGN.md S4): a small share of the
// descriptor budget; the boot HTTP server gets the rest (bootserver.Listeners.Cap).
const (
	metricsPerSource = 4
	metricsTotal     = 16
)

// limitListeners puts the HTTP and metrics listeners behind connlimit: the boot server's
// caps derived from the process's descriptor budget (bootserver.Listeners.Cap), less what
// TFTP's transfers and the metrics listener need, with room kept for the machines being
// booted for the nonce window.
func (a *Agent) limitListeners() (err error) {
	c := bootserver.CapsConfig{Window: a.nonceWindow(), Clock: a.clock}
	if a.cfg.Boot.TFTP {
		c.TFTPTransfers = a.cfg.Boot.TFTPLimits.MaxTransfers
	}
	if a.metricsLn != nil {
		c.Reserved = metricsTotal * connlimit.DefaultPerConn
	}
	var caps bootserver.Caps
	if a.socks, caps, err = a.socks.Cap(c); err != nil {
		return fmt.Errorf("agent: %w", err)
	}
	a.httpLimit, a.httpsLimit, a.prefer = caps.HTTP, caps.HTTPS, caps.Prefer
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
	a.log.Debug("http connection caps", "nofile", caps.NOFILE, "total", caps.HTTP.Limits().Total, "per_source", caps.HTTP.Limits().PerSource)
	return nil
}
