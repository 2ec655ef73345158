package redfish_test

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"github.com/bettercompute/siteboot/bmc"
	"github.com/bettercompute/siteboot/bmc/redfish"
	"github.com/bettercompute/siteboot/hwid"
)

// FuzzBMCAnswers serves the fuzzer's bytes as every resource below the service root and
// the system collection, with the fuzzer's status, and drives every read operation over
// them. Whatever a BMC answers: no panic, a bounded number of requests, an *bmc.OpError
// on failure, and on success only well-formed values (unique non-zero MACs, no link-local
// addresses, a UUID that round-trips).
func FuzzBMCAnswers(f *testing.F) {
	seeds, _ := filepath.Glob("../bmctest/testdata/public-rackmount1/Systems/437XR1138R2/*/*/index.json")
	seeds = append(seeds, "../bmctest/testdata/public-rackmount1/Systems/437XR1138R2/index.json",
		"../bmctest/testdata/hpe-dl325-ilo5/Systems/1/index.json",
		"../bmctest/testdata/hpe-dl325-ilo5/Managers/1/VirtualMedia/2/index.json",
		"../bmctest/testdata/hpe-dl325-ilo5/Managers/1/EthernetInterfaces/3/index.json",
		"../bmctest/testdata/openbmc/Systems/system/index.json",
		"../bmctest/testdata/openbmc/Systems/system/ResetActionInfo/index.json",
		"../bmctest/testdata/openbmc/UpdateService/index.json")
	for _, p := range seeds {
		if b, err := os.ReadFile(p); err == nil {
			f.Add(b, uint16(200))
		}
	}
	f.Add([]byte(`{"Members":[{"@odata.id":"/redfish/v1/x"}],"EthernetInterfaces":{"@odata.id":"/redfish/v1/x"},"MACAddress":"02:00:00:00:00:01","Links":{"Chassis":[{"@odata.id":"/redfish/v1/x"}]},"NetworkAdapters":{"@odata.id":"/redfish/v1/x"},"NetworkDeviceFunctions":{"@odata.id":"/redfish/v1/x"}}`), uint16(200))
	f.Add([]byte(`{"UUID":"38947555-7742-3448-3784-823347823834","EthernetInterfaces":{"@odata.id":"@evil.example/redfish/v1/x"}}`), uint16(200))
	f.Add([]byte(`{"error":{"code":"Base.1.8.GeneralError","message":"no"}}`), uint16(400))
	f.Add([]byte(`not json`), uint16(500))
	f.Add([]byte(`{"TaskState":"Running"}`), uint16(202))
	f.Add([]byte(`{"@odata.id":"/redfish/v1/TaskService/Tasks/1","Id":"1","TaskState":"Completed"}`), uint16(200))
	f.Add([]byte(`{"error":{"code":"Base.1.8.GeneralError"},"@Message.ExtendedInfo":[{"Message":"m","Severity":"Critical"}]}`), uint16(200))
	f.Add([]byte(`{"Actions":{"#UpdateService.SimpleUpdate":{"target":"/redfish/v1/x"},"#ComputerSystem.Reset":{"@Redfish.ActionInfo":"/redfish/v1/x"}},"Parameters":[{"Name":"ResetType","AllowableValues":["On"]}]}`), uint16(200))
	f.Add([]byte(`{"MediaTypes":["CD"],"Inserted":true,"Image":"http://192.0.2.1/a.iso","VirtualMedia":{"@odata.id":"/redfish/v1/x"},"Members":[{"@odata.id":"/redfish/v1/x"}]}`), uint16(200))

	f.Add([]byte(`{"@Redfish.Settings":{"SettingsObject":{"@odata.id":"/redfish/v1/Systems/Self/SD"}},"Boot":{"BootSourceOverrideTarget":"Pxe","BootSourceOverrideEnabled":"Once"}}`), uint16(200))
	f.Add([]byte(`{"@Redfish.Settings":{"SettingsObject":{"@odata.id":"//evil.example/x"}}}`), uint16(200))
	f.Add([]byte(`{"error":{"code":"IDRAC.2.8.SYS518","@Message.ExtendedInfo":[{"MessageId":"IDRAC.2.8.SYS518"}]}}`), uint16(503))
	f.Add([]byte(`{"error":{"code":"Base.1.8.GeneralError","@Message.ExtendedInfo":[{"MessageId":"iLO.2.15.InvalidOperationForSystemState"}]}}`), uint16(400))
	f.Add([]byte(`{"Storage":{"@odata.id":"/redfish/v1/x"},"Members":[{"@odata.id":"/redfish/v1/x"}],"Id":"x","Drives":[{"@odata.id":"/redfish/v1/x"}],"Volumes":{"@odata.id":"/redfish/v1/x"},"RAIDType":"RAID1","Links":{"Drives":[{"@odata.id":"/redfish/v1/x"}]},"Actions":{"#Drive.SecureErase":{"target":"/redfish/v1/x"}}}`), uint16(201))
	f.Add([]byte(`{"Storage":{"@odata.id":"/redfish/v1/x"},"Members":[{"@odata.id":"/redfish/v1/x"}],"Id":"x","Volumes":{"@odata.id":"/redfish/v1/x"},"VolumeType":"Mirrored","CapacityBytes":-5,"Links":{"Drives":[{"@odata.id":"//evil.example/x"}]},"Actions":{"#Volume.Initialize":{"target":"/redfish/v1/x"}}}`), uint16(200))
	f.Add([]byte(`{"FirmwareInventory":{"@odata.id":"/redfish/v1/x"},"Members":[{"@odata.id":"/redfish/v1/x"}],"Version":"9.9"}`), uint16(200))

	f.Fuzz(func(t *testing.T, body []byte, status uint16) {
		code := int(status%500) + 100
		if code < 200 {
			code = 200
		}
		var requests atomic.Int64
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			requests.Add(1)
			w.Header().Set("Content-Type", "application/json")
			switch r.URL.Path {
			case "/redfish/v1/", "/redfish/v1":
				_, _ = w.Write([]byte(`{"Systems":{"@odata.id":"/redfish/v1/Systems"},"AccountService":{"@odata.id":"/redfish/v1/AccountService"}}`))
			case "/redfish/v1/Systems":
				_, _ = w.Write([]byte(`{"Members":[{"@odata.id":"/redfish/v1/Systems/1"}]}`))
			default:
				w.WriteHeader(code)
				_, _ = w.Write(body)
			}
		}))
		defer srv.Close()
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		d, err := redfish.Dial(ctx, redfish.Config{BasicAuth: true, Timeout: 2 * time.Second,
			PollInterval: time.Millisecond, PowerTimeout: 50 * time.Millisecond, SettleTime: time.Millisecond,
			TaskTimeout: 100 * time.Millisecond,
			RetryWait:   time.Millisecond},
			bmc.Target{Address: srv.URL, Username: "u", Password: "p"})
		if err != nil {
			t.Fatalf("Dial: %v", err)
		}
		defer d.Close()
		check := func(err error) {
			var oe *bmc.OpError
			var pe *bmc.PartialError
			if errors.As(err, &pe) {
				for _, p := range pe.Parts {
					if !errors.As(p.Err, &oe) || p.Part == "" {
						t.Errorf("part %q: error %T %v is not an *bmc.OpError", p.Part, p.Err, p.Err)
					}
				}
				return
			}
			if err != nil && !errors.As(err, &oe) {
				t.Errorf("error %T %v is not an *bmc.OpError", err, err)
			}
		}
		inv, err := d.Inspect(ctx)
		check(err)
		if err == nil || errors.Is(err, bmc.ErrPartial) {
			seen := map[hwid.MAC]bool{}
			for _, n := range inv.NICs {
				if n.MAC.IsZero() || seen[n.MAC] {
					t.Errorf("NIC MAC %v zero or repeated", n.MAC)
				}
				seen[n.MAC] = true
			}
			for _, a := range append(inv.HostAddrs, inv.BMCAddrs...) {
				if !a.IsValid() || a.IsLinkLocalUnicast() || a.IsUnspecified() {
					t.Errorf("address %v reported", a)
				}
			}
			if inv.HasUUID {
				if u, err := hwid.ParseUUID(inv.UUID.String()); err != nil || u != inv.UUID {
					t.Errorf("UUID %v does not round-trip", inv.UUID)
				}
			}
		}
		_, err = d.Storage(ctx)
		check(err)
		_, err = d.PowerState(ctx)
		check(err)
		check(d.SetBootDevice(ctx, bmc.BootDevice{Target: bmc.BootPXE}))
		check(d.RotatePassword(ctx, "u", "p2"))
		check(d.InsertMedia(ctx, "http://192.0.2.1/boot.iso"))
		check(d.EjectMedia(ctx))
		fctx, fcancel := context.WithTimeout(ctx, 2*time.Second)
		_, err = d.UpdateFirmware(fctx, bmc.FirmwareUpdate{URL: "http://192.0.2.1/fw.bin", Version: "9.9"})
		fcancel()
		check(err)
		if n := requests.Load(); n > 6*512+64 {
			t.Errorf("%d requests for one round of operations", n)
		}
		// The storage changes: typed errors, and a volume read back only with what the
		// BMC listed.
		sctx, scancel := context.WithTimeout(ctx, time.Second)
		defer scancel()
		vs, err := d.Volumes(sctx, "")
		check(err)
		for _, v := range vs {
			if v.CapacityBytes < 0 {
				t.Errorf("volume %+v with a negative capacity", v)
			}
		}
		v, err := d.CreateVolume(sctx, bmc.VolumeSpec{RAIDType: "RAID1", Drives: []string{"x", "y"}})
		check(err)
		if err == nil && (v.RAIDType != "RAID1" && v.RAIDType != "") {
			t.Errorf("volume %+v kept another RAID type without ErrDiffers", v)
		}
		check(d.DeleteVolume(sctx, "", "1"))
		check(d.EraseDrive(sctx, "", "x"))
	})
}
