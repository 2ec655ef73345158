package redfish_test

import (
	"context"
	"errors"
	"net/http"
	"net/netip"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/bettercompute/siteboot/bmc"
	"github.com/bettercompute/siteboot/bmc/bmctest"
	"github.com/bettercompute/siteboot/bmc/redfish"
	"github.com/bettercompute/siteboot/hwid"
	"github.com/google/go-cmp/cmp"
)

// Tests on real vendors' captured Redfish trees (bmctest.HPEDL325, bmctest.OpenBMC) and
// on the behaviours bmctest models from the Redfish specification and from what
// sushy-emulator and iDRAC were seen to do. Where a test changes a
// captured resource to make a case, it says so.

func posts(reqs []bmctest.Request, suffix string) []bmctest.Request {
	var out []bmctest.Request
	for _, r := range reqs {
		if r.Method == http.MethodPost && strings.HasSuffix(r.Path, suffix) {
			out = append(out, r)
		}
	}
	return out
}

func TestILOBootModeRefusalIsLearnedAndNeverDropsAnExplicitMode(t *testing.T) {
	srv, d := start(t, bmctest.Options{Mockup: bmctest.HPEDL325, Vendor: bmctest.HPEiLO}, redfish.Config{})
	sys := srv.SystemPath()
	// The captured system is in UEFI mode. Legacy, asked explicitly, cannot be had from a
	// BMC that refuses the mode property: an error, and nothing changed.
	err := d.SetBootDevice(ctx(t), bmc.BootDevice{Target: bmc.BootPXE, Mode: bmc.BootModeLegacy})
	kindIs(t, err, bmc.ErrUnsupported)
	if err == nil || !strings.Contains(err.Error(), "UEFI mode; Legacy was asked for") {
		t.Errorf("error does not say the mode the BMC is in: %v", err)
	}
	if b := srv.Resource(sys)["Boot"].(map[string]any); b["BootSourceOverrideEnabled"] != "Disabled" {
		t.Errorf("boot override changed: %v", b)
	}
	if diff := cmp.Diff([]string{"no-boot-mode"}, d.Learned()); diff != "" {
		t.Errorf("learned (-want +got):\n%s", diff)
	}
	// Learned: UEFI (the current mode) and auto cost one PATCH each, without the mode.
	for _, dev := range []bmc.BootDevice{{Target: bmc.BootPXE, Mode: bmc.BootModeUEFI}, {Target: bmc.BootCD}} {
		srv.ResetRequests()
		if err := d.SetBootDevice(ctx(t), dev); err != nil {
			t.Fatalf("SetBootDevice(%+v): %v", dev, err)
		}
		if diff := cmp.Diff([]string{bootTarget(dev.Target) + " Once - OK"}, patches(srv.Requests())); diff != "" {
			t.Errorf("%+v: PATCHes (-want +got):\n%s", dev, diff)
		}
	}
	srv.ResetRequests()
	err = d.SetBootDevice(ctx(t), bmc.BootDevice{Target: bmc.BootDisk, Mode: bmc.BootModeLegacy})
	kindIs(t, err, bmc.ErrUnsupported)
	if n := len(patches(srv.Requests())); n != 0 {
		t.Errorf("%d PATCHes sent for a mode the BMC is known to refuse", n)
	}
}

func bootTarget(t bmc.BootTarget) string {
	return map[bmc.BootTarget]string{bmc.BootPXE: "Pxe", bmc.BootCD: "Cd", bmc.BootDisk: "Hdd", bmc.BootHTTP: "UefiHttp"}[t]
}

func TestA200WithAnErrorBodyIsNotSuccess(t *testing.T) {
	srv, d := start(t, bmctest.Options{Patch200ErrorBody: true}, redfish.Config{})
	for i := range 4 {
		err := d.SetBootDevice(ctx(t), bmc.BootDevice{Target: bmc.BootCD, Mode: bmc.BootModeUEFI})
		kindIs(t, err, bmc.ErrRefused)
		if err == nil || !strings.Contains(err.Error(), "could not be applied") {
			t.Errorf("try %d: error does not carry the BMC's message: %v", i, err)
		}
	}
	if got := boot(srv)["BootSourceOverrideTarget"]; got == "Cd" {
		t.Error("the fake applied the override it refused")
	}
}

