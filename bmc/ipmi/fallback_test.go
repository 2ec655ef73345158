package ipmi_test

import (
	"errors"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/bettercompute/siteboot/bmc"
	"github.com/bettercompute/siteboot/bmc/ipmi"
	"github.com/bettercompute/siteboot/bmc/ipmi/ipmitest"
	"github.com/bettercompute/siteboot/hwid"
)

// pyghmi's BMC (the IPMI stack of virtualbmc) answers Chassis Control power cycle with
// 0xcc: the driver sends power down, waits for off, then power up.
func TestPowerCycleFallsBackToOffThenOn(t *testing.T) {
	p := ipmitest.StartPyghmi(t)
	d := ipmitest.Dial(t, p.Target())
	if err := d.SetPower(ctx(t), bmc.PowerActionOn); err != nil {
		t.Fatal(err)
	}
	if err := d.SetPower(ctx(t), bmc.PowerActionCycle); err != nil {
		t.Fatalf("cycle: %v", err)
	}
	want := []string{"powered on", "abruptly remove power", "powered on"}
	// The BMC logs each action on its stdout as it acts; the line can reach the test a
	// moment after the answer did, so read until three are in (bounded: 5 s).
	got := p.Actions()
	for deadline := time.Now().Add(5 * time.Second); len(got) < len(want) && time.Now().Before(deadline); got = p.Actions() {
		time.Sleep(20 * time.Millisecond)
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("BMC actions (-want +got):\n%s", diff)
	}
	if st, err := d.PowerState(ctx(t)); err != nil || st != bmc.PowerOn {
		t.Errorf("after the cycle: %s, %v", st, err)
	}
}

// Inspection reads each part on its own: a part the BMC refuses is named, the rest kept.
func TestInspectIsPartial(t *testing.T) {
	t.Run("pyghmi refuses Get System GUID", func(t *testing.T) {
		p := ipmitest.StartPyghmi(t)
		d := ipmitest.Dial(t, p.Target())
		inv, err := d.Inspect(ctx(t))
		checkPartial(t, err, "system-guid", bmc.ErrUnsupported, "0xc1")
		if inv.HasUUID {
			t.Errorf("a UUID was invented: %v", inv.UUID)
		}
		if got, want := inv.BMCMAC.String(), ipmitest.PyghmiMAC; got != want {
			t.Errorf("BMC MAC %s, want %s", got, want)
		}
		if diff := cmp.Diff([]netip.Addr{netip.MustParseAddr(ipmitest.PyghmiIP)}, inv.BMCAddrs, cmp.Comparer(func(a, b netip.Addr) bool { return a == b })); diff != "" {
			t.Errorf("BMC addrs (-want +got):\n%s", diff)
		}
	})
	t.Run("ipmi_sim refuses the LAN address", func(t *testing.T) {
		s := startSim(t)
		d := dial(t, s)
		s.FailLAN(t, "ip_addr")
		inv, err := d.Inspect(ctx(t))
		checkPartial(t, err, "lan-address", bmc.ErrRefused, "0xff")
		raw, _ := hwid.ParseUUID(simGUID)
		if !inv.HasUUID || inv.UUIDRaw != raw {
			t.Errorf("GUID lost: %+v", inv)
		}
		if inv.BMCMAC.String() != ipmitest.MAC || len(inv.BMCAddrs) != 0 {
			t.Errorf("MAC %s, addrs %v", inv.BMCMAC, inv.BMCAddrs)
		}
		// Once the BMC answers again, the inspection is whole.
		s.FailLAN(t)
		if _, err := d.Inspect(ctx(t)); err != nil {
			t.Errorf("whole inspection: %v", err)
		}
	})
}

func checkPartial(t *testing.T, err error, part string, kind error, code string) {
	t.Helper()
	var pe *bmc.PartialError
	if !errors.As(err, &pe) {
		t.Fatalf("error %v is not a *bmc.PartialError", err)
	}
	if diff := cmp.Diff([]string{part}, pe.Failed()); diff != "" {
		t.Errorf("failed parts (-want +got):\n%s", diff)
	}
	if !errors.Is(err, bmc.ErrPartial) || !errors.Is(err, kind) || bmc.KindOf(err) != bmc.ErrPartial {
		t.Errorf("error %v: want ErrPartial and %v", err, kind)
	}
	var oe *bmc.OpError
	if !errors.As(pe.Parts[0].Err, &oe) || oe.Code != code || oe.Driver != ipmi.Name {
		t.Errorf("part error %+v, want code %s", oe, code)
	}
	if !strings.Contains(err.Error(), part) {
		t.Errorf("error %q does not name %s", err, part)
	}
}

// ipmi_sim refuses Open Session with a 2-byte reply once its sessions are used up: the
// error is ErrNoSession, and a session frees a slot when closed.
func TestNoFreeSession(t *testing.T) {
	s := startSim(t)
	var open []*ipmi.Driver
	defer func() {
		for _, d := range open {
			_ = d.Close()
		}
	}()
	var err error
	for range 100 {
		var d *ipmi.Driver
		d, err = ipmi.Dial(ctx(t), ipmi.Config{CipherSuites: []int{3}}, s.target())
		if err != nil {
			break
		}
		open = append(open, d)
	}
	if err == nil {
		t.Fatalf("%d sessions opened and none refused", len(open))
	}
	t.Logf("ipmi_sim refused session %d: %v", len(open)+1, err)
	kindIs(t, err, bmc.ErrNoSession)
	if strings.Contains(err.Error(), "too short") {
		t.Errorf("error shows go-ipmi's decode message: %v", err)
	}
	_ = open[0].Close()
	open = open[1:]
	d, err := ipmi.Dial(ctx(t), ipmi.Config{CipherSuites: []int{3}}, s.target())
	if err != nil {
		t.Fatalf("after closing one session: %v", err)
	}
	open = append(open, d)
}
