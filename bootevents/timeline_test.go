package bootevents_test

import (
	"encoding/json"
	"fmt"
	"math"
	"net/netip"
	"runtime"
	"testing"
	"time"

	"github.com/bettercompute/siteboot/bootevents"
	"github.com/bettercompute/siteboot/clock/clocktest"
	"github.com/bettercompute/siteboot/hwid"
	"github.com/google/go-cmp/cmp"
)

var (
	macA  = hwid.MustParseMAC("52:54:00:00:00:0a")
	macB  = hwid.MustParseMAC("52:54:00:00:00:0b")
	t0    = time.Date(2026, 12, 5, 10, 0, 0, 0, time.UTC)
	addrA = netip.MustParseAddr("192.0.2.10")
)

func newTimeline(t *testing.T, c bootevents.Config) *bootevents.Timeline {
	t.Helper()
	tl, err := bootevents.NewTimeline(c)
	if err != nil {
		t.Fatal(err)
	}
	return tl
}

func at(s float64) time.Time { return t0.Add(time.Duration(s * float64(time.Second))) }

// spoofed returns the i-th MAC of a flood.
func spoofed(i int) hwid.MAC {
	return hwid.MAC{0x02, 0xee, byte(i >> 24), byte(i >> 16), byte(i >> 8), byte(i)}
}

func TestTimelineFloodStaysWithinBound(t *testing.T) {
	c := bootevents.Config{MaxMachines: 1000, BootsPerMachine: 2, EventsPerBoot: 8, LinesPerBoot: 4}
	tl := newTimeline(t, c)
	// a real machine, answered, before the flood
	tl.Emit(bootevents.Event{Time: at(0), MAC: macA, Stage: bootevents.StageDHCPv4, Outcome: bootevents.OutcomeOK, Reason: "answered"})

	runtime.GC()
	var before runtime.MemStats
	runtime.ReadMemStats(&before)
	const flood = 100_000
	for i := range flood {
		mac := spoofed(i)
		id := bootevents.BootIDOf(fmt.Sprint("nonce-", i))
		boots, events := 1, 2
		if i%100 == 0 || i >= flood-10 { // some send more than a boot holds, over more boots than kept
			boots, events = 3, 12
		}
		for j := range boots {
			for k := range events {
				tl.Emit(bootevents.Event{
					Time: at(float64(i) + float64(j)*1000), MAC: mac, BootID: id, Stage: bootevents.StageDHCPv4,
					Outcome: bootevents.OutcomeRefused, Reason: fmt.Sprint("reason-", (i+k)%300), Detail: string(make([]byte, 500)) + "x",
					Addr: netip.AddrFrom4([4]byte{10, byte(i >> 16), byte(i >> 8), byte(i)}),
				})
			}
			for range 6 {
				tl.Emit(bootevents.Event{Time: at(float64(i) + float64(j)*1000), MAC: mac, Stage: bootevents.StageConsole, Outcome: bootevents.OutcomeLog, Detail: "line"})
			}
		}
	}
	runtime.GC()
	var after runtime.MemStats
	runtime.ReadMemStats(&after)

	if n := tl.Len(); n != c.MaxMachines {
		t.Errorf("Len() = %d after %d spoofed MACs, want the bound %d", n, flood, c.MaxMachines)
	}
	if _, ok := tl.Machine(macA); !ok {
		t.Errorf("the answered machine was pushed out by a flood of machines never answered")
	}
	grew := int64(after.HeapAlloc) - int64(before.HeapAlloc)
	if bound := int64(c.MaxBytes()); grew > bound {
		t.Errorf("heap grew %d bytes, above the stated bound MaxBytes() = %d", grew, bound)
	}
	t.Logf("heap grew %d bytes for %d machines held; MaxBytes() = %d", grew, tl.Len(), c.MaxBytes())
	for i := flood - 10; i < flood; i++ {
		m, ok := tl.Machine(spoofed(i))
		if !ok {
			t.Fatalf("the newest spoofed MAC %d is not held", i)
		}
		if len(m.Boots) > c.BootsPerMachine {
			t.Errorf("%d boots held, bound %d", len(m.Boots), c.BootsPerMachine)
		}
		for _, b := range m.Boots {
			if len(b.Events) > c.EventsPerBoot || len(b.Console) > c.LinesPerBoot || len(b.IDs) > bootevents.IDsPerBoot {
				t.Errorf("boot holds %d events, %d lines, %d ids: over the bounds", len(b.Events), len(b.Console), len(b.IDs))
			}
			for _, e := range b.Events {
				if len(e.Detail) > bootevents.MaxDetail || len(e.Reason) > bootevents.MaxReason {
					t.Errorf("detail of %d bytes, reason %q kept", len(e.Detail), e.Reason)
				}
			}
		}
	}
	st := tl.Stats()
	if st.MachinesEvicted != flood+1-uint64(c.MaxMachines) || st.Machines != uint64(c.MaxMachines) {
		t.Errorf("Stats = %+v", st)
	}
	// Boot ids and addresses of evicted machines lead nowhere.
	if _, _, ok := tl.ByBootID(bootevents.BootIDOf("nonce-0")); ok {
		t.Errorf("the boot id of an evicted machine still finds it")
	}
	if _, ok := tl.MACOf(netip.AddrFrom4([4]byte{10, 0, 0, 0})); ok {
		t.Errorf("the address of an evicted machine still finds it")
	}
}

