package bootevents_test

import (
	"fmt"
	"net/netip"
	"runtime"
	"testing"
	"time"

	"github.com/bettercompute/siteboot/bootevents"
	"github.com/bettercompute/siteboot/hwid"
)

// stormBoot emits what the agent's components report of one machine's boot in the boot
// storm (bench/storm): DHCP, an aborted and a whole TFTP read, iPXE's DHCP, the bind, the
// assertion, the script and three images from the cache.
func stormBoot(tl bootevents.Sink, i int, start time.Time) {
	for _, e := range stormEvents(i, start) {
		tl.Emit(e)
	}
}

func stormEvents(i int, start time.Time) []bootevents.Event {
	mac := hwid.MAC{0x52, 0x54, 0x00, 0x5c, byte(i >> 8), byte(i)}
	addr := netip.AddrFrom4([4]byte{127, 1, byte(i >> 8), byte(i)})
	uuid := hwid.UUID{0x4c, 0x4c, 0x45, 0x44, 14: byte(i >> 8), 15: byte(i)}
	id := bootevents.BootIDOf(fmt.Sprint("nonce-", i))
	dhcp := netip.AddrPortFrom(addr, 68)
	tftp := netip.AddrPortFrom(addr, 32982)
	http := netip.AddrPortFrom(addr, 48131)
	ms := func(f float64) time.Time { return start.Add(time.Duration(f * float64(time.Millisecond))) }
	return []bootevents.Event{
		{Time: ms(0), MAC: mac, Stage: bootevents.StageDHCPv4, Outcome: bootevents.OutcomeOK, Reason: "answered", Peer: dhcp, Addr: addr, Bytes: 300, Arch: hwid.ArchX86_64EFI, HasArch: true, UUID: uuid, HasUUID: true},
		{Time: ms(0.1), Stage: bootevents.StageTFTP, Outcome: bootevents.OutcomeFailed, Reason: "aborted", Peer: tftp, Duration: 534731, Detail: "ipxe.efi"},
		{Time: ms(14.6), MAC: mac, BootID: id, Stage: bootevents.StageDHCPv4, Outcome: bootevents.OutcomeOK, Reason: "answered", Peer: dhcp, Addr: addr, IPXE: true, Bytes: 300, Arch: hwid.ArchX86_64EFI, HasArch: true, UUID: uuid, HasUUID: true},
		{Time: ms(0.7), Stage: bootevents.StageTFTP, Outcome: bootevents.OutcomeOK, Reason: "ok", Peer: tftp, Bytes: 1 << 20, Duration: 13999833, Detail: "ipxe.efi"},
		{Time: ms(16), MAC: mac, BootID: id, Stage: bootevents.StageBind, Outcome: bootevents.OutcomeOK, Reason: "bound", Peer: netip.AddrPortFrom(addr, 0)},
		{Time: ms(16.9), MAC: mac, BootID: id, Stage: bootevents.StageAssertion, Outcome: bootevents.OutcomeOK, Peer: netip.AddrPortFrom(addr, 0), Bytes: 198},
		{Time: ms(16.9), MAC: mac, BootID: id, Stage: bootevents.StageScript, Outcome: bootevents.OutcomeOK, Peer: netip.AddrPortFrom(addr, 0), Addr: addr, IPXE: true, UUID: uuid, HasUUID: true},
		{Time: ms(18.3), Stage: bootevents.StageCache, Outcome: bootevents.OutcomeOK, Reason: "served", Peer: http, Bytes: 1 << 20, Duration: 894202, Detail: "sha256:161023b77c0f"},
		{Time: ms(18.9), Stage: bootevents.StageCache, Outcome: bootevents.OutcomeOK, Reason: "served", Peer: http, Bytes: 1 << 20, Duration: 531084, Detail: "sha256:65f78a7ee52a"},
		{Time: ms(20.8), Stage: bootevents.StageCache, Outcome: bootevents.OutcomeOK, Reason: "served", Peer: http, Bytes: 4 << 20, Duration: 1591229, Detail: "sha256:745a857112e2"},
	}
}

// TestTimelineStormCost: the memory a Timeline holds for machines whose one boot went
// well (the boot storm's), and what it allocates to get there.
func TestTimelineStormCost(t *testing.T) {
	const machines = 4000
	tl := newTimeline(t, bootevents.Config{})
	runtime.GC()
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	for i := range machines {
		stormBoot(tl, i, at(float64(i)/100))
	}
	runtime.GC()
	runtime.ReadMemStats(&after)
	held := (int64(after.HeapAlloc) - int64(before.HeapAlloc)) / machines
	alloc := int64(after.TotalAlloc-before.TotalAlloc) / machines
	mallocs := int64(after.Mallocs-before.Mallocs) / machines
	t.Logf("per machine: %d bytes held, %d bytes and %d allocations made", held, alloc, mallocs)
	// The package's stated cost of a machine whose boot went well (doc.go).
	if held > 320 {
		t.Errorf("a machine whose boot went well holds %d bytes, above the stated 320", held)
	}
	if mallocs > 16 && !raceEnabled {
		t.Errorf("%d allocations a machine, for 10 events", mallocs)
	}
	if n := tl.Len(); n != machines {
		t.Fatalf("Len() = %d, want %d", n, machines)
	}
	m, _ := tl.Machine(hwid.MAC{0x52, 0x54, 0x00, 0x5c, 0, 7})
	if len(m.Boots) != 1 || len(m.Boots[0].Events) != 10 {
		t.Fatalf("machine 7: %d boots, want 1 of 10 events: %+v", len(m.Boots), m)
	}
	runtime.KeepAlive(tl)
}

// BenchmarkTimelineStormBoot: one op is one machine's boot in the storm, ten events, into
// a Timeline holding 4,000 machines (each boot after a machine's first begins a new one).
func BenchmarkTimelineStormBoot(b *testing.B) {
	tl, _ := bootevents.NewTimeline(bootevents.Config{})
	const machines = 4000
	boots := make([][]bootevents.Event, machines)
	for i := range boots {
		boots[i] = stormEvents(i, at(float64(i)/100))
	}
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		for _, e := range boots[i%machines] {
			tl.Emit(e)
		}
		i++
	}
}
