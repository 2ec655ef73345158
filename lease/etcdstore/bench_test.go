package etcdstore_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/bettercompute/siteboot/lease"
	"github.com/bettercompute/siteboot/lease/etcdstore"
	"github.com/bettercompute/siteboot/lease/internal/etcdpeer"
	"github.com/bettercompute/siteboot/lease/leasetest"
)

// BenchmarkTickAll1000Etcd: passes of a controller over 1,000 sites on a real etcd
// (Debian's etcd-server 3.4 on loopback, data dir on /dev/shm when present); every tick is
// a linearizable read and a transaction that renews. Reports site ticks per second.
func BenchmarkTickAll1000Etcd(b *testing.B) {
	peer := etcdpeer.Start(b)
	for _, par := range []int{1, lease.DefaultParallel, 32} {
		b.Run(fmt.Sprintf("parallel=%d", par), func(b *testing.B) {
			const n = 1000
			fl := staticFleet{agents: map[string][]lease.Agent{}}
			for i := range n {
				s := fmt.Sprintf("site-%04d", i)
				fl.sites = append(fl.sites, s)
				fl.agents[s] = []lease.Agent{{Node: s + "-a", Site: s, Beat: 1}, {Node: s + "-b", Site: s, Beat: 1}}
			}
			store := &etcdstore.Store{Client: peer.Client, Prefix: fmt.Sprintf("/bench/%d/", time.Now().UnixNano())}
			c := &lease.Controller{Store: store, Fleet: fl, Parallel: par, Clock: leasetest.NewClock()}
			ctx := context.Background()
			if err := c.TickAll(ctx); err != nil {
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
		})
	}
}
