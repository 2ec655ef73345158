package agent

import (
	"context"
	"slices"
	"sync"

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
	a.sweepSilent()
	// Lapsed entries are pruned (a write) by the applier, off this loop.
	a.kickApplier()
	snap := a.found.Snapshot()
	r := sitelink.StatusReport{
		Site:             a.cfg.SiteID,
		Node:             a.cfg.NodeID,
		DiscoveredDigest: snap.Digest.String(),
		Images:           a.imageReports(),
		Counters:         a.Stats(),
	}
	a.mu.Lock()
	r.Acked = slices.Clone(a.acks)
	a.mu.Unlock()
	r.BMC = a.bmc.dispatch.Pending()
	a.mu.Lock()
	sendList := snap.Digest != a.sentDigest
	a.mu.Unlock()
	if sendList {
		r.Discovered = make([]sitelink.DiscoveredMachine, 0, len(snap.Entries))
		for _, e := range snap.Entries {
			d := sitelink.DiscoveredMachine{MAC: e.MAC.String(), ProductUUID: e.ProductUUID, Arch: e.Arch, FirstSeen: e.FirstSeen, LastSeen: e.LastSeen, Count: e.Count}
			if e.Relay.IsValid() {
				d.Relay = e.Relay.String()
			}
			r.Discovered = append(r.Discovered, d)
		}
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
	a.fence.Observe(lease.Word{Holds: d.Lease.Holds, Epoch: d.Lease.Epoch, TTL: d.Lease.TTL(), Beat: d.Lease.Beat})
	a.mu.Lock()
	if sendList {
		a.sentDigest = snap.Digest
	}
	// The control plane has these acknowledgements now; it stops resending those commands.
	a.acks = slices.DeleteFunc(a.acks, func(id string) bool { return slices.Contains(r.Acked, id) })
	a.mu.Unlock()
	a.bmc.dispatch.Delivered(r.BMC)

	var boot []sitelink.Command
	for _, c := range d.Commands {
		// bmc.* commands run off this loop; their results go back in a later report.
		if !a.bmcCommand(ctx, c) {
			boot = append(boot, c)
		}
	}
	// The boot commands are applied and persisted by the applier: the heartbeat never waits
	// on the disk.
	a.enqueue(boot)
	if err := a.cache.SetPinned(a.wantedImages(d.CacheImages)); err != nil {
		a.log.Error("cache images", "err", err)
	}
	return nil
}

// applyQueue holds the boot commands the heartbeat handed to the applier.
type applyQueue struct {
	mu      sync.Mutex
	pending []sitelink.Command
	ids     map[string]bool // queued or being applied
	wake    chan struct{}
}

// enqueue hands commands to the applier, but those queued, being applied or applied and
// not yet acknowledged (the control plane resends a command until its acknowledgement).
func (a *Agent) enqueue(cmds []sitelink.Command) {
	a.mu.Lock()
	acked := slices.Clone(a.acks)
	a.mu.Unlock()
	q := &a.applyq
	q.mu.Lock()
	if q.ids == nil {
		q.ids = map[string]bool{}
	}
	for _, c := range cmds {
		if q.ids[c.ID] || slices.Contains(acked, c.ID) {
			continue
		}
		q.ids[c.ID] = true
		q.pending = append(q.pending, c)
	}
	q.mu.Unlock()
	a.kickApplier()
}

func (a *Agent) kickApplier() {
	select {
	case a.applyq.wake <- struct{}{}:
	default:
	}
}

// queued is the number of boot commands received and not yet applied.
func (a *Agent) queued() int {
	a.applyq.mu.Lock()
	defer a.applyq.mu.Unlock()
	return len(a.applyq.ids)
}

// applyLoop applies what the heartbeats hand over: it prunes lapsed entries and applies the
// queued commands, all of them in one write of the entries file.
func (a *Agent) applyLoop(ctx context.Context) error {
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-a.applyq.wake:
		}
		a.applyPending()
	}
}

func (a *Agent) applyPending() {
	if err := a.entries.Prune(); err != nil {
		a.log.Error("prune boot entries", "err", err)
	}
	q := &a.applyq
	q.mu.Lock()
	cmds := q.pending
	q.pending = nil
	q.mu.Unlock()
	if len(cmds) == 0 {
		return
	}
	var batch []sitelink.Command
	for _, c := range cmds {
		if err := sitelink.CheckEntryCommand(c); err != nil {
			a.log.Error("command refused", "id", c.ID, "kind", c.Kind, "err", err)
			continue
		}
		batch = append(batch, c)
	}
	// The whole batch costs one write of the entries file, not one per command.
	if err := a.apply(batch); err != nil {
		a.log.Error("commands not applied; the control plane sends them again", "commands", len(batch), "err", err)
		batch = nil
	}
	a.mu.Lock()
	for _, c := range batch {
		if !slices.Contains(a.acks, c.ID) {
			a.acks = append(a.acks, c.ID)
		}
	}
	a.mu.Unlock()
	// Acknowledged (or refused, and sent again): no longer queued.
	q.mu.Lock()
	for _, c := range cmds {
		delete(q.ids, c.ID)
	}
	q.mu.Unlock()
	// A machine that got an entry is no longer unknown (D1).
	a.found.ForgetFunc(func(mac hwid.MAC) bool {
		_, ok := a.entries.Lookup(mac)
		return ok
	})
}

// apply carries out checked commands, in order, in one write of the entries file; it
// returns only once the result is on disk.
func (a *Agent) apply(cmds []sitelink.Command) error {
	if len(cmds) == 0 {
		return nil
	}
	gone, err := a.entries.Apply(cmds...)
	if err != nil {
		return err
	}
	// The cleaned-up boots are over: their cache grants end with them.
	for _, e := range gone {
		a.cache.RevokeKey(bootserver.GrantKey(e.MAC, e.Workflow))
	}
	return nil
}

// wantedImages is the pinned set: the site's ramdisk kernel and initrd, and the control
// plane's cache images.
func (a *Agent) wantedImages(fromControl []sitelink.CacheImage) []imagecache.Image {
	all := []Image{a.cfg.Boot.Kernel, a.cfg.Boot.Initrd}
	for _, im := range fromControl {
		all = append(all, Image(im))
	}
	out := make([]imagecache.Image, 0, len(all))
	for _, im := range all {
		d, err := imagecache.ParseDigest(im.SHA256)
		if err != nil {
			a.log.Warn("cache image with a malformed digest ignored", "url", im.URL, "sha256", im.SHA256)
			continue
		}
		out = append(out, imagecache.Image{URL: im.URL, SHA256: d, Format: im.format()})
	}
	return out
}

func (a *Agent) imageReports() []sitelink.ImageReport {
	st := a.cache.Status()
	out := make([]sitelink.ImageReport, 0, len(st))
	for _, s := range st {
		r := sitelink.ImageReport{SHA256: s.Image.SHA256.String(), Format: s.Image.Format, State: s.State.String(), Bytes: s.Bytes}
		if s.Err != nil {
			r.Reason = s.Err.Error()
		}
		out = append(out, r)
	}
	return out
}
