package redfish_test

import (
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/bettercompute/siteboot/bmc"
	"github.com/bettercompute/siteboot/bmc/bmctest"
	"github.com/bettercompute/siteboot/bmc/redfish"
)

// One test per vendor quirk of issue 40 ("BMCs"), named after it; each comment gives the
// quirk's source. No capture of these BMCs is here: each runs against a bmctest profile
// of the vendor's behaviour as its source describes it.

// TestQuirkWriteAcceptedThenSilentlyReverted: a Supermicro AMI BMC answered a Boot PATCH
// with 200 and had forgotten the override a few seconds later (bmclib #459). The profile
// (ForgetBootAfterReads) forgets it after the first read-back; the driver reads again after
// SettleTime and reports the revert as such.
func TestQuirkWriteAcceptedThenSilentlyReverted(t *testing.T) {
	srv, d := start(t, bmctest.Options{ForgetBootAfterReads: 1}, redfish.Config{SettleTime: 5 * time.Millisecond})
	err := d.SetBootDevice(ctx(t), bmc.BootDevice{Target: bmc.BootPXE})
	kindIs(t, err, bmc.ErrDiffers)
	if !strings.Contains(err.Error(), "reverted") || !strings.Contains(err.Error(), "Disabled") {
		t.Errorf("error does not say the override was reverted: %v", err)
	}
	// The second read really is the settled one: the override was there after the PATCH.
	gets := 0
	for _, r := range srv.Requests() {
		if r.Method == http.MethodGet && r.Path == srv.SystemPath() {
			gets++
		}
	}
	if gets != 3 { // before the PATCH, the read-back, the settled read
		t.Errorf("%d reads of the system, want 3", gets)
	}
	// A BMC that keeps the override: no error, with the same settle time.
	_, keeps := start(t, bmctest.Options{}, redfish.Config{SettleTime: 5 * time.Millisecond})
	if err := keeps.SetBootDevice(ctx(t), bmc.BootDevice{Target: bmc.BootPXE}); err != nil {
		t.Errorf("a BMC that keeps the override: %v", err)
	}
}

// settingsCase runs a one-time PXE override on a BMC whose override lives in a settings
// object, and checks it went there, left the system's Boot alone, and applied at boot.
func settingsCase(t *testing.T, object, want string) {
	srv, d := start(t, bmctest.Options{BootSettingsObject: object}, redfish.Config{})
	before := bootOf(srv)["BootSourceOverrideEnabled"]
	if err := d.SetBootDevice(ctx(t), bmc.BootDevice{Target: bmc.BootPXE, Mode: bmc.BootModeUEFI}); err != nil {
		t.Fatalf("SetBootDevice: %v", err)
	}
	var paths []string
	for _, r := range srv.Requests() {
		if r.Method == http.MethodPatch {
			paths = append(paths, r.Path)
		}
	}
	if diff := cmp.Diff([]string{want}, paths); diff != "" {
		t.Errorf("PATCHes (-want +got):\n%s", diff)
	}
	if got := bootOf(srv)["BootSourceOverrideEnabled"]; got != before {
		t.Errorf("the system's own Boot changed to %v before a boot", got)
	}
	pending := srv.Resource(want)["Boot"].(map[string]any)
	if pending["BootSourceOverrideTarget"] != "Pxe" || pending["BootSourceOverrideEnabled"] != "Once" {
		t.Errorf("settings object holds %v", pending)
	}
	if err := d.SetPower(ctx(t), bmc.PowerActionCycle); err != nil {
		t.Fatalf("power cycle: %v", err)
	}
	boots := srv.Boots()
	if len(boots) == 0 || boots[len(boots)-1].Target != "Pxe" {
		t.Errorf("boots %+v, want the last one from Pxe", boots)
	}
}

// TestQuirkIDRAC10BootIsReadOnlyOverrideThroughSettings: iDRAC10's ComputerSystem Boot is
// read-only and the override is PATCHed to the object @Redfish.Settings names (bmclib #461;
// sushy's iDRAC10 release note). Profile: BootSettingsObject IDRAC10Settings.
func TestQuirkIDRAC10BootIsReadOnlyOverrideThroughSettings(t *testing.T) {
	settingsCase(t, bmctest.IDRAC10Settings, bmctest.SystemPath+"/Settings")
}

