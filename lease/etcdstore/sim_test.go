package etcdstore_test

import (
	"flag"
	"fmt"
	"testing"
	"time"

	"github.com/bettercompute/siteboot/lease"
	"github.com/bettercompute/siteboot/lease/etcdstore"
	"github.com/bettercompute/siteboot/lease/etcdstore/internal/etcdpeer"
	"github.com/bettercompute/siteboot/lease/internal/leasesim"
)

var simFlags = func() *leasesim.Flags {
	f := leasesim.RegisterFlags(flag.CommandLine)
	flag.IntVar(&f.Steps, "lease.sim.etcdsteps", 3000, "steps per seed of the simulation on etcd")
	return f
}()

// TestSimulationEtcd runs the lease package's faulty simulation with a real etcd (Debian's
// etcd-server, started on loopback) as the store: the same invariants hold.
func TestSimulationEtcd(t *testing.T) {
	peer := etcdpeer.Start(t)
	run := time.Now().UnixNano()
	leasesim.OnStore(t, *simFlags, func(i int) lease.Store {
		return &lease.RegisterStore{Register: &etcdstore.Register{Client: peer.Client}, Prefix: fmt.Sprintf("/sim/%d/%d/", run, i)}
	})
}
