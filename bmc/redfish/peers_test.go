package redfish_test

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/bettercompute/siteboot/bmc"
	"github.com/bettercompute/siteboot/bmc/redfish"
	"github.com/bettercompute/siteboot/hwid"
	"github.com/bettercompute/siteboot/internal/testpeer"
	"github.com/google/go-cmp/cmp"
)

// Tests against Redfish services nobody here wrote: OpenStack's sushy-emulator (fake
// driver) and DMTF's Redfish-Mockup-Server, started from internal/testpeer's archives.

const (
	sushyUser = "admin"
	sushyPass = "sushy-password"
)

// peerCtx is a context for one operation against a Python emulator on a loaded machine.
func peerCtx(t *testing.T, d time.Duration) context.Context {
	c, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return c
}

// sushyConfig polls quickly: sushy's fake driver lands power changes 1-11 s after the call.
func sushyConfig() redfish.Config {
	return redfish.Config{PollInterval: 200 * time.Millisecond, PowerTimeout: 40 * time.Second, Timeout: 20 * time.Second, SettleTime: 200 * time.Millisecond}
}

func dialSushy(t *testing.T, s *testpeer.Sushy, cfg redfish.Config) *redfish.Driver {
	t.Helper()
	tg := bmc.Target{Driver: redfish.Name, Address: s.URL, Username: sushyUser, Password: sushyPass, CertSHA256: s.TLS.SHA256}
	d, err := redfish.Dial(peerCtx(t, 30*time.Second), cfg, tg)
	if err != nil {
		t.Fatalf("Dial sushy-emulator: %v", err)
	}
	t.Cleanup(func() { _ = d.Close() })
	return d
}

// isoServer serves a small "ISO" at /boot.iso and /other.iso, and 404 elsewhere.
func isoServer(t *testing.T) *httptest.Server {
	srv := newISOServer()
	t.Cleanup(srv.Close)
	return srv
}

func isoServerB(b *testing.B) string {
	srv := newISOServer()
	b.Cleanup(srv.Close)
	return srv.URL
}

func newISOServer() *httptest.Server {
	return httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/boot.iso", "/other.iso":
			w.Header().Set("Content-Type", "application/octet-stream")
			_, _ = w.Write([]byte(strings.Repeat("ISO9660", 512)))
		default:
			http.NotFound(w, r)
		}
	}))
}

// sushyStorage gives the fake system one storage subsystem with two drives, in
// sushy-emulator's own config format.
const sushyStorage = `
SUSHY_EMULATOR_STORAGE = {
    "27946b59-9e44-4fa7-8e91-f3527a1ef094": [
        {"Id": "1", "Name": "Local Storage Controller",
         "StorageControllers": [{"MemberId": "0", "Name": "Contoso Integrated RAID", "SpeedGbps": 12}],
         "Drives": ["32ADF365C6C1B7BD", "58CFF987A1B2C3D4"]}
    ]
}
SUSHY_EMULATOR_DRIVES = {
    ("27946b59-9e44-4fa7-8e91-f3527a1ef094", "1"): [
        {"Id": "32ADF365C6C1B7BD", "Name": "Drive Sample", "CapacityBytes": 899527000000, "Protocol": "SAS"},
        {"Id": "58CFF987A1B2C3D4", "Name": "Drive Two", "CapacityBytes": 480103981056, "Protocol": "SATA"}
    ]
}
SUSHY_EMULATOR_VOLUMES = {
    ("27946b59-9e44-4fa7-8e91-f3527a1ef094", "1"): []
}
`