// TestOnceKeptAsContinuousTookEffectDifferently: the override was set, persistent; that is
// ErrDiffers (done, not to be sent again), not a refusal.
func TestOnceKeptAsContinuousTookEffectDifferently(t *testing.T) {
	_, d := start(t, bmctest.Options{OnceStoredAsContinuous: true}, redfish.Config{})
	err := d.SetBootDevice(ctx(t), bmc.BootDevice{Target: bmc.BootPXE})
	kindIs(t, err, bmc.ErrDiffers)
	if errors.Is(err, bmc.ErrRefused) {
		t.Errorf("%v is also a refusal", err)
	}
	for _, want := range []string{"kept BootSourceOverrideEnabled Continuous (asked Once)", "modification by the service"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("error lacks %q: %v", want, err)
		}
	}
}

func TestUEFIHTTPFromLegacySwitchesTheModeFirst(t *testing.T) {
	srv, d := start(t, bmctest.Options{ModeDependentTargets: true}, redfish.Config{})
	srv.Patch(bmctest.SystemPath, map[string]any{"Boot": map[string]any{"BootSourceOverrideMode": "Legacy"}})
	if err := d.SetBootDevice(ctx(t), bmc.BootDevice{Target: bmc.BootHTTP}); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{"- - UEFI OK", "UefiHttp Once UEFI OK"}, patches(srv.Requests())); diff != "" {
		t.Errorf("PATCHes (-want +got):\n%s", diff)
	}
}

func TestGracefulOffPressesThePowerButtonWhereNoShutdownIsOffered(t *testing.T) {
	srv, d := start(t, bmctest.Options{Mockup: bmctest.HPEDL325}, redfish.Config{})
	// Changed from the capture: the DL325's iLO lists GracefulShutdown and PushPowerButton;
	// An iLO 5 was seen with PushPowerButton only.
	srv.Patch(srv.SystemPath(), map[string]any{"Actions": map[string]any{"#ComputerSystem.Reset": map[string]any{
		"ResetType@Redfish.AllowableValues": []any{"On", "ForceOff", "ForceRestart", "Nmi", "PushPowerButton"}}}})
	if err := d.SetPower(ctx(t), bmc.PowerActionOff); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{"PushPowerButton"}, resets(srv.Requests())); diff != "" {
		t.Errorf("resets (-want +got):\n%s", diff)
	}
	if st, _ := d.PowerState(ctx(t)); st != bmc.PowerOff {
		t.Errorf("power = %s, want off", st)
	}
}

func TestActionsCarryIfMatchAndARefusalIsLearned(t *testing.T) {
	srv, d := start(t, bmctest.Options{IfMatch412: true}, redfish.Config{})
	srv.SetPowerState("Off")
	if err := d.SetPower(ctx(t), bmc.PowerActionOn); err != nil {
		t.Fatal(err)
	}
	got := posts(srv.Requests(), "/ComputerSystem.Reset")
	if len(got) != 2 || got[0].IfMatch == "" || got[0].Status != http.StatusPreconditionFailed || got[1].IfMatch != "" {
		t.Fatalf("first reset: %+v", got)
	}
	srv.ResetRequests()
	if err := d.SetPower(ctx(t), bmc.PowerActionForceOff); err != nil {
		t.Fatal(err)
	}
	if got := posts(srv.Requests(), "/ComputerSystem.Reset"); len(got) != 1 || got[0].IfMatch != "" {
		t.Errorf("after learning: %+v", got)
	}
	if !slices.Contains(d.Learned(), "no-action-if-match") {
		t.Errorf("learned %v", d.Learned())
	}
}