// TestQuirkFutureStateFollowsRedfishSettings: some AMI/ASRock BMCs keep the override in a
// FutureState resource, /redfish/v1/Systems/Self/SD, outside the system (Redfish-Tacklebox
// #144): the driver follows @Redfish.Settings wherever it points. Profile:
// BootSettingsObject AMIFutureState.
func TestQuirkFutureStateFollowsRedfishSettings(t *testing.T) {
	settingsCase(t, bmctest.AMIFutureState, bmctest.AMIFutureState)
}

// TestQuirkPersistentBootNotSupported: Lenovo XCC refuses BootSourceOverrideEnabled
// Continuous (Ironic's workaround: set a one-time boot before each power-on). The driver
// says so (ErrUnsupported, naming the workaround), learns it, and a one-time override
// still works. Profile: bmctest.LenovoXCC.
func TestQuirkPersistentBootNotSupported(t *testing.T) {
	srv, d := start(t, bmctest.Options{Vendor: bmctest.LenovoXCC}, redfish.Config{})
	err := d.SetBootDevice(ctx(t), bmc.BootDevice{Target: bmc.BootPXE, Persistent: true})
	kindIs(t, err, bmc.ErrUnsupported)
	if !strings.Contains(err.Error(), "set it once before each boot") {
		t.Errorf("error does not name the workaround: %v", err)
	}
	srv.ResetRequests()
	err = d.SetBootDevice(ctx(t), bmc.BootDevice{Target: bmc.BootDisk, Persistent: true})
	kindIs(t, err, bmc.ErrUnsupported)
	if n := len(patches(srv.Requests())); n != 0 {
		t.Errorf("%d PATCHes sent after the refusal was learned", n)
	}
	if err := d.SetBootDevice(ctx(t), bmc.BootDevice{Target: bmc.BootPXE}); err != nil {
		t.Errorf("one-time override: %v", err)
	}
}

// TestQuirkSessionPoolOneSessionPerBMCReused: iDRAC runs out of sessions (RAC0218) and
// Foreman's smart-proxy leaked them (smart-proxy #895/#896). One Open holds one session
// for all its operations and logs it out on Close; basic auth opens none. Profile:
// bmctest.LenovoXCC's cap of 2 sessions.
func TestQuirkSessionPoolOneSessionPerBMCReused(t *testing.T) {
	srv := bmctest.NewServer(bmctest.Options{Vendor: bmctest.LenovoXCC, MaxSessions: 2})
	t.Cleanup(srv.Close)
	cfg := redfish.Config{SettleTime: time.Millisecond}
	for round := range 3 { // more Opens in sequence than the cap: each gives its session back
		d, err := redfish.Dial(ctx(t), cfg, target(srv))
		if err != nil {
			t.Fatalf("round %d: Dial: %v", round, err)
		}
		for range 5 {
			if _, err := d.PowerState(ctx(t)); err != nil {
				t.Fatalf("round %d: %v", round, err)
			}
			if err := d.SetBootDevice(ctx(t), bmc.BootDevice{Target: bmc.BootPXE}); err != nil {
				t.Fatalf("round %d: %v", round, err)
			}
		}
		if n := srv.Sessions(); n != 1 {
			t.Errorf("round %d: %d sessions open, want 1", round, n)
		}
		if err := d.Close(); err != nil {
			t.Fatalf("round %d: Close: %v", round, err)
		}
		if n := srv.Sessions(); n != 0 {
			t.Errorf("round %d: %d sessions left after Close", round, n)
		}
	}
	logins := len(posts(srv.Requests(), "/SessionService/Sessions"))
	if logins != 3 {
		t.Errorf("%d logins for 3 Opens", logins)
	}
	basic, err := redfish.Dial(ctx(t), redfish.Config{BasicAuth: true, SettleTime: time.Millisecond}, target(srv))
	if err != nil {
		t.Fatal(err)
	}
	defer basic.Close()
	if err := basic.SetBootDevice(ctx(t), bmc.BootDevice{Target: bmc.BootPXE}); err != nil {
		t.Fatal(err)
	}
	if n := srv.Sessions(); n != 0 {
		t.Errorf("basic auth opened %d sessions", n)
	}
}
