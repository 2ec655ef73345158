package agent

import (
	"context"

	"github.com/bettercompute/siteboot/lease"
	"github.com/bettercompute/siteboot/sitelink"
)

// syncOnce sends a status report and applies the desired state that comes back; a.beat
// calls it every Control.Heartbeat, and sooner when discovery or a BMC operation wants a
// report. While the control plane cannot be reached the agent keeps serving from its last
// desired state; the fence, measured from the last heartbeat the lease's renewal answered,
// ends the serving on its own.
func (a *Agent) syncOnce(ctx context.Context) error {
	// The site certificate is re-read here when its files changed, so that a renewal (or a
	// bad new file) is seen on the heartbeat, not only at the next handshake; the last good
	// pair stays in use meanwhile, so the fence never lapses for it.
	a.linkTLS.Check()
	if a.bootTLS != nil {
		// The boot certificate too, so that /healthz and its expiry gauge follow a renewal
		// between handshakes; a bad file is logged and named in /healthz.
		_ = a.bootTLS.Check()
	}
	a.sweepSilent()
	a.bmc.SweepSessions()
	// Lapsed entries are pruned (a write) by the applier, off this loop.
	a.applier.Kick()
	r := sitelink.StatusReport{Site: a.cfg.SiteID, Node: a.cfg.NodeID, Counters: a.Stats()}
	sent := a.report.Report(&r) // the cache, the section and the discovery list
	r.Acked = a.applier.Acked()
	r.BMC, r.Transitions = a.bmc.Pending()

	cctx, cancel := context.WithTimeout(ctx, a.cfg.Control.Timeout)
	defer cancel()
	// The heartbeat number is stamped just before sending: the fence measures its window
	// from this moment.
	r.Beat = a.fence.Heartbeat()
	d, err := a.link.Sync(cctx, r)
	if err != nil {
		return err
	}
	a.fence.Observe(lease.Word{Holds: d.Lease.Holds, Epoch: d.Lease.Epoch, TTL: d.Lease.TTL(), Beat: d.Lease.Beat, Holder: d.Lease.Holder})
	// The control plane has these acknowledgements now; it stops resending those commands.
	a.applier.Delivered(r.Acked)
	a.bmc.Delivered(r.BMC)

	var boot []sitelink.Command
	for _, c := range d.Commands {
		// bmc.* commands run off this loop; their results go back in a later report.
		if !a.bmc.Start(ctx, c) {
			boot = append(boot, c)
		}
	}
	// The boot commands are applied and persisted by the applier: the heartbeat never waits
	// on the disk.
	a.applier.Enqueue(boot...)
	if err := a.report.Answered(sent, d); err != nil {
		a.log.Error("cache images", "err", err)
	}
	return nil
}
