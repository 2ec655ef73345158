package lease_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/bettercompute/siteboot/lease"
)

// manySites is a Fleet of n sites with two connected agents each.
type manySites struct {
	sites  []string
	agents map[string][]lease.Agent
}

func newManySites(n int) *manySites {
	m := &manySites{agents: make(map[string][]lease.Agent, n)}
	for i := range n {
		s := fmt.Sprintf("site-%04d", i)
		m.sites = append(m.sites, s)
		m.agents[s] = []lease.Agent{{Node: s + "-a", Site: s, Beat: 1}, {Node: s + "-b", Site: s, Beat: 1}}
	}
	return m
}

func (m *manySites) Sites(context.Context) ([]string, error) { return m.sites, nil }

func (m *manySites) Connected(_ context.Context, site string) ([]lease.Agent, error) {
	return m.agents[site], nil
}

// BenchmarkTickAll1000Memory: passes over 1,000 sites on the in-memory store (every tick a
// renewal, so every tick writes); reports site ticks per second.
func BenchmarkTickAll1000Memory(b *testing.B) {
	for _, par := range []int{1, lease.DefaultParallel} {
		b.Run(fmt.Sprintf("parallel=%d", par), func(b *testing.B) {
			benchTickAll(b, &lease.MemoryStore{}, 1000, par)
		})
	}
}

// benchTickAll runs b.N passes of a controller over n sites.
func benchTickAll(b *testing.B, store lease.Store, n, par int) {
	fl := newManySites(n)
	c := &lease.Controller{Store: store, Fleet: fl, Parallel: par, Clock: newFakeClock()}
	ctx := context.Background()
	if err := c.TickAll(ctx); err != nil { // acquire every lease first
		b.Fatal(err)
	}
	b.ResetTimer()
	start := time.Now()
	for b.Loop() {
		if err := c.TickAll(ctx); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(n*b.N)/time.Since(start).Seconds(), "ticks/s")
	if st := c.Stats(); st.Changes[lease.Renewed] != uint64(n*b.N) {
		b.Fatalf("%d renewals, want %d", st.Changes[lease.Renewed], n*b.N)
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