func TestTimelineBootsAndLookups(t *testing.T) {
	tl := newTimeline(t, bootevents.Config{BootsPerMachine: 2})
	id := bootevents.BootIDOf("abc")
	ev := []bootevents.Event{
		{Time: at(0), MAC: macA, Stage: bootevents.StageDHCPv4, Outcome: bootevents.OutcomeOK},
		{Time: at(0.1), MAC: macA, Stage: bootevents.StageBoot4011, Outcome: bootevents.OutcomeOK, Addr: addrA},
		// TFTP knows only the address
		{Time: at(0.2), Peer: netip.AddrPortFrom(addrA, 2070), Stage: bootevents.StageTFTP, Outcome: bootevents.OutcomeOK, Detail: "undionly.kpxe", Bytes: 70000},
		// iPXE's DHCP is the same boot
		{Time: at(2), MAC: macA, Stage: bootevents.StageDHCPv4, IPXE: true, Outcome: bootevents.OutcomeOK, BootID: id},
		{Time: at(2.5), MAC: macA, Stage: bootevents.StageScript, Outcome: bootevents.OutcomeOK, BootID: id},
		// a console line naming only the address
		{Time: at(3), Peer: netip.AddrPortFrom(addrA, 514), Stage: bootevents.StageConsole, Outcome: bootevents.OutcomeLog, Reason: "info", Detail: "ipxe: booting\x1b[0m"},
	}
	for _, e := range ev {
		tl.Emit(e)
	}
	m, ok := tl.Machine(macA)
	if !ok || len(m.Boots) != 1 {
		t.Fatalf("Machine = %+v, %v; want one boot", m, ok)
	}
	b := m.Boots[0]
	if len(b.Events) != 5 || b.Events[2].MAC != macA || len(b.Console) != 1 || b.Console[0].Text != "ipxe: booting[0m" {
		t.Errorf("boot = %+v", b)
	}
	if diff := cmp.Diff([]bootevents.BootID{id}, b.IDs); diff != "" {
		t.Errorf("IDs (-want +got):\n%s", diff)
	}
	got, i, ok := tl.ByBootID(id)
	if !ok || got.MAC != macA || i != 0 {
		t.Errorf("ByBootID = %v %d %v", got.MAC, i, ok)
	}
	// The firmware's next DHCP begins a new boot; a third pushes out the first.
	tl.Emit(bootevents.Event{Time: at(60), MAC: macA, Stage: bootevents.StageDHCPv4, Outcome: bootevents.OutcomeOK})
	tl.Emit(bootevents.Event{Time: at(61), MAC: macA, Stage: bootevents.StageTFTP, Outcome: bootevents.OutcomeOK})
	tl.Emit(bootevents.Event{Time: at(62), MAC: macA, Stage: bootevents.StageDHCPv4, Outcome: bootevents.OutcomeOK})
	m, _ = tl.Machine(macA)
	if len(m.Boots) != 2 || !m.Boots[1].Start.Equal(at(62)) || !m.Boots[0].Start.Equal(at(60)) {
		t.Errorf("boots start %v", m.Boots)
	}
	if _, _, ok := tl.ByBootID(id); ok {
		t.Errorf("a pushed-out boot is still found by its id")
	}
	// Silence longer than BootGap begins a new boot too.
	tl.Emit(bootevents.Event{Time: at(62).Add(bootevents.DefaultBootGap + time.Second), MAC: macA, Stage: bootevents.StageBMC, Outcome: bootevents.OutcomeOK})
	m, _ = tl.Machine(macA)
	if last, _ := m.Last(); len(last.Events) != 1 || last.Events[0].Stage != bootevents.StageBMC {
		t.Errorf("after the gap, last boot = %+v", last)
	}
	// An event that leads to no machine is counted, not kept.
	tl.Emit(bootevents.Event{Peer: netip.MustParseAddrPort("198.51.100.9:1000"), Stage: bootevents.StageTFTP})
	if st := tl.Stats(); st.Unattributed != 1 {
		t.Errorf("Unattributed = %d", st.Unattributed)
	}
}

