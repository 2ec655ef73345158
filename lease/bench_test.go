package lease_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/bettercompute/siteboot/lease"
	"github.com/bettercompute/siteboot/lease/leasetest"
)

// BenchmarkTickAll1000Memory: passes over 1,000 sites on the in-memory store (every tick a
// renewal, so every tick writes); reports site ticks per second.
func BenchmarkTickAll1000Memory(b *testing.B) {
	for _, par := range []int{1, lease.DefaultParallel} {
		b.Run(fmt.Sprintf("parallel=%d", par), func(b *testing.B) {
			leasetest.BenchmarkTickAll(b, &lease.MemoryStore{}, 1000, par)
		})
	}
}

// BenchmarkTick: the pure decision alone.
func BenchmarkTick(b *testing.B) {
	rec := lease.Record{Site: "s", Holder: "b", Epoch: 3, Expires: t0.Add(time.Second), TTL: 15 * time.Second}
	agents := []lease.Agent{{Node: "a", Site: "s", Beat: 1}, {Node: "b", Site: "s", Beat: 2}, {Node: "c", Site: "s", Beat: 3}}
	for b.Loop() {
		if d := lease.Tick(rec, agents, t0, 15*time.Second); d.Change != lease.Renewed {
			b.Fatal(d.Change)
		}
	}
}

// BenchmarkFenceActive: what every proxy DHCP answer and boot script pays.
func BenchmarkFenceActive(b *testing.B) {
	var f lease.Fence
	f.Observe(lease.Word{Holds: true, Epoch: 1, TTL: time.Hour, Beat: f.Heartbeat()})
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			if _, ok := f.Active(); !ok {
				b.Fatal("inactive")
			}
		}
	})
}
