package bootevents_test

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/bettercompute/siteboot/bootevents"
	"github.com/bettercompute/siteboot/hwid"
)

// TestMachineHandler: a machine seen gets its timeline and diagnosis (with the host's
// facts), one never seen a 404 with the no-DHCP diagnosis, a malformed MAC a 400, and no
// timeline a 503.
func TestMachineHandler(t *testing.T) {
	tl, err := bootevents.NewTimeline(bootevents.Config{})
	if err != nil {
		t.Fatal(err)
	}
	mac := hwid.MAC{0x52, 0x54, 0, 0, 0, 1}
	tl.Emit(bootevents.Event{MAC: mac, Stage: bootevents.StageBoot4011, Outcome: bootevents.OutcomeRefused, Reason: "fenced"})
	facts := func(m hwid.MAC) bootevents.Facts {
		return bootevents.Facts{Entry: m == mac, FenceEpoch: 3, FenceHolder: "agent-b"}
	}
	srv := httptest.NewServer(http.StripPrefix("/debug/machines/", bootevents.MachineHandler(tl, facts)))
	defer srv.Close()
	off := httptest.NewServer(bootevents.MachineHandler(nil, nil))
	defer off.Close()
	for _, tc := range []struct {
		url      string
		status   int
		code     string
		timeline bool
	}{
		{srv.URL + "/debug/machines/" + mac.String(), http.StatusOK, bootevents.DiagFenced, true},
		{srv.URL + "/debug/machines/52:54:00:00:00:02", http.StatusNotFound, bootevents.DiagNoDHCP, false},
		{srv.URL + "/debug/machines/not-a-mac", http.StatusBadRequest, "", false},
		{off.URL + "/" + mac.String(), http.StatusServiceUnavailable, "", false},
	} {
		resp, err := http.Get(tc.url)
		if err != nil {
			t.Fatal(err)
		}
		var rep bootevents.Report
		if tc.code != "" {
			if err := json.NewDecoder(resp.Body).Decode(&rep); err != nil {
				t.Fatalf("%s: %v", tc.url, err)
			}
		}
		resp.Body.Close()
		if tc.code == bootevents.DiagFenced && !strings.Contains(rep.Diagnosis.Line, "held by agent-b") {
			t.Errorf("the host's facts are not in %q", rep.Diagnosis.Line)
		}
		if resp.StatusCode != tc.status || rep.Diagnosis.Code != tc.code || (rep.Machine != nil) != tc.timeline {
			t.Errorf("%s: status %d, %+v; want %d, %q, timeline %v", tc.url, resp.StatusCode, rep, tc.status, tc.code, tc.timeline)
		}
	}
}
