package agent

import (
	"context"

	"github.com/bettercompute/siteboot/bootserver"
	"github.com/bettercompute/siteboot/hwid"
	"github.com/bettercompute/siteboot/imagecache"
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
	snap := a.found.Snapshot()
	r := sitelink.StatusReport{
		Site:             a.cfg.SiteID,
		Node:             a.cfg.NodeID,
		DiscoveredDigest: snap.Digest.String(),
		Images:           bootserver.ImageReports(a.cache.Status()),
		Counters:         a.Stats(),
	}
	a.mu.Lock()
	pinned := a.pinned
	a.mu.Unlock()
	section := sitelink.SiteSection(r.Images, pinned, a.entries.Sanboot())
	r.Section = &section
	r.Acked = a.applier.Acked()
	r.BMC, r.Transitions = a.bmc.Pending()
	a.mu.Lock()
	sendList := snap.Digest != a.sentDigest
	a.mu.Unlock()
	if sendList {
		r.Discovered = bootserver.Discovered(snap)
	}

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
	a.mu.Lock()
	if sendList {
		a.sentDigest = snap.Digest
	}
	a.mu.Unlock()
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
	a.mu.Lock()
	a.pinned = d.CacheImages
	a.mu.Unlock()
	if err := a.cache.SetPinned(a.wantedImages(d.CacheImages)); err != nil {
		a.log.Error("cache images", "err", err)
	}
	return nil
}

// applied ends what the entries the clean-ups dropped granted, and forgets the discovered
// machines that got an entry: they are no longer unknown (D1).
func (a *Agent) applied(dropped []sitelink.ProxyDhcpEntry) {
	for _, e := range dropped {
		a.cache.RevokeKey(bootserver.GrantKey(e.MAC, e.Workflow))
	}
	a.found.ForgetFunc(func(mac hwid.MAC) bool {
		_, ok := a.entries.Lookup(mac)
		return ok
	})
}

// wantedImages is the pinned set: the site's ramdisk kernel and initrd, and the control
// plane's cache images.
func (a *Agent) wantedImages(fromControl []sitelink.CacheImage) []imagecache.Image {
	out, err := bootserver.CacheImages(append([]Image{a.cfg.Boot.Kernel, a.cfg.Boot.Initrd}, fromControl...))
	if err != nil {
		a.log.Warn("cache images with a malformed digest ignored", "err", err)
	}
	return out
}
