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
	seeds = append(seeds, "../bmctest/testdata/public-rackmount1/Systems/437XR1138R2/index.json")
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
		d, err := redfish.Dial(ctx, redfish.Config{BasicAuth: true, Timeout: 2 * time.Second},
			bmc.Target{Address: srv.URL, Username: "u", Password: "p"})
		if err != nil {
			t.Fatalf("Dial: %v", err)
		}
		defer d.Close()
		check := func(err error) {
			var oe *bmc.OpError
			if err != nil && !errors.As(err, &oe) {
				t.Errorf("error %T %v is not an *bmc.OpError", err, err)
			}
		}
		inv, err := d.Inspect(ctx)
		check(err)
		if err == nil {
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
		if n := requests.Load(); n > 3*512+16 {
			t.Errorf("%d requests for one round of operations", n)
		}
	})
}