func TestSushyEmulator(t *testing.T) {
	s := testpeer.SushyEmulator(t, testpeer.SushyConfig{Username: sushyUser, Password: sushyPass, Extra: sushyStorage})
	d := dialSushy(t, s, sushyConfig())

	t.Run("no SessionService: basic auth, learned", func(t *testing.T) {
		if diff := cmp.Diff([]string{"basic-auth"}, d.Learned()); diff != "" {
			t.Errorf("learned (-want +got):\n%s", diff)
		}
	})
	t.Run("session only: unsupported", func(t *testing.T) {
		cfg := sushyConfig()
		cfg.SessionOnly = true
		_, err := redfish.Dial(peerCtx(t, 30*time.Second), cfg,
			bmc.Target{Driver: redfish.Name, Address: s.URL, Username: sushyUser, Password: sushyPass})
		kindIs(t, err, bmc.ErrUnsupported)
	})
	t.Run("wrong password", func(t *testing.T) {
		_, err := redfish.Dial(peerCtx(t, 30*time.Second), sushyConfig(),
			bmc.Target{Driver: redfish.Name, Address: s.URL, Username: sushyUser, Password: "wrong"})
		kindIs(t, err, bmc.ErrAuth)
	})
	t.Run("power on and off, read back", func(t *testing.T) {
		// sushy's fake driver lands each change 1-11 s after the call: two of them here, two
		// more in the cycle below.
		for _, a := range []bmc.PowerAction{bmc.PowerActionOn, bmc.PowerActionOff} {
			if err := d.SetPower(peerCtx(t, 60*time.Second), a); err != nil {
				t.Fatalf("SetPower(%s): %v", a, err)
			}
			want := bmc.PowerOn
			if a == bmc.PowerActionForceOff || a == bmc.PowerActionOff {
				want = bmc.PowerOff
			}
			got, err := d.PowerState(peerCtx(t, 30*time.Second))
			if err != nil || got != want {
				t.Fatalf("after %s: PowerState = %s, %v; want %s", a, got, err, want)
			}
		}
	})
	t.Run("cycle without a PowerCycle reset: ForceOff, Off read back, On", func(t *testing.T) {
		if err := d.SetPower(peerCtx(t, 90*time.Second), bmc.PowerActionOn); err != nil {
			t.Fatal(err)
		}
		if err := d.SetPower(peerCtx(t, 90*time.Second), bmc.PowerActionCycle); err != nil {
			t.Fatal(err)
		}
		if got, err := d.PowerState(peerCtx(t, 30*time.Second)); err != nil || got != bmc.PowerOn {
			t.Errorf("after the cycle: %s, %v", got, err)
		}
	})
	t.Run("one-time boot: sushy keeps Continuous, said", func(t *testing.T) {
		err := d.SetBootDevice(peerCtx(t, 30*time.Second), bmc.BootDevice{Target: bmc.BootPXE})
		kindIs(t, err, bmc.ErrDiffers)
		if err == nil || !strings.Contains(err.Error(), "BootSourceOverrideEnabled Continuous (asked Once)") {
			t.Errorf("error does not say what the BMC kept: %v", err)
		}
	})
	t.Run("persistent PXE boot", func(t *testing.T) {
		if err := d.SetBootDevice(peerCtx(t, 30*time.Second), bmc.BootDevice{Target: bmc.BootPXE, Persistent: true}); err != nil {
			t.Fatal(err)
		}
	})
	t.Run("UEFI HTTP from Legacy: mode switched first", func(t *testing.T) {
		if err := d.SetBootDevice(peerCtx(t, 30*time.Second), bmc.BootDevice{Target: bmc.BootDisk, Mode: bmc.BootModeLegacy, Persistent: true}); err != nil {
			t.Fatalf("Legacy: %v", err)
		}
		err := d.SetBootDevice(peerCtx(t, 30*time.Second), bmc.BootDevice{Target: bmc.BootHTTP, Persistent: true})
		// The target is now allowed (UEFI); sushy then stores Pxe for UefiHttp without
		// an HttpBootUri, and the read-back says so.
		if errors.Is(err, bmc.ErrUnsupported) {
			t.Fatalf("UEFI HTTP refused as unsupported: the mode was not switched first: %v", err)
		}
		kindIs(t, err, bmc.ErrDiffers)
		if err == nil || !strings.Contains(err.Error(), "BootSourceOverrideTarget Pxe (asked UefiHttp)") {
			t.Errorf("error does not say what the BMC kept: %v", err)
		}
	})
	t.Run("inspection", func(t *testing.T) {
		inv, err := d.Inspect(peerCtx(t, 30*time.Second))
		if err != nil {
			t.Fatal(err)
		}
		if !inv.HasUUID || inv.UUID.String() != testpeer.DefaultSushySystem.UUID {
			t.Errorf("UUID = %v %v", inv.UUID, inv.HasUUID)
		}
		if !inv.NICsKnown || len(inv.NICs) != 1 || inv.NICs[0].MAC != hwid.MustParseMAC("00:5c:52:31:3a:9c") {
			t.Errorf("NICs = %+v (known %v)", inv.NICs, inv.NICsKnown)
		}
	})
	t.Run("virtual media", func(t *testing.T) {
		iso := isoServer(t)
		if err := d.InsertMedia(peerCtx(t, 30*time.Second), iso.URL+"/boot.iso"); err != nil {
			t.Fatalf("insert: %v", err)
		}
		if err := d.InsertMedia(peerCtx(t, 30*time.Second), iso.URL+"/other.iso"); err != nil {
			t.Fatalf("insert of another image: %v", err)
		}
		err := d.InsertMedia(peerCtx(t, 30*time.Second), iso.URL+"/missing.iso")
		kindIs(t, err, bmc.ErrRefused)
		if err := d.InsertMedia(peerCtx(t, 30*time.Second), iso.URL+"/boot.iso"); err != nil {
			t.Fatalf("insert after a failed one: %v", err)
		}
		if err := d.EjectMedia(peerCtx(t, 30*time.Second)); err != nil {
			t.Fatalf("eject: %v", err)
		}
	})
	t.Run("firmware: the fake driver cannot, and says so", func(t *testing.T) {
		// sushy's fake driver keeps no firmware versions, so SimpleUpdate answers 500 (its
		// 204 with the task's Location is tested against bmctest.Options.FirmwareNoContent).
		_, err := d.UpdateFirmware(peerCtx(t, 30*time.Second), bmc.FirmwareUpdate{URL: "http://192.0.2.1/bios.bin",
			Targets: []string{"/redfish/v1/Systems/" + testpeer.DefaultSushySystem.UUID}})
		kindIs(t, err, bmc.ErrRefused)
		var oe *bmc.OpError
		if !errors.As(err, &oe) || !strings.Contains(oe.Message, "Failed fetching BIOS information") {
			t.Errorf("error does not carry the BMC's message: %v", err)
		}
	})
	t.Run("storage", func(t *testing.T) {
		disks, err := d.Storage(peerCtx(t, 30*time.Second))
		if err != nil {
			t.Fatal(err)
		}
		// Model, serial and health are what sushy's drive template fills in.
		want := []bmc.Disk{
			{Name: "Drive Sample", Model: "C123", Serial: "1234570", CapacityBytes: 899527000000, Controller: "1", Health: "OK"},
			{Name: "Drive Two", Model: "C123", Serial: "1234570", CapacityBytes: 480103981056, Controller: "1", Health: "OK"},
		}
		if diff := cmp.Diff(want, disks); diff != "" {
			t.Errorf("disks (-want +got):\n%s", diff)
		}
	})
	t.Run("volumes: the fake driver lists them and creates none", func(t *testing.T) {
		// sushy serves Volumes from its config and creates them only through libvirt: its
		// fake driver answers a creation 501, which is ErrUnsupported. It has no DELETE of
		// a volume and no Drive.SecureErase.
		vs, err := d.Volumes(peerCtx(t, 30*time.Second), "")
		if err != nil || len(vs) != 0 {
			t.Fatalf("Volumes = %v, %v; want none", vs, err)
		}
		_, err = d.CreateVolume(peerCtx(t, 30*time.Second), bmc.VolumeSpec{RAIDType: "RAID1",
			Drives: []string{"32ADF365C6C1B7BD", "58CFF987A1B2C3D4"}})
		kindIs(t, err, bmc.ErrUnsupported)
		kindIs(t, d.EraseDrive(peerCtx(t, 30*time.Second), "1", "32ADF365C6C1B7BD"), bmc.ErrUnsupported)
		if vs, err := d.Volumes(peerCtx(t, 30*time.Second), "1"); err != nil || len(vs) != 0 {
			t.Errorf("Volumes after the refused creation = %v, %v", vs, err)
		}
	})
	t.Run("secure boot enable, read back", func(t *testing.T) {
		st, err := d.SecureBoot(peerCtx(t, 30*time.Second))
		if err != nil || st.Enabled {
			t.Fatalf("SecureBoot = %+v, %v; want disabled (sushy's default)", st, err)
		}
		for _, on := range []bool{true, false} {
			if err := d.SetSecureBoot(peerCtx(t, 30*time.Second), on); err != nil {
				t.Fatalf("SetSecureBoot(%v): %v", on, err)
			}
			st, err := d.SecureBoot(peerCtx(t, 30*time.Second))
			want := map[bool]string{true: "Enabled", false: "Disabled"}[on]
			if err != nil || st.Enabled != on || st.CurrentBoot != want {
				t.Errorf("after SetSecureBoot(%v): %+v, %v", on, st, err)
			}
		}
	})
}

