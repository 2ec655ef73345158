package bootserver_test

import (
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/bettercompute/siteboot/bootserver"
	"github.com/bettercompute/siteboot/clock/clocktest"
	"github.com/bettercompute/siteboot/discovery"
	"github.com/bettercompute/siteboot/hwid"
	"github.com/bettercompute/siteboot/internal/testlog"
	"github.com/bettercompute/siteboot/sitelink"
)

// TestLinkSync: the discovery list goes in a report until a report carrying it was
// answered, and again once it changed; its digest goes in every one. An answer pins its
// cache images with the host's own, a malformed one logged and left out. Applying a
// machine's entry forgets it from the list.
func TestLinkSync(t *testing.T) {
	clk := clocktest.New(time.Now())
	cache, ims := openCache(t, clk, "raw", "iso")
	found, err := discovery.NewList(discovery.Config{Clock: clk})
	if err != nil {
		t.Fatal(err)
	}
	defer found.Close()
	entries, err := sitelink.OpenEntryStore(t.TempDir()+"/entries.json", clk)
	if err != nil {
		t.Fatal(err)
	}
	var logs testlog.Buffer
	own := sitelink.CacheImage{URL: ims[0].URL, SHA256: ims[0].SHA256.String(), Format: ims[0].Format}
	s := &bootserver.LinkSync{Cache: cache, Found: found, Entries: entries, Pinned: []sitelink.CacheImage{own}, Logger: slog.New(slog.NewTextHandler(&logs, nil))}
	mac, _ := hwid.ParseMAC("52:54:00:00:00:07")

	report := func() (sitelink.StatusReport, bootserver.ReportSent) {
		var r sitelink.StatusReport
		sent := s.Report(&r)
		if r.DiscoveredDigest == "" || r.Section == nil {
			t.Fatalf("report without digest or section: %+v", r)
		}
		return r, sent
	}
	found.Seen(discovery.Sighting{MAC: mac, Via: discovery.ViaDHCP})
	r, sent := report()
	if len(r.Discovered) != 1 {
		t.Fatalf("first report lists %d machines, want 1", len(r.Discovered))
	}
	if r2, _ := report(); len(r2.Discovered) != 1 {
		t.Error("an unanswered list is not sent again")
	}
	control := sitelink.CacheImage{URL: ims[1].URL, SHA256: ims[1].SHA256.String(), Format: ims[1].Format}
	bad := sitelink.CacheImage{URL: "http://192.0.2.1/x", SHA256: "not-a-digest"}
	if err := s.Answered(sent, sitelink.SyncResponse{SiteSpec: sitelink.SiteSpec{CacheImages: []sitelink.CacheImage{control, bad}}}); err != nil {
		t.Fatal(err)
	}
	if r, _ := report(); r.Discovered != nil {
		t.Errorf("an acknowledged list sent again: %+v", r.Discovered)
	}
	pinned := map[string]bool{}
	for _, st := range cache.Status() {
		pinned[st.Image.SHA256.String()] = true
	}
	if !pinned[own.SHA256] || !pinned[control.SHA256] || len(pinned) != 2 {
		t.Errorf("pinned %v, want the host's image and the control plane's", pinned)
	}
	if !strings.Contains(logs.String(), "malformed digest") {
		t.Errorf("the malformed image not logged: %q", logs.String())
	}

	// The machine gets an entry: it is no longer unknown, and the changed list goes out.
	if _, err := entries.Apply(sitelink.Command{ID: "c1", Kind: sitelink.KindPrepareRamdisk, Entries: []sitelink.ProxyDhcpEntry{{
		MAC: mac, Arch: sitelink.ArchX86UEFI, Workflow: "wf-1", NotAfter: clk.Now().Add(time.Hour)}}}); err != nil {
		t.Fatal(err)
	}
	s.Applied(nil)
	if n := len(found.Snapshot().Entries); n != 0 {
		t.Errorf("%d machines listed after the entry was applied, want 0", n)
	}
	if r, _ := report(); r.Discovered == nil || len(r.Discovered) != 0 {
		t.Errorf("the emptied list: %+v, want sent, empty", r.Discovered)
	}
}
