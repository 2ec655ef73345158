package agent_test

import (
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/bettercompute/siteboot/bmc"
	"github.com/bettercompute/siteboot/bmc/bmctest"
	"github.com/bettercompute/siteboot/bmc/redfish"
	"github.com/bettercompute/siteboot/examples/siteagent/agent"
	"github.com/bettercompute/siteboot/sitelink"
)

// scriptedHost is a host that sends its commands one at a time, each until the agent
// reported its result, and grants every claim of its node. It keeps every report.
type scriptedHost struct {
	replayingHost
	cmds    []sitelink.Command
	mu      sync.Mutex
	next    int
	byID    map[string]sitelink.BMCResult
	reports []sitelink.StatusReport
}

func (h *scriptedHost) Sync(ctx context.Context, r sitelink.StatusReport) (sitelink.SyncResponse, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.reports = append(h.reports, r)
	if h.byID == nil {
		h.byID = map[string]sitelink.BMCResult{}
	}
	for _, res := range r.BMC {
		h.byID[res.ID] = res
	}
	for h.next < len(h.cmds) {
		if _, ok := h.byID[h.cmds[h.next].ID]; !ok {
			return sitelink.SyncResponse{Commands: []sitelink.Command{h.cmds[h.next]}}, nil
		}
		h.next++
	}
	return sitelink.SyncResponse{}, nil
}

// results waits until every command has a result and returns them in the commands' order.
func (h *scriptedHost) results(t *testing.T) []sitelink.BMCResult {
	t.Helper()
	waitFor(t, "every command's result", func() bool {
		h.mu.Lock()
		defer h.mu.Unlock()
		return h.next == len(h.cmds)
	})
	h.mu.Lock()
	defer h.mu.Unlock()
	var out []sitelink.BMCResult
	for _, c := range h.cmds {
		out = append(out, h.byID[c.ID])
	}
	return out
}

// runAgent runs an agent over host until the test ends, its BMCs opened by a registry of
// bmc/redfish whose boot overrides settle in a millisecond.
func runAgent(t *testing.T, site, node string, host agent.Link, configure ...func(*agent.Config)) *agent.Agent {
	t.Helper()
	a, _ := startAgent(t, site, node, host, configure...)
	return a
}

// startAgent is runAgent that also returns a function that stops the agent.
func startAgent(t *testing.T, site, node string, host agent.Link, configure ...func(*agent.Config)) (*agent.Agent, func()) {
	t.Helper()
	origin := httptest.NewServer(http.NotFoundHandler())
	t.Cleanup(origin.Close)
	_, key, _ := ed25519.GenerateKey(rand.Reader)
	cfg := linkedConfig(site, node, t.TempDir(), origin.URL)
	for _, f := range configure {
		f(&cfg)
	}
	reg := bmc.NewRegistry()
	reg.Register(redfish.Name, redfish.Config{SettleTime: time.Millisecond, PollInterval: time.Millisecond})
	ctx, cancel := context.WithCancel(context.Background())
	a, err := agent.New(ctx, &cfg, host, agent.Options{Signer: key, DrainTimeout: time.Second, BMCOpener: reg})
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- a.Run(ctx) }()
	var once sync.Once
	stop := func() { once.Do(func() { cancel(); <-done }) }
	t.Cleanup(stop)
	return a, stop
}

// TestBMCBootKeptByRearming: Lenovo XCC refuses a persistent boot override (no Continuous;
// Ironic re-arms a one-time boot before each power-on instead). The agent's bmc.boot
// persistent succeeds there, saying the device is kept by re-arming, and each power-on the
// agent sends afterwards (on, cycle) boots the machine from PXE. A BMC that keeps the
// override persistently is left to keep it.
func TestBMCBootKeptByRearming(t *testing.T) {
	cmd := func(id, kind string, tg sitelink.BMCTarget, body sitelink.BMCCommand) sitelink.Command {
		body.Target = tg
		return sitelink.Command{ID: id, Kind: kind, BMC: &body}
	}
	script := func(tg sitelink.BMCTarget) []sitelink.Command {
		return []sitelink.Command{
			cmd("boot", sitelink.KindBMCBoot, tg, sitelink.BMCCommand{Device: "pxe", Mode: "uefi", Persistent: true}),
			cmd("off", sitelink.KindBMCPower, tg, sitelink.BMCCommand{Action: "force-off"}),
			cmd("on", sitelink.KindBMCPower, tg, sitelink.BMCCommand{Action: "on"}),
			cmd("cycle", sitelink.KindBMCPower, tg, sitelink.BMCCommand{Action: "cycle"}),
		}
	}
	boots := func(srv *bmctest.Server) []string {
		var out []string
		for _, b := range srv.Boots() {
			out = append(out, b.Target)
		}
		return out
	}

	t.Run("xcc", func(t *testing.T) {
		srv := bmctest.NewServer(bmctest.Options{Vendor: bmctest.LenovoXCC})
		t.Cleanup(srv.Close)
		host := &scriptedHost{cmds: script(sitelink.BMCTarget{Driver: redfish.Name, Address: srv.URL, Credential: "bmc/xcc"})}
		runAgent(t, "site-k", "agent-k", host)
		res := host.results(t)
		for _, r := range res {
			if r.Status != sitelink.StatusOK {
				t.Fatalf("%s: %+v, want ok", r.ID, r)
			}
		}
		if !res[0].BootKept || res[0].Message == "" {
			t.Errorf("persistent boot on XCC: %+v, want boot_kept and a message saying so", res[0])
		}
		if diff := cmp.Diff([]string{"Pxe", "Pxe"}, boots(srv)); diff != "" {
			t.Errorf("boots after on and cycle (-want +got):\n%s", diff)
		}
	})
	t.Run("a BMC that keeps it", func(t *testing.T) {
		srv := bmctest.NewServer(bmctest.Options{})
		t.Cleanup(srv.Close)
		host := &scriptedHost{cmds: script(sitelink.BMCTarget{Driver: redfish.Name, Address: srv.URL, Credential: "bmc/m"})}
		runAgent(t, "site-k", "agent-k", host)
		res := host.results(t)
		if res[0].Status != sitelink.StatusOK || res[0].BootKept {
			t.Errorf("persistent boot on a BMC that keeps it: %+v, want ok without boot_kept", res[0])
		}
		if diff := cmp.Diff([]string{"Pxe", "Pxe"}, boots(srv)); diff != "" {
			t.Errorf("boots after on and cycle (-want +got):\n%s", diff)
		}
	})
}
