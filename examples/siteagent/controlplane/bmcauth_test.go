package controlplane_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"slices"
	"strings"
	"testing"

	"github.com/bettercompute/siteboot/bmc"
	"github.com/bettercompute/siteboot/sitelink"
)

// ask posts v to path over c and returns the status and the raw answer.
func (r *rig) ask(t *testing.T, c *http.Client, path string, v any) (int, []byte) {
	t.Helper()
	b, _ := json.Marshal(v)
	resp, err := c.Post(r.url+path, "application/json", bytes.NewReader(b))
	if err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, body
}

// routeTo sends node's heartbeat and checks that command id came back in its desired state.
func (r *rig) routeTo(t *testing.T, c *http.Client, node string, beat uint64, id string) {
	t.Helper()
	st, d := r.sync(t, c, sitelink.StatusReport{Site: site, Node: node, Beat: beat})
	if st != http.StatusOK || !slices.ContainsFunc(d.Commands, func(c sitelink.Command) bool { return c.ID == id }) {
		t.Fatalf("%s's heartbeat: %d, commands %+v; want command %s routed to it", node, st, d.Commands, id)
	}
}

var bmcTarget = sitelink.BMCTarget{Driver: "redfish", Address: "127.0.0.1:9", Credential: "bmc-site-t-1"}

// TestBMCCredentialOnlyToRoutedNode: a BMC credential goes, over mutual TLS, only to the
// node a live bmc.* command naming it is routed to. An enrolled node of another site with a
// valid certificate (agent-x of site-other), another agent of the same site (agent-b) and
// agent-a itself before the command is routed to it or after it ended, all get 403 and never
// the secret.
func TestBMCCredentialOnlyToRoutedNode(t *testing.T) {
	r := newRig(t)
	r.plane.Enroll("site-other", "agent-x")
	secret, next := "pw-"+strings.Repeat("t", 12), "pw-next-"+strings.Repeat("n", 8)
	r.plane.SetCredential(bmcTarget.Credential, bmc.Credential{Username: "admin", Password: secret})
	r.plane.SetCredential("bmc-site-t-next", bmc.Credential{Username: "admin", Password: next})
	a, b, x := r.client(t, site, "agent-a"), r.client(t, site, "agent-b"), r.client(t, "site-other", "agent-x")
	type want struct {
		who      string
		c        *http.Client
		node     string
		ref      string
		status   int
		password string // "" for none
	}
	check := func(stage string, cases []want) {
		t.Helper()
		for _, w := range cases {
			st, body := r.ask(t, w.c, "/v1/bmc/credential", map[string]string{"node": w.node, "ref": w.ref})
			if st != w.status {
				t.Errorf("%s: %s asking for %s: %d, want %d", stage, w.who, w.ref, st, w.status)
			}
			for _, s := range []string{secret, next} {
				if s != w.password && bytes.Contains(body, []byte(s)) {
					t.Errorf("%s: %s asking for %s got a password it must not have", stage, w.who, w.ref)
				}
			}
			if w.password != "" {
				var c struct{ Password string }
				if json.Unmarshal(body, &c); c.Password != w.password {
					t.Errorf("%s: %s did not get the credential of %s", stage, w.who, w.ref)
				}
			}
		}
	}
	strangers := func(ref string) []want {
		return []want{
			{"agent-x of another site", x, "agent-x", ref, http.StatusForbidden, ""},
			{"agent-x in agent-a's name", x, "agent-a", ref, http.StatusForbidden, ""},
			{"agent-b of the same site", b, "agent-b", ref, http.StatusForbidden, ""},
		}
	}

	power, err := r.plane.BMC(site, sitelink.KindBMCPower, sitelink.BMCCommand{Target: bmcTarget, Action: "cycle"})
	if err != nil {
		t.Fatal(err)
	}
	check("queued, not routed", append(strangers(bmcTarget.Credential),
		want{"agent-a", a, "agent-a", bmcTarget.Credential, http.StatusForbidden, ""}))

	r.routeTo(t, a, "agent-a", 1, power)
	check("routed to agent-a", append(strangers(bmcTarget.Credential),
		want{"agent-a", a, "agent-a", bmcTarget.Credential, http.StatusOK, secret},
		// A reference no command routed to agent-a names.
		want{"agent-a", a, "agent-a", "bmc-site-t-next", http.StatusForbidden, ""}))

	// A rotation names the new credential too; another site's node still gets neither.
	rotate, err := r.plane.BMC(site, sitelink.KindBMCRotate, sitelink.BMCCommand{Target: bmcTarget, NewCredential: "bmc-site-t-next"})
	if err != nil {
		t.Fatal(err)
	}
	r.routeTo(t, a, "agent-a", 2, rotate)
	check("rotation routed to agent-a", append(strangers("bmc-site-t-next"),
		want{"agent-a", a, "agent-a", "bmc-site-t-next", http.StatusOK, next}))

	// agent-b cannot end agent-a's commands by reporting results for them.
	r.sync(t, b, sitelink.StatusReport{Site: site, Node: "agent-b", Beat: 3, BMC: []sitelink.BMCResult{
		{ID: power, Kind: sitelink.KindBMCPower, Status: string(bmc.StatusOK)},
		{ID: rotate, Kind: sitelink.KindBMCRotate, Status: string(bmc.StatusOK)}}})
	if _, _, done := r.plane.BMCResult(power); done {
		t.Errorf("agent-b's report ended a command routed to agent-a")
	}
	check("after agent-b's forged results", []want{{"agent-a", a, "agent-a", bmcTarget.Credential, http.StatusOK, secret}})

	// Both commands end: nobody gets either credential any more.
	r.sync(t, a, sitelink.StatusReport{Site: site, Node: "agent-a", Beat: 4, BMC: []sitelink.BMCResult{
		{ID: power, Kind: sitelink.KindBMCPower, Status: string(bmc.StatusOK)},
		{ID: rotate, Kind: sitelink.KindBMCRotate, Status: string(bmc.StatusOK)}}})
	if _, _, done := r.plane.BMCResult(power); !done {
		t.Fatalf("agent-a's report did not end its command")
	}
	check("ended", []want{
		{"agent-a", a, "agent-a", bmcTarget.Credential, http.StatusForbidden, ""},
		{"agent-a", a, "agent-a", "bmc-site-t-next", http.StatusForbidden, ""},
	})
	if got := r.plane.Stats().RefusedNotRouted; got == 0 {
		t.Errorf("refused credential requests not counted")
	}
}

