package ipmi_test

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/bettercompute/siteboot/bmc"
	"github.com/bettercompute/siteboot/bmc/ipmi"
)

// Opening a session, setting a one-time PXE boot in UEFI mode and cycling the power. (Not
// run: it needs a BMC; the tests run the same against ipmi_sim.)
func Example() {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	d, err := ipmi.Dial(ctx, ipmi.Config{}, bmc.Target{Address: "192.0.2.21", Username: "ADMIN", Password: "secret"})
	switch {
	case errors.Is(err, bmc.ErrAuth):
		fmt.Println("check the credentials held for this BMC")
		return
	case err != nil:
		fmt.Println(err)
		return
	}
	defer d.Close()
	if err := d.SetBootDevice(ctx, bmc.BootDevice{Target: bmc.BootPXE, Mode: bmc.BootModeUEFI}); err != nil {
		fmt.Println(err)
		return
	}
	if err := d.SetPower(ctx, bmc.PowerActionCycle); err != nil {
		fmt.Println(err)
		return
	}
	inv, _ := d.Inspect(ctx)
	fmt.Println(inv.UUID, inv.NICsKnown) // NICsKnown is false: IPMI cannot list host NICs
}
