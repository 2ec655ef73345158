package discovery_test

import (
	"net/netip"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/bettercompute/siteboot/discovery"
	"github.com/bettercompute/siteboot/hwid"
)

func TestMerge(t *testing.T) {
	now := epoch.Add(48 * time.Hour)
	ago := func(d time.Duration) time.Time { return now.Add(-d) }
	mac1, mac2, mac3 := hwid.MustParseMAC(macN(1)), hwid.MustParseMAC(macN(2)), hwid.MustParseMAC(macN(3))
	relay := netip.MustParseAddr
	uuidB := "44454c4c-3100-1035-8052-b4c04f4e4b32"
	entry := func(mac hwid.MAC, first, last time.Duration, count uint64) discovery.Entry {
		return discovery.Entry{MAC: mac, FirstSeen: ago(first), LastSeen: ago(last), Count: count}
	}
	with := func(e discovery.Entry, f func(*discovery.Entry)) discovery.Entry { f(&e); return e }

	tests := []struct {
		name  string
		lists []discovery.AgentList
		want  []discovery.Merged
	}{
		{"nothing", nil, nil},
		{"one agent newest first", []discovery.AgentList{{AgentID: "a", Entries: []discovery.Entry{
			entry(mac1, 3*time.Hour, 2*time.Hour, 1),
			entry(mac2, time.Hour, time.Minute, 4),
		}}}, []discovery.Merged{
			{MAC: mac2, FirstSeen: ago(time.Hour), LastSeen: ago(time.Minute), Count: 4, AgentIDs: []string{"a"}},
			{MAC: mac1, FirstSeen: ago(3 * time.Hour), LastSeen: ago(2 * time.Hour), Count: 1, AgentIDs: []string{"a"}},
		}},
		{"two agents summed and listed", []discovery.AgentList{
			{AgentID: "b", Entries: []discovery.Entry{with(entry(mac1, time.Hour, 10*time.Minute, 3), func(e *discovery.Entry) {
				e.ProductUUID, e.Arch, e.Relay = uuidA, "7", relay("203.0.113.1")
			})}},
			{AgentID: "a", Entries: []discovery.Entry{with(entry(mac1, 2*time.Hour, 20*time.Minute, 5), func(e *discovery.Entry) {
				e.ProductUUID, e.Arch, e.Relay = uuidB, "16", relay("198.51.100.1")
			})}},
		}, []discovery.Merged{
			// UUID and arch from the agent that saw it last (b).
			{MAC: mac1, ProductUUID: uuidA, Arch: "7", FirstSeen: ago(2 * time.Hour), LastSeen: ago(10 * time.Minute), Count: 8,
				Relays: []netip.Addr{relay("198.51.100.1"), relay("203.0.113.1")}, AgentIDs: []string{"a", "b"}},
		}},
		{"the newest sighting without a UUID keeps an older one's", []discovery.AgentList{
			{AgentID: "a", Entries: []discovery.Entry{with(entry(mac1, time.Hour, time.Hour, 1), func(e *discovery.Entry) { e.ProductUUID = uuidA })}},
			{AgentID: "b", Entries: []discovery.Entry{entry(mac1, time.Minute, time.Minute, 1)}},
		}, []discovery.Merged{
			{MAC: mac1, ProductUUID: uuidA, FirstSeen: ago(time.Hour), LastSeen: ago(time.Minute), Count: 2, AgentIDs: []string{"a", "b"}},
		}},
		{"same relay listed once", []discovery.AgentList{
			{AgentID: "a", Entries: []discovery.Entry{with(entry(mac1, time.Hour, time.Hour, 1), func(e *discovery.Entry) { e.Relay = relay("198.51.100.1") })}},
			{AgentID: "b", Entries: []discovery.Entry{with(entry(mac1, time.Hour, time.Hour, 1), func(e *discovery.Entry) { e.Relay = relay("198.51.100.1") })}},
		}, []discovery.Merged{
			{MAC: mac1, FirstSeen: ago(time.Hour), LastSeen: ago(time.Hour), Count: 2, Relays: []netip.Addr{relay("198.51.100.1")}, AgentIDs: []string{"a", "b"}},
		}},
		{"24 hours edge", []discovery.AgentList{{AgentID: "a", Entries: []discovery.Entry{
			entry(mac1, 30*time.Hour, 24*time.Hour, 1),                 // exactly a day: out
			entry(mac2, 30*time.Hour, 24*time.Hour-time.Nanosecond, 1), // in
		}}}, []discovery.Merged{
			{MAC: mac2, FirstSeen: ago(30 * time.Hour), LastSeen: ago(24*time.Hour - time.Nanosecond), Count: 1, AgentIDs: []string{"a"}},
		}},
		{"an old entry of one agent adds nothing", []discovery.AgentList{
			{AgentID: "a", Entries: []discovery.Entry{entry(mac1, 40*time.Hour, 30*time.Hour, 100)}},
			{AgentID: "b", Entries: []discovery.Entry{entry(mac1, time.Hour, time.Hour, 1)}},
		}, []discovery.Merged{
			{MAC: mac1, FirstSeen: ago(time.Hour), LastSeen: ago(time.Hour), Count: 1, AgentIDs: []string{"b"}},
		}},
		{"a later list of an agent replaces its earlier one whole", []discovery.AgentList{
			{AgentID: "a", Entries: []discovery.Entry{entry(mac1, time.Hour, time.Hour, 9), entry(mac3, time.Hour, time.Hour, 1)}},
			{AgentID: "b", Entries: []discovery.Entry{entry(mac2, time.Hour, time.Hour, 1)}},
			{AgentID: "a", Entries: []discovery.Entry{entry(mac1, time.Hour, time.Minute, 2)}},
		}, []discovery.Merged{
			{MAC: mac1, FirstSeen: ago(time.Hour), LastSeen: ago(time.Minute), Count: 2, AgentIDs: []string{"a"}},
			{MAC: mac2, FirstSeen: ago(time.Hour), LastSeen: ago(time.Hour), Count: 1, AgentIDs: []string{"b"}},
		}},
		{"ties in MAC order", []discovery.AgentList{{AgentID: "a", Entries: []discovery.Entry{
			entry(mac3, time.Hour, time.Hour, 1), entry(mac1, time.Hour, time.Hour, 1), entry(mac2, time.Hour, time.Hour, 1),
		}}}, []discovery.Merged{
			{MAC: mac1, FirstSeen: ago(time.Hour), LastSeen: ago(time.Hour), Count: 1, AgentIDs: []string{"a"}},
			{MAC: mac2, FirstSeen: ago(time.Hour), LastSeen: ago(time.Hour), Count: 1, AgentIDs: []string{"a"}},
			{MAC: mac3, FirstSeen: ago(time.Hour), LastSeen: ago(time.Hour), Count: 1, AgentIDs: []string{"a"}},
		}},
		{"malformed fields dropped, others canonicalised", []discovery.AgentList{{AgentID: "a", Entries: []discovery.Entry{
			with(entry(mac1, time.Hour, time.Hour, 1), func(e *discovery.Entry) {
				e.ProductUUID, e.Arch, e.Relay = "{"+uuidA+"}", "a b", relay("fe80::1%eth0")
			}),
			with(entry(mac2, time.Hour, time.Hour, 1), func(e *discovery.Entry) {
				e.ProductUUID, e.Arch, e.Relay = "4C4C4544-0031-3510-8052-B4C04F4E4B32", "EFI", relay("::ffff:198.51.100.7")
			}),
		}}}, []discovery.Merged{
			{MAC: mac1, FirstSeen: ago(time.Hour), LastSeen: ago(time.Hour), Count: 1, AgentIDs: []string{"a"}},
			{MAC: mac2, ProductUUID: uuidA, Arch: "efi", FirstSeen: ago(time.Hour), LastSeen: ago(time.Hour), Count: 1,
				Relays: []netip.Addr{relay("198.51.100.7")}, AgentIDs: []string{"a"}},
		}},
		{"counts saturate", []discovery.AgentList{
			{AgentID: "a", Entries: []discovery.Entry{entry(mac1, time.Hour, time.Hour, ^uint64(0)-1)}},
			{AgentID: "b", Entries: []discovery.Entry{entry(mac1, time.Hour, time.Hour, 5)}},
		}, []discovery.Merged{
			{MAC: mac1, FirstSeen: ago(time.Hour), LastSeen: ago(time.Hour), Count: ^uint64(0), AgentIDs: []string{"a", "b"}},
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := discovery.Merge(now, tt.lists...)
			if diff := cmp.Diff(tt.want, got, addrEqual, cmpopts.EquateEmpty()); diff != "" {
				t.Errorf("Merge (-want +got):\n%s", diff)
			}
		})
	}
}

