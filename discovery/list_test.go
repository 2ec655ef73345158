package discovery_test

import (
	"errors"
	"fmt"
	"log/slog"
	"net/netip"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"go.uber.org/goleak"

	"github.com/bettercompute/siteboot/discovery"
	"github.com/bettercompute/siteboot/hwid"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

const (
	macA  = "3c:ec:ef:12:34:56"
	uuidA = "4c4c4544-0031-3510-8052-b4c04f4e4b32"
)

var (
	mA = hwid.MustParseMAC(macA)
	uA = hwid.MustParseUUID(uuidA)
)

func newList(t testing.TB, c discovery.Config) (*discovery.List, *fakeClock) {
	t.Helper()
	clk := newFakeClock()
	c.Clock = clk
	l, err := discovery.NewList(c)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	return l, clk
}

func TestSeenValidation(t *testing.T) {
	tests := []struct {
		name   string
		in     discovery.Sighting
		stored bool
		want   discovery.Entry // FirstSeen, LastSeen and Count filled in by the test
	}{
		{"all fields", discovery.Sighting{MAC: mA, UUID: uA, Arch: hwid.ArchX86_64EFI, HasArch: true, Relay: netip.MustParseAddr("198.51.100.1")}, true,
			discovery.Entry{MAC: mA, ProductUUID: uuidA, Arch: "x86_64-efi", Relay: netip.MustParseAddr("198.51.100.1")}},
		{"mac only", discovery.Sighting{MAC: mA}, true, discovery.Entry{MAC: mA}},
		{"zero mac dropped", discovery.Sighting{UUID: uA}, false, discovery.Entry{}},
		{"uuid placeholder kept", discovery.Sighting{MAC: mA, UUID: hwid.MustParseUUID("ffffffff-ffff-ffff-ffff-ffffffffffff")}, true,
			discovery.Entry{MAC: mA, ProductUUID: "ffffffff-ffff-ffff-ffff-ffffffffffff"}},
		{"zero uuid is none", discovery.Sighting{MAC: mA, UUID: hwid.UUID{}}, true, discovery.Entry{MAC: mA}},
		{"arch bios sent", discovery.Sighting{MAC: mA, Arch: hwid.ArchBIOS, HasArch: true}, true, discovery.Entry{MAC: mA, Arch: "bios"}},
		{"arch bios not sent", discovery.Sighting{MAC: mA, Arch: hwid.ArchBIOS}, true, discovery.Entry{MAC: mA}},
		{"arch without a name", discovery.Sighting{MAC: mA, Arch: hwid.Arch(65535), HasArch: true}, true, discovery.Entry{MAC: mA, Arch: "arch-65535"}},
		{"relay ipv6", discovery.Sighting{MAC: mA, Relay: netip.MustParseAddr("2001:db8::1")}, true,
			discovery.Entry{MAC: mA, Relay: netip.MustParseAddr("2001:db8::1")}},
		{"relay v4-mapped kept as v4", discovery.Sighting{MAC: mA, Relay: netip.MustParseAddr("::ffff:203.0.113.9")}, true,
			discovery.Entry{MAC: mA, Relay: netip.MustParseAddr("203.0.113.9")}},
		{"relay zone ignored", discovery.Sighting{MAC: mA, Relay: netip.MustParseAddr("fe80::1%eth0")}, true, discovery.Entry{MAC: mA}},
		{"relay unspecified is none", discovery.Sighting{MAC: mA, Relay: netip.IPv4Unspecified()}, true, discovery.Entry{MAC: mA}},
		{"relay v6 unspecified is none", discovery.Sighting{MAC: mA, Relay: netip.IPv6Unspecified()}, true, discovery.Entry{MAC: mA}},
		{"relay dhcpv6 link address", discovery.Sighting{MAC: mA, Relay: netip.MustParseAddr("2001:db8:1::1")}, true,
			discovery.Entry{MAC: mA, Relay: netip.MustParseAddr("2001:db8:1::1")}},
		{"relay v6 link-local is none", discovery.Sighting{MAC: mA, Relay: netip.MustParseAddr("fe80::1")}, true, discovery.Entry{MAC: mA}},
		{"relay v6 multicast ignored", discovery.Sighting{MAC: mA, Relay: netip.MustParseAddr("ff02::1:2")}, true, discovery.Entry{MAC: mA}},
		{"relay v4 multicast ignored", discovery.Sighting{MAC: mA, Relay: netip.MustParseAddr("224.0.0.1")}, true, discovery.Entry{MAC: mA}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			l, clk := newList(t, discovery.Config{})
			if got := l.Seen(tt.in); got != tt.stored {
				t.Fatalf("Seen = %v, want %v", got, tt.stored)
			}
			var want []discovery.Entry
			if tt.stored {
				tt.want.FirstSeen, tt.want.LastSeen, tt.want.Count = clk.Now(), clk.Now(), 1
				want = []discovery.Entry{tt.want}
			}
			got := l.Snapshot().Entries
			if diff := cmp.Diff(want, got, addrEqual, cmpopts.EquateEmpty()); diff != "" {
				t.Errorf("entries (-want +got):\n%s", diff)
			}
		})
	}
}

