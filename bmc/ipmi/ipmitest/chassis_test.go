package ipmitest_test

import (
	"context"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/bettercompute/siteboot/bmc"
	"github.com/bettercompute/siteboot/bmc/ipmi/ipmitest"
	"github.com/bettercompute/siteboot/internal/testpeer"
)

// machine is a stand-in for a QEMU machine: a process the Chassis starts on power-on and
// kills on power-off, and whose life is the chassis' power state.
type machine struct {
	t       *testing.T
	c       *ipmitest.Chassis
	mu      sync.Mutex
	p       *testpeer.Process
	boots   []string // the boot device each power-on found
	actions []ipmitest.ChassisAction
}

func (m *machine) power(a ipmitest.ChassisAction) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.actions = append(m.actions, a)
	on := m.p != nil && !m.p.Exited()
	switch a {
	case ipmitest.ChassisOn:
		if on {
			return
		}
		m.boots = append(m.boots, m.c.Boot())
		m.c.SetBoot("default") // a one-time override is used up
		m.p = testpeer.Start(m.t, testpeer.Cmd{Path: "sleep", Args: []string{"600"}})
		m.c.SetPID(m.p.PID())
	case ipmitest.ChassisOff, ipmitest.ChassisSoftOff:
		if on {
			m.p.Kill()
			m.c.SetPID(0)
		}
	}
}

func (m *machine) state() ([]string, []ipmitest.ChassisAction) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return slices.Clone(m.boots), slices.Clone(m.actions)
}

// TestChassisHandsPowerToTheTest: with a Chassis, ipmi_sim's power calls reach the test in
// order, "get power" answers from whether the test's process lives (also after it ended on
// its own), and the boot device set through IPMI is what the next power-on finds.
func TestChassisHandsPowerToTheTest(t *testing.T) {
	m := &machine{t: t}
	m.c = &ipmitest.Chassis{Power: m.power}
	s := ipmitest.StartSim(t, ipmitest.SimOptions{Chassis: m.c})
	d := ipmitest.Dial(t, s.Target())
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()

	state := func() bmc.PowerState {
		t.Helper()
		st, err := d.PowerState(ctx)
		if err != nil {
			t.Fatal(err)
		}
		return st
	}
	waitState := func(want bmc.PowerState) {
		t.Helper()
		deadline := time.Now().Add(10 * time.Second)
		for state() != want {
			if time.Now().After(deadline) {
				t.Fatalf("power state never became %s", want)
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
	if st := state(); st != bmc.PowerOff {
		t.Fatalf("before any power-on: %s, want off", st)
	}
	if err := d.SetPower(ctx, bmc.PowerActionOn); err != nil {
		t.Fatal(err)
	}
	waitState(bmc.PowerOn)
	if err := d.SetBootDevice(ctx, bmc.BootDevice{Target: bmc.BootPXE}); err != nil {
		t.Fatal(err)
	}
	// A cycle of a running machine: ipmi_sim powers it off, then on again.
	if err := d.SetPower(ctx, bmc.PowerActionCycle); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(20 * time.Second)
	for {
		if boots, _ := m.state(); len(boots) == 2 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the cycle never powered the machine on again: %v", m.c.Calls())
		}
		time.Sleep(50 * time.Millisecond)
	}
	waitState(bmc.PowerOn)
	boots, actions := m.state()
	if diff := cmp.Diff([]string{"default", "pxe"}, boots); diff != "" {
		t.Errorf("boot devices found at power-on (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]ipmitest.ChassisAction{ipmitest.ChassisOn, ipmitest.ChassisOff, ipmitest.ChassisOn}, actions); diff != "" {
		t.Errorf("power calls handed to the test (-want +got):\n%s", diff)
	}
	calls := m.c.Calls()
	if diff := cmp.Diff([]string{"set power 1", "set boot pxe", "set power 0", "set power 1"}, ipmitest.SetCalls(calls)); diff != "" {
		t.Errorf("chassis set calls (-want +got):\n%s", diff)
	}
	for i, c := range calls {
		if c.At.IsZero() || (i > 0 && c.At.Before(calls[i-1].At)) || time.Since(c.At) > time.Minute {
			t.Errorf("call %d %q at %v: want its time, in order", i, c.Call, c.At)
		}
	}

	// The machine ends on its own (the ramdisk powers off): the BMC says off.
	m.mu.Lock()
	m.p.Kill()
	m.mu.Unlock()
	waitState(bmc.PowerOff)
}
