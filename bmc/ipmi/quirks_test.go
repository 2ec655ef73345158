package ipmi_test

import (
	"strings"
	"testing"

	"github.com/bettercompute/siteboot/bmc"
	"github.com/bettercompute/siteboot/bmc/ipmi/ipmitest"
)

// TestQuirkIDRAC10IgnoresIPMIBootDevice: iDRAC10 answers IPMI's Set System Boot Options
// with success and keeps the boot device it had (bmclib #461; sushy's iDRAC10 release
// note: the boot override goes through Redfish's settings object there). The driver reads
// the boot flags back and says so: ErrDiffers naming what the BMC kept and that Redfish is
// the way. Profile: pyghmi's BMC with IgnoreBootDevice.
func TestQuirkIDRAC10IgnoresIPMIBootDevice(t *testing.T) {
	p := ipmitest.StartPyghmiWith(t, ipmitest.PyghmiOptions{IgnoreBootDevice: true})
	d := ipmitest.Dial(t, p.Target())
	err := d.SetBootDevice(ctx(t), bmc.BootDevice{Target: bmc.BootPXE})
	kindIs(t, err, bmc.ErrDiffers)
	for _, w := range []string{"accepted boot device pxe", "but kept none", "Redfish"} {
		if !strings.Contains(err.Error(), w) {
			t.Errorf("error %q does not say %q", err, w)
		}
	}
	if got, err := d.BootDevice(ctx(t)); err != nil || got != bmc.BootNone {
		t.Errorf("BootDevice() = %q, %v; want none (ignored)", got, err)
	}
	// The same BMC that keeps what it is told is fine.
	p2 := ipmitest.StartPyghmi(t)
	if err := ipmitest.Dial(t, p2.Target()).SetBootDevice(ctx(t), bmc.BootDevice{Target: bmc.BootPXE}); err != nil {
		t.Errorf("a BMC that keeps the device: %v", err)
	}
}