// TestBMCClaimOnlyFromRoutedNode: a claim on a destructive command is granted only to the
// node the command is routed to. A node of another site (or another agent of the same site)
// gets 403 for a queued command, a routed one and an id nobody issued, and leaves no claim
// record behind; the agent the command is routed to is then granted it.
func TestBMCClaimOnlyFromRoutedNode(t *testing.T) {
	r := newRig(t)
	r.plane.Enroll("site-other", "agent-x")
	a, b, x := r.client(t, site, "agent-a"), r.client(t, site, "agent-b"), r.client(t, "site-other", "agent-x")
	claim := func(c *http.Client, node, id string) (int, bmc.Grant) {
		t.Helper()
		var g bmc.Grant
		st, body := r.ask(t, c, "/v1/bmc/claim", sitelink.ClaimRequest{Node: node, ID: id, Op: "power", Journal: "j-" + node})
		if st == http.StatusOK {
			if err := json.Unmarshal(body, &g); err != nil {
				t.Fatal(err)
			}
		}
		return st, g
	}
	refused := func(stage, who string, c *http.Client, node, id string) {
		t.Helper()
		if st, g := claim(c, node, id); st != http.StatusForbidden || g.Granted {
			t.Errorf("%s: %s's claim on %s: %d granted=%v, want 403", stage, who, id, st, g.Granted)
		}
	}
	id, err := r.plane.BMC(site, sitelink.KindBMCPower, sitelink.BMCCommand{Target: bmcTarget, Action: "cycle"})
	if err != nil {
		t.Fatal(err)
	}
	refused("queued", "agent-x", x, "agent-x", id)
	refused("queued", "agent-b", b, "agent-b", id)
	refused("never issued", "agent-x", x, "agent-x", "bmc-made-up")
	for _, cid := range []string{id, "bmc-made-up"} {
		if rec, _, err := r.plane.Claims().Store.Get(context.Background(), cid); err != nil || rec.State != bmc.ClaimNone {
			t.Errorf("claim record of %s after refused claims: %+v %v, want none", cid, rec, err)
		}
	}

	r.routeTo(t, a, "agent-a", 1, id)
	refused("routed to agent-a", "agent-x", x, "agent-x", id)
	refused("routed to agent-a", "agent-x in agent-a's name", x, "agent-a", id)
	refused("routed to agent-a", "agent-b", b, "agent-b", id)
	if st, g := claim(a, "agent-a", id); st != http.StatusOK || !g.Granted {
		t.Errorf("agent-a's claim on its own command: %d %+v, want granted", st, g)
	}
	if got := r.plane.Stats().RefusedNotRouted; got < 5 {
		t.Errorf("refused claims counted %d, want at least 5", got)
	}
}
