package agent_test

import (
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/bettercompute/siteboot/bmc"
	"github.com/bettercompute/siteboot/bmc/bmctest"
	"github.com/bettercompute/siteboot/examples/siteagent/agent"
	"github.com/bettercompute/siteboot/sitelink"
)

// replayingHost is a host that keeps sending one bmc.power command and grants every claim
// of its node, as a control plane that lost its claim records would: only the agent's own
// journal, persisted in its data dir, keeps a restarted agent from sending it again.
type replayingHost struct {
	cmd     sitelink.Command
	mu      sync.Mutex
	results []sitelink.BMCResult
}

func (h *replayingHost) Sync(ctx context.Context, r sitelink.StatusReport) (sitelink.SyncResponse, error) {
	h.mu.Lock()
	h.results = append(h.results, r.BMC...)
	h.mu.Unlock()
	return sitelink.SyncResponse{Commands: []sitelink.Command{h.cmd}}, nil
}

func (h *replayingHost) Token(ctx context.Context, q sitelink.TokenRequest) (string, error) {
	return "", sitelink.ErrNotReady
}

func (h *replayingHost) Claim(ctx context.Context, req sitelink.ClaimRequest) (sitelink.Grant, error) {
	return sitelink.Grant{Granted: true, State: sitelink.ClaimGranted, Node: req.Node}, nil
}

func (h *replayingHost) ReportClaim(ctx context.Context, req sitelink.ClaimRequest) error {
	return nil
}

func (h *replayingHost) Credential(ctx context.Context, req sitelink.CredentialRequest) (sitelink.Credential, error) {
	return sitelink.Credential{Username: bmctest.DefaultUsername, Password: bmctest.DefaultPassword}, nil
}

func (h *replayingHost) result() (sitelink.BMCResult, bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if len(h.results) == 0 {
		return sitelink.BMCResult{}, false
	}
	return h.results[0], true // the first; the host's repeats are answered from the journal
}

// TestBMCJournalSurvivesRestart: a power cycle the agent ran is not sent again by the same
// agent restarted on its data dir, although its host sends the command again and grants
// the claim again; the repeat is answered from DATA/bmc-journal.json.
func TestBMCJournalSurvivesRestart(t *testing.T) {
	srv := bmctest.NewServer(bmctest.Options{})
	t.Cleanup(srv.Close)
	origin := httptest.NewServer(http.NotFoundHandler())
	t.Cleanup(origin.Close)
	dir := t.TempDir()
	_, key, _ := ed25519.GenerateKey(rand.Reader)
	cfg := linkedConfig("site-j", "agent-j", dir, origin.URL)

	resets := func() int {
		n := 0
		for _, r := range srv.Requests() {
			if r.Method == http.MethodPost && strings.HasSuffix(r.Path, "ComputerSystem.Reset") {
				n++
			}
		}
		return n
	}
	cmd := sitelink.Command{ID: "bmc-cycle-1", Kind: sitelink.KindBMCPower, BMC: &sitelink.BMCCommand{
		Target: sitelink.BMCTarget{Driver: "redfish", Address: srv.URL, Credential: "bmc/m1"}, Action: "cycle"}}
	run := func() sitelink.BMCResult {
		host := &replayingHost{cmd: cmd}
		ctx, cancel := context.WithCancel(context.Background())
		a, err := agent.New(ctx, &cfg, host, agent.Options{Signer: key, DrainTimeout: time.Second})
		if err != nil {
			cancel()
			t.Fatal(err)
		}
		done := make(chan error, 1)
		go func() { done <- a.Run(ctx) }()
		defer func() { cancel(); <-done }()
		deadline := time.Now().Add(30 * time.Second)
		for time.Now().Before(deadline) {
			if r, ok := host.result(); ok {
				return r
			}
			time.Sleep(20 * time.Millisecond)
		}
		t.Fatal("no result reported")
		return sitelink.BMCResult{}
	}
	first := run()
	if first.Status != "ok" || first.Replayed {
		t.Fatalf("first run: %+v", first)
	}
	sent := resets()
	if sent == 0 {
		t.Fatal("the power cycle never reached the BMC")
	}
	again := run()
	if again.Status != "ok" || !again.Replayed {
		t.Errorf("after the restart: %+v, want the journal's outcome, replayed", again)
	}
	if n := resets(); n != sent {
		t.Errorf("the restarted agent sent the power cycle again: %d reset requests, then %d", sent, n)
	}
	if n := len(srv.Boots()); n != 1 {
		t.Errorf("the machine booted %d times, want 1", n)
	}
}

// TestBMCJournalDamaged: an agent whose BMC journal does not parse starts all the same,
// sets the file aside, says so in its status (the report's counters) and refuses to send a
// destructive command, since what the lost records said was sent cannot be known.
func TestBMCJournalDamaged(t *testing.T) {
	srv := bmctest.NewServer(bmctest.Options{})
	t.Cleanup(srv.Close)
	origin := httptest.NewServer(http.NotFoundHandler())
	t.Cleanup(origin.Close)
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, bmc.JournalFile), []byte("{\"version\": 1, \"records\": [tor"), 0o600); err != nil {
		t.Fatal(err)
	}
	_, key, _ := ed25519.GenerateKey(rand.Reader)
	cfg := linkedConfig("site-j", "agent-j", dir, origin.URL)
	host := &countingHost{replayingHost: replayingHost{cmd: sitelink.Command{ID: "bmc-cycle-1", Kind: sitelink.KindBMCPower, BMC: &sitelink.BMCCommand{
		Target: sitelink.BMCTarget{Driver: "redfish", Address: srv.URL, Credential: "bmc/m1"}, Action: "cycle"}}}}
	ctx, cancel := context.WithCancel(context.Background())
	a, err := agent.New(ctx, &cfg, host, agent.Options{Signer: key, DrainTimeout: time.Second})
	if err != nil {
		cancel()
		t.Fatalf("the agent did not start on a damaged BMC journal: %v", err)
	}
	done := make(chan error, 1)
	go func() { done <- a.Run(ctx) }()
	defer func() { cancel(); <-done }()
	var res sitelink.BMCResult
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		if r, ok := host.result(); ok {
			res = r
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("no result reported")
		}
	}
	if res.Status != sitelink.StatusNotSent {
		t.Errorf("power cycle on a damaged journal: %+v, want not-sent", res)
	}
	for _, r := range srv.Requests() {
		if r.Method == http.MethodPost {
			t.Errorf("the BMC got %s %s", r.Method, r.Path)
		}
	}
	if n := a.Stats()["bmc_journal_damaged"]; n != 1 {
		t.Errorf("status bmc_journal_damaged = %d, want 1", n)
	}
	if n := host.counter("bmc_journal_damaged"); n != 1 {
		t.Errorf("the report's counter bmc_journal_damaged = %d, want 1", n)
	}
	aside, _ := filepath.Glob(filepath.Join(dir, bmc.JournalSetAsidePrefix+"*"))
	if len(aside) != 1 {
		t.Errorf("set-aside journal files: %v, want one", aside)
	}
}

// countingHost is a replayingHost that keeps the last report's counters.
type countingHost struct {
	replayingHost
	cmu      sync.Mutex
	counters map[string]uint64
}

func (h *countingHost) Sync(ctx context.Context, r sitelink.StatusReport) (sitelink.SyncResponse, error) {
	h.cmu.Lock()
	h.counters = r.Counters
	h.cmu.Unlock()
	return h.replayingHost.Sync(ctx, r)
}

func (h *countingHost) counter(name string) uint64 {
	h.cmu.Lock()
	defer h.cmu.Unlock()
	return h.counters[name]
}
