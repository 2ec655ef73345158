package discovery_test

import (
	"fmt"
	"net/netip"
	"testing"
	"time"

	"github.com/bettercompute/siteboot/discovery"
	"github.com/bettercompute/siteboot/hwid"
)

func benchList(b *testing.B, c discovery.Config) *discovery.List {
	b.Helper()
	l, err := discovery.NewList(c)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { l.Close() })
	return l
}

// BenchmarkSeen measures one sighting on the system clock: a machine already listed, a
// stream of new machines evicting old ones (with the report throttle), a zero MAC, and
// known machines from all cores at once.
func BenchmarkSeen(b *testing.B) {
	macs := make([]hwid.MAC, 4096)
	for i := range macs {
		macs[i] = hwid.MustParseMAC(macN(i))
	}
	full := func(mac hwid.MAC) discovery.Sighting {
		return discovery.Sighting{MAC: mac, UUID: uA, Arch: hwid.ArchX86_64EFI, HasArch: true, Relay: netip.MustParseAddr("198.51.100.1")}
	}
	b.Run("known", func(b *testing.B) {
		l := benchList(b, discovery.Config{})
		s := full(mA)
		b.ReportAllocs()
		for b.Loop() {
			l.Seen(s)
		}
	})
	b.Run("new", func(b *testing.B) {
		l := benchList(b, discovery.Config{ReportWanted: func() {}})
		b.ReportAllocs()
		i := 0
		for b.Loop() {
			l.Seen(full(macs[i%len(macs)]))
			i++
		}
	})
	b.Run("zero-mac", func(b *testing.B) {
		l := benchList(b, discovery.Config{})
		s := full(hwid.MAC{})
		b.ReportAllocs()
		for b.Loop() {
			l.Seen(s)
		}
	})
	b.Run("known-parallel", func(b *testing.B) {
		l := benchList(b, discovery.Config{})
		b.ReportAllocs()
		b.RunParallel(func(pb *testing.PB) {
			i := 0
			for pb.Next() {
				l.Seen(full(macs[i%discovery.DefaultMax]))
				i++
			}
		})
	})
}

func BenchmarkSnapshot(b *testing.B) {
	l := benchList(b, discovery.Config{})
	for i := range discovery.DefaultMax {
		l.Seen(discovery.Sighting{MAC: hwid.MustParseMAC(macN(i)), UUID: hwid.MustParseUUID(uuidA), Arch: hwid.ArchX86_64EFI, HasArch: true, Relay: netip.MustParseAddr("198.51.100.1")})
	}
	b.Run("unchanged", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			l.Snapshot()
		}
	})
	b.Run("changed", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			l.Seen(discovery.Sighting{MAC: hwid.MustParseMAC(macA)})
			l.Snapshot()
		}
	})
}

// BenchmarkMerge merges the full lists of N agents that saw half of each other's machines.
func BenchmarkMerge(b *testing.B) {
	now := epoch.Add(time.Hour)
	for _, agents := range []int{1, 2, 4, 8} {
		lists := make([]discovery.AgentList, agents)
		for a := range lists {
			lists[a].AgentID = fmt.Sprintf("node_%d", a)
			for i := a * 128; i < a*128+discovery.DefaultMax; i++ {
				at := now.Add(-time.Duration(i) * time.Second)
				lists[a].Entries = append(lists[a].Entries, discovery.Entry{MAC: hwid.MustParseMAC(macN(i)), ProductUUID: uuidA, Arch: "7",
					FirstSeen: at, LastSeen: at, Count: 3})
			}
		}
		b.Run(fmt.Sprintf("agents=%d", agents), func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				discovery.Merge(now, lists...)
			}
		})
	}
}

func BenchmarkMatch(b *testing.B) {
	now := epoch.Add(time.Minute)
	u := hwid.MustParseUUID(uuidA)
	var seen []discovery.Merged
	for i := range discovery.DefaultMax {
		seen = append(seen, discovery.Merged{MAC: hwid.MustParseMAC(macN(i)), ProductUUID: "8f1c0e2a-1b2c-4d5e-9f00-1122334455ff",
			FirstSeen: epoch, LastSeen: epoch})
	}
	seen[100].ProductUUID = u.SMBIOS().String()
	site := make([]discovery.Machine, 1000)
	for i := range site {
		site[i] = discovery.Machine{ID: fmt.Sprint("m", i), UUID: hwid.MustParseUUID(fmt.Sprintf("8f1c0e2a-1b2c-4d5e-9f00-%012x", i))}
	}
	q := discovery.Query{MachineID: "m0", UUID: u, PoweredAt: epoch, Now: now, Seen: seen, Site: site}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := discovery.Match(q); err != nil {
			b.Fatal(err)
		}
	}
}