func TestMergeAtMost256Newest(t *testing.T) {
	now := epoch.Add(48 * time.Hour)
	// Three agents of 200 machines each, overlapping by half: 400 distinct machines.
	var lists []discovery.AgentList
	for a := range 3 {
		al := discovery.AgentList{AgentID: string(rune('a' + a))}
		for i := a * 100; i < a*100+200; i++ {
			at := now.Add(-time.Duration(i) * time.Minute)
			al.Entries = append(al.Entries, discovery.Entry{MAC: hwid.MustParseMAC(macN(i)), FirstSeen: at, LastSeen: at, Count: 1})
		}
		lists = append(lists, al)
	}
	got := discovery.Merge(now, lists...)
	if len(got) != discovery.DefaultMax {
		t.Fatalf("Merge returned %d, want %d", len(got), discovery.DefaultMax)
	}
	for i, m := range got {
		if want := hwid.MustParseMAC(macN(i)); m.MAC != want {
			t.Fatalf("entry %d is %s, want %s (newest first)", i, m.MAC, want)
		}
		wantCount := uint64(1)
		if i >= 100 && i < 300 { // a and b share 100-199, b and c 200-299
			wantCount = 2
		}
		if m.Count != wantCount || len(m.AgentIDs) != int(wantCount) {
			t.Errorf("%s: count %d agents %v, want %d", m.MAC, m.Count, m.AgentIDs, wantCount)
		}
	}
}

