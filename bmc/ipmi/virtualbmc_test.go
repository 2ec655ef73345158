package ipmi_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/bettercompute/siteboot/bmc"
	"github.com/bettercompute/siteboot/bmc/ipmi"
	"github.com/bettercompute/siteboot/bmc/ipmi/ipmitest"
)

// TestQEMUVirtualBMC drives a real QEMU machine through virtualbmc, which answers power
// cycle with 0xcc and Get System GUID and the LAN parameters with 0xc1, and success to boot
// devices it does not carry out.
func TestQEMUVirtualBMC(t *testing.T) {
	v := ipmitest.StartVirtualBMC(t)
	// virtualbmc answers a power command only once libvirt has started or stopped the QEMU
	// process, which a loaded machine can make take longer than the default attempts (2 s,
	// sent 3 times): one attempt here waits as long as that start may take.
	d, err := ipmi.Dial(ctx(t), ipmi.Config{CipherSuites: []int{3}, Timeout: 15 * time.Second}, v.Target())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = d.Close() })
	long := func() context.Context {
		c, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		t.Cleanup(cancel)
		return c
	}
	if st, err := d.PowerState(ctx(t)); err != nil || st != bmc.PowerOff {
		t.Fatalf("a defined domain: %s, %v", st, err)
	}
	if err := d.SetBootDevice(ctx(t), bmc.BootDevice{Target: bmc.BootPXE}); err != nil {
		t.Fatal(err)
	}
	if x := v.Virsh(t, "dumpxml", ipmitest.VirtualBMCDomain); !strings.Contains(x, "<boot dev='network'/>") {
		t.Errorf("boot device not network:\n%s", x)
	}
	// virtualbmc answers success to BIOS setup and to no override, and keeps the device it
	// had: read back, that is ErrDiffers naming what it kept.
	for _, target := range []bmc.BootTarget{bmc.BootBIOSSetup, bmc.BootNone} {
		err := d.SetBootDevice(ctx(t), bmc.BootDevice{Target: target})
		kindIs(t, err, bmc.ErrDiffers)
		if !strings.Contains(err.Error(), "kept pxe") {
			t.Errorf("%s: %v", target, err)
		}
		if got, err := d.BootDevice(ctx(t)); err != nil || got != bmc.BootPXE {
			t.Errorf("after %s the BMC reads %q, %v", target, got, err)
		}
	}
	if err := d.SetPower(long(), bmc.PowerActionOn); err != nil {
		t.Fatal(err)
	}
	if st := v.Virsh(t, "domstate", ipmitest.VirtualBMCDomain); st != "running" {
		t.Fatalf("after power on the domain is %q", st)
	}
	before := v.Virsh(t, "domid", ipmitest.VirtualBMCDomain)
	// virtualbmc refuses Chassis Control power cycle (0xcc): the driver powers the domain
	// off, waits for off, and on again: a new QEMU process, so a new domain id.
	if err := d.SetPower(long(), bmc.PowerActionCycle); err != nil {
		t.Fatalf("cycle: %v", err)
	}
	after := v.Virsh(t, "domid", ipmitest.VirtualBMCDomain)
	if st := v.Virsh(t, "domstate", ipmitest.VirtualBMCDomain); st != "running" || after == before {
		t.Errorf("after the cycle: state %q, domain id %s (was %s)", st, after, before)
	}
	// Inspection: virtualbmc answers none of the parts; each is named.
	_, err = d.Inspect(ctx(t))
	var oe *bmc.OpError
	if !errors.As(err, &oe) || !errors.Is(err, bmc.ErrUnsupported) || oe.Code != "0xc1" {
		t.Fatalf("inspect: %v", err)
	}
	for _, part := range []string{"system-guid", "lan-address", "lan-mac"} {
		if !strings.Contains(err.Error(), part) {
			t.Errorf("error %q does not name %s", err, part)
		}
	}
	if err := d.SetPower(long(), bmc.PowerActionForceOff); err != nil {
		t.Fatal(err)
	}
	if st := v.Virsh(t, "domstate", ipmitest.VirtualBMCDomain); st != "shut off" {
		t.Errorf("after force off: %q", st)
	}
}
