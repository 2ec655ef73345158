package agent_test

import (
	"context"
	"fmt"
	"net/http"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/bettercompute/siteboot/bmc"
	"github.com/bettercompute/siteboot/bmc/bmctest"
	"github.com/bettercompute/siteboot/bmc/redfish"
	"github.com/bettercompute/siteboot/examples/siteagent/agent"
	"github.com/bettercompute/siteboot/examples/siteagent/controlplane"
	"github.com/bettercompute/siteboot/sitelink"
)

// logins counts the logins srv accepted.
func logins(srv *bmctest.Server) int {
	n := 0
	for _, r := range srv.Requests() {
		if r.Method == http.MethodPost && r.Path == "/redfish/v1/SessionService/Sessions" && r.Status == http.StatusCreated {
			n++
		}
	}
	return n
}

// TestBMCSessionPerBMC: the agent keeps one session per BMC and lends it to each operation
// in turn. Over bmc.boot, bmc.power and bmc.query commands and a power cycle transition of
// three machines, each BMC (a Lenovo XCC among them, whose persistent boot device the
// agent keeps by re-arming it through the same session) never sees more than one session
// open at once, and logs the agent in once for all of its operations; /metrics says how
// many sessions are open, and every one is logged out when the agent stops. A login refused after the BMC's password changed drops the
// session, and the next operation, with the new credential, logs in again.
func TestBMCSessionPerBMC(t *testing.T) {
	plane := controlplane.New(nil)
	plane.Enroll("site-k", "agent-k")
	plane.SetCredential("bmc/m", bmc.Credential{Username: bmctest.DefaultUsername, Password: bmctest.DefaultPassword})
	srvs := map[string]*bmctest.Server{}
	body := sitelink.TransitionCommand{Action: "cycle"}
	for i, vendor := range []bmctest.Vendor{bmctest.LenovoXCC, "", ""} {
		// A BMC that takes one session at a time: a second login at once is refused (503).
		srv := bmctest.NewServer(bmctest.Options{Vendor: vendor, MaxSessions: 1})
		t.Cleanup(srv.Close)
		name := fmt.Sprintf("m%02d", i)
		srvs[name] = srv
		body.Machines = append(body.Machines, sitelink.TransitionMachine{Name: name, Group: "pdu-1",
			Target: sitelink.BMCTarget{Driver: redfish.Name, Address: srv.URL, Credential: "bmc/m"}})
	}
	a, stop := startAgent(t, "site-k", "agent-k", plane.Link(), func(c *agent.Config) {
		c.BMC.TransitionSettle = 10 * time.Millisecond
		c.Metrics.Listen = netip.MustParseAddrPort("127.0.0.1:0")
	})
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	run := func(kind string, tg sitelink.BMCTarget, c sitelink.BMCCommand) sitelink.BMCResult {
		t.Helper()
		c.Target = tg
		id, err := plane.BMC("site-k", kind, c)
		if err != nil {
			t.Fatal(err)
		}
		res, err := plane.WaitBMC(ctx, id)
		if err != nil {
			t.Fatalf("%s: %v", kind, err)
		}
		return res
	}
	sessionsOpen := func() string {
		t.Helper()
		_, body := get(t, "http://"+a.Addrs()["metrics"]+"/metrics")
		for _, l := range strings.Split(body, "\n") {
			if v, ok := strings.CutPrefix(l, "siteboot_bmc_sessions_open "); ok {
				return v
			}
		}
		t.Fatal("no siteboot_bmc_sessions_open on /metrics")
		return ""
	}

	xcc, srv := body.Machines[0].Target, srvs["m00"]
	ops := 0
	for _, c := range []struct {
		kind string
		body sitelink.BMCCommand
	}{
		{sitelink.KindBMCBoot, sitelink.BMCCommand{Device: "pxe", Mode: "uefi", Persistent: true}},
		{sitelink.KindBMCPower, sitelink.BMCCommand{Action: "force-off"}},
		{sitelink.KindBMCQuery, sitelink.BMCCommand{}},
		{sitelink.KindBMCPower, sitelink.BMCCommand{Action: "on"}},
		{sitelink.KindBMCQuery, sitelink.BMCCommand{}},
		{sitelink.KindBMCQuery, sitelink.BMCCommand{}},
	} {
		if res := run(c.kind, xcc, c.body); res.Status != sitelink.StatusOK {
			t.Fatalf("%s %+v: %+v, want ok", c.kind, c.body, res)
		}
		ops++
	}
	id, err := plane.Transition("site-k", body)
	if err != nil {
		t.Fatal(err)
	}
	if res, err := plane.WaitBMC(ctx, id); err != nil || res.Status != sitelink.StatusOK || res.Progress == nil || res.Progress.Done != len(srvs) {
		t.Fatalf("transition: %+v, %v; want every machine done", res, err)
	}
	ops += 2 // at least the transition's cycle and its confirming read
	if res := run(sitelink.KindBMCPower, xcc, sitelink.BMCCommand{Action: "cycle"}); res.Status != sitelink.StatusOK {
		t.Fatalf("cycle after the transition: %+v", res)
	}
	ops++

	for name, s := range srvs {
		if p := s.PeakSessions(); p != 1 {
			t.Errorf("%s: at most %d sessions open at once, want 1", name, p)
		}
		if n := logins(s); n != 1 {
			t.Errorf("%s: %d logins, want 1 for all of its operations", name, n)
		}
		if s.Sessions() != 1 {
			t.Errorf("%s: %d sessions open at the BMC between operations, want the agent's one", name, s.Sessions())
		}
	}
	if ops < 9 {
		t.Fatalf("only %d operations at the XCC", ops)
	}
	// The XCC keeps no persistent boot device: each power-on the agent sent through the
	// pooled session (on, the transition's cycle, the last cycle) armed PXE first.
	var boots []string
	for _, b := range srv.Boots() {
		boots = append(boots, b.Target)
	}
	if strings.Join(boots, ",") != "Pxe,Pxe,Pxe" {
		t.Errorf("XCC boots %v, want three from PXE (the kept device re-armed on the pooled session)", boots)
	}
	if got := sessionsOpen(); got != "3" {
		t.Errorf("siteboot_bmc_sessions_open %s, want 3 (one per BMC)", got)
	}

	// The password changes at the XCC and its session times out: logging in again with
	// the cached credential is refused, the operation fails as an auth error, and its
	// session is dropped.
	change, _ := http.NewRequest(http.MethodPost, srv.URL+bmctest.Account1+"/Actions/ManagerAccount.ChangePassword",
		strings.NewReader(`{"NewPassword":"changed-pw","SessionAccountPassword":"`+bmctest.DefaultPassword+`"}`))
	change.SetBasicAuth(bmctest.DefaultUsername, bmctest.DefaultPassword)
	change.Header.Set("Content-Type", "application/json")
	resp, err := srv.Client().Do(change)
	if err != nil || resp.StatusCode != http.StatusNoContent {
		t.Fatalf("password change at the fake: %v, %v", resp, err)
	}
	resp.Body.Close()
	srv.ExpireSessions()
	if res := run(sitelink.KindBMCQuery, xcc, sitelink.BMCCommand{}); res.Status == sitelink.StatusOK || res.ErrorKind != "auth" {
		t.Fatalf("query after the password changed: %+v, want an auth failure", res)
	}
	if got := sessionsOpen(); got != "2" {
		t.Errorf("after the refused login: siteboot_bmc_sessions_open %s, want 2 (the XCC's dropped)", got)
	}
	plane.SetCredential("bmc/m", bmc.Credential{Username: bmctest.DefaultUsername, Password: "changed-pw"})
	if res := run(sitelink.KindBMCQuery, xcc, sitelink.BMCCommand{}); res.Status != sitelink.StatusOK {
		t.Fatalf("query with the new credential: %+v, want ok", res)
	}
	if n := logins(srv); n != 2 || srv.PeakSessions() != 1 {
		t.Errorf("XCC after the new credential: %d logins, peak %d sessions; want a second login, one at a time", n, srv.PeakSessions())
	}
	if got := sessionsOpen(); got != "3" {
		t.Errorf("siteboot_bmc_sessions_open %s, want 3", got)
	}
	// The agent stops: every session is logged out.
	stop()
	for name, s := range srvs {
		if s.Sessions() != 0 {
			t.Errorf("%s: %d sessions open after the agent stopped, want 0", name, s.Sessions())
		}
	}
}