var addrEqual = cmp.Comparer(func(a, b netip.Addr) bool { return a == b })

func TestSeenUpdates(t *testing.T) {
	l, clk := newList(t, discovery.Config{})
	mac := hwid.MustParseMAC(macA)
	t0 := clk.Now()
	l.Seen(discovery.Sighting{MAC: hwid.MustParseMAC(macA), UUID: hwid.MustParseUUID(uuidA), Arch: hwid.ArchX86_64EFI, HasArch: true, Relay: netip.MustParseAddr("198.51.100.1")})
	clk.Advance(time.Minute)
	// Absent fields, and a relay with a zone, leave what the machine said before.
	l.Seen(discovery.Sighting{MAC: mA, Relay: netip.MustParseAddr("fe80::1%eth0"), Via: discovery.ViaHTTP})
	clk.Advance(time.Minute)
	want := discovery.Entry{MAC: mac, ProductUUID: uuidA, Arch: "x86_64-efi", Relay: netip.MustParseAddr("198.51.100.1"),
		FirstSeen: t0, LastSeen: t0.Add(time.Minute), Count: 2}
	got, ok := l.Get(mac)
	if diff := cmp.Diff(want, got, addrEqual); !ok || diff != "" {
		t.Errorf("after an update with nothing new (-want +got), ok=%v:\n%s", ok, diff)
	}
	// New well-formed values replace the old ones.
	other := "44454c4c-3100-1035-8052-b4c04f4e4b32"
	l.Seen(discovery.Sighting{MAC: hwid.MustParseMAC("3C:EC:EF:12:34:56"), UUID: hwid.MustParseUUID(other), Arch: hwid.ArchX86_64EFIHTTP, HasArch: true, Relay: netip.MustParseAddr("203.0.113.1")})
	want = discovery.Entry{MAC: mac, ProductUUID: other, Arch: "x86_64-efi-http", Relay: netip.MustParseAddr("203.0.113.1"),
		FirstSeen: t0, LastSeen: t0.Add(2 * time.Minute), Count: 3}
	got, _ = l.Get(mac)
	if diff := cmp.Diff(want, got, addrEqual); diff != "" {
		t.Errorf("after an update with new values (-want +got):\n%s", diff)
	}
	st := l.Stats()
	wantStats := discovery.Stats{Sightings: 3, Recorded: 3, New: 1, IgnoredRelay: 1, Len: 1}
	if diff := cmp.Diff(wantStats, st); diff != "" {
		t.Errorf("stats (-want +got):\n%s", diff)
	}
}

func macN(i int) string {
	return fmt.Sprintf("52:54:00:%02x:%02x:%02x", byte(i>>16), byte(i>>8), byte(i))
}

