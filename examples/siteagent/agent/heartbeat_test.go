package agent_test

import (
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/bettercompute/siteboot/examples/siteagent/agent"
	"github.com/bettercompute/siteboot/hwid"
	"github.com/bettercompute/siteboot/sitelink"
)

// bulkHost answers every heartbeat with the commands not acknowledged yet, and records when
// each heartbeat came.
type bulkHost struct {
	cmds []sitelink.Command

	mu    sync.Mutex
	acked map[string]bool
	beats []time.Time
}

func (h *bulkHost) Sync(ctx context.Context, r sitelink.StatusReport) (sitelink.SyncResponse, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.beats = append(h.beats, time.Now())
	for _, id := range r.Acked {
		h.acked[id] = true
	}
	d := sitelink.SyncResponse{SiteSpec: sitelink.SiteSpec{Lease: sitelink.BootLeaseState{Holds: true, Epoch: 1, TTLMs: 15000, Beat: r.Beat}}}
	for _, c := range h.cmds {
		if !h.acked[c.ID] {
			d.Commands = append(d.Commands, c)
		}
	}
	return d, nil
}

func (h *bulkHost) Token(context.Context, sitelink.TokenRequest) (string, error) {
	return "", sitelink.ErrNotReady
}

// TestHeartbeatDoesNotWaitOnCommands: an answer of 1,000 boot.prepareRamdisk commands
// holding 20,000 entries does not hold the heartbeat back: the heartbeats keep their
// interval while the commands are applied and persisted, and all are acknowledged.
func TestHeartbeatDoesNotWaitOnCommands(t *testing.T) {
	origin := httptest.NewServer(http.NotFoundHandler())
	t.Cleanup(origin.Close)
	_, key, _ := ed25519.GenerateKey(rand.Reader)
	const hb = 100 * time.Millisecond
	cfg := linkedConfig("site-h", "agent-h", t.TempDir(), origin.URL)

	host := &bulkHost{acked: map[string]bool{}}
	notAfter := time.Now().Add(time.Hour)
	for i := range 1000 {
		c := sitelink.Command{ID: fmt.Sprintf("prep-%d", i), Kind: sitelink.KindPrepareRamdisk}
		for j := range 20 {
			n := i*20 + j
			c.Entries = append(c.Entries, sitelink.ProxyDhcpEntry{MAC: hwid.MAC{0x52, 0x54, 0, byte(n >> 16), byte(n >> 8), byte(n)},
				Arch: sitelink.ArchX86UEFI, Workflow: fmt.Sprintf("wf-%d", i), NotAfter: notAfter, TokenRef: fmt.Sprintf("tok-%d", n)})
		}
		host.cmds = append(host.cmds, c)
	}
	ctx, cancel := context.WithCancel(context.Background())
	a, err := agent.New(ctx, &cfg, host, agent.Options{Signer: key, DrainTimeout: time.Second})
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- a.Run(ctx) }()
	defer func() { cancel(); <-done }()

	allAcked := func() bool {
		host.mu.Lock()
		defer host.mu.Unlock()
		return len(host.acked) == len(host.cmds)
	}
	for deadline := time.Now().Add(60 * time.Second); !allAcked(); time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the commands were not all acknowledged")
		}
	}
	time.Sleep(5 * hb) // a few heartbeats more, with the entries in place
	if n := len(a.Entries().All()); n != 20000 {
		t.Errorf("%d entries held, want 20000", n)
	}
	host.mu.Lock()
	beats := slices.Clone(host.beats)
	host.mu.Unlock()
	var worst time.Duration
	for i := 1; i < len(beats); i++ {
		worst = max(worst, beats[i].Sub(beats[i-1]))
	}
	// The bound follows from the lease the host grants (TTL 15s): the lease is lost only
	// past the TTL, and a gap past half of it leaves no room for one failed beat to be
	// retried in time. (One beat here decodes 1,000 commands of 20,000 entries, which takes
	// seconds under -race on a loaded machine: 5.9 s was seen at a load average of 12.)
	// Persisting the batch a command at a time (20,000 entries rewritten per command) held
	// the heartbeat back far longer; the writes count below catches that regression without
	// a clock.
	if ttl := 15 * time.Second; worst > ttl/2 {
		t.Errorf("the longest gap between heartbeats was %v (interval %v, lease TTL %v) over %d heartbeats", worst, hb, ttl, len(beats))
	}
	if w := a.Stats()["boot_entries_writes"]; w == 0 || w > 100 {
		t.Errorf("the entries file was written %d times for 1,000 commands, want it written in batches", w)
	}
	t.Logf("%d heartbeats, longest gap %v, %d writes of the entries file", len(beats), worst, a.Stats()["boot_entries_writes"])
}

// linkedConfig is the config the agent tests with a control link share: boot HTTP on a
// free loopback port, kernel and initrd at origin, a heartbeat every 100ms and no metrics
// listener.
func linkedConfig(site, node, dir, origin string) agent.Config {
	sha := strings.Repeat("ab", 32)
	cfg := agent.DefaultConfig()
	cfg.SiteID, cfg.NodeID, cfg.DataDir = site, node, dir
	cfg.Boot.HTTPListen = netip.MustParseAddrPort("127.0.0.1:0")
	cfg.Boot.HTTPBase = "http://127.0.0.1:0"
	cfg.Boot.Kernel = agent.Image{URL: origin + "/k", SHA256: sha}
	cfg.Boot.Initrd = agent.Image{URL: origin + "/i", SHA256: sha}
	cfg.Control = agent.ControlConfig{URL: "http://control.invalid", Insecure: true, Heartbeat: 100 * time.Millisecond, Timeout: time.Second}
	cfg.Metrics.Listen = netip.AddrPort{}
	return cfg
}
