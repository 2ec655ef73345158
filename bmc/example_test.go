package bmc_test

import (
	"context"
	"errors"
	"fmt"

	"github.com/bettercompute/siteboot/bmc"
	"github.com/bettercompute/siteboot/bmc/bmctest"
	"github.com/bettercompute/siteboot/bmc/redfish"
)

// A host registers the drivers it supports, opens one per machine, and asserts for the
// capabilities an operation needs. The BMC here is bmctest's fake on the DMTF mockup.
func Example() {
	srv := bmctest.NewServer(bmctest.Options{})
	defer srv.Close()

	reg := bmc.NewRegistry()
	_ = reg.Register("redfish", redfish.Config{})

	ctx := context.Background()
	d, err := reg.Open(ctx, bmc.Target{Driver: "redfish", Address: srv.URL,
		Username: bmctest.DefaultUsername, Password: bmctest.DefaultPassword})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer d.Close()

	if bc, ok := d.(bmc.BootController); ok {
		err := bc.SetBootDevice(ctx, bmc.BootDevice{Target: bmc.BootPXE, Mode: bmc.BootModeUEFI})
		fmt.Println("boot override:", err)
	}
	// The control plane's request carries an operation id: a retry of the same request is
	// answered from the journal instead of cycling the machine again.
	var runner bmc.Runner
	pc := d.(bmc.PowerController)
	for range 2 {
		err := runner.Run(ctx, "req-7f3a", "power", func(ctx context.Context) error {
			return pc.SetPower(ctx, bmc.PowerActionCycle)
		})
		fmt.Println("cycle:", err)
	}
	fmt.Println("boots seen by the BMC:", srv.Boots())

	if inv, err := d.(bmc.Inspector).Inspect(ctx); err == nil {
		fmt.Println("uuid:", inv.UUID, "nics:", len(inv.NICs))
	}

	_, err = reg.Open(ctx, bmc.Target{Driver: "amt", Address: "192.0.2.10"})
	fmt.Println(errors.Is(err, bmc.ErrUnsupportedDriver))
	// Output:
	// boot override: <nil>
	// cycle: <nil>
	// cycle: <nil>
	// boots seen by the BMC: [{Pxe UEFI}]
	// uuid: 38947555-7742-3448-3784-823347823834 nics: 2
	// true
}
