package bootserver

import (
	"errors"
	"fmt"

	"github.com/bettercompute/siteboot/discovery"
	"github.com/bettercompute/siteboot/imagecache"
	"github.com/bettercompute/siteboot/sitelink"
)

// DefaultImageFormat is the format of a cache image whose CacheImage names none.
const DefaultImageFormat = "raw"

// CacheImages are the images of a site's configuration and its control plane
// (SiteSpec.CacheImages) as the cache pins them (imagecache.Cache.SetPinned): a Format of
// "" becomes DefaultImageFormat. An image with a malformed SHA256 is left out, and named
// in the error, so that one bad image does not unpin the others.
func CacheImages(list []sitelink.CacheImage) ([]imagecache.Image, error) {
	out := make([]imagecache.Image, 0, len(list))
	var errs []error
	for _, im := range list {
		d, err := imagecache.ParseDigest(im.SHA256)
		if err != nil {
			errs = append(errs, fmt.Errorf("bootserver: cache image %q: %w", im.URL, err))
			continue
		}
		if im.Format == "" {
			im.Format = DefaultImageFormat
		}
		out = append(out, imagecache.Image{URL: im.URL, SHA256: d, Format: im.Format})
	}
	return out, errors.Join(errs...)
}

// ImageReports are the cache's images (imagecache.Cache.Status) as a status report
// carries them: digest, format, state, bytes, and why a failed pull failed.
func ImageReports(st []imagecache.Status) []sitelink.ImageReport {
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

// Discovered is the discovery list as a status report carries it (StatusReport.Discovered).
func Discovered(snap discovery.Snapshot) []sitelink.DiscoveredMachine {
	out := make([]sitelink.DiscoveredMachine, 0, len(snap.Entries))
	for _, e := range snap.Entries {
		d := sitelink.DiscoveredMachine{MAC: e.MAC.String(), ProductUUID: e.ProductUUID, Arch: e.Arch, FirstSeen: e.FirstSeen, LastSeen: e.LastSeen, Count: e.Count}
		if e.Relay.IsValid() {
			d.Relay = e.Relay.String()
		}
		out = append(out, d)
	}
	return out
}
