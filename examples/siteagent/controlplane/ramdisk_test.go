package controlplane_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/bettercompute/siteboot/bmc/bmctest"
	"github.com/bettercompute/siteboot/examples/siteagent/controlplane"
	"github.com/bettercompute/siteboot/hwid"
	"github.com/bettercompute/siteboot/sitelink"
)

// TestEnsureRamdiskPersistentBoot: against a BMC that stores a one-time override as
// Continuous (as sushy-emulator does), EnsureRamdisk stops at the boot step, which took
// effect differently ("differs", with what the BMC kept), and sends no power cycle; with PersistentBoot the override is asked Continuous,
// the power cycle follows and the machine boots from PXE.
func TestEnsureRamdiskPersistentBoot(t *testing.T) {
	l := newBMCLab(t)
	srv := bmctest.NewServer(bmctest.Options{OnceStoredAsContinuous: true})
	t.Cleanup(srv.Close)
	srv.SetPowerState("Off")
	a := l.agent("agent-a")
	waitUntil(t, "agent-a holds the lease", 10*time.Second, func() bool { return a.Fence().Active })
	m := controlplane.RamdiskMachine{
		Entries: []sitelink.ProxyDhcpEntry{{MAC: hwid.MAC{0x52, 0x54, 0x00, 0x12, 0x34, 0x98}, Arch: sitelink.ArchX86UEFI, Workflow: "wf-p", NotAfter: time.Now().Add(2 * time.Hour)}},
		BMC:     sitelink.BMCTarget{Driver: "redfish", Address: srv.URL, Credential: "bmc/m1"},
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()

	steps, err := l.plane.EnsureRamdisk(ctx, bmcSite, m)
	var se *controlplane.StepError
	if !errors.As(err, &se) || se.Step != "bmc.boot pxe once" || se.Result.Status != "differs" ||
		!strings.Contains(se.Result.Message, "kept BootSourceOverrideEnabled Continuous") || steps.PowerID != "" {
		t.Fatalf("one-time boot on a BMC that keeps Continuous: %v (%+v), want the boot step to differ and no power step", err, steps)
	}
	if n := powerPosts(srv); n != 0 {
		t.Errorf("the BMC got %d power requests after the boot step differed, want none", n)
	}

	m.PersistentBoot = true
	steps, err = l.plane.EnsureRamdisk(ctx, bmcSite, m)
	if err != nil {
		t.Fatalf("EnsureRamdisk with PersistentBoot: %v (%+v)", err, steps)
	}
	if steps.Boot.Status != "ok" || steps.Power.Status != "ok" {
		t.Errorf("steps = %+v, want boot and power ok", steps)
	}
	if boots := srv.Boots(); len(boots) != 1 || boots[0].Target != "Pxe" {
		t.Errorf("the machine's boots = %+v, want one from Pxe", boots)
	}
}
