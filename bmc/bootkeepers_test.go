package bmc_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/bettercompute/siteboot/bmc"
	"github.com/bettercompute/siteboot/bmc/bmctest"
	"github.com/bettercompute/siteboot/bmc/redfish"
)

// keepersExecutor is an Executor over bmctest BMCs whose Wrap is keeps.Wrap.
func keepersExecutor(keeps *bmc.BootKeepers) *bmc.Executor {
	reg := bmc.NewRegistry()
	reg.Register(redfish.Name, redfish.Config{SettleTime: time.Millisecond, PollInterval: time.Millisecond})
	return &bmc.Executor{
		Opener: reg,
		Credentials: bmc.CredentialsFunc(func(context.Context, string) (bmc.Credential, error) {
			return bmc.Credential{Username: bmctest.DefaultUsername, Password: bmctest.DefaultPassword}, nil
		}),
		Sessions: &bmc.SessionPool{},
		Wrap:     keeps.Wrap,
	}
}

// bootTargets are the boot targets srv's machine booted from, in order.
func bootTargets(srv *bmctest.Server) []string {
	var out []string
	for _, b := range srv.Boots() {
		out = append(out, b.Target)
	}
	return out
}

// TestBootKeepersRearmEachPowerOn: Lenovo XCC refuses a persistent boot override. Through
// BootKeepers, a persistent SetBoot under KeepBoot succeeds there and is kept (Kept names
// it), and every power-on sent under KeepBoot afterwards, by later operations on the same
// BMC, boots the machine from PXE again. A BMC that keeps the override itself is left to
// keep it (nothing is Kept), and an operation without KeepBoot gets the driver as it is
// (XCC's refusal comes back).
func TestBootKeepersRearmEachPowerOn(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	pxe := bmc.BootDevice{Target: bmc.BootPXE, Mode: bmc.BootModeUEFI, Persistent: true}
	run := func(t *testing.T, vendor bmctest.Vendor, keep bool) (*bmctest.Server, *bmc.BootKeepers, bmc.TargetRef, []bmc.Result) {
		t.Helper()
		srv := bmctest.NewServer(bmctest.Options{Vendor: vendor})
		t.Cleanup(srv.Close)
		keeps := &bmc.BootKeepers{}
		e := keepersExecutor(keeps)
		t.Cleanup(func() { _ = e.Sessions.Close() })
		tg := bmc.TargetRef{Driver: redfish.Name, Address: srv.URL, Credential: "bmc/m"}
		octx := ctx
		if keep {
			octx = bmc.KeepBoot(ctx)
		}
		var out []bmc.Result
		for i, op := range []bmc.Op{bmc.SetBoot{Device: pxe}, bmc.SetPower{Action: bmc.PowerActionForceOff},
			bmc.SetPower{Action: bmc.PowerActionOn}, bmc.SetPower{Action: bmc.PowerActionCycle}} {
			out = append(out, e.RunOp(octx, fmt.Sprintf("op-%d", i), tg, op))
		}
		return srv, keeps, tg, out
	}
	t.Run("xcc kept", func(t *testing.T) {
		srv, keeps, tg, res := run(t, bmctest.LenovoXCC, true)
		for i, r := range res {
			if r.Outcome.Status != bmc.StatusOK {
				t.Fatalf("op %d: %+v, want ok", i, r.Outcome)
			}
		}
		if got, ok := keeps.Kept(tg); !ok || got.Target != bmc.BootPXE {
			t.Errorf("Kept = %+v, %v; want PXE kept", got, ok)
		}
		if diff := cmp.Diff([]string{"Pxe", "Pxe"}, bootTargets(srv)); diff != "" {
			t.Errorf("boots after on and cycle (-want +got):\n%s", diff)
		}
		if _, ok := keeps.Kept(bmc.TargetRef{Driver: redfish.Name, Address: "https://192.0.2.9"}); ok {
			t.Error("another BMC has a device kept")
		}
	})
	t.Run("a BMC that keeps it", func(t *testing.T) {
		srv, keeps, tg, res := run(t, bmctest.Generic, true)
		if res[0].Outcome.Status != bmc.StatusOK {
			t.Fatalf("persistent boot: %+v", res[0].Outcome)
		}
		if _, ok := keeps.Kept(tg); ok {
			t.Error("a BMC that keeps a persistent override has it kept by re-arming")
		}
		if diff := cmp.Diff([]string{"Pxe", "Pxe"}, bootTargets(srv)); diff != "" {
			t.Errorf("boots after on and cycle (-want +got):\n%s", diff)
		}
	})
	t.Run("xcc without KeepBoot", func(t *testing.T) {
		_, keeps, tg, res := run(t, bmctest.LenovoXCC, false)
		if res[0].Outcome.Status != bmc.StatusFailed || !errors.Is(res[0].Outcome.Err(), bmc.ErrUnsupported) {
			t.Errorf("persistent boot on XCC without KeepBoot: %+v want failed, unsupported", res[0].Outcome)
		}
		if _, ok := keeps.Kept(tg); ok {
			t.Error("a device is kept for an operation not marked KeepBoot")
		}
	})
}

// ExampleBootKeepers keeps a persistent boot device at a BMC that cannot keep one (this
// fake BMC behaves as Lenovo XCC) across the operations an Executor runs: BootKeepers.Wrap
// is the Executor's Wrap, and KeepBoot marks the operations that set a boot device or the
// power.
func ExampleBootKeepers() {
	srv := bmctest.NewServer(bmctest.Options{Vendor: bmctest.LenovoXCC})
	defer srv.Close()
	keeps := &bmc.BootKeepers{}
	e := keepersExecutor(keeps)
	defer e.Sessions.Close()

	ctx := bmc.KeepBoot(context.Background())
	tg := bmc.TargetRef{Driver: redfish.Name, Address: srv.URL, Credential: "bmc/a"}
	res := e.RunOp(ctx, "boot-1", tg, bmc.SetBoot{Device: bmc.BootDevice{Target: bmc.BootPXE, Persistent: true}})
	d, kept := keeps.Kept(tg)
	fmt.Println(res.Outcome.Status, kept, d.Target)
	for i, a := range []bmc.PowerAction{bmc.PowerActionForceOff, bmc.PowerActionOn, bmc.PowerActionCycle} {
		e.RunOp(ctx, fmt.Sprint("power-", i), tg, bmc.SetPower{Action: a})
	}
	fmt.Println("boots from the network:", len(srv.Boots()))
	// Output:
	// ok true pxe
	// boots from the network: 2
}