func TestTimelineFullBootKeepsHeadAndLatest(t *testing.T) {
	tl := newTimeline(t, bootevents.Config{EventsPerBoot: 8})
	for i := range 20 {
		tl.Emit(bootevents.Event{Time: at(float64(i)), MAC: macB, Stage: bootevents.StageDHCPv4, Outcome: bootevents.OutcomeRefused, Detail: fmt.Sprint(i)})
	}
	m, _ := tl.Machine(macB)
	b := m.Boots[0]
	var got []string
	for _, e := range b.Events {
		got = append(got, e.Detail)
	}
	want := []string{"0", "1", "14", "15", "16", "17", "18", "19"}
	if diff := cmp.Diff(want, got); diff != "" || b.EventsDropped != 12 {
		t.Errorf("kept (-want +got):\n%s dropped %d", diff, b.EventsDropped)
	}
}

func TestTimelineResolve(t *testing.T) {
	clk := clocktest.New(t0)
	tl := newTimeline(t, bootevents.Config{Clock: clk, Resolve: func(a netip.Addr) (hwid.MAC, bool) { return macA, a == addrA }})
	tl.Emit(bootevents.Event{MAC: macA, Stage: bootevents.StageDHCPv4, Outcome: bootevents.OutcomeOK})
	tl.Emit(bootevents.Event{Peer: netip.AddrPortFrom(addrA, 3000), Stage: bootevents.StageTFTP, Outcome: bootevents.OutcomeOK})
	m, _ := tl.Machine(macA)
	if n := len(m.Boots[0].Events); n != 2 || !m.Boots[0].Events[0].Time.Equal(t0) {
		t.Errorf("events %+v", m.Boots[0].Events)
	}
}