func TestBoundEvictsOldestLastSeen(t *testing.T) {
	for _, max := range []int{0, 1, 2, 5} {
		t.Run(fmt.Sprint("max=", max), func(t *testing.T) {
			l, clk := newList(t, discovery.Config{Max: max})
			bound := max
			if bound == 0 {
				bound = discovery.DefaultMax
			}
			for i := range bound {
				l.Seen(discovery.Sighting{MAC: hwid.MustParseMAC(macN(i))})
				clk.Advance(time.Second)
			}
			// See the first one again: the second becomes the one last seen longest ago.
			l.Seen(discovery.Sighting{MAC: hwid.MustParseMAC(macN(0))})
			clk.Advance(time.Second)
			l.Seen(discovery.Sighting{MAC: hwid.MustParseMAC(macN(bound))})
			if got := l.Len(); got != bound {
				t.Fatalf("Len = %d, want %d", got, bound)
			}
			evicted := macN(1)
			if bound == 1 {
				evicted = macN(0)
			}
			if _, ok := l.Get(hwid.MustParseMAC(evicted)); ok {
				t.Errorf("%s still listed after the bound was passed", evicted)
			}
			if _, ok := l.Get(hwid.MustParseMAC(macN(bound))); !ok {
				t.Errorf("newest machine %s not listed", macN(bound))
			}
			if bound > 1 {
				if _, ok := l.Get(hwid.MustParseMAC(macN(0))); !ok {
					t.Errorf("%s, seen again, was evicted", macN(0))
				}
			}
			if got := l.Stats().Evicted; got != 1 {
				t.Errorf("Evicted = %d, want 1", got)
			}
		})
	}
}

func TestForgetAfterADay(t *testing.T) {
	tests := []struct {
		name   string
		after  time.Duration // since the last sighting
		listed bool
	}{
		{"just seen", 0, true},
		{"a nanosecond short of a day", 24*time.Hour - time.Nanosecond, true},
		{"a day", 24 * time.Hour, false},
		{"a week", 7 * 24 * time.Hour, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			l, clk := newList(t, discovery.Config{})
			mac := hwid.MustParseMAC(macA)
			l.Seen(discovery.Sighting{MAC: hwid.MustParseMAC(macA)})
			clk.Advance(time.Hour)
			l.Seen(discovery.Sighting{MAC: hwid.MustParseMAC(macA)}) // the day counts from here
			before := l.Digest()
			clk.Advance(tt.after)
			if got := l.Contains(mac); got != tt.listed {
				t.Errorf("Contains after %v = %v, want %v", tt.after, got, tt.listed)
			}
			_, ok := l.Get(mac)
			if ok != tt.listed {
				t.Errorf("listed %v after %v, want %v", ok, tt.after, tt.listed)
			}
			if n := len(l.Snapshot().Entries); n != l.Len() || (n == 1) != tt.listed {
				t.Errorf("snapshot has %d entries, Len %d, want listed=%v", n, l.Len(), tt.listed)
			}
			if changed := l.Digest() != before; changed == tt.listed {
				t.Errorf("digest changed = %v, want %v", changed, !tt.listed)
			}
		})
	}
}

func TestForgetOnlyTheExpired(t *testing.T) {
	l, clk := newList(t, discovery.Config{})
	l.Seen(discovery.Sighting{MAC: hwid.MustParseMAC(macN(1))})
	clk.Advance(12 * time.Hour)
	l.Seen(discovery.Sighting{MAC: hwid.MustParseMAC(macN(2))})
	clk.Advance(12 * time.Hour)
	// macN(1) is a day old; this sighting forgets it and keeps macN(2).
	l.Seen(discovery.Sighting{MAC: hwid.MustParseMAC(macN(3))})
	var got []string
	for _, e := range l.Snapshot().Entries {
		got = append(got, e.MAC.String())
	}
	if diff := cmp.Diff([]string{macN(3), macN(2)}, got); diff != "" {
		t.Errorf("listed (-want +got):\n%s", diff)
	}
	if st := l.Stats(); st.Expired != 1 {
		t.Errorf("Expired = %d, want 1", st.Expired)
	}
}

