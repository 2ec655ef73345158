package controlplane_test

import (
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/bettercompute/siteboot/bmc"
	"github.com/bettercompute/siteboot/bmc/bmctest"
	"github.com/bettercompute/siteboot/bmc/redfish"
	"github.com/bettercompute/siteboot/examples/siteagent/agent"
	"github.com/bettercompute/siteboot/examples/siteagent/controlplane"
	"github.com/bettercompute/siteboot/lease"
	"github.com/bettercompute/siteboot/lease/etcdstore"
	"github.com/bettercompute/siteboot/lease/etcdstore/etcdstoretest"
	"github.com/bettercompute/siteboot/sitelink"
)

// failoverAgent is an agent of the site run in process, linked to the plane by its own
// LocalLink, which records every report the agent sent.
type failoverAgent struct {
	node string
	link *controlplane.LocalLink
	kill func() // its link cut, its context cancelled: nothing more reaches the plane

	mu      sync.Mutex
	reports []sitelink.StatusReport
}

func (a *failoverAgent) Sync(ctx context.Context, r sitelink.StatusReport) (sitelink.SyncResponse, error) {
	d, err := a.link.Sync(ctx, r)
	if err == nil {
		a.mu.Lock()
		a.reports = append(a.reports, r)
		a.mu.Unlock()
	}
	return d, err
}

func (a *failoverAgent) Token(ctx context.Context, q sitelink.TokenRequest) (string, error) {
	return a.link.Token(ctx, q)
}

func (a *failoverAgent) Claim(ctx context.Context, q sitelink.ClaimRequest) (sitelink.Grant, error) {
	return a.link.Claim(ctx, q)
}

func (a *failoverAgent) ReportClaim(ctx context.Context, q sitelink.ClaimRequest) error {
	return a.link.ReportClaim(ctx, q)
}

func (a *failoverAgent) Credential(ctx context.Context, q sitelink.CredentialRequest) (sitelink.Credential, error) {
	return a.link.Credential(ctx, q)
}

// machineResults returns transition id's machines' results the plane took from this
// agent's reports, by machine, each report's in order.
func (a *failoverAgent) machineResults(id string) map[string][]sitelink.BMCResult {
	a.mu.Lock()
	defer a.mu.Unlock()
	out := map[string][]sitelink.BMCResult{}
	for _, r := range a.reports {
		for _, res := range r.BMC {
			if res.Transition == id && res.Machine != "" {
				out[res.Machine] = append(out[res.Machine], res)
			}
		}
	}
	return out
}

// startFailoverAgent runs an agent of site on the plane, with the BMC settings of a
// transition test (a ramp of rate power-ons per second, a short settle).
func startFailoverAgent(t *testing.T, p *controlplane.Plane, site, node string, rate float64) *failoverAgent {
	t.Helper()
	origin := httptest.NewServer(http.NotFoundHandler())
	t.Cleanup(origin.Close)
	sha := strings.Repeat("ab", 32)
	cfg := agent.DefaultConfig()
	cfg.SiteID, cfg.NodeID, cfg.DataDir = site, node, t.TempDir()
	cfg.Boot.HTTPListen = netip.MustParseAddrPort("127.0.0.1:0")
	cfg.Boot.HTTPBase = "http://127.0.0.1:0"
	cfg.Boot.Kernel = agent.Image{URL: origin.URL + "/k", SHA256: sha}
	cfg.Boot.Initrd = agent.Image{URL: origin.URL + "/i", SHA256: sha}
	cfg.Control = agent.ControlConfig{URL: "http://control.invalid", Insecure: true, Heartbeat: 100 * time.Millisecond, Timeout: time.Second}
	cfg.Metrics.Listen = netip.AddrPort{}
	cfg.BMC.PowerOnRate = rate
	cfg.BMC.TransitionSettle = 10 * time.Millisecond
	reg := bmc.NewRegistry()
	reg.Register(redfish.Name, redfish.Config{SettleTime: time.Millisecond, PollInterval: 5 * time.Millisecond})
	_, key, _ := ed25519.GenerateKey(rand.Reader)
	a := &failoverAgent{node: node, link: p.Link()}
	ctx, cancel := context.WithCancel(context.Background())
	ag, err := agent.New(ctx, &cfg, a, agent.Options{Signer: key, DrainTimeout: time.Second, BMCOpener: reg})
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- ag.Run(ctx) }()
	var once sync.Once
	a.kill = func() {
		once.Do(func() {
			a.link.SetCut(true)
			cancel()
		})
	}
	t.Cleanup(func() { a.kill(); <-done })
	return a
}

