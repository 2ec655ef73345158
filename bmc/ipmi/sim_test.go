package ipmi_test

import (
	"testing"

	"github.com/bettercompute/siteboot/bmc"
	"github.com/bettercompute/siteboot/bmc/ipmi"
	"github.com/bettercompute/siteboot/bmc/ipmi/ipmitest"
)

// The simulated BMC is ipmitest's ipmi_sim; these are short names for its tests.
const (
	simUser = ipmitest.User
	simPass = ipmitest.Pass
	simGUID = ipmitest.GUID
)

type sim struct {
	*ipmitest.Sim
	addr string
	port int
}

// startSim starts ipmi_sim on a free loopback port, or skips (fails when peers are
// required) when it is not installed.
func startSim(t testing.TB) *sim { return startSimWith(t, ipmitest.SimOptions{}) }

func startSimWith(t testing.TB, o ipmitest.SimOptions) *sim {
	t.Helper()
	s := ipmitest.StartSim(t, o)
	return &sim{Sim: s, addr: s.Addr, port: s.Port}
}

func (s *sim) target() bmc.Target { return s.Target() }

// calls returns the chassis-control calls made so far and forgets them.
func (s *sim) calls(t testing.TB) []string { return s.Calls(t) }

// sets returns only the "set ..." calls.
func sets(calls []string) []string { return ipmitest.Sets(calls) }

func (s *sim) ipmitool(t testing.TB, pass string, args ...string) (string, error) {
	t.Helper()
	return s.Ipmitool(t, pass, args...)
}

func (s *sim) ipmitoolAs(t testing.TB, user, pass string, args ...string) (string, error) {
	t.Helper()
	return ipmitest.Ipmitool(t, s.port, user, pass, args...)
}

func (s *sim) mustIpmitool(t testing.TB, args ...string) string {
	t.Helper()
	return s.MustIpmitool(t, args...)
}

// dial opens our driver with cipher suite 3 pinned.
func dial(t testing.TB, s *sim) *ipmi.Driver {
	t.Helper()
	return ipmitest.Dial(t, s.target())
}