func TestForget(t *testing.T) {
	l, _ := newList(t, discovery.Config{})
	for i := range 5 {
		l.Seen(discovery.Sighting{MAC: hwid.MustParseMAC(macN(i))})
	}
	if n := l.Forget(hwid.MustParseMAC(macN(1)), hwid.MustParseMAC(macN(1)), hwid.MustParseMAC(macN(9))); n != 1 {
		t.Errorf("Forget = %d, want 1", n)
	}
	if l.Contains(hwid.MustParseMAC(macN(1))) || !l.Contains(hwid.MustParseMAC(macN(2))) {
		t.Errorf("Contains disagrees with Forget")
	}
	entries := map[hwid.MAC]bool{hwid.MustParseMAC(macN(3)): true, hwid.MustParseMAC(macN(4)): true}
	if n := l.ForgetFunc(func(m hwid.MAC) bool { return entries[m] }); n != 2 {
		t.Errorf("ForgetFunc = %d, want 2", n)
	}
	var got []string
	for _, e := range l.Snapshot().Entries {
		got = append(got, e.MAC.String())
	}
	// All seen at one instant: ties go in MAC order.
	if diff := cmp.Diff([]string{macN(0), macN(2)}, got); diff != "" {
		t.Errorf("listed (-want +got):\n%s", diff)
	}
	// A forgotten MAC seen again is a new machine.
	l.Seen(discovery.Sighting{MAC: hwid.MustParseMAC(macN(1))})
	if e, _ := l.Get(hwid.MustParseMAC(macN(1))); e.Count != 1 {
		t.Errorf("count after forgetting = %d, want 1", e.Count)
	}
	if st := l.Stats(); st.Forgotten != 3 || st.New != 6 {
		t.Errorf("Forgotten = %d, New = %d; want 3, 6", st.Forgotten, st.New)
	}
}

func TestDHCPFirst(t *testing.T) {
	for _, dhcpFirst := range []bool{false, true} {
		t.Run(fmt.Sprint("DHCPFirst=", dhcpFirst), func(t *testing.T) {
			l, _ := newList(t, discovery.Config{DHCPFirst: dhcpFirst})
			http := discovery.Sighting{MAC: hwid.MustParseMAC(macA), Via: discovery.ViaHTTP}
			if got := l.Seen(http); got == dhcpFirst {
				t.Errorf("script fetch of an unlisted MAC recorded = %v", got)
			}
			l.Seen(discovery.Sighting{MAC: hwid.MustParseMAC(macA), Via: discovery.ViaDHCP})
			if !l.Seen(http) {
				t.Errorf("script fetch of a MAC DHCP showed not recorded")
			}
			want := uint64(3)
			if dhcpFirst {
				want = 2
			}
			if e, _ := l.Get(hwid.MustParseMAC(macA)); e.Count != want {
				t.Errorf("Count = %d, want %d", e.Count, want)
			}
		})
	}
}