func TestSushyEmulatorTLS(t *testing.T) {
	s := testpeer.SushyEmulator(t, testpeer.SushyConfig{Username: sushyUser, Password: sushyPass, TLS: true})
	t.Run("pinned", func(t *testing.T) {
		d := dialSushy(t, s, sushyConfig())
		if _, err := d.PowerState(peerCtx(t, 30*time.Second)); err != nil {
			t.Fatal(err)
		}
	})
	t.Run("http:// to the TLS port", func(t *testing.T) {
		_, err := redfish.Dial(peerCtx(t, 30*time.Second), sushyConfig(), bmc.Target{Driver: redfish.Name,
			Address: strings.Replace(s.URL, "https://", "http://", 1), Username: sushyUser, Password: sushyPass})
		kindIs(t, err, bmc.ErrScheme)
		if err == nil || !strings.Contains(err.Error(), "https://") {
			t.Errorf("error does not say to use https://: %v", err)
		}
	})
}

// mockupDir is a mockup folder of bmctest's, served as is by DMTF's server.
func mockupDir(name string) string { return filepath.Join("..", "bmctest", "testdata", name) }

func sessionCount(t *testing.T, url string) int {
	t.Helper()
	resp, err := http.Get(url + "/redfish/v1/SessionService/Sessions")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var coll struct {
		Members []json.RawMessage
	}
	if err := json.NewDecoder(resp.Body).Decode(&coll); err != nil {
		t.Fatal(err)
	}
	return len(coll.Members)
}