func TestMachineJSONRoundTrip(t *testing.T) {
	tl := newTimeline(t, bootevents.Config{})
	tl.Emit(bootevents.Event{Time: at(0), MAC: macA, Stage: bootevents.StageDHCPv4, Outcome: bootevents.OutcomeRefused, Reason: "arch-mismatch",
		Arch: hwid.ArchBIOS, HasArch: true, Peer: netip.MustParseAddrPort("192.0.2.1:68"), BootID: bootevents.BootIDOf("n")})
	tl.Emit(bootevents.Event{Time: at(1), MAC: macA, Stage: bootevents.StageConsole, Outcome: bootevents.OutcomeLog, Detail: "hello", Reason: "notice"})
	m, _ := tl.Machine(macA)
	b, err := json.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	var back bootevents.Machine
	if err := json.Unmarshal(b, &back); err != nil {
		t.Fatalf("%v\n%s", err, b)
	}
	again, _ := json.Marshal(back)
	if diff := cmp.Diff(string(b), string(again)); diff != "" || back.Boots[0].Events[0].Arch != hwid.ArchBIOS || !back.Boots[0].Events[0].HasArch {
		t.Errorf("round trip (-want +got):\n%s", diff)
	}
	var raw map[string]any
	_ = json.Unmarshal(b, &raw)
	ev := raw["boots"].([]any)[0].(map[string]any)["events"].([]any)[0].(map[string]any)
	if ev["arch"] != "bios" || ev["stage"] != "dhcpv4" || ev["outcome"] != "refused" || ev["mac"] != "52:54:00:00:00:0a" {
		t.Errorf("event JSON = %v", ev)
	}
}

func TestConfigValidate(t *testing.T) {
	var tooMany int64 = math.MaxInt32 + 1 // past a slot's int32 (negative where int is 32 bits: invalid too)
	for _, c := range []bootevents.Config{{MaxMachines: -1}, {EventsPerBoot: 2}, {EventsPerBoot: bootevents.MaxEventsPerBoot + 1}, {BootGap: -time.Second}, {MaxMachines: int(tooMany)}} {
		if _, err := bootevents.NewTimeline(c); bootevents.ReasonOf(err) != "invalid" {
			t.Errorf("NewTimeline(%+v) = %v", c, err)
		}
	}
}

func TestBootID(t *testing.T) {
	a, b := bootevents.BootIDOf("nonce-a"), bootevents.BootIDOf("nonce-b")
	if a == b || a.IsZero() || !bootevents.BootIDOf("").IsZero() || a != bootevents.BootIDOf("nonce-a") {
		t.Errorf("BootIDOf: %v %v", a, b)
	}
	p, err := bootevents.ParseBootID(a.String())
	if err != nil || p != a {
		t.Errorf("ParseBootID(%s) = %v, %v", a, p, err)
	}
	for _, s := range []string{"xyz", "0123456789abcdeg", "0123456789abcdef0"} {
		if _, err := bootevents.ParseBootID(s); bootevents.ReasonOf(err) != "bad-boot-id" {
			t.Errorf("ParseBootID(%q) = %v", s, err)
		}
	}
	var s bootevents.Stage
	if err := s.UnmarshalText([]byte("warp")); bootevents.ReasonOf(err) != "bad-name" {
		t.Errorf("Stage.UnmarshalText = %v", err)
	}
}

func TestTeeAndNil(t *testing.T) {
	if bootevents.Tee(nil, nil) != nil {
		t.Errorf("Tee of nothing is not nil: components would build events nobody hears")
	}
	var n int
	s := bootevents.Tee(bootevents.SinkFunc(func(bootevents.Event) { n++ }), nil, bootevents.SinkFunc(func(bootevents.Event) { n += 10 }))
	s.Emit(bootevents.Event{})
	if n != 11 {
		t.Errorf("n = %d", n)
	}
}

func BenchmarkTimelineEmit(b *testing.B) {
	tl, _ := bootevents.NewTimeline(bootevents.Config{})
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		tl.Emit(bootevents.Event{Time: at(float64(i / 8)), MAC: spoofed(i / 8 % 4000), Stage: bootevents.Stage(1 + i%8), Outcome: bootevents.OutcomeOK, Reason: "answered"})
		i++
	}
}