func TestReportThrottle(t *testing.T) {
	type step struct {
		at  time.Duration // since the start
		mac int           // a MAC number; -1 for none (time only)
	}
	tests := []struct {
		name  string
		steps []step
		end   time.Duration
		want  []time.Duration // when ReportWanted was called
	}{
		{"first machine at once", []step{{0, 1}}, time.Hour, []time.Duration{0}},
		{"known machine never", []step{{0, 1}, {40 * time.Second, 1}, {2 * time.Minute, 1}}, time.Hour, []time.Duration{0}},
		{"second within interval trails at its end",
			[]step{{0, 1}, {10 * time.Second, 2}}, time.Hour, []time.Duration{0, 30 * time.Second}},
		{"trailing call not before the interval",
			[]step{{0, 1}, {29*time.Second + 999*time.Millisecond, 2}}, 29*time.Second + 999*time.Millisecond, []time.Duration{0}},
		{"one trailing call for many", []step{{0, 1}, {1 * time.Second, 2}, {2 * time.Second, 3}, {29 * time.Second, 4}},
			time.Hour, []time.Duration{0, 30 * time.Second}},
		{"at exactly the interval at once", []step{{0, 1}, {30 * time.Second, 2}}, time.Hour, []time.Duration{0, 30 * time.Second}},
		{"just inside the interval trails", []step{{0, 1}, {30*time.Second - time.Nanosecond, 2}}, time.Hour,
			[]time.Duration{0, 30 * time.Second}},
		{"interval counts from the trailing call",
			[]step{{0, 1}, {10 * time.Second, 2}, {31 * time.Second, 3}}, time.Hour,
			[]time.Duration{0, 30 * time.Second, 60 * time.Second}},
		{"after a quiet spell at once",
			[]step{{0, 1}, {10 * time.Minute, 2}, {10*time.Minute + time.Second, 3}}, time.Hour,
			[]time.Duration{0, 10 * time.Minute, 10*time.Minute + 30*time.Second}},
		{"steady stream once per interval",
			[]step{{0, 1}, {20 * time.Second, 2}, {40 * time.Second, 3}, {60 * time.Second, 4}, {80 * time.Second, 5}, {100 * time.Second, 6}},
			time.Hour, []time.Duration{0, 30 * time.Second, 60 * time.Second, 90 * time.Second, 120 * time.Second}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var mu sync.Mutex
			var got []time.Duration
			var clk *fakeClock
			l, clk := newList(t, discovery.Config{ReportWanted: func() {
				mu.Lock()
				got = append(got, clk.Now().Sub(epoch))
				mu.Unlock()
			}})
			for _, s := range tt.steps {
				clk.Advance(s.at - clk.Now().Sub(epoch))
				if s.mac >= 0 {
					l.Seen(discovery.Sighting{MAC: hwid.MustParseMAC(macN(s.mac))})
				}
			}
			clk.Advance(tt.end - clk.Now().Sub(epoch))
			mu.Lock()
			defer mu.Unlock()
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("ReportWanted calls (-want +got):\n%s", diff)
			}
			if st := l.Stats(); st.ReportsWanted != uint64(len(got)) {
				t.Errorf("ReportsWanted = %d, calls %d", st.ReportsWanted, len(got))
			}
		})
	}
}