func TestPatchIfMatchRefusalIsLearned(t *testing.T) {
	srv, d := start(t, bmctest.Options{PatchIfMatch412: true}, redfish.Config{})
	if err := d.SetBootDevice(ctx(t), bmc.BootDevice{Target: bmc.BootCD}); err != nil {
		t.Fatal(err)
	}
	srv.ResetRequests()
	if err := d.SetBootDevice(ctx(t), bmc.BootDevice{Target: bmc.BootPXE}); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{"Pxe Once UEFI OK"}, patches(srv.Requests())); diff != "" {
		t.Errorf("PATCHes after learning (-want +got):\n%s", diff)
	}
}

func TestPatchCarriesTheETagWhereTheBMCRequiresIt(t *testing.T) {
	srv, d := start(t, bmctest.Options{RequireIfMatch: true}, redfish.Config{})
	if err := d.SetBootDevice(ctx(t), bmc.BootDevice{Target: bmc.BootCD}); err != nil {
		t.Fatal(err)
	}
	for _, r := range srv.Requests() {
		if r.Method == http.MethodPatch && (r.IfMatch == "" || r.Status != http.StatusOK) {
			t.Errorf("PATCH %+v", r)
		}
	}
}

func TestOpenBMCWithoutSimpleUpdateIsUnsupportedAndSendsNothing(t *testing.T) {
	srv, d := start(t, bmctest.Options{Mockup: bmctest.OpenBMC}, redfish.Config{})
	_, err := d.UpdateFirmware(ctx(t), bmc.FirmwareUpdate{URL: "https://192.0.2.1/bmc.tar"})
	kindIs(t, err, bmc.ErrUnsupported)
	if errors.Is(err, bmc.ErrRefused) {
		t.Errorf("reported as refused: %v", err)
	}
	if s := sent(srv.Requests()); len(s) != 0 {
		t.Errorf("sent %v", s)
	}
}

func TestFirmwareTaskMonitors(t *testing.T) {
	for _, tc := range []struct {
		name string
		opts bmctest.Options
	}{
		{"202 and a task monitor", bmctest.Options{}},
		{"204 and the task's Location (sushy-emulator)", bmctest.Options{FirmwareNoContent: true}},
		{"monitor gone once the task ended", bmctest.Options{TaskMonitorGone: true, TaskPolls: 2}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv, d := start(t, tc.opts, redfish.Config{})
			res, err := d.UpdateFirmware(ctx(t), bmc.FirmwareUpdate{URL: "https://192.0.2.1/fw.bin"})
			if err != nil {
				t.Fatal(err)
			}
			if res.State != "Completed" || res.Task == "" || len(res.Messages) != 1 {
				t.Errorf("result %+v", res)
			}
			if diff := cmp.Diff([]string{"https://192.0.2.1/fw.bin"}, srv.Updates()); diff != "" {
				t.Errorf("updates (-want +got):\n%s", diff)
			}
		})
	}
}

func TestFailedInsertLeavesNoFalseInsertedDrive(t *testing.T) {
	srv, d := start(t, bmctest.Options{MediaInsertFails: true}, redfish.Config{})
	const img = "http://192.0.2.1/boot.iso"
	for i := range 2 {
		err := d.InsertMedia(ctx(t), img)
		kindIs(t, err, bmc.ErrRefused)
		if i == 0 && (err == nil || !strings.Contains(err.Error(), "ejected")) {
			t.Errorf("error does not say the drive was ejected: %v", err)
		}
		if srv.Resource(bmctest.CD1Path)["Inserted"] == true {
			t.Errorf("try %d: the drive is left showing an image after a failed insert", i)
		}
	}
}

