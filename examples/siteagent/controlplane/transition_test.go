package controlplane_test

import (
	"encoding/json"
	"errors"
	"net/http"
	"testing"

	"github.com/bettercompute/siteboot/bmc"
	"github.com/bettercompute/siteboot/sitelink"
)

// TestTransitionRouting: a bmc.transition goes to the site's agent as one command; that
// agent (and only it) may claim the steps it takes on the transition's machines, and fetch
// their credentials; its machines' results are kept once each, from it alone, and its
// progress is the last one it reported; an invalid transition is refused before anything
// is routed.
func TestTransitionRouting(t *testing.T) {
	r := newRig(t)
	r.plane.SetCredential("bmc/m1", bmc.Credential{Username: "admin", Password: "pw-m1-secret"})
	a, b := r.client(t, site, "agent-a"), r.client(t, site, "agent-b")
	body := sitelink.TransitionCommand{Action: "cycle", Machines: []sitelink.TransitionMachine{
		{Name: "m1", Target: sitelink.BMCTarget{Driver: "redfish", Address: "https://198.51.100.1", Credential: "bmc/m1"}},
		{Name: "m2", Target: sitelink.BMCTarget{Driver: "redfish", Address: "https://198.51.100.2", Credential: "bmc/m1"}},
	}}
	if _, err := r.plane.Transition(site, sitelink.TransitionCommand{Action: "cycle"}); !errors.Is(err, bmc.ErrInvalid) {
		t.Errorf("a transition without machines: %v, want invalid", err)
	}
	if _, err := r.plane.BMC(site, sitelink.KindBMCTransition, sitelink.BMCCommand{}); err == nil {
		t.Error("a bmc.transition queued through BMC, without its body")
	}
	id, err := r.plane.Transition(site, body)
	if err != nil {
		t.Fatal(err)
	}
	claim := func(c *http.Client, node, cid string) (int, bmc.Grant) {
		t.Helper()
		var g bmc.Grant
		st, raw := r.ask(t, c, "/v1/bmc/claim", sitelink.ClaimRequest{Node: node, ID: cid, Op: "power", Journal: "j-" + node})
		if st == http.StatusOK {
			if err := json.Unmarshal(raw, &g); err != nil {
				t.Fatal(err)
			}
		}
		return st, g
	}
	step := id + "/m1/act/1"
	if st, _ := claim(a, "agent-a", step); st != http.StatusForbidden {
		t.Errorf("a step claimed before the transition was routed: %d, want 403", st)
	}

	r.routeTo(t, a, "agent-a", 1, id)
	if st, g := claim(b, "agent-b", step); st != http.StatusForbidden || g.Granted {
		t.Errorf("agent-b's claim on agent-a's step: %d %+v, want 403", st, g)
	}
	if st, _ := claim(a, "agent-a", id+"/m9/act/1"); st != http.StatusForbidden {
		t.Errorf("a step on a machine not in the transition: %d, want 403", st)
	}
	if st, g := claim(a, "agent-a", step); st != http.StatusOK || !g.Granted {
		t.Errorf("agent-a's claim on its step: %d %+v, want granted", st, g)
	}
	if st, _ := r.ask(t, b, "/v1/bmc/credential", sitelink.CredentialRequest{Node: "agent-b", Ref: "bmc/m1"}); st != http.StatusForbidden {
		t.Errorf("agent-b asked the machines' credential: %d, want 403", st)
	}
	var cred sitelink.Credential
	if st := r.post(t, a, "/v1/bmc/credential", sitelink.CredentialRequest{Node: "agent-a", Ref: "bmc/m1"}, &cred); st != http.StatusOK || cred.Password != "pw-m1-secret" {
		t.Errorf("agent-a asked its transition's credential: %d", st)
	}

	m1 := sitelink.BMCResult{ID: id + "/m1", Kind: sitelink.KindBMCTransition, Status: sitelink.StatusOK, Transition: id, Machine: "m1"}
	progress := sitelink.TransitionProgress{ID: id, Action: "cycle", Total: 2, Pending: 1, Done: 1}
	// agent-b's word on agent-a's transition counts for nothing.
	forged := m1
	forged.Status = sitelink.StatusFailed
	r.sync(t, b, sitelink.StatusReport{Site: site, Node: "agent-b", Beat: 1, BMC: []sitelink.BMCResult{forged},
		Transitions: []sitelink.TransitionProgress{{ID: id, Total: 2, Failed: 2}}})
	if st, _ := r.plane.TransitionState(id); len(st.Machines) != 0 || st.Progress.Total != 0 {
		t.Errorf("after agent-b's report: %+v, want nothing taken", st)
	}
	r.sync(t, a, sitelink.StatusReport{Site: site, Node: "agent-a", Beat: 2, BMC: []sitelink.BMCResult{m1}, Transitions: []sitelink.TransitionProgress{progress}})
	r.sync(t, a, sitelink.StatusReport{Site: site, Node: "agent-a", Beat: 3, BMC: []sitelink.BMCResult{m1}, Transitions: []sitelink.TransitionProgress{progress}})
	st, ok := r.plane.TransitionState(id)
	if !ok || len(st.Machines) != 1 || st.Machines["m1"].Status != sitelink.StatusOK || st.Repeats != 1 || st.Progress != progress {
		t.Errorf("plane's state: %+v, want m1 done once, one repeat, the progress reported", st)
	}
	if _, _, ok := r.plane.BMCResult(id); ok {
		t.Error("a machine's result ended the transition")
	}
	sum := sitelink.BMCResult{ID: id, Kind: sitelink.KindBMCTransition, Status: sitelink.StatusOK, Progress: &progress}
	r.sync(t, a, sitelink.StatusReport{Site: site, Node: "agent-a", Beat: 4, BMC: []sitelink.BMCResult{sum}})
	if res, _, ok := r.plane.BMCResult(id); !ok || res.Status != sitelink.StatusOK {
		t.Errorf("the transition's own result: %+v %v", res, ok)
	}
	if st, _ := claim(a, "agent-a", id+"/m2/act/1"); st != http.StatusForbidden {
		t.Errorf("a step claimed after the transition ended: %d, want 403", st)
	}

	aid, err := r.plane.AbortTransition(site, id)
	if err != nil {
		t.Fatal(err)
	}
	_, d := r.sync(t, a, sitelink.StatusReport{Site: site, Node: "agent-a", Beat: 5})
	var sent *sitelink.Command
	for i := range d.Commands {
		if d.Commands[i].ID == aid {
			sent = &d.Commands[i]
		}
	}
	if sent == nil || sent.Kind != sitelink.KindBMCTransitionAbort || sent.Abort != id {
		t.Errorf("abort command sent: %+v, want %s aborting %s", sent, sitelink.KindBMCTransitionAbort, id)
	}
}