func TestCloseStopsTrailingReport(t *testing.T) {
	calls := 0
	l, clk := newList(t, discovery.Config{ReportWanted: func() { calls++ }})
	l.Seen(discovery.Sighting{MAC: hwid.MustParseMAC(macN(1))})
	l.Seen(discovery.Sighting{MAC: hwid.MustParseMAC(macN(2))})
	if clk.Pending() != 1 {
		t.Fatalf("%d timers armed, want 1", clk.Pending())
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	if clk.Pending() != 0 {
		t.Errorf("%d timers armed after Close", clk.Pending())
	}
	clk.Advance(time.Hour)
	l.Seen(discovery.Sighting{MAC: hwid.MustParseMAC(macN(3))})
	if calls != 1 {
		t.Errorf("ReportWanted called %d times, want 1 (before Close)", calls)
	}
	if l.Len() != 3 {
		t.Errorf("Len after Close = %d, want 3", l.Len())
	}
}

// With the system clock the trailing report runs on a real timer; Close must leave no
// goroutine behind (TestMain checks) and no call after it returns.
func TestCloseSystemClock(t *testing.T) {
	var mu sync.Mutex
	calls := 0
	l, err := discovery.NewList(discovery.Config{ReportEvery: time.Hour, ReportWanted: func() {
		mu.Lock()
		calls++
		mu.Unlock()
	}})
	if err != nil {
		t.Fatal(err)
	}
	l.Seen(discovery.Sighting{MAC: hwid.MustParseMAC(macN(1))})
	l.Seen(discovery.Sighting{MAC: hwid.MustParseMAC(macN(2))}) // arms an hour's timer
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	defer mu.Unlock()
	if calls != 1 {
		t.Errorf("ReportWanted called %d times, want 1", calls)
	}
}

func TestDigest(t *testing.T) {
	feed := func(order []int) (*discovery.List, *fakeClock) {
		l, clk := newList(t, discovery.Config{})
		for _, i := range order {
			l.Seen(discovery.Sighting{MAC: hwid.MustParseMAC(macN(i)), UUID: hwid.MustParseUUID(uuidA), Arch: hwid.ArchX86_64EFI, HasArch: true})
		}
		return l, clk
	}
	a, clkA := feed([]int{1, 2, 3})
	b, _ := feed([]int{3, 1, 2})
	if a.Digest() != b.Digest() {
		t.Errorf("same content in another order gives another digest")
	}
	snap := a.Snapshot()
	if snap.Digest != discovery.DigestOf(snap.Entries) {
		t.Errorf("Snapshot digest %s != DigestOf(entries) %s", snap.Digest, discovery.DigestOf(snap.Entries))
	}
	d0 := a.Digest()
	clkA.Advance(time.Hour)
	if a.Digest() != d0 {
		t.Errorf("digest changed while nothing happened")
	}
	a.Seen(discovery.Sighting{})
	if a.Digest() != d0 {
		t.Errorf("digest changed on a dropped sighting")
	}
	a.Seen(discovery.Sighting{MAC: hwid.MustParseMAC(macN(1))})
	d1 := a.Digest()
	if d1 == d0 {
		t.Errorf("digest unchanged by a new sighting (count and last seen)")
	}
	a.Forget(hwid.MustParseMAC(macN(1)))
	if d2 := a.Digest(); d2 == d1 || d2 == d0 {
		t.Errorf("digest unchanged by Forget")
	}
	empty, _ := newList(t, discovery.Config{})
	if empty.Digest() != discovery.DigestOf(nil) {
		t.Errorf("empty list digest %s != DigestOf(nil)", empty.Digest())
	}
	// Each field counts.
	base := discovery.Entry{MAC: hwid.MustParseMAC(macA), ProductUUID: uuidA, Arch: "7", Relay: netip.MustParseAddr("198.51.100.1"),
		FirstSeen: epoch, LastSeen: epoch.Add(time.Second), Count: 2}
	variants := []func(*discovery.Entry){
		func(e *discovery.Entry) { e.MAC[5]++ },
		func(e *discovery.Entry) { e.ProductUUID = "" },
		func(e *discovery.Entry) { e.Arch = "16" },
		func(e *discovery.Entry) { e.Relay = netip.Addr{} },
		func(e *discovery.Entry) { e.Relay = netip.MustParseAddr("::ffff:198.51.100.1") },
		func(e *discovery.Entry) { e.FirstSeen = e.FirstSeen.Add(time.Nanosecond) },
		func(e *discovery.Entry) { e.LastSeen = e.LastSeen.Add(time.Nanosecond) },
		func(e *discovery.Entry) { e.Count++ },
	}
	seen := map[discovery.Digest]int{discovery.DigestOf([]discovery.Entry{base}): -1}
	for i, v := range variants {
		e := base
		v(&e)
		d := discovery.DigestOf([]discovery.Entry{e})
		if j, dup := seen[d]; dup {
			t.Errorf("variant %d has the digest of variant %d", i, j)
		}
		seen[d] = i
	}
	// The location of a time is not content.
	e := base
	e.LastSeen = e.LastSeen.In(time.FixedZone("X", 3600))
	if discovery.DigestOf([]discovery.Entry{e}) != discovery.DigestOf([]discovery.Entry{base}) {
		t.Errorf("digest depends on the time zone")
	}
}

func TestConcurrentUse(t *testing.T) {
	l, clk := newList(t, discovery.Config{Max: 64, ReportWanted: func() {}})
	const workers, each = 4, 2000
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			for i := range each {
				l.Seen(discovery.Sighting{MAC: hwid.MustParseMAC(macN(i % 32)), UUID: hwid.MustParseUUID(uuidA), Arch: hwid.ArchX86_64EFI, HasArch: true, Via: discovery.Via(w % 2)})
				switch i % 200 {
				case 0:
					_ = l.Snapshot()
				case 100:
					clk.Advance(time.Second)
				}
			}
		})
	}
	wg.Wait()
	var sum uint64
	for _, e := range l.Snapshot().Entries {
		sum += e.Count
	}
	// No MAC was ever evicted or forgotten, so every sighting is in some count.
	if st := l.Stats(); sum != workers*each || st.Recorded != workers*each || st.Len != 32 {
		t.Errorf("sum of counts %d, recorded %d, Len %d; want %d, %d, 32", sum, st.Recorded, st.Len, workers*each, workers*each)
	}
}