func TestInspectionOfTheILOCapture(t *testing.T) {
	_, d := start(t, bmctest.Options{Mockup: bmctest.HPEDL325}, redfish.Config{})
	inv, err := d.Inspect(ctx(t))
	if err != nil {
		t.Fatal(err)
	}
	if !inv.HasUUID || inv.UUID.String() != "36383150-3630-584d-5130-313930323042" || inv.Serial != "MXQ019020B" ||
		inv.Model != "ProLiant DL325 Gen10 Plus" || inv.Manufacturer != "HPE" {
		t.Errorf("identity: %+v", inv)
	}
	var got []hwid.MAC
	for _, n := range inv.NICs {
		got = append(got, n.MAC)
	}
	want := []hwid.MAC{hwid.MustParseMAC("94:40:c9:5c:86:bc"), hwid.MustParseMAC("94:40:c9:5c:86:bd"),
		hwid.MustParseMAC("14:02:ec:d9:3a:a0"), hwid.MustParseMAC("14:02:ec:d9:3a:a1")}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("NICs (-want +got):\n%s", diff)
	}
	// Manager interface 1 (dedicated), not 2 (disabled, 0.0.0.0) nor 3 (the host
	// interface's 16.1.15.1).
	if diff := cmp.Diff([]netip.Addr{netip.MustParseAddr("10.254.1.15")}, inv.BMCAddrs, cmp.Comparer(func(a, b netip.Addr) bool { return a == b })); diff != "" {
		t.Errorf("BMC addresses (-want +got):\n%s", diff)
	}
}

func TestInspectionNormalisesPlaceholdersAndPadding(t *testing.T) {
	srv, d := start(t, bmctest.Options{Mockup: bmctest.HPEDL325}, redfish.Config{})
	// Changed from the capture: an unprogrammed UUID, a padded serial, an SMBIOS placeholder.
	srv.Patch(srv.SystemPath(), map[string]any{"UUID": "00000000-0000-0000-0000-000000000000",
		"SerialNumber": "  MXQ019020B   ", "Model": "To Be Filled By O.E.M."})
	inv, err := d.Inspect(ctx(t))
	if err != nil {
		t.Fatal(err)
	}
	if inv.HasUUID || inv.Serial != "MXQ019020B" || inv.Model != "" {
		t.Errorf("HasUUID %v, Serial %q, Model %q", inv.HasUUID, inv.Serial, inv.Model)
	}
}

func TestInspectionIsPartialWhenAManagerIsMissing(t *testing.T) {
	srv, d := start(t, bmctest.Options{Mockup: bmctest.HPEDL325}, redfish.Config{})
	srv.Delete("/redfish/v1/Managers/1", "/redfish/v1/Managers")
	inv, err := d.Inspect(ctx(t))
	var pe *bmc.PartialError
	if !errors.As(err, &pe) {
		t.Fatalf("err = %v, want a *bmc.PartialError", err)
	}
	if diff := cmp.Diff([]string{"manager /redfish/v1/Managers/1"}, pe.Failed()); diff != "" {
		t.Errorf("failed parts (-want +got):\n%s", diff)
	}
	if !errors.Is(err, bmc.ErrPartial) || !errors.Is(err, bmc.ErrUnsupported) {
		t.Errorf("kinds of %v", err)
	}
	if !inv.HasUUID || len(inv.NICs) != 4 || len(inv.BMCAddrs) != 0 {
		t.Errorf("what was read is lost: %+v", inv)
	}
}

func TestInspectionOfTheOpenBMCCapture(t *testing.T) {
	srv, d := start(t, bmctest.Options{Mockup: bmctest.OpenBMC}, redfish.Config{})
	mgr := "/redfish/v1/Managers/bmc/EthernetInterfaces"
	// Added to the capture, shaped as bmcweb serves them: the USB gadget link to the host,
	// and a second interface repeating eth0's address.
	srv.Put(mgr+"/usb0", mgr, map[string]any{"Id": "usb0", "Name": "Manager Ethernet Interface",
		"Description": "Management Network Interface", "MACAddress": "02:00:00:00:00:01",
		"IPv4Addresses": []any{map[string]any{"Address": "169.254.95.120"}, map[string]any{"Address": "192.0.2.77"}}})
	eth0 := srv.Resource(mgr + "/eth0")
	srv.Put(mgr+"/eth1", mgr, map[string]any{"Id": "eth1", "MACAddress": "02:00:00:00:00:02",
		"IPv4Addresses": eth0["IPv4Addresses"]})
	inv, err := d.Inspect(ctx(t))
	if err != nil {
		t.Fatal(err)
	}
	// The capture has no UUID and no EthernetInterfaces on its system: neither is known.
	if inv.HasUUID || inv.NICsKnown || len(inv.NICs) != 0 {
		t.Errorf("HasUUID %v NICsKnown %v NICs %v", inv.HasUUID, inv.NICsKnown, inv.NICs)
	}
	var want []netip.Addr
	v6, _ := eth0["IPv6Addresses"].([]any)
	for _, a := range append(eth0["IPv4Addresses"].([]any), v6...) {
		if ip, err := netip.ParseAddr(a.(map[string]any)["Address"].(string)); err == nil && !ip.IsUnspecified() && !ip.IsLinkLocalUnicast() {
			want = append(want, ip)
		}
	}
	if len(want) == 0 {
		t.Fatal("capture's eth0 has no address")
	}
	if diff := cmp.Diff(want, inv.BMCAddrs, cmp.Comparer(func(a, b netip.Addr) bool { return a == b })); diff != "" {
		t.Errorf("BMC addresses (-want +got):\n%s", diff)
	}
}

