package sitelink

import (
	"slices"
	"strings"
)

// States of SectionStatus.State: the seed's condition of an agent's site section.
const (
	SectionProgressing = "PROGRESSING" // pinned images still warming, nothing failed
	SectionReady       = "READY"       // every pinned image verified, every sanboot ISO cached
	SectionFailed      = "FAILED"      // at least one Failures entry; an operator must act
)

// Reasons of SectionFailure.Reason for a sanboot entry (an image's failure carries the
// image's own reason, e.g. imagecache's "digest-mismatch").
const (
	// SectionISONotPinned: the entry's ISO is not among the site's cache images as an "iso".
	SectionISONotPinned = "iso-not-pinned"
	// SectionISONotCached: the ISO is pinned but its verified copy is not in the cache yet.
	SectionISONotCached = "iso-not-cached"
)

// SectionStatus is the state of the agent's site section (the seed: it "stays PROGRESSING
// while images warm", "fails for an image whose bytes do not match" and "fails naming the
// entry" whose sanboot ISO is not cached). [SiteSection] derives it.
type SectionStatus struct {
	State string `json:"state"` // SectionProgressing, SectionReady or SectionFailed
	// Warming are the digests of the pinned images still warming, sorted.
	Warming []string `json:"warming,omitempty"`
	// Failures name each failed image and each sanboot entry that cannot be served, images
	// first (by digest), then entries (by MAC).
	Failures []SectionFailure `json:"failures,omitempty"`
}

// SectionFailure names one cause of a failed section: an image (SHA256) or a sanboot
// entry (MAC, with the ISO's digest in SHA256).
type SectionFailure struct {
	SHA256 string `json:"sha256"`
	MAC    string `json:"mac,omitempty"` // set for a sanboot entry
	Reason string `json:"reason"`
}

// SiteSection is the section's state from the cache's image reports, the images the site
// pins (SiteSpec.CacheImages) and the live boot entries. An image failed for any reason
// fails the section, naming it with report.Reason; a sanboot entry whose ISO is not a pinned
// "iso" image, or is not yet ready, fails it naming the entry. Otherwise an image still
// warming keeps it PROGRESSING, and it is READY.
func SiteSection(images []ImageReport, pinned []CacheImage, entries []ProxyDhcpEntry) SectionStatus {
	var s SectionStatus
	state := make(map[string]string, len(images))
	for _, im := range images {
		state[im.SHA256] = im.State
		switch im.State {
		case ImageFailed:
			s.Failures = append(s.Failures, SectionFailure{SHA256: im.SHA256, Reason: im.Reason})
		case ImageWarming:
			s.Warming = append(s.Warming, im.SHA256)
		}
	}
	isos := make(map[string]bool, len(pinned))
	for _, p := range pinned {
		if p.Format == "iso" {
			isos[p.SHA256] = true
		}
	}
	slices.Sort(s.Warming)
	slices.SortFunc(s.Failures, func(a, b SectionFailure) int { return strings.Compare(a.SHA256, b.SHA256) })
	var sanboot []SectionFailure
	for _, e := range entries {
		d := e.SanbootSHA256
		switch {
		case d == "":
		case !isos[d]:
			sanboot = append(sanboot, SectionFailure{SHA256: d, MAC: e.MAC.String(), Reason: SectionISONotPinned})
		case state[d] != ImageReady:
			sanboot = append(sanboot, SectionFailure{SHA256: d, MAC: e.MAC.String(), Reason: SectionISONotCached})
		}
	}
	slices.SortFunc(sanboot, func(a, b SectionFailure) int { return strings.Compare(a.MAC, b.MAC) })
	s.Failures = append(s.Failures, sanboot...)
	switch {
	case len(s.Failures) > 0:
		s.State = SectionFailed
	case len(s.Warming) > 0:
		s.State = SectionProgressing
	default:
		s.State = SectionReady
	}
	return s
}
