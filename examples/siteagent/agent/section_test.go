package agent_test

import (
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/bettercompute/siteboot/sitelink"
)

// TestSiteSection: the report carries the site section's state as the seed defines it:
// PROGRESSING while a pinned image warms, FAILED naming a sanboot entry whose ISO is not yet
// cached and an image whose bytes did not match, READY once everything is verified.
func TestSiteSection(t *testing.T) {
	h := newHarness(t)
	iso, other := randBytes(32<<10), randBytes(1000)
	release := make(chan struct{})
	isoOrigin := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/slow.iso" {
			<-release // the ISO warms until the test lets it through
		}
		w.Write(iso)
	}))
	t.Cleanup(isoOrigin.Close)
	t.Cleanup(func() {
		select {
		case <-release:
		default:
			close(release)
		}
	})
	a, _ := h.start(t, h.config(t.TempDir()), h.plane.Link())
	section := func() sitelink.SectionStatus {
		s, ok := h.plane.Section("agent-t")
		if !ok {
			t.Fatal("no section in the agent's report")
		}
		return s
	}
	// beatUntil beats until the reported section satisfies cond; a pull runs in real time,
	// so each beat also waits a little for it.
	beatUntil := func(what string, cond func(sitelink.SectionStatus) bool) sitelink.SectionStatus {
		t.Helper()
		for i := 0; ; i++ {
			h.beat(t, a)
			if s := section(); cond(s) {
				return s
			} else if i == 200 {
				t.Fatalf("%s: section still %+v", what, s)
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
	beatUntil("ramdisk images verified", func(s sitelink.SectionStatus) bool { return s.State == sitelink.SectionReady })

	isoSum := sum(iso)
	h.plane.SetImages("site-t", []sitelink.CacheImage{{URL: isoOrigin.URL + "/slow.iso", SHA256: isoSum, Format: "iso"}})
	s := beatUntil("ISO warming", func(s sitelink.SectionStatus) bool { return s.State == sitelink.SectionProgressing })
	if !slices.Equal(s.Warming, []string{isoSum}) || len(s.Failures) != 0 {
		t.Errorf("while the ISO warms: %+v, want PROGRESSING warming only %s", s, isoSum)
	}

	e := entry(7, h.clk.Now().Add(2*time.Hour))
	e.SanbootSHA256 = isoSum
	h.prepare(t, a, e)
	s = beatUntil("sanboot entry named", func(s sitelink.SectionStatus) bool { return s.State == sitelink.SectionFailed })
	want := sitelink.SectionFailure{SHA256: isoSum, MAC: e.MAC.String(), Reason: sitelink.SectionISONotCached}
	if !slices.Equal(s.Failures, []sitelink.SectionFailure{want}) {
		t.Errorf("sanboot entry before its ISO is cached: failures %+v, want %+v", s.Failures, want)
	}

	close(release)
	beatUntil("ISO cached", func(s sitelink.SectionStatus) bool { return s.State == sitelink.SectionReady })

	// An image whose bytes do not match its digest fails the section, naming it.
	bad := sum(other)
	h.plane.SetImages("site-t", []sitelink.CacheImage{
		{URL: isoOrigin.URL + "/slow.iso", SHA256: isoSum, Format: "iso"},
		{URL: isoOrigin.URL + "/bad.raw", SHA256: bad, Format: "raw"},
	})
	s = beatUntil("bad image named", func(s sitelink.SectionStatus) bool { return s.State == sitelink.SectionFailed })
	if len(s.Failures) != 1 || s.Failures[0].SHA256 != bad || s.Failures[0].MAC != "" || !strings.Contains(s.Failures[0].Reason, "digest") {
		t.Errorf("image with the wrong bytes: failures %+v, want one naming %s with its reason", s.Failures, bad)
	}
}