func TestInfiniBandFunctionsAreNotPXENICs(t *testing.T) {
	srv, d := start(t, bmctest.Options{NetworkAdapters: true, NoSystemEthernetInterfaces: true}, redfish.Config{})
	fns := bmctest.ChassisURI + "/NetworkAdapters/NIC1/NetworkDeviceFunctions"
	// Shaped as an iDRAC's was seen: no NetDevFuncType, an InfiniBand object.
	srv.Put(fns+"/3", fns, map[string]any{"Id": "3", "NetDevFuncCapabilities": []any{"InfiniBand"},
		"InfiniBand": map[string]any{"PermanentMACAddress": "B0:26:28:00:00:03"},
		"Ethernet":   map[string]any{"MACAddress": "B0:26:28:00:00:03"}})
	inv, err := d.Inspect(ctx(t))
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range inv.NICs {
		if n.MAC == hwid.MustParseMAC("B0:26:28:00:00:03") {
			t.Errorf("InfiniBand function reported as a NIC: %+v", n)
		}
	}
	if len(inv.NICs) != 2 {
		t.Errorf("NICs %+v", inv.NICs)
	}
}

func TestStorageIsPartialWhenADriveIsMissing(t *testing.T) {
	srv, d := start(t, bmctest.Options{}, redfish.Config{})
	st := bmctest.SystemPath + "/Storage"
	srv.Put(st, "", map[string]any{"Name": "Storage"})
	srv.Patch(bmctest.SystemPath, map[string]any{"Storage": map[string]any{"@odata.id": st}})
	srv.Put(st+"/1", st, map[string]any{"Id": "1", "Drives": []any{
		map[string]any{"@odata.id": st + "/1/Drives/a"}, map[string]any{"@odata.id": st + "/1/Drives/b"}}})
	srv.Put(st+"/1/Drives/a", "", map[string]any{"Name": "a", "Model": " SSD 1 ", "SerialNumber": "S1  ", "CapacityBytes": 1e9})
	disks, err := d.Storage(ctx(t))
	var pe *bmc.PartialError
	if !errors.As(err, &pe) || !slices.Equal(pe.Failed(), []string{"drive " + st + "/1/Drives/b"}) {
		t.Fatalf("err = %v", err)
	}
	if diff := cmp.Diff([]bmc.Disk{{Name: "a", Model: "SSD 1", Serial: "S1", CapacityBytes: 1e9, Controller: "1"}}, disks); diff != "" {
		t.Errorf("disks (-want +got):\n%s", diff)
	}
}

func TestNoSessionServiceFallsBackToBasicAuth(t *testing.T) {
	srv := bmctest.NewServer(bmctest.Options{NoSessionService: true})
	t.Cleanup(srv.Close)
	d, err := redfish.Dial(ctx(t), redfish.Config{}, target(srv))
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	if _, err := d.PowerState(ctx(t)); err != nil {
		t.Fatal(err)
	}
	for _, r := range srv.Requests() {
		if strings.TrimSuffix(r.Path, "/") != bmctest.Root && r.Auth != "basic" { // gofish reads the root before it logs in
			t.Errorf("%s %s sent with auth %q", r.Method, r.Path, r.Auth)
		}
	}
	_, err = redfish.Dial(ctx(t), redfish.Config{SessionOnly: true}, target(srv))
	kindIs(t, err, bmc.ErrUnsupported)
}

