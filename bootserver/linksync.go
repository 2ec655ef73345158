package bootserver

import (
	"log/slog"
	"slices"
	"sync"

	"github.com/bettercompute/siteboot/discovery"
	"github.com/bettercompute/siteboot/hwid"
	"github.com/bettercompute/siteboot/imagecache"
	"github.com/bettercompute/siteboot/sitelink"
)

// LinkSync is the boot server's part of an agent's heartbeat over sitelink: what each
// status report says of the image cache and of the discovery list ([LinkSync.Report]),
// what the control plane's answer pins in the cache ([LinkSync.Answered]), and what the
// boot commands applied end ([LinkSync.Applied]). The discovery list goes in a report
// only when it changed since a report carrying it was answered (its digest goes in every
// one), so a quiet site sends no list. Set the fields before first use; it is safe for
// concurrent use.
type LinkSync struct {
	Cache   *imagecache.Cache    // required
	Found   *discovery.List      // required
	Entries *sitelink.EntryStore // required
	// Pinned are the host's own images, kept in the cache besides the control plane's
	// (the site's ramdisk kernel and initrd).
	Pinned []sitelink.CacheImage
	// Logger receives the answers' malformed images; nil discards.
	Logger *slog.Logger

	mu     sync.Mutex
	images []sitelink.CacheImage // the last answer's cache images, for the section's state
	acked  discovery.Digest      // the list's digest the control plane acknowledged
}

// ReportSent is what [LinkSync.Report] put in a report, for [LinkSync.Answered].
type ReportSent struct {
	digest discovery.Digest
	list   bool
}

// Report fills r's Images, Section, DiscoveredDigest and, when the list changed since a
// report carrying it was answered, Discovered.
func (s *LinkSync) Report(r *sitelink.StatusReport) ReportSent {
	snap := s.Found.Snapshot()
	r.DiscoveredDigest = snap.Digest.String()
	r.Images = ImageReports(s.Cache.Status())
	s.mu.Lock()
	images, send := s.images, snap.Digest != s.acked
	s.mu.Unlock()
	section := sitelink.SiteSection(r.Images, images, s.Entries.Sanboot())
	r.Section = &section
	if send {
		r.Discovered = Discovered(snap)
	}
	return ReportSent{digest: snap.Digest, list: send}
}

// Answered records the control plane's answer d to a report Report filled (sent): the
// list it carried is acknowledged, and d's cache images, with Pinned, are the cache's
// pinned set (an image with a malformed digest is logged and left out).
func (s *LinkSync) Answered(sent ReportSent, d sitelink.SyncResponse) error {
	s.mu.Lock()
	if sent.list {
		s.acked = sent.digest
	}
	s.images = d.CacheImages
	s.mu.Unlock()
	images, err := CacheImages(append(slices.Clone(s.Pinned), d.CacheImages...))
	if err != nil && s.Logger != nil {
		s.Logger.Warn("cache images with a malformed digest ignored", "err", err)
	}
	return s.Cache.SetPinned(images)
}

// Applied is a sitelink.EntryApplier's OnApplied: it ends what the entries the clean-ups
// dropped granted (their boot grants in the cache), and forgets the discovered machines
// that got an entry: they are no longer unknown (D1).
func (s *LinkSync) Applied(dropped []sitelink.ProxyDhcpEntry) {
	for _, e := range dropped {
		s.Cache.RevokeKey(GrantKey(e.MAC, e.Workflow))
	}
	s.Found.ForgetFunc(func(mac hwid.MAC) bool {
		_, ok := s.Entries.Lookup(mac)
		return ok
	})
}