// TestTransitionFailoverTwoAgentsEtcd: a power cycle of 20 machines (bmctest Redfish BMCs)
// goes to agent A, the site's lease holder, as one bmc.transition; A is killed half way
// (its link to the plane cut and its context cancelled, nothing cleaned up) as the plane
// records its report of a machine's cycle, or as it grants A's claim of a step. The plane,
// whose lease and claims are in a real etcd, routes the transition to the standby B once
// A's session lapses; B resumes it. Every machine ends with one result in the plane, those
// A finished as A reported them, the transition's own result comes from B, and no BMC got
// more than one power-on: a machine is done with exactly one, or unknown (its step granted
// to A, which never reported it: B never sends it) with at most one.
func TestTransitionFailoverTwoAgentsEtcd(t *testing.T) {
	t.Run("killed as it reports a cycle", func(t *testing.T) { transitionFailover(t, false) })
	t.Run("killed as its claim is granted", func(t *testing.T) { transitionFailover(t, true) })
}

func transitionFailover(t *testing.T, atGrant bool) {
	const (
		site = "site-f"
		n    = 20
	)
	etcd := etcdstoretest.Start(t)
	p := controlplane.New(nil)
	p.Lease = &lease.RegisterStore{Register: &etcdstore.Register{Client: etcd.Client, Prefix: "/sbC/"}}
	p.ClaimStore = &bmc.RegisterClaimStore{Register: &etcdstore.Register{Client: etcd.Client, Prefix: "/sbC/"}}
	p.SessionTimeout = 500 * time.Millisecond
	p.Enroll(site, "agent-a")
	p.Enroll(site, "agent-b")
	p.SetCredential("bmc/site", bmc.Credential{Username: bmctest.DefaultUsername, Password: bmctest.DefaultPassword})

	body := sitelink.TransitionCommand{Action: "cycle"}
	var srvs []*bmctest.Server
	for i := range n {
		s := bmctest.NewServer(bmctest.Options{MaxSessions: 4,
			Faults: bmctest.Faults{MinLatency: 5 * time.Millisecond, MaxLatency: 30 * time.Millisecond, Seed: uint64(i)}})
		t.Cleanup(s.Close)
		s.SetPowerState("On")
		srvs = append(srvs, s)
		body.Machines = append(body.Machines, sitelink.TransitionMachine{Name: fmt.Sprintf("m%02d", i), Group: "pdu-1",
			Target: sitelink.BMCTarget{Driver: redfish.Name, Address: s.URL, Credential: "bmc/site"}})
	}

	// A first, so that it holds the site's lease; then B, its standby.
	a := startFailoverAgent(t, p, site, "agent-a", 5)
	waitUntil(t, "agent-a to hold the lease", 10*time.Second, func() bool {
		rec, err := p.LeaseRecord(context.Background(), site)
		return err == nil && rec.Holder == "agent-a"
	})
	b := startFailoverAgent(t, p, site, "agent-b", 5)
	waitUntil(t, "agent-b to heartbeat", 10*time.Second, func() bool {
		b.mu.Lock()
		defer b.mu.Unlock()
		return len(b.reports) > 0
	})

	// A dies as the plane records its report of the n/2-th cycle it carried out, or its
	// n/2-th claim: its link cut before it hears the answer, its context cancelled.
	var acts, grants atomic.Int32
	p.OnBMCReport = func(node string, _ sitelink.Command, o bmc.Outcome) {
		if node == "agent-a" && o.Status == bmc.StatusOK && acts.Add(1) == n/2 && !atGrant {
			a.kill()
		}
	}
	// The machines whose step agent-a was granted: with steps in flight side by side, A can
	// die holding a grant in either case.
	var grantedA sync.Map
	p.OnBMCClaim = func(node string, c sitelink.Command) {
		if node != "agent-a" {
			return
		}
		if parts := strings.Split(c.ID, "/"); len(parts) > 1 {
			grantedA.Store(parts[1], true)
		}
		if grants.Add(1) == n/2 && atGrant {
			a.kill()
		}
	}
	id, err := p.Transition(site, body)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	res, err := p.WaitBMC(ctx, id)
	if err != nil {
		st, _ := p.TransitionState(id)
		t.Fatalf("the transition did not end: %v; the plane has %d machines' results, progress %+v", err, len(st.Machines), st.Progress)
	}
	st, _ := p.TransitionState(id)
	fromA, fromB := a.machineResults(id), b.machineResults(id)
	if len(fromA) == 0 || len(fromA) >= n {
		t.Fatalf("agent-a reported %d machines before it died, want some and not all", len(fromA))
	}
	if len(fromB) == 0 {
		t.Fatal("agent-b reported no machine: the transition was not resumed there")
	}
	if !atGrant && acts.Load() < n/2 || atGrant && grants.Load() < n/2 {
		t.Errorf("agent-a's cycles recorded: %d, claims granted %d, want it killed at the %d-th", acts.Load(), grants.Load(), n/2)
	}
	if res.Status == "" || res.Progress == nil || res.Progress.Total != n || res.Progress.Pending != 0 {
		t.Errorf("the transition's own result: %+v (progress %+v), want one from agent-b with every machine ended", res, res.Progress)
	}

	status := map[string]int{}
	var unknownOns []int
	for i, s := range srvs {
		name := fmt.Sprintf("m%02d", i)
		r, ok := st.Machines[name]
		if !ok {
			t.Errorf("%s: no result in the plane", name)
			continue
		}
		status[r.Status]++
		ons := len(s.PowerOns())
		if ons > 1 {
			t.Errorf("%s: %d power-ons, want at most one", name, ons)
		}
		switch r.Status {
		case sitelink.StatusOK:
			if ons != 1 {
				t.Errorf("%s reported done with %d power-ons, want 1", name, ons)
			}
		case sitelink.StatusUnknown:
			// A's step was granted as it died: never sent again.
			unknownOns = append(unknownOns, ons)
			if _, granted := grantedA.Load(name); !granted {
				t.Errorf("%s: %+v, but agent-a was never granted its step", name, r)
			}
			if len(fromA[name]) > 0 {
				t.Errorf("%s: %+v, but agent-a had reported it", name, r)
			}
		default:
			t.Errorf("%s: %+v, want done, or unknown where agent-a's cycle was under way", name, r)
		}
		if ra := fromA[name]; len(ra) > 0 && ra[0].Status != r.Status {
			t.Errorf("%s: agent-a reported %s, the plane holds %+v", name, ra[0].Status, r)
		}
		if rb := fromB[name]; len(fromA[name]) > 0 && len(rb) > 0 && rb[0].Status != r.Status {
			t.Errorf("%s: agent-b resumed it as %+v, agent-a had reported %s", name, rb[0], r.Status)
		}
	}
	if got := len(st.Machines); got != n {
		t.Errorf("%d machines with a result in the plane, want %d", got, n)
	}
	if atGrant && status[sitelink.StatusUnknown] == 0 {
		t.Errorf("statuses %v: agent-a died holding a grant, and no machine is unknown", status)
	}
	if status[sitelink.StatusOK] <= len(fromA) {
		t.Errorf("statuses %v: agent-b carried out none of the machines agent-a left (a reported %d)", status, len(fromA))
	}
	t.Logf("agent-a reported %d machines before it died; agent-b %d (%d of them resumed from a's records); statuses %v (power-ons of the unknown ones %v); repeats %d",
		len(fromA), len(fromB), overlap(fromA, fromB), status, unknownOns, st.Repeats)
}

func overlap(a, b map[string][]sitelink.BMCResult) int {
	n := 0
	for k := range a {
		if _, ok := b[k]; ok {
			n++
		}
	}
	return n
}
