package bmc_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/bettercompute/siteboot/bmc"
	"github.com/bettercompute/siteboot/bmc/bmctest"
	"github.com/bettercompute/siteboot/bmc/redfish"
)

// TestQuirkPersistentBootNotSupportedRearmedOnEachPowerOn: Lenovo XCC refuses a
// persistent boot override (BootSourceOverrideEnabled Continuous is not in its list), so
// Ironic sets a one-time override before each power-on instead (Ironic's redfish
// management interface, "persistent boot not supported": it re-applies the boot device
// on every power-on). BootKeeper does the same: the machine boots from PXE on every
// power-on, where the driver alone gives PXE to the first boot only. Profile:
// bmctest.LenovoXCC.
func TestQuirkPersistentBootNotSupportedRearmedOnEachPowerOn(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	open := func(t *testing.T, o bmctest.Options) (*bmctest.Server, *redfish.Driver) {
		srv := bmctest.NewServer(o)
		t.Cleanup(srv.Close)
		d, err := redfish.Dial(ctx, redfish.Config{SettleTime: time.Millisecond, PollInterval: time.Millisecond},
			bmc.Target{Driver: redfish.Name, Address: srv.URL, Username: bmctest.DefaultUsername, Password: bmctest.DefaultPassword})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = d.Close() })
		return srv, d
	}
	pxe := bmc.BootDevice{Target: bmc.BootPXE, Mode: bmc.BootModeUEFI, Persistent: true}
	boots := func(t *testing.T, srv *bmctest.Server, pc bmc.PowerController) []string {
		t.Helper()
		for _, a := range []bmc.PowerAction{bmc.PowerActionForceOff, bmc.PowerActionOn, bmc.PowerActionReset,
			bmc.PowerActionForceOff, bmc.PowerActionOn} {
			if err := pc.SetPower(ctx, a); err != nil {
				t.Fatalf("SetPower(%s): %v", a, err)
			}
		}
		return bootTargets(srv)
	}

	t.Run("driver alone", func(t *testing.T) {
		srv, d := open(t, bmctest.Options{Vendor: bmctest.LenovoXCC})
		if err := d.SetBootDevice(ctx, pxe); !errors.Is(err, bmc.ErrUnsupported) {
			t.Fatalf("persistent PXE on XCC: %v, want unsupported", err)
		}
		if err := d.SetBootDevice(ctx, bmc.BootDevice{Target: bmc.BootPXE, Mode: bmc.BootModeUEFI}); err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff([]string{"Pxe", "None", "None"}, boots(t, srv, d)); diff != "" {
			t.Errorf("boots (-want +got):\n%s", diff)
		}
	})
	t.Run("kept", func(t *testing.T) {
		srv, d := open(t, bmctest.Options{Vendor: bmctest.LenovoXCC})
		k := bmc.NewBootKeeper(d)
		if err := k.SetBootDevice(ctx, pxe); err != nil {
			t.Fatalf("persistent PXE through the keeper: %v", err)
		}
		if dev, ok := k.Kept(); !ok || dev.Target != bmc.BootPXE || dev.Persistent {
			t.Errorf("Kept() = %+v, %v; want one-time PXE", dev, ok)
		}
		if diff := cmp.Diff([]string{"Pxe", "Pxe", "Pxe"}, boots(t, srv, k)); diff != "" {
			t.Errorf("boots (-want +got):\n%s", diff)
		}
		// A one-time override ends the keeping.
		if err := k.SetBootDevice(ctx, bmc.BootDevice{Target: bmc.BootDisk}); err != nil {
			t.Fatal(err)
		}
		if _, ok := k.Kept(); ok {
			t.Error("still kept after a one-time override")
		}
	})
	t.Run("a BMC that keeps it is left alone", func(t *testing.T) {
		_, d := open(t, bmctest.Options{})
		k := bmc.NewBootKeeper(d)
		if err := k.SetBootDevice(ctx, pxe); err != nil {
			t.Fatal(err)
		}
		if _, ok := k.Kept(); ok {
			t.Error("a persistent override the BMC keeps is re-armed too")
		}
	})
}