// TestSchemeMismatchHasItsOwnWords: a scheme that does not match the port is ErrScheme,
// worded as such, never "TLS certificate not trusted" (no certificate was looked at).
func TestSchemeMismatchHasItsOwnWords(t *testing.T) {
	tlsSrv := bmctest.NewServer(bmctest.Options{TLS: true})
	t.Cleanup(tlsSrv.Close)
	plain := bmctest.NewServer(bmctest.Options{})
	t.Cleanup(plain.Close)
	for _, tc := range []struct{ name, addr, hint string }{
		{"http to a TLS port", strings.Replace(tlsSrv.URL, "https://", "http://", 1), "use https://"},
		{"https to a plain port", strings.Replace(plain.URL, "http://", "https://", 1), "use http://"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			_, err := redfish.Dial(c, redfish.Config{}, bmc.Target{Driver: redfish.Name, Address: tc.addr,
				Username: bmctest.DefaultUsername, Password: bmctest.DefaultPassword})
			kindIs(t, err, bmc.ErrScheme)
			if errors.Is(err, bmc.ErrUnreachable) || errors.Is(err, bmc.ErrTLS) || err == nil || !strings.Contains(err.Error(), tc.hint) {
				t.Errorf("err = %v", err)
			}
			if strings.Contains(err.Error(), "certificate") {
				t.Errorf("a scheme mismatch is worded as a certificate problem: %v", err)
			}
			if got := bmc.KindName(err); got != "scheme" {
				t.Errorf("KindName = %q, want scheme", got)
			}
		})
	}
}

// TestCaptureCapabilities is the captures' rows of the capability table in doc.go.
func TestCaptureCapabilities(t *testing.T) {
	ops := []struct {
		name string
		run  func(context.Context, *redfish.Driver) error
	}{
		{"power cycle", func(c context.Context, d *redfish.Driver) error { return d.SetPower(c, bmc.PowerActionCycle) }},
		{"one-time PXE", func(c context.Context, d *redfish.Driver) error {
			return d.SetBootDevice(c, bmc.BootDevice{Target: bmc.BootPXE})
		}},
		{"persistent disk", func(c context.Context, d *redfish.Driver) error {
			return d.SetBootDevice(c, bmc.BootDevice{Target: bmc.BootDisk, Persistent: true})
		}},
		{"UEFI HTTP", func(c context.Context, d *redfish.Driver) error {
			return d.SetBootDevice(c, bmc.BootDevice{Target: bmc.BootHTTP})
		}},
		{"virtual media", func(c context.Context, d *redfish.Driver) error {
			if err := d.InsertMedia(c, "http://192.0.2.1/boot.iso"); err != nil {
				return err
			}
			return d.EjectMedia(c)
		}},
		{"firmware", func(c context.Context, d *redfish.Driver) error {
			_, err := d.UpdateFirmware(c, bmc.FirmwareUpdate{URL: "http://192.0.2.1/fw.bin"})
			return err
		}},
		{"storage", func(c context.Context, d *redfish.Driver) error { _, err := d.Storage(c); return err }},
	}
	for _, tc := range []struct {
		mockup bmctest.Mockup
		want   map[string]error // nil: works
	}{
		{bmctest.HPEDL325, map[string]error{}},
		{bmctest.OpenBMC, map[string]error{"UEFI HTTP": bmc.ErrUnsupported, "virtual media": bmc.ErrUnsupported,
			"firmware": bmc.ErrUnsupported}},
	} {
		for _, op := range ops {
			t.Run(string(tc.mockup)+"/"+op.name, func(t *testing.T) {
				_, d := start(t, bmctest.Options{Mockup: tc.mockup}, redfish.Config{})
				err := op.run(ctx(t), d)
				if want := tc.want[op.name]; want != nil {
					kindIs(t, err, want)
				} else if err != nil {
					t.Errorf("%s: %v", op.name, err)
				}
			})
		}
	}
}