// TestBMCIdleSessionLoggedOut: a BMC session idle longer than BMC.SessionIdle is logged out
// by the agent (swept on its heartbeat) before the BMC's own timeout would end it, and the
// next operation there logs in again.
func TestBMCIdleSessionLoggedOut(t *testing.T) {
	plane := controlplane.New(nil)
	plane.Enroll("site-k", "agent-k")
	plane.SetCredential("bmc/m", bmc.Credential{Username: bmctest.DefaultUsername, Password: bmctest.DefaultPassword})
	srv := bmctest.NewServer(bmctest.Options{MaxSessions: 1})
	t.Cleanup(srv.Close)
	startAgent(t, "site-k", "agent-k", plane.Link(), func(c *agent.Config) { c.BMC.SessionIdle = 2 * time.Second })
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	query := func() {
		t.Helper()
		id, err := plane.BMC("site-k", sitelink.KindBMCQuery, sitelink.BMCCommand{Target: sitelink.BMCTarget{Driver: redfish.Name, Address: srv.URL, Credential: "bmc/m"}})
		if err != nil {
			t.Fatal(err)
		}
		if res, err := plane.WaitBMC(ctx, id); err != nil || res.Status != sitelink.StatusOK {
			t.Fatalf("query: %+v, %v", res, err)
		}
	}
	query()
	if srv.Sessions() != 1 {
		t.Fatalf("%d sessions open after a query, want the agent's one kept", srv.Sessions())
	}
	waitFor(t, "the idle session logged out", func() bool { return srv.Sessions() == 0 })
	query()
	if n := logins(srv); n != 2 {
		t.Errorf("%d logins, want a second one after the idle session was logged out", n)
	}
}