func TestConfigValidate(t *testing.T) {
	for _, c := range []discovery.Config{
		{Max: -1}, {Max: 1 << 20}, {ForgetAfter: -time.Second}, {ReportEvery: -time.Second},
	} {
		if _, err := discovery.NewList(c); !errors.Is(err, discovery.ErrConfig) {
			t.Errorf("NewList(%+v) = %v, want ErrConfig", c, err)
		}
	}
}

func TestValidHelpers(t *testing.T) {
	if !discovery.ValidArch("x86_64_efi") || discovery.ValidArch("X86_64_EFI") || discovery.ValidArch("") {
		t.Errorf("ValidArch wrong")
	}
	if !discovery.ValidProductUUID(uuidA) || discovery.ValidProductUUID(strings.ToUpper(uuidA)) {
		t.Errorf("ValidProductUUID wrong")
	}
	if !discovery.ValidRelay(netip.MustParseAddr("198.51.100.1")) || discovery.ValidRelay(netip.MustParseAddr("::ffff:198.51.100.1")) ||
		discovery.ValidRelay(netip.MustParseAddr("0.0.0.0")) || discovery.ValidRelay(netip.Addr{}) {
		t.Errorf("ValidRelay wrong")
	}
}

func TestDebugLog(t *testing.T) {
	var buf strings.Builder
	var mu sync.Mutex
	h := slog.NewTextHandler(writerFunc(func(p []byte) (int, error) {
		mu.Lock()
		defer mu.Unlock()
		return buf.Write(p)
	}), &slog.HandlerOptions{Level: slog.LevelDebug})
	l, _ := newList(t, discovery.Config{Max: 1, Logger: slog.New(h)})
	l.Seen(discovery.Sighting{MAC: hwid.MustParseMAC(macN(1))})
	l.Seen(discovery.Sighting{MAC: hwid.MustParseMAC(macN(2))})
	mu.Lock()
	defer mu.Unlock()
	out := buf.String()
	for _, want := range []string{"new machine", "mac=" + macN(2), "evicting machine", "mac=" + macN(1)} {
		if !strings.Contains(out, want) {
			t.Errorf("log lacks %q:\n%s", want, out)
		}
	}
}

type writerFunc func([]byte) (int, error)

func (f writerFunc) Write(p []byte) (int, error) { return f(p) }

// ReportWanted may read the list: it runs without the list's lock.
func TestReportWantedMayReadTheList(t *testing.T) {
	var got []int
	var l *discovery.List
	l, clk := newList(t, discovery.Config{ReportWanted: func() { got = append(got, len(l.Snapshot().Entries)) }})
	l.Seen(discovery.Sighting{MAC: hwid.MustParseMAC(macN(1))})
	l.Seen(discovery.Sighting{MAC: hwid.MustParseMAC(macN(2))})
	l.Seen(discovery.Sighting{MAC: hwid.MustParseMAC(macN(3))})
	clk.Advance(time.Minute) // the trailing call, from the timer
	if diff := cmp.Diff([]int{1, 3}, got); diff != "" {
		t.Errorf("entries seen by ReportWanted (-want +got):\n%s", diff)
	}
}

func TestClockSetBack(t *testing.T) {
	l, clk := newList(t, discovery.Config{})
	l.Seen(discovery.Sighting{MAC: hwid.MustParseMAC(macA)})
	clk.Set(clk.Now().Add(-time.Hour))
	l.Seen(discovery.Sighting{MAC: hwid.MustParseMAC(macA)})
	e, ok := l.Get(hwid.MustParseMAC(macA))
	if !ok || !e.LastSeen.Equal(epoch) || !e.FirstSeen.Equal(epoch) || e.Count != 2 {
		t.Errorf("after the clock went back: %+v, %v; want first = last = %v, count 2", e, ok, epoch)
	}
}
