package agent_test

import (
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"errors"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/bettercompute/siteboot/bmc/bmctest"
	"github.com/bettercompute/siteboot/examples/siteagent/agent"
	"github.com/bettercompute/siteboot/sitelink"
)

// claimingHost sends each of its commands until the command's result comes back, and
// answers each claim as the test set it up for that command id: granted, held by another
// node, already reported, unanswered, or granted only once the test releases it.
type claimingHost struct {
	mu      sync.Mutex
	cmds    []sitelink.Command
	results map[string]sitelink.BMCResult
	answers map[string]string // by command id: "granted", "refused", "reused", "unanswered", "hold"
	held    chan struct{}     // a "hold" claim waits until this is closed
	holding chan struct{}     // closed once a "hold" claim is waiting
}

func (h *claimingHost) add(c sitelink.Command, answer string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.cmds = append(h.cmds, c)
	h.answers[c.ID] = answer
}

func (h *claimingHost) Sync(ctx context.Context, r sitelink.StatusReport) (sitelink.SyncResponse, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, res := range r.BMC {
		h.results[res.ID] = res
	}
	var d sitelink.SyncResponse
	for _, c := range h.cmds {
		if _, done := h.results[c.ID]; !done {
			d.Commands = append(d.Commands, c)
		}
	}
	return d, nil
}

func (h *claimingHost) result(id string) (sitelink.BMCResult, bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	r, ok := h.results[id]
	return r, ok
}

func (h *claimingHost) Token(ctx context.Context, q sitelink.TokenRequest) (string, error) {
	return "", sitelink.ErrNotReady
}

func (h *claimingHost) Claim(ctx context.Context, req sitelink.ClaimRequest) (sitelink.Grant, error) {
	h.mu.Lock()
	answer := h.answers[req.ID]
	h.mu.Unlock()
	switch answer {
	case "refused":
		return sitelink.Grant{State: sitelink.ClaimGranted, Node: "agent-other"}, nil
	case "reused":
		return sitelink.Grant{State: sitelink.ClaimReported, Node: "agent-other", Outcome: sitelink.Outcome{Status: sitelink.StatusOK}}, nil
	case "unanswered":
		return sitelink.Grant{}, errors.New("link down")
	case "hold":
		close(h.holding)
		select {
		case <-h.held:
		case <-ctx.Done():
			return sitelink.Grant{}, ctx.Err()
		}
	}
	return sitelink.Grant{Granted: true, State: sitelink.ClaimGranted, Node: req.Node}, nil
}

func (h *claimingHost) ReportClaim(ctx context.Context, req sitelink.ClaimRequest) error {
	return nil
}

func (h *claimingHost) Credential(ctx context.Context, req sitelink.CredentialRequest) (sitelink.Credential, error) {
	return sitelink.Credential{Username: bmctest.DefaultUsername, Password: bmctest.DefaultPassword}, nil
}

// TestBMCMetrics: /metrics counts the agent's bmc.* commands by kind and outcome, the
// ones answered without sending, each answer a claim got, and the commands in flight; only
// the granted power cycle reached the BMC.
func TestBMCMetrics(t *testing.T) {
	srv := bmctest.NewServer(bmctest.Options{})
	t.Cleanup(srv.Close)
	origin := httptest.NewServer(http.NotFoundHandler())
	t.Cleanup(origin.Close)
	_, key, _ := ed25519.GenerateKey(rand.Reader)
	cfg := linkedConfig("site-m", "agent-m", t.TempDir(), origin.URL)
	cfg.Metrics.Listen = netip.MustParseAddrPort("127.0.0.1:0")

	host := &claimingHost{results: map[string]sitelink.BMCResult{}, answers: map[string]string{},
		held: make(chan struct{}), holding: make(chan struct{})}
	tg := sitelink.BMCTarget{Driver: "redfish", Address: srv.URL, Credential: "bmc/m"}
	power := func(id, action string) sitelink.Command {
		return sitelink.Command{ID: id, Kind: sitelink.KindBMCPower, BMC: &sitelink.BMCCommand{Target: tg, Action: action}}
	}
	host.add(sitelink.Command{ID: "q-1", Kind: sitelink.KindBMCQuery, BMC: &sitelink.BMCCommand{Target: tg}}, "")
	host.add(power("p-granted", "cycle"), "granted")
	host.add(power("p-refused", "cycle"), "refused")
	host.add(power("p-reused", "cycle"), "reused")
	host.add(power("p-unanswered", "cycle"), "unanswered")

	ctx, cancel := context.WithCancel(context.Background())
	a, err := agent.New(ctx, &cfg, host, agent.Options{Signer: key, DrainTimeout: time.Second})
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- a.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done })
	metricsURL := "http://" + a.Addrs()["metrics"] + "/metrics"

	waitResults := func(ids ...string) {
		t.Helper()
		deadline := time.Now().Add(30 * time.Second)
		for _, id := range ids {
			for {
				if _, ok := host.result(id); ok {
					break
				}
				if time.Now().After(deadline) {
					t.Fatalf("no result for %s", id)
				}
				time.Sleep(10 * time.Millisecond)
			}
		}
	}
	bmcLines := func() []string {
		t.Helper()
		_, body := get(t, metricsURL)
		var out []string
		for _, l := range strings.Split(body, "\n") {
			if strings.HasPrefix(l, "siteboot_bmc_") {
				out = append(out, l)
			}
		}
		return out
	}
	wantLines := func(want ...string) {
		t.Helper()
		got := bmcLines()
		for _, w := range want {
			if !slices.Contains(got, w) {
				t.Errorf("no %q in the metrics:\n%s", w, strings.Join(got, "\n"))
			}
		}
	}

	waitResults("q-1", "p-granted", "p-refused", "p-reused", "p-unanswered")
	for id, want := range map[string]string{"q-1": "ok", "p-granted": "ok", "p-refused": "not-sent", "p-reused": "ok", "p-unanswered": "not-sent"} {
		if r, _ := host.result(id); r.Status != want {
			t.Errorf("%s: %+v, want status %s", id, r, want)
		}
	}
	wantLines(
		`siteboot_bmc_operations_total{kind="bmc.query",outcome="ok"} 1`,
		`siteboot_bmc_operations_total{kind="bmc.power",outcome="ok"} 2`,
		`siteboot_bmc_operations_total{kind="bmc.power",outcome="not-sent"} 2`,
		`siteboot_bmc_replayed_total{kind="bmc.power"} 1`,
		`siteboot_bmc_claims_total{answer="granted"} 1`,
		`siteboot_bmc_claims_total{answer="refused"} 1`,
		`siteboot_bmc_claims_total{answer="reused"} 1`,
		`siteboot_bmc_claims_total{answer="unanswered"} 1`,
		`siteboot_bmc_operations_in_flight 0`,
		`siteboot_bmc_deferred_total 0`,
	)
	if n := len(srv.Boots()); n != 1 {
		t.Errorf("the machine booted %d times, want 1 (the granted cycle)", n)
	}

	// A command whose claim is still being answered is in flight until it ends.
	host.add(power("p-held", "on"), "hold")
	select {
	case <-host.holding:
	case <-time.After(30 * time.Second):
		t.Fatal("the held command's claim never came")
	}
	wantLines(`siteboot_bmc_operations_in_flight 1`)
	close(host.held)
	waitResults("p-held")
	wantLines(
		`siteboot_bmc_operations_in_flight 0`,
		`siteboot_bmc_claims_total{answer="granted"} 2`,
		`siteboot_bmc_operations_total{kind="bmc.power",outcome="ok"} 3`,
	)
}