// TestTimelineKeepsEveryField: a Timeline keeps its events packed; what it gives back is
// each event as emitted, every field (an IPv6 peer with its zone, an event stamped before
// its boot began, the largest values), in order, and a boot that overflows keeps its first
// quarter and its latest.
func TestTimelineKeepsEveryField(t *testing.T) {
	tl := newTimeline(t, bootevents.Config{EventsPerBoot: 8})
	uuid := hwid.MustParseUUID("4c4c4544-0031-3510-8052-b4c04f4e4b32")
	id := bootevents.BootIDOf("a nonce")
	evs := []bootevents.Event{
		{Time: at(10), MAC: macA, Stage: bootevents.StageDHCPv4, Outcome: bootevents.OutcomeOK, Reason: "answered",
			Peer: netip.MustParseAddrPort("192.0.2.10:68"), Addr: addrA, Arch: hwid.ArchX86_64EFI, HasArch: true,
			UUID: uuid, HasUUID: true, Bytes: 300},
		{Time: at(9.5), MAC: macA, BootID: id, Stage: bootevents.StageDHCPv6, Outcome: bootevents.OutcomeRefused,
			Reason: "declined", Peer: netip.MustParseAddrPort("[fe80::1%eth0]:546"), Addr: netip.MustParseAddr("2001:db8::10"),
			IPXE: true, Detail: "détail ünicode"},
		{Time: at(11), MAC: macA, BootID: id, Stage: bootevents.StageTFTP, Outcome: bootevents.OutcomeFailed,
			Reason: "timeout", Bytes: 1<<64 - 1, Duration: 1<<63 - 1, Detail: "ipxe.efi"},
		{Time: at(12), MAC: macA, Stage: bootevents.StageScript, Outcome: bootevents.OutcomeOK, Duration: -time.Second,
			Arch: hwid.Arch(0xffff), HasArch: true},
	}
	for i := range 8 { // 4 + 8 = 12 events into a boot of 8: 4 dropped
		evs = append(evs, bootevents.Event{Time: at(13 + float64(i)), MAC: macA, Stage: bootevents.StageCache,
			Outcome: bootevents.OutcomeOK, Reason: "served", Bytes: uint64(i), Detail: fmt.Sprint("sha256:", i)})
	}
	for _, e := range evs {
		tl.Emit(e)
	}
	m, ok := tl.Machine(macA)
	if !ok || len(m.Boots) != 1 {
		t.Fatalf("Machine = %+v, %v; want one boot", m, ok)
	}
	b := m.Boots[0]
	// EventsPerBoot 8: the first quarter (2) is kept, then the latest 6.
	want := append(append([]bootevents.Event{}, evs[:2]...), evs[6:]...)
	if diff := cmp.Diff(want, b.Events, cmp.Comparer(func(a, b netip.Addr) bool { return a == b }),
		cmp.Comparer(func(a, b netip.AddrPort) bool { return a == b }),
		cmp.Comparer(func(a, b time.Time) bool { return a.Equal(b) })); diff != "" {
		t.Errorf("events (-want +got):\n%s", diff)
	}
	// Both of the machine's addresses, IPv4 and IPv6, lead to it, and only those.
	for _, a := range []string{"192.0.2.10", "2001:db8::10", "::ffff:192.0.2.10"} {
		if mac, ok := tl.MACOf(netip.MustParseAddr(a)); !ok || mac != macA {
			t.Errorf("MACOf(%s) = %v, %v; want %v", a, mac, ok, macA)
		}
	}
	for _, a := range []string{"192.0.2.11", "2001:db8::11", "::", "0.0.0.0"} {
		if mac, ok := tl.MACOf(netip.MustParseAddr(a)); ok {
			t.Errorf("MACOf(%s) = %v, want none", a, mac)
		}
	}
	if b.EventsDropped != 4 || !b.Start.Equal(at(10)) || !b.Last.Equal(at(20)) {
		t.Errorf("boot dropped %d, start %v, last %v; want 4, %v, %v", b.EventsDropped, b.Start, b.Last, at(10), at(20))
	}
}

