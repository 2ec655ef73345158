package bmctest_test

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/bettercompute/siteboot/bmc/bmctest"
	"github.com/google/go-cmp/cmp"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

type client struct {
	t     *testing.T
	srv   *bmctest.Server
	token string
}

func (c *client) do(method, path, body string, hdr ...string) (int, map[string]any, http.Header) {
	c.t.Helper()
	req, err := http.NewRequest(method, c.srv.URL+path, strings.NewReader(body))
	if err != nil {
		c.t.Fatal(err)
	}
	if c.token != "" {
		req.Header.Set("X-Auth-Token", c.token)
	}
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	resp, err := c.srv.Client().Do(req)
	if err != nil {
		c.t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	var m map[string]any
	_ = json.Unmarshal(b, &m)
	return resp.StatusCode, m, resp.Header
}

func login(t *testing.T, srv *bmctest.Server) *client {
	c := &client{t: t, srv: srv}
	code, _, h := c.do("POST", "/redfish/v1/SessionService/Sessions",
		fmt.Sprintf(`{"UserName":%q,"Password":%q}`, bmctest.DefaultUsername, bmctest.DefaultPassword))
	if code != http.StatusCreated || h.Get("X-Auth-Token") == "" || h.Get("Location") == "" {
		t.Fatalf("login: %d %v", code, h)
	}
	c.token = h.Get("X-Auth-Token")
	return c
}

func TestServesTheMockup(t *testing.T) {
	srv := bmctest.NewServer(bmctest.Options{})
	defer srv.Close()
	anon := &client{t: t, srv: srv}
	if code, root, _ := anon.do("GET", "/redfish/v1/", ""); code != 200 || root["Systems"] == nil {
		t.Fatalf("service root without auth: %d", code)
	}
	if code, _, _ := anon.do("GET", bmctest.SystemPath, ""); code != http.StatusUnauthorized {
		t.Errorf("system without auth: %d, want 401", code)
	}
	c := login(t, srv)
	code, sys, _ := c.do("GET", bmctest.SystemPath, "")
	if code != 200 {
		t.Fatalf("GET system: %d", code)
	}
	b, err := os.ReadFile("testdata/public-rackmount1/Systems/437XR1138R2/index.json")
	if err != nil {
		t.Fatal(err)
	}
	var file map[string]any
	if err := json.Unmarshal(b, &file); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(file, sys); diff != "" {
		t.Errorf("served system differs from the mockup file (-file +served):\n%s", diff)
	}
	if code, _, _ := c.do("GET", "/redfish/v1/NoSuchThing", ""); code != 404 {
		t.Errorf("missing resource: %d", code)
	}
}

func TestETagsAndPatch(t *testing.T) {
	srv := bmctest.NewServer(bmctest.Options{})
	defer srv.Close()
	c := login(t, srv)
	_, _, h := c.do("GET", bmctest.SystemPath, "")
	tag := h.Get("ETag")
	if tag == "" {
		t.Fatal("no ETag")
	}
	body := `{"AssetTag":"rack-7"}`
	if code, _, _ := c.do("PATCH", bmctest.SystemPath, body, "If-Match", `W/"stale"`); code != http.StatusPreconditionFailed {
		t.Errorf("stale If-Match: %d, want 412", code)
	}
	if code, _, _ := c.do("PATCH", bmctest.SystemPath, body, "If-Match", tag); code != 200 {
		t.Errorf("current If-Match: %d", code)
	}
	if got := srv.Resource(bmctest.SystemPath)["AssetTag"]; got != "rack-7" {
		t.Errorf("AssetTag = %v", got)
	}
	_, _, h2 := c.do("GET", bmctest.SystemPath, "")
	if h2.Get("ETag") == tag {
		t.Error("ETag unchanged by a PATCH")
	}
	reqs := srv.Requests()
	last := reqs[len(reqs)-2]
	if last.Method != "PATCH" || last.Body != body || last.IfMatch != tag || last.Auth != "session" || last.Status != 200 {
		t.Errorf("recorded %+v", last)
	}
}

func TestVendorRules(t *testing.T) {
	tests := []struct {
		vendor bmctest.Vendor
		boot   string
		want   int
	}{
		{bmctest.Generic, `{"BootSourceOverrideTarget":"Pxe","BootSourceOverrideEnabled":"Continuous"}`, 200},
		{bmctest.Generic, `{"BootSourceOverrideTarget":"UefiHttp"}`, 400},
		{bmctest.HPEiLO, `{"BootSourceOverrideTarget":"Pxe","BootSourceOverrideMode":"UEFI"}`, 400},
		{bmctest.HPEiLO, `{"BootSourceOverrideTarget":"Pxe"}`, 200},
		{bmctest.Supermicro, `{"BootSourceOverrideTarget":"Pxe"}`, 400},
		{bmctest.Supermicro, `{"BootSourceOverrideTarget":"Pxe","BootSourceOverrideMode":"UEFI"}`, 200},
		{bmctest.LenovoXCC, `{"BootSourceOverrideEnabled":"Continuous"}`, 400},
		{bmctest.LenovoXCC, `{"BootSourceOverrideEnabled":"Once"}`, 200},
	}
	for _, tc := range tests {
		srv := bmctest.NewServer(bmctest.Options{Vendor: tc.vendor})
		c := login(t, srv)
		code, body, _ := c.do("PATCH", bmctest.SystemPath, `{"Boot":`+tc.boot+`}`)
		if code != tc.want {
			t.Errorf("%s %s: %d, want %d (%v)", tc.vendor, tc.boot, code, tc.want, body)
		}
		if code == 400 && body["error"] == nil {
			t.Errorf("%s: 400 without a Redfish error body", tc.vendor)
		}
		srv.Close()
	}
}

func TestResetTaskAndSessions(t *testing.T) {
	srv := bmctest.NewServer(bmctest.Options{TaskPolls: 2})
	defer srv.Close()
	c := login(t, srv)
	if srv.Sessions() != 1 {
		t.Fatalf("sessions = %d", srv.Sessions())
	}
	if code, _, _ := c.do("POST", bmctest.SystemPath+"/Actions/ComputerSystem.Reset", `{"ResetType":"Explode"}`); code != 400 {
		t.Errorf("bad ResetType: %d", code)
	}
	if code, _, _ := c.do("POST", bmctest.SystemPath+"/Actions/ComputerSystem.Reset", `{"ResetType":"ForceOff"}`); code != 204 {
		t.Errorf("ForceOff: %d", code)
	}
	if srv.Resource(bmctest.SystemPath)["PowerState"] != "Off" {
		t.Error("not off")
	}
	code, _, h := c.do("POST", "/redfish/v1/UpdateService/Actions/UpdateService.SimpleUpdate", `{"ImageURI":"http://192.0.2.1/fw.bin"}`)
	if code != 202 || h.Get("Location") == "" {
		t.Fatalf("SimpleUpdate: %d %v", code, h)
	}
	var states []string
	for range 3 {
		code, task, _ := c.do("GET", h.Get("Location"), "")
		states = append(states, fmt.Sprint(code, " ", task["TaskState"]))
	}
	if diff := cmp.Diff([]string{"202 Running", "200 Completed", "200 Completed"}, states); diff != "" {
		t.Errorf("task monitor (-want +got):\n%s", diff)
	}
	srv.ExpireSessions()
	if code, _, _ := c.do("GET", bmctest.SystemPath, ""); code != 401 {
		t.Errorf("after expiry: %d", code)
	}
}

func TestServesTheCaptures(t *testing.T) {
	for _, tc := range []struct {
		mockup           bmctest.Mockup
		system, model    string
		resetOffAccepted bool
	}{
		{bmctest.HPEDL325, "/redfish/v1/Systems/1", "ProLiant DL325 Gen10 Plus", true},
		{bmctest.OpenBMC, "/redfish/v1/Systems/system", "", true},
	} {
		t.Run(string(tc.mockup), func(t *testing.T) {
			srv := bmctest.NewServer(bmctest.Options{Mockup: tc.mockup})
			defer srv.Close()
			if srv.SystemPath() != tc.system {
				t.Fatalf("SystemPath = %q", srv.SystemPath())
			}
			c := login(t, srv)
			code, sys, _ := c.do("GET", tc.system, "")
			if code != http.StatusOK || str(sys["Model"]) != tc.model {
				t.Fatalf("GET system: %d %v", code, sys["Model"])
			}
			// Reset types come from the action's annotation (iLO) or its ActionInfo (OpenBMC).
			srv.SetPowerState("On")
			code, _, _ = c.do("POST", tc.system+"/Actions/ComputerSystem.Reset", `{"ResetType":"ForceOff"}`)
			if code != http.StatusNoContent || srv.Resource(tc.system)["PowerState"] != "Off" {
				t.Errorf("ForceOff: %d, power %v", code, srv.Resource(tc.system)["PowerState"])
			}
			code, _, _ = c.do("POST", tc.system+"/Actions/ComputerSystem.Reset", `{"ResetType":"Bogus"}`)
			if code != http.StatusBadRequest {
				t.Errorf("unknown reset type: %d", code)
			}
		})
	}
}

func str(v any) string {
	s, _ := v.(string)
	return s
}

func TestDeleteMakesAPartAnswer404(t *testing.T) {
	srv := bmctest.NewServer(bmctest.Options{Mockup: bmctest.HPEDL325})
	defer srv.Close()
	c := login(t, srv)
	srv.Delete("/redfish/v1/Managers/1", "/redfish/v1/Managers")
	if code, _, _ := c.do("GET", "/redfish/v1/Managers/1", ""); code != http.StatusNotFound {
		t.Errorf("GET deleted: %d", code)
	}
	if _, coll, _ := c.do("GET", "/redfish/v1/Managers", ""); len(coll["Members"].([]any)) != 0 {
		t.Errorf("still listed: %v", coll["Members"])
	}
}

func TestBehaviourOptions(t *testing.T) {
	t.Run("no SessionService", func(t *testing.T) {
		srv := bmctest.NewServer(bmctest.Options{NoSessionService: true})
		defer srv.Close()
		c := &client{t: t, srv: srv}
		_, root, _ := c.do("GET", "/redfish/v1/", "")
		if root["SessionService"] != nil || root["Links"].(map[string]any)["Sessions"] != nil {
			t.Errorf("root still links sessions: %v", root)
		}
	})
	t.Run("If-Match required", func(t *testing.T) {
		srv := bmctest.NewServer(bmctest.Options{RequireIfMatch: true})
		defer srv.Close()
		c := login(t, srv)
		if code, _, _ := c.do("PATCH", bmctest.SystemPath, `{"AssetTag":"x"}`); code != http.StatusPreconditionRequired {
			t.Errorf("PATCH without If-Match: %d", code)
		}
		_, _, h := c.do("GET", bmctest.SystemPath, "")
		if code, _, _ := c.do("PATCH", bmctest.SystemPath, `{"AssetTag":"x"}`, "If-Match", h.Get("ETag")); code != http.StatusOK {
			t.Errorf("PATCH with If-Match: %d", code)
		}
	})
	t.Run("UefiHttp only in UEFI mode", func(t *testing.T) {
		srv := bmctest.NewServer(bmctest.Options{ModeDependentTargets: true})
		defer srv.Close()
		c := login(t, srv)
		allowed := func() []any {
			_, sys, _ := c.do("GET", bmctest.SystemPath, "")
			return sys["Boot"].(map[string]any)["BootSourceOverrideTarget@Redfish.AllowableValues"].([]any)
		}
		if !contains(allowed(), "UefiHttp") {
			t.Errorf("UEFI mode: %v", allowed())
		}
		srv.Patch(bmctest.SystemPath, map[string]any{"Boot": map[string]any{"BootSourceOverrideMode": "Legacy"}})
		if contains(allowed(), "UefiHttp") {
			t.Errorf("Legacy mode: %v", allowed())
		}
	})
	t.Run("firmware 204 with the task's Location", func(t *testing.T) {
		srv := bmctest.NewServer(bmctest.Options{FirmwareNoContent: true})
		defer srv.Close()
		c := login(t, srv)
		code, _, h := c.do("POST", "/redfish/v1/UpdateService/Actions/UpdateService.SimpleUpdate", `{"ImageURI":"http://192.0.2.1/x"}`)
		if code != http.StatusNoContent || !strings.HasPrefix(h.Get("Location"), "/redfish/v1/TaskService/Tasks/") {
			t.Fatalf("%d %v", code, h)
		}
		if _, task, _ := c.do("GET", h.Get("Location"), ""); task["TaskState"] != "Completed" {
			t.Errorf("task %v", task)
		}
	})
	t.Run("insert fails after recording the image", func(t *testing.T) {
		srv := bmctest.NewServer(bmctest.Options{MediaInsertFails: true})
		defer srv.Close()
		c := login(t, srv)
		c.do("POST", bmctest.CD1Path+"/Actions/VirtualMedia.EjectMedia", `{}`)
		code, _, _ := c.do("POST", bmctest.CD1Path+"/Actions/VirtualMedia.InsertMedia", `{"Image":"http://192.0.2.1/a.iso"}`)
		if code != http.StatusInternalServerError || srv.Resource(bmctest.CD1Path)["Inserted"] != true {
			t.Errorf("%d %v", code, srv.Resource(bmctest.CD1Path)["Inserted"])
		}
	})
}

func contains(list []any, v any) bool {
	for _, x := range list {
		if x == v {
			return true
		}
	}
	return false
}

// TestPowerOnsSentAreBeforeTheirLatency: a power-on is carried out after the request's
// latency, and PowerOnsSent tells when it arrived (on fake time).
func TestPowerOnsSentAreBeforeTheirLatency(t *testing.T) {
	srv := bmctest.NewServer(bmctest.Options{Faults: bmctest.Faults{MinLatency: 150 * time.Millisecond, MaxLatency: 150 * time.Millisecond}})
	defer srv.Close()
	srv.SetPowerState("Off")
	synctest.Test(t, func(t *testing.T) {
		start := time.Now()
		req := httptest.NewRequest(http.MethodPost, bmctest.SystemPath+"/Actions/ComputerSystem.Reset", strings.NewReader(`{"ResetType":"On"}`))
		req.SetBasicAuth(bmctest.DefaultUsername, bmctest.DefaultPassword)
		rec := httptest.NewRecorder()
		srv.ServeHTTP(rec, req)
		if rec.Code/100 != 2 {
			t.Fatalf("reset answered %d: %s", rec.Code, rec.Body)
		}
		ons, sent := srv.PowerOns(), srv.PowerOnsSent()
		if len(ons) != 1 || len(sent) != 1 {
			t.Fatalf("%d power-ons, %d sent; want 1 each", len(ons), len(sent))
		}
		if !sent[0].Equal(start) || ons[0].Sub(sent[0]) != 150*time.Millisecond {
			t.Errorf("sent at +%v, carried out %v later; want +0s and 150ms", sent[0].Sub(start), ons[0].Sub(sent[0]))
		}
	})
}
