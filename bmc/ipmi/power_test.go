package ipmi_test

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/bettercompute/siteboot/bmc"
	"github.com/bettercompute/siteboot/bmc/ipmi"
	"github.com/bettercompute/siteboot/bmc/ipmi/ipmitest"
	"github.com/bettercompute/siteboot/internal/testpeer"
)

// guest is a machine behind ipmi_sim's chassis: a process started at power-on and killed
// at power-off; a graceful off (soft-off) is carried out after shutdownAfter, or never when
// it is negative (an OS that ignores the ACPI request).
type guest struct {
	t             *testing.T
	c             *ipmitest.Chassis
	shutdownAfter time.Duration

	mu sync.Mutex
	p  *testpeer.Process
}

func (g *guest) power(a ipmitest.ChassisAction) {
	g.mu.Lock()
	defer g.mu.Unlock()
	on := g.p != nil && !g.p.Exited()
	switch a {
	case ipmitest.ChassisOn:
		if !on {
			g.p = testpeer.Start(g.t, testpeer.Cmd{Path: "sleep", Args: []string{"600"}})
			g.c.SetPID(g.p.PID())
		}
	case ipmitest.ChassisOff:
		if on {
			g.p.Kill()
			g.c.SetPID(0)
		}
	case ipmitest.ChassisSoftOff:
		if on && g.shutdownAfter >= 0 {
			p := g.p
			time.AfterFunc(g.shutdownAfter, func() {
				p.Kill()
				g.c.SetPID(0)
			})
		}
	}
}

// TestGracefulOffIsConfirmed: a graceful off returns once the machine reports off, and
// is ErrTimeout when it never does within PowerTimeout, as on the Redfish driver.
func TestGracefulOffIsConfirmed(t *testing.T) {
	for _, tc := range []struct {
		name          string
		shutdownAfter time.Duration
		wantErr       bool
	}{
		{"the OS shuts down after a while", 1500 * time.Millisecond, false},
		{"the OS ignores the request", -1, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := &guest{t: t, shutdownAfter: tc.shutdownAfter}
			g.c = &ipmitest.Chassis{Power: g.power}
			s := ipmitest.StartSim(t, ipmitest.SimOptions{Chassis: g.c})
			c, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			const timeout = 3 * time.Second
			d, err := ipmi.Dial(c, ipmi.Config{CipherSuites: []int{3}, PowerTimeout: timeout}, s.Target())
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = d.Close() })
			if err := d.SetPower(c, bmc.PowerActionOn); err != nil {
				t.Fatal(err)
			}
			if st, err := d.PowerState(c); err != nil || st != bmc.PowerOn {
				t.Fatalf("after power on: %s, %v", st, err)
			}
			start := time.Now()
			err = d.SetPower(c, bmc.PowerActionOff)
			took := time.Since(start)
			st, serr := d.PowerState(c)
			if serr != nil {
				t.Fatal(serr)
			}
			if tc.wantErr {
				kindIs(t, err, bmc.ErrTimeout)
				if !strings.Contains(err.Error(), "still reports on") || took < timeout {
					t.Errorf("after %v: %v", took, err)
				}
				if st != bmc.PowerOn {
					t.Errorf("the machine is %s", st)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if st != bmc.PowerOff || took < tc.shutdownAfter {
				t.Errorf("graceful off returned after %v with the machine %s; it shuts down after %v",
					took, st, tc.shutdownAfter)
			}
		})
	}
}
