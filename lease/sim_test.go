package lease_test

import (
	"flag"
	"testing"

	"github.com/bettercompute/siteboot/lease/internal/leasesim"
)

// The simulation itself is in lease/internal/leasesim, so that the etcd store's module runs it
// too; its flags (-lease.sim.seeds, -lease.sim.steps, -lease.sim.seed) replay a seed.
var simFlags = leasesim.RegisterFlags(flag.CommandLine)

// TestSimulation runs the fenced lease under every fault over many seeds (fresh each run; a
// failure prints its seed and the command that replays it).
func TestSimulation(t *testing.T) { leasesim.Simulation(t, *simFlags) }

// TestSimulationCatchesNaiveFence: the same simulation, run with a fence measured from the
// word's arrival, finds two agents active at once.
func TestSimulationCatchesNaiveFence(t *testing.T) { leasesim.CatchesNaiveFence(t, *simFlags) }

// TestSimulationFailover: the holder is cut off at a random moment of a calm run; the standby
// is active no earlier than the old holder's fence ended and within the bound after expiry.
func TestSimulationFailover(t *testing.T) { leasesim.Failover(t, *simFlags) }