// TestTimelineKeysMove: an address and a boot id that another machine presents move to
// it; the first machine keeps its events but is no longer found by them, and pushing out
// its boots or the machine itself leaves the second found. Console lines stay with their
// boot as older boots give way.
func TestTimelineKeysMove(t *testing.T) {
	tl := newTimeline(t, bootevents.Config{MaxMachines: 2, BootsPerMachine: 2})
	id := bootevents.BootIDOf("shared")
	dhcp := func(s float64, mac hwid.MAC, id bootevents.BootID) bootevents.Event {
		return bootevents.Event{Time: at(s), MAC: mac, BootID: id, Stage: bootevents.StageDHCPv4, Outcome: bootevents.OutcomeOK, Addr: addrA}
	}
	line := func(s float64, text string) bootevents.Event {
		return bootevents.Event{Time: at(s), Peer: netip.AddrPortFrom(addrA, 514), Stage: bootevents.StageConsole, Outcome: bootevents.OutcomeLog, Detail: text}
	}
	tl.Emit(dhcp(0, macA, id))
	tl.Emit(line(1, "a's line"))
	tl.Emit(dhcp(2, macB, id))
	tl.Emit(line(3, "b's line"))
	if mac, ok := tl.MACOf(addrA); !ok || mac != macB {
		t.Errorf("MACOf = %v, %v; want %v", mac, ok, macB)
	}
	if m, _, ok := tl.ByBootID(id); !ok || m.MAC != macB {
		t.Errorf("ByBootID = %v, %v; want %v", m.MAC, ok, macB)
	}
	a, _ := tl.Machine(macA)
	if len(a.Addrs) != 0 || len(a.Boots) != 1 || len(a.Boots[0].Events) != 1 || len(a.Boots[0].Console) != 1 || a.Boots[0].Console[0].Text != "a's line" {
		t.Errorf("A = %+v", a)
	}
	// A's boots give way to new ones: B is still found by the id.
	tl.Emit(bootevents.Event{Time: at(1000), MAC: macA, Stage: bootevents.StageBMC, Outcome: bootevents.OutcomeOK})
	tl.Emit(bootevents.Event{Time: at(2000), MAC: macA, Stage: bootevents.StageBMC, Outcome: bootevents.OutcomeOK})
	if m, _, ok := tl.ByBootID(id); !ok || m.MAC != macB {
		t.Errorf("after A's boot went, ByBootID = %v, %v; want %v", m.MAC, ok, macB)
	}
	// B's console lines follow its boots: new boots begin, the first gives way.
	tl.Emit(bootevents.Event{Time: at(3000), MAC: macB, Stage: bootevents.StageBMC, Outcome: bootevents.OutcomeOK})
	tl.Emit(line(3001, "b's second boot"))
	b, _ := tl.Machine(macB)
	if len(b.Boots) != 2 || len(b.Boots[0].Console) != 1 || b.Boots[0].Console[0].Text != "b's line" ||
		len(b.Boots[1].Console) != 1 || b.Boots[1].Console[0].Text != "b's second boot" {
		t.Errorf("B = %+v", b)
	}
	tl.Emit(bootevents.Event{Time: at(4000), MAC: macB, Stage: bootevents.StageBMC, Outcome: bootevents.OutcomeOK})
	b, _ = tl.Machine(macB)
	if len(b.Boots) != 2 || len(b.Boots[0].Console) != 1 || b.Boots[0].Console[0].Text != "b's second boot" || len(b.Boots[1].Console) != 0 {
		t.Errorf("B after its third boot = %+v", b)
	}
	if _, _, ok := tl.ByBootID(id); ok {
		t.Errorf("the id of B's pushed-out boot still finds it")
	}
	// A third machine pushes out A (the least recently heard of): B stays found by address.
	tl.Emit(bootevents.Event{Time: at(5000), MAC: hwid.MAC{2, 0, 0, 0, 0, 0xc}, Stage: bootevents.StageDHCPv4, Outcome: bootevents.OutcomeOK})
	if _, ok := tl.Machine(macA); ok {
		t.Errorf("A was not pushed out")
	}
	if mac, ok := tl.MACOf(addrA); !ok || mac != macB {
		t.Errorf("after A went, MACOf = %v, %v; want %v", mac, ok, macB)
	}
}
