package redfish_test

import (
	"context"
	"errors"
	"fmt"

	"github.com/bettercompute/siteboot/bmc"
	"github.com/bettercompute/siteboot/bmc/bmctest"
	"github.com/bettercompute/siteboot/bmc/redfish"
)

// Against a fake Lenovo XCC: a one-time PXE boot is accepted, a persistent one is refused
// with a typed error, and Close logs the session out.
func Example() {
	srv := bmctest.NewServer(bmctest.Options{Vendor: bmctest.LenovoXCC, TLS: true})
	defer srv.Close()

	ctx := context.Background()
	d, err := redfish.Dial(ctx, redfish.Config{}, bmc.Target{
		Address:    srv.URL,
		Username:   bmctest.DefaultUsername,
		Password:   bmctest.DefaultPassword,
		CertSHA256: srv.CertificateSHA256(), // trust this BMC's self-signed certificate
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println("sessions:", srv.Sessions())

	err = d.SetBootDevice(ctx, bmc.BootDevice{Target: bmc.BootPXE})
	fmt.Println("once:", err)
	err = d.SetBootDevice(ctx, bmc.BootDevice{Target: bmc.BootPXE, Persistent: true})
	fmt.Println("persistent unsupported:", errors.Is(err, bmc.ErrUnsupported))

	_ = d.Close()
	fmt.Println("sessions:", srv.Sessions())
	// Output:
	// sessions: 1
	// once: <nil>
	// persistent unsupported: true
	// sessions: 0
}
