package lease_test

import (
	"flag"
	"fmt"
	"testing"
	"time"

	"github.com/bettercompute/siteboot/lease/etcdstore"
	"github.com/bettercompute/siteboot/lease/internal/etcdpeer"
)

var simEtcdSteps = flag.Int("lease.sim.etcdsteps", 3000, "steps per seed of the simulation on etcd")

// TestSimulationEtcd runs the faulty simulation with a real etcd (Debian's etcd-server,
// started on loopback) as the store: the same invariants hold.
func TestSimulationEtcd(t *testing.T) {
	peer := etcdpeer.Start(t)
	seeds := simSeedsToRun()
	if *simSeed == 0 {
		seeds = seeds[:min(len(seeds), 3)]
	}
	// A seed of its own may happen to have no write conflict; the run as a whole must have
	// some, or the store's compare-and-swap was never tested against a rival.
	conflicts := 0
	for i, seed := range seeds {
		cfg := simFaulty
		cfg.Steps = *simEtcdSteps
		cfg.Store = &etcdstore.Store{Client: peer.Client, Prefix: fmt.Sprintf("/sim/%d/%d/", time.Now().UnixNano(), i)}
		s := newSim(cfg, seed)
		if err := s.run(0); err != nil {
			t.Fatal(err)
		}
		checkFinalRecord(t, s)
		conflicts += s.conflicts
		t.Logf("seed %d on etcd: %d steps, %v simulated, %d promotions, %d conflicts, final epoch %d",
			seed, s.steps, s.now.Round(time.Second), s.promotions, s.conflicts, s.store.cur.Epoch)
	}
	if conflicts == 0 {
		t.Errorf("no write conflict in %d seeds: the compare-and-swap was never contested", len(seeds))
	}
}
