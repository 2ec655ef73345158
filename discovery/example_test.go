package discovery_test

import (
	"errors"
	"fmt"
	"net/netip"
	"time"

	"github.com/bettercompute/siteboot/clock/clocktest"
	"github.com/bettercompute/siteboot/discovery"
	"github.com/bettercompute/siteboot/hwid"
)

// The agent's side: proxy DHCP and the boot handler report what machines without a boot
// entry sent, raw; the list keeps only what is well-formed.
func Example() {
	list, err := discovery.NewList(discovery.Config{
		DHCPFirst:    true, // this agent runs proxy DHCP
		ReportWanted: func() { fmt.Println("status report wanted") },
	})
	if err != nil {
		panic(err)
	}
	defer list.Close()

	// Proxy DHCP: a UEFI machine through a relay, with the fields proxy DHCP parsed.
	list.Seen(discovery.Sighting{
		MAC:     hwid.MustParseMAC("3C-EC-EF-12-34-56"),
		UUID:    hwid.MustParseUUID("4C4C4544-0031-3510-8052-B4C04F4E4B32"),
		Arch:    hwid.ArchX86_64EFI,
		HasArch: true,
		Relay:   netip.MustParseAddr("198.51.100.1"),
	})
	// Its iPXE script fetch: it counts, and keeps what DHCP said.
	list.Seen(discovery.Sighting{MAC: hwid.MustParseMAC("3c:ec:ef:12:34:56"), Via: discovery.ViaHTTP})
	// A zero MAC drops the sighting; so does a script fetch DHCP never showed.
	list.Seen(discovery.Sighting{})
	list.Seen(discovery.Sighting{MAC: hwid.MustParseMAC("52:54:00:00:00:01"), Via: discovery.ViaHTTP})

	snap := list.Snapshot()
	for _, e := range snap.Entries {
		fmt.Println(e.MAC, e.ProductUUID, e.Arch, e.Relay, e.Count)
	}
	fmt.Println(snap.Digest == discovery.DigestOf(snap.Entries))

	// The MAC got a boot entry: it leaves the list.
	mac, _ := hwid.ParseMAC("3c:ec:ef:12:34:56")
	fmt.Println(list.Forget(mac), list.Len())
	// Output:
	// status report wanted
	// 3c:ec:ef:12:34:56 4c4c4544-0031-3510-8052-b4c04f4e4b32 x86_64-efi 198.51.100.1 2
	// true
	// 1 0
}

// The control plane's side: merge the agents' lists, then name the candidate of a machine
// enrolled by UUID right after powering it on.
func ExampleMatch() {
	powerAt := time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)
	now := powerAt.Add(2 * time.Minute)
	uuid, _ := hwid.ParseUUID("4c4c4544-0031-3510-8052-b4c04f4e4b32")
	mac, _ := hwid.ParseMAC("3c:ec:ef:12:34:56")
	seen := func(at time.Time, count uint64) discovery.Entry {
		// The firmware reports the UUID in SMBIOS byte order.
		return discovery.Entry{MAC: mac, ProductUUID: uuid.SMBIOS().String(), Arch: "7",
			FirstSeen: at, LastSeen: at, Count: count}
	}
	merged := discovery.Merge(now,
		discovery.AgentList{AgentID: "node_a", Entries: []discovery.Entry{seen(powerAt.Add(40*time.Second), 3)}},
		discovery.AgentList{AgentID: "node_b", Entries: []discovery.Entry{seen(powerAt.Add(41*time.Second), 2)}},
	)
	fmt.Println(len(merged), merged[0].Count, merged[0].AgentIDs)

	q := discovery.Query{MachineID: "node_m1", UUID: uuid, PoweredAt: powerAt, Now: now, Seen: merged}
	c, err := discovery.Match(q)
	fmt.Println(c.MAC, err)

	// The same MAC is already another machine's.
	q.Site = []discovery.Machine{{ID: "node_m2", MACs: []hwid.MAC{mac}}}
	_, err = discovery.Match(q)
	fmt.Println(discovery.ReasonOf(err), errors.Is(err, discovery.ErrMACEnrolled))
	// Output:
	// 1 5 [node_a node_b]
	// 3c:ec:ef:12:34:56 <nil>
	// mac-enrolled true
}

// The identity backstop, once the booted ramdisk reports its own UUID and NICs.
func ExampleIdentity_Verify() {
	enrolled, _ := hwid.ParseUUID("4c4c4544-0031-3510-8052-b4c04f4e4b32")
	mac, _ := hwid.ParseMAC("3c:ec:ef:12:34:56")
	other, _ := hwid.ParseMAC("3c:ec:ef:12:34:57")
	id := discovery.Identity{
		EnrolledUUID: enrolled,
		MAC:          mac,
		MACSource:    discovery.MACDiscovered,
		ReportedUUID: enrolled.Reversed(), // as IPMI prints it
		ReportedNICs: []hwid.MAC{other, mac},
	}
	fmt.Println(id.Verify())
	id.ReportedNICs = []hwid.MAC{other}
	fmt.Println(id.Verify())
	// Output:
	// <nil>
	// discovery: machine-identity-mismatch: reported NICs do not include 3c:ec:ef:12:34:56
}

// A host watches the machines proxy DHCP answered; one that asks for nothing within the
// window most likely took another server's boot file, and is named once.
func ExampleSilent() {
	clk := clocktest.New(time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC))
	silent, err := discovery.NewSilent(discovery.SilentConfig{Window: 5 * time.Minute, Clock: clk})
	if err != nil {
		fmt.Println(err)
		return
	}
	quiet, booted := hwid.MAC{0x52, 0x54, 0, 0, 0, 1}, hwid.MAC{0x52, 0x54, 0, 0, 0, 2}
	silent.Answered(quiet) // proxy DHCP's answers
	silent.Answered(booted)
	silent.Asked(booted) // its script request

	clk.Advance(5 * time.Minute)
	for _, mac := range silent.Sweep() { // on the host's ticker
		fmt.Println("answered, then asked for nothing:", mac)
	}
	fmt.Println("silent:", silent.Stats().Silent)
	// Output:
	// answered, then asked for nothing: 52:54:00:00:00:01
	// silent: 1
}