func TestUEFIHTTPFromLegacyOnABMCThatRefusesTheMode(t *testing.T) {
	srv, d := start(t, bmctest.Options{Mockup: bmctest.HPEDL325, Vendor: bmctest.HPEiLO, ModeDependentTargets: true}, redfish.Config{})
	// Changed from the capture: the system in Legacy mode.
	srv.Patch(srv.SystemPath(), map[string]any{"Boot": map[string]any{"BootSourceOverrideMode": "Legacy"}})
	err := d.SetBootDevice(ctx(t), bmc.BootDevice{Target: bmc.BootHTTP})
	kindIs(t, err, bmc.ErrUnsupported)
	if err == nil || !strings.Contains(err.Error(), "Legacy mode; UEFI was asked for") {
		t.Errorf("err = %v", err)
	}
	srv.ResetRequests()
	err = d.SetBootDevice(ctx(t), bmc.BootDevice{Target: bmc.BootHTTP})
	kindIs(t, err, bmc.ErrUnsupported)
	if n := len(patches(srv.Requests())); n != 0 {
		t.Errorf("%d PATCHes sent after the refusal was learned", n)
	}
}

func TestAMissingNICCollectionIsNotNoNICs(t *testing.T) {
	srv, d := start(t, bmctest.Options{}, redfish.Config{})
	srv.Delete(bmctest.SystemPath+"/EthernetInterfaces", "")
	inv, err := d.Inspect(ctx(t))
	var pe *bmc.PartialError
	if !errors.As(err, &pe) || !slices.Equal(pe.Failed(), []string{"nics " + bmctest.SystemPath + "/EthernetInterfaces"}) {
		t.Fatalf("err = %v", err)
	}
	if inv.NICsKnown || !inv.HasUUID {
		t.Errorf("NICsKnown %v HasUUID %v", inv.NICsKnown, inv.HasUUID)
	}
}

// TestInspectionOfAnIDRACManagementPortNamedByItsHostInterface: iDRAC's
// HostInterfaces/Host.1 names NIC.1 as its ManagerEthernetInterface, though NIC.1 is the
// iDRAC's management port (its only interface). The layout and values are those of a
// PowerEdge R750's iDRAC 9, put on the DMTF mockup's manager (no iDRAC capture is kept
// here): NIC.1's address and MAC are the BMC's.
func TestInspectionOfAnIDRACManagementPortNamedByItsHostInterface(t *testing.T) {
	srv, d := start(t, bmctest.Options{}, redfish.Config{})
	mgr := bmctest.ManagerURI
	ifaces := mgr + "/EthernetInterfaces"
	srv.Delete(ifaces+"/eth0", ifaces)
	srv.Delete(ifaces+"/ToHost", ifaces)
	srv.Put(ifaces+"/NIC.1", ifaces, map[string]any{"Id": "NIC.1", "Name": "Manager Ethernet Interface",
		"Description": "Management Network Interface", "InterfaceEnabled": true,
		"MACAddress": "B0:7B:25:D6:51:82", "PermanentMACAddress": "B0:7B:25:D6:51:82",
		"IPv4Addresses": []any{map[string]any{"Address": "192.168.247.199", "AddressOrigin": "DHCP",
			"SubnetMask": "255.255.255.0", "Gateway": "192.168.247.1"}},
		"IPv6Addresses": []any{map[string]any{"Address": "fe80::b27b:25ff:fed6:5182", "AddressOrigin": "LinkLocal"}}})
	his := mgr + "/HostInterfaces"
	srv.Put(his, "", map[string]any{"Name": "Host Interface Collection", "Members": []any{}, "Members@odata.count": 0})
	srv.Put(his+"/Host.1", his, map[string]any{"Id": "Host.1", "Name": "Managed Host Interface 1",
		"HostInterfaceType": "NetworkHostInterface", "InterfaceEnabled": false, "ExternallyAccessible": false,
		"ManagerEthernetInterface": map[string]any{"@odata.id": ifaces + "/NIC.1"},
		"HostEthernetInterfaces":   map[string]any{"@odata.id": his + "/Host.1/HostEthernetInterfaces"}})
	inv, err := d.Inspect(ctx(t))
	if err != nil {
		t.Fatal(err)
	}
	if got, want := inv.BMCMAC, hwid.MustParseMAC("b0:7b:25:d6:51:82"); got != want {
		t.Errorf("BMC MAC %v, want %v", got, want)
	}
	if diff := cmp.Diff([]netip.Addr{netip.MustParseAddr("192.168.247.199")}, inv.BMCAddrs,
		cmp.Comparer(func(a, b netip.Addr) bool { return a == b })); diff != "" {
		t.Errorf("BMC addresses (-want +got):\n%s", diff)
	}

	// With a second interface beside it, the one the host interface names is the host's
	// side, and the other is the management port.
	srv.Put(ifaces+"/NIC.2", ifaces, map[string]any{"Id": "NIC.2", "MACAddress": "B0:7B:25:D6:51:83",
		"IPv4Addresses": []any{map[string]any{"Address": "192.0.2.9"}}})
	inv, err = d.Inspect(ctx(t))
	if err != nil {
		t.Fatal(err)
	}
	if inv.BMCMAC != hwid.MustParseMAC("b0:7b:25:d6:51:83") || len(inv.BMCAddrs) != 1 || inv.BMCAddrs[0] != netip.MustParseAddr("192.0.2.9") {
		t.Errorf("with a second interface: %v %v", inv.BMCMAC, inv.BMCAddrs)
	}
}