// mockupBoot reads the Boot object of the DMTF mockup's system as the server keeps it.
func mockupBoot(t *testing.T, url string) map[string]any {
	t.Helper()
	resp, err := http.Get(url + "/redfish/v1/Systems/437XR1138R2")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var sys struct{ Boot map[string]any }
	if err := json.NewDecoder(resp.Body).Decode(&sys); err != nil {
		t.Fatal(err)
	}
	return sys.Boot
}

func TestDMTFMockupServer(t *testing.T) {
	m := testpeer.RedfishMockupServer(t, mockupDir("public-rackmount1"))
	tg := bmc.Target{Driver: redfish.Name, Address: m.URL, Username: "Administrator", Password: "any"}
	cfg := redfish.Config{PollInterval: 50 * time.Millisecond, PowerTimeout: 500 * time.Millisecond, Timeout: 10 * time.Second, SettleTime: 50 * time.Millisecond}

	t.Run("session login and logout", func(t *testing.T) {
		before := sessionCount(t, m.URL)
		d, err := redfish.Dial(peerCtx(t, 20*time.Second), cfg, tg)
		if err != nil {
			t.Fatal(err)
		}
		if got := sessionCount(t, m.URL); got != before+1 {
			t.Errorf("sessions after login = %d, want %d", got, before+1)
		}
		if len(d.Learned()) != 0 {
			t.Errorf("learned %v from a BMC with a SessionService", d.Learned())
		}
		if err := d.Close(); err != nil {
			t.Fatalf("logout: %v", err)
		}
		if got := sessionCount(t, m.URL); got != before {
			t.Errorf("sessions after logout = %d, want %d", got, before)
		}
	})
	d, err := redfish.Dial(peerCtx(t, 20*time.Second), cfg, tg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = d.Close() })

	t.Run("boot PATCH merged and read back", func(t *testing.T) {
		for _, b := range []bmc.BootDevice{
			{Target: bmc.BootPXE, Mode: bmc.BootModeUEFI},
			{Target: bmc.BootCD, Mode: bmc.BootModeLegacy, Persistent: true},
			{Target: bmc.BootNone},
		} {
			if err := d.SetBootDevice(peerCtx(t, 20*time.Second), b); err != nil {
				t.Errorf("SetBootDevice(%+v): %v", b, err)
			}
		}
	})
	t.Run("UEFI HTTP is not offered, and Legacy stays", func(t *testing.T) {
		// The system was left in Legacy mode above. UEFI is listed, so the mode is switched
		// to read UEFI's targets; UefiHttp is not among them, and Legacy is put back.
		if m := mockupBoot(t, m.URL)["BootSourceOverrideMode"]; m != "Legacy" {
			t.Fatalf("mode before: %v", m)
		}
		err := d.SetBootDevice(peerCtx(t, 20*time.Second), bmc.BootDevice{Target: bmc.BootHTTP})
		kindIs(t, err, bmc.ErrUnsupported)
		if m := mockupBoot(t, m.URL)["BootSourceOverrideMode"]; m != "Legacy" {
			t.Errorf("mode after: %v (%v)", m, err)
		}
	})
	t.Run("an action the server accepts but never carries out", func(t *testing.T) {
		// The mockup server answers 204 to any listed action and changes nothing: the
		// read-back is what tells.
		err := d.SetPower(peerCtx(t, 20*time.Second), bmc.PowerActionForceOff)
		kindIs(t, err, bmc.ErrTimeout)
		if err == nil || !strings.Contains(err.Error(), "still reports On") {
			t.Errorf("error does not say what the machine reports: %v", err)
		}
	})
	t.Run("virtual media by PATCH, read back", func(t *testing.T) {
		// The mockup's drives list no actions: the driver PATCHes them, and the server
		// merges the PATCH.
		if err := d.InsertMedia(peerCtx(t, 20*time.Second), "http://192.0.2.1/boot.iso"); err != nil {
			t.Fatalf("insert: %v", err)
		}
		if err := d.EjectMedia(peerCtx(t, 20*time.Second)); err != nil {
			t.Fatalf("eject: %v", err)
		}
		if !strings.Contains(strings.Join(d.Learned(), " "), "media-by-patch") {
			t.Errorf("learned %v", d.Learned())
		}
	})
	t.Run("firmware: 204 without a task", func(t *testing.T) {
		// The server answers any listed action 204 and runs nothing: with no task to
		// follow and nothing to read back, the update is reported as the BMC put it.
		res, err := d.UpdateFirmware(peerCtx(t, 20*time.Second), bmc.FirmwareUpdate{URL: "http://192.0.2.1/fw.bin"})
		if err != nil || res.State != "Completed" || res.Task != "" {
			t.Errorf("UpdateFirmware = %+v, %v", res, err)
		}
	})
	t.Run("inspection", func(t *testing.T) {
		inv, err := d.Inspect(peerCtx(t, 20*time.Second))
		if err != nil {
			t.Fatal(err)
		}
		if !inv.HasUUID || inv.Serial != "437XR1138R2" || len(inv.NICs) == 0 {
			t.Errorf("inventory = %+v", inv)
		}
	})
}
