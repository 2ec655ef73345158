package etcdstore_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/bettercompute/siteboot/lease"
	"github.com/bettercompute/siteboot/lease/etcdstore"
	"github.com/bettercompute/siteboot/lease/etcdstore/internal/etcdpeer"
	"github.com/bettercompute/siteboot/lease/leasetest"
)

// BenchmarkTickAll1000Etcd: passes of a controller over 1,000 sites on a real etcd
// (Debian's etcd-server 3.4 on loopback, data dir on /dev/shm when present); every tick is
// a linearizable read and a transaction that renews. Reports site ticks per second.
func BenchmarkTickAll1000Etcd(b *testing.B) {
	peer := etcdpeer.Start(b)
	for _, par := range []int{1, lease.DefaultParallel, 32} {
		b.Run(fmt.Sprintf("parallel=%d", par), func(b *testing.B) {
			store := &lease.RegisterStore{Register: &etcdstore.Register{Client: peer.Client}, Prefix: fmt.Sprintf("/bench/%d/", time.Now().UnixNano())}
			leasetest.BenchmarkTickAll(b, store, 1000, par)
		})
	}
}