// TestFirmwareMessagesNeverQuoteTheImageGrant: the BMC quotes the image URL, which holds
// an image cache grant, in its task's messages (bmctest's tasks do, as BMCs do); neither
// the result nor the error gives the URL or the grant back.
func TestFirmwareMessagesNeverQuoteTheImageGrant(t *testing.T) {
	const grant = "6f1c0a9e4b2d7c8e3a5f1b0d9c7e2a4f"
	image := "http://192.0.2.1:8080/cache/t/" + grant + "/" + strings.Repeat("ab", 32)
	for _, fail := range []bool{false, true} {
		srv, d := start(t, bmctest.Options{FailUpdate: fail}, redfish.Config{})
		res, err := d.UpdateFirmware(ctx(t), bmc.FirmwareUpdate{URL: image})
		if fail {
			kindIs(t, err, bmc.ErrRefused)
		} else if err != nil {
			t.Fatal(err)
		}
		if !slices.Contains(srv.Updates(), image) && !fail {
			t.Errorf("the BMC was not given the URL: %v", srv.Updates())
		}
		said := strings.Join(res.Messages, "\n")
		if err != nil {
			said += "\n" + err.Error() + "\n" + bmc.OutcomeOf(err).Message
		}
		if len(res.Messages) == 0 || !strings.Contains(said, redfish.Redacted) {
			t.Errorf("failed %v: the BMC's messages are not kept, redacted: %q", fail, said)
		}
		if strings.Contains(said, grant) || strings.Contains(said, "192.0.2.1:8080") {
			t.Errorf("failed %v: the grant comes back: %q", fail, said)
		}
	}
}

// TestFailedInsertNeverQuotesTheImageGrant: an insert that fails after the drive recorded
// the image (as sushy-emulator does) says what the drive claimed, without the grant.
func TestFailedInsertNeverQuotesTheImageGrant(t *testing.T) {
	const grant = "0a1b2c3d4e5f60718293a4b5c6d7e8f9"
	image := "http://192.0.2.1:8080/cache/t/" + grant + "/" + strings.Repeat("cd", 32)
	_, d := start(t, bmctest.Options{MediaInsertFails: true}, redfish.Config{})
	err := d.InsertMedia(ctx(t), image)
	if err == nil {
		t.Fatal("the insert did not fail")
	}
	if !strings.Contains(err.Error(), "anyway") || !strings.Contains(err.Error(), redfish.Redacted) {
		t.Errorf("the error does not say what the drive claimed: %v", err)
	}
	if strings.Contains(err.Error(), grant) || strings.Contains(bmc.OutcomeOf(err).Message, grant) {
		t.Errorf("the grant comes back: %v", err)
	}
}
