package discovery_test

import (
	"net/netip"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/bettercompute/siteboot/discovery"
	"github.com/bettercompute/siteboot/hwid"
)

// TestIPv6Sightings: DHCPv6 sightings carry the link address of the relay nearest the
// client. The list keeps the last one a machine came through (a later sighting without a
// relay, or with a link-local link address, keeps it), the digest changes with it, a
// multicast one is ignored and counted, and the control plane's merge lists every relay of
// both families in address order.
func TestIPv6Sightings(t *testing.T) {
	clk := newFakeClock()
	l, err := discovery.NewList(discovery.Config{Clock: clk})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	mac := hwid.MustParseMAC(macN(6))
	link1, link2 := netip.MustParseAddr("2001:db8:1::1"), netip.MustParseAddr("2001:db8:2::1")
	arch := hwid.ArchX86_64EFI

	for _, s := range []struct {
		relay netip.Addr
		want  netip.Addr
	}{
		{link1, link1},
		{netip.Addr{}, link1},                     // not relayed this time: the relay is kept
		{netip.MustParseAddr("fe80::1"), link1},   // a link-local link address names nothing
		{netip.MustParseAddr("ff02::1:2"), link1}, // malformed: ignored
		{link2, link2},
	} {
		clk.Advance(time.Second)
		l.Seen(discovery.Sighting{MAC: mac, Arch: arch, HasArch: true, Relay: s.relay})
		snap := l.Snapshot()
		if len(snap.Entries) != 1 || snap.Entries[0].Relay != s.want {
			t.Fatalf("after a sighting via %v: %+v, want relay %v", s.relay, snap.Entries, s.want)
		}
	}
	if st := l.Stats(); st.IgnoredRelay != 1 {
		t.Errorf("IgnoredRelay %d, want 1 (the multicast one)", st.IgnoredRelay)
	}
	// Relays alone (last-seen moves too) differ: check the digest of the same entry with
	// each relay.
	e := l.Snapshot().Entries[0]
	e1 := e
	e1.Relay = link1
	if discovery.DigestOf([]discovery.Entry{e}) == discovery.DigestOf([]discovery.Entry{e1}) {
		t.Error("two IPv6 relays give one digest")
	}

	now := clk.Now()
	got := discovery.Merge(now,
		discovery.AgentList{AgentID: "a", Entries: []discovery.Entry{e}},
		discovery.AgentList{AgentID: "b", Entries: []discovery.Entry{{MAC: mac, Relay: netip.MustParseAddr("198.51.100.1"), FirstSeen: now, LastSeen: now, Count: 1}}},
		discovery.AgentList{AgentID: "c", Entries: []discovery.Entry{{MAC: mac, Relay: link1, FirstSeen: now, LastSeen: now, Count: 1}}},
	)
	if len(got) != 1 {
		t.Fatalf("merged %+v", got)
	}
	want := []netip.Addr{netip.MustParseAddr("198.51.100.1"), link1, link2}
	if diff := cmp.Diff(want, got[0].Relays, cmp.Comparer(func(a, b netip.Addr) bool { return a == b })); diff != "" {
		t.Errorf("merged relays (-want +got):\n%s", diff)
	}
}