// An agent's snapshot goes through Merge unchanged but for the agent id.
func TestMergeOfSnapshot(t *testing.T) {
	l, clk := newList(t, discovery.Config{})
	l.Seen(discovery.Sighting{MAC: hwid.MustParseMAC(macA), UUID: hwid.MustParseUUID(uuidA), Arch: hwid.ArchX86_64EFI, HasArch: true, Relay: netip.MustParseAddr("198.51.100.1")})
	clk.Advance(time.Minute)
	l.Seen(discovery.Sighting{MAC: hwid.MustParseMAC(macN(1))})
	snap := l.Snapshot()
	got := discovery.Merge(clk.Now(), discovery.AgentList{AgentID: "a", Entries: snap.Entries})
	var want []discovery.Merged
	for _, e := range snap.Entries {
		m := discovery.Merged{MAC: e.MAC, ProductUUID: e.ProductUUID, Arch: e.Arch, FirstSeen: e.FirstSeen, LastSeen: e.LastSeen,
			Count: e.Count, AgentIDs: []string{"a"}}
		if e.Relay.IsValid() {
			m.Relays = []netip.Addr{e.Relay}
		}
		want = append(want, m)
	}
	if diff := cmp.Diff(want, got, addrEqual, cmpopts.EquateEmpty()); diff != "" {
		t.Errorf("Merge of one snapshot (-want +got):\n%s", diff)
	}
}
