package controlplane_test

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/bettercompute/siteboot/bmc"
	"github.com/bettercompute/siteboot/bmc/bmctest"
	"github.com/bettercompute/siteboot/examples/siteagent/agent"
	"github.com/bettercompute/siteboot/examples/siteagent/controlplane"
	"github.com/bettercompute/siteboot/hwid"
	"github.com/bettercompute/siteboot/imagecache"
	"github.com/bettercompute/siteboot/sitelink"
	"github.com/google/go-cmp/cmp"
)

// These tests run site agents against the plane in process, with a fake Redfish BMC
// (bmc/bmctest, DMTF's public-rackmount1 mockup): no real BMC runs in a unit test; the e2e
// tests drive OpenIPMI's ipmi_sim in front of a QEMU machine.

const bmcSite = "site-bmc"

// syncBuffer is a log sink the agents and the plane write to from several goroutines.
type bmcLogs struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *bmcLogs) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *bmcLogs) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

type bmcLab struct {
	t      *testing.T
	plane  *controlplane.Plane
	logs   *bmcLogs
	log    *slog.Logger
	origin *httptest.Server
	kernel []byte
	fw     []byte
}

func newBMCLab(t *testing.T) *bmcLab {
	l := &bmcLab{t: t, logs: &bmcLogs{}, kernel: make([]byte, 4096), fw: make([]byte, 8192)}
	rand.Read(l.kernel)
	rand.Read(l.fw)
	l.log = slog.New(slog.NewTextHandler(l.logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	l.origin = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/vmlinuz", "/initrd":
			w.Write(l.kernel)
		case "/fw.bin":
			w.Write(l.fw)
		default:
			http.NotFound(w, r)
		}
	}))
	t.Cleanup(l.origin.Close)
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("logs:\n%s", l.logs.String())
		}
	})
	l.plane = controlplane.New(l.log.With("part", "plane"))
	l.plane.TTL = 2 * time.Second
	l.plane.Interval = 100 * time.Millisecond
	l.plane.SessionTimeout = 500 * time.Millisecond
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { l.plane.Run(ctx); close(done) }()
	t.Cleanup(func() { cancel(); <-done })
	l.plane.SetCredential("bmc/m1", bmc.Credential{Username: bmctest.DefaultUsername, Password: bmctest.DefaultPassword})
	l.plane.SetImages(bmcSite, []sitelink.CacheImage{{URL: l.origin.URL + "/fw.bin", SHA256: digestOf(l.fw), Format: "raw"}})
	return l
}

func digestOf(b []byte) string {
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:])
}

type bmcAgent struct {
	*agent.Agent
	link *controlplane.LocalLink
	stop context.CancelFunc
	done chan error
}

func (l *bmcLab) agent(name string) *bmcAgent {
	t := l.t
	lo := netip.MustParseAddrPort("127.0.0.1:0")
	cfg := agent.DefaultConfig()
	cfg.SiteID, cfg.NodeID, cfg.DataDir = bmcSite, name, t.TempDir()
	cfg.Boot.HTTPListen = lo
	cfg.Boot.HTTPBase = "http://127.0.0.1:0"
	cfg.Boot.Kernel = agent.Image{URL: l.origin.URL + "/vmlinuz", SHA256: digestOf(l.kernel), Format: "kernel"}
	cfg.Boot.Initrd = agent.Image{URL: l.origin.URL + "/initrd", SHA256: digestOf(l.kernel), Format: "initrd"}
	cfg.Boot.AllowedSourceNetworks = []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8")}
	cfg.Lease.TTL = 2 * time.Second
	cfg.Control = agent.ControlConfig{URL: "http://control.invalid", Insecure: true, Heartbeat: 100 * time.Millisecond, Timeout: time.Second}
	cfg.Metrics.Listen = netip.AddrPort{}
	cfg.BMC.Timeout = 20 * time.Second
	_, key, _ := ed25519.GenerateKey(rand.Reader)
	l.plane.Enroll(bmcSite, name)
	link := l.plane.Link()
	ctx, cancel := context.WithCancel(context.Background())
	a, err := agent.New(ctx, &cfg, link, agent.Options{Logger: l.log.With("part", name), Signer: key, DrainTimeout: time.Second})
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	la := &bmcAgent{Agent: a, link: link, stop: cancel, done: make(chan error, 1)}
	go func() { la.done <- a.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-la.done })
	return la
}

func waitUntil(t *testing.T, what string, limit time.Duration, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(limit)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within %v", what, limit)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func (l *bmcLab) run(kind string, body sitelink.BMCCommand) sitelink.BMCResult {
	l.t.Helper()
	id, err := l.plane.BMC(bmcSite, kind, body)
	if err != nil {
		l.t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	res, err := l.plane.WaitBMC(ctx, id)
	if err != nil {
		l.t.Fatalf("%s: %v", kind, err)
	}
	return res
}

// TestBMCCommands runs every bmc.* kind through an agent against the fake BMC: results come
// back by id with what the BMC read, the credential is fetched by reference and appears in
// no log, firmware and media get a grant for their one digest, and a BMC that refuses says
// so with its kind.
func TestBMCCommands(t *testing.T) {
	l := newBMCLab(t)
	srv := bmctest.NewServer(bmctest.Options{})
	t.Cleanup(srv.Close)
	a := l.agent("agent-a")
	waitUntil(t, "lease and cached firmware", 10*time.Second, func() bool {
		d := mustDigest(t, digestOf(l.fw))
		_, ok := a.Cache().Lookup(d)
		return a.Fence().Active && ok
	})
	tg := sitelink.BMCTarget{Driver: "redfish", Address: srv.URL, Credential: "bmc/m1"}

	q := l.run(sitelink.KindBMCQuery, sitelink.BMCCommand{Target: tg})
	if q.Status != "ok" || q.Inventory == nil || q.Power == "" {
		t.Fatalf("query: %+v", q)
	}
	if diff := cmp.Diff([]string{"12:44:6a:3b:04:11", "aa:bb:cc:dd:ee:00"}, q.Inventory.MACs); diff != "" {
		t.Errorf("query MACs (-want +got):\n%s", diff)
	}
	if q.Inventory.UUID == "" {
		t.Errorf("query found no UUID: %+v", q.Inventory)
	}

	if r := l.run(sitelink.KindBMCBoot, sitelink.BMCCommand{Target: tg, Device: "pxe"}); r.Status != "ok" {
		t.Fatalf("boot: %+v", r)
	}
	if r := l.run(sitelink.KindBMCPower, sitelink.BMCCommand{Target: tg, Action: "cycle"}); r.Status != "ok" {
		t.Fatalf("power: %+v", r)
	}
	boots := srv.Boots()
	if len(boots) == 0 || boots[len(boots)-1].Target != "Pxe" {
		t.Errorf("the machine's last boot = %+v, want one from Pxe", boots)
	}

	s := l.run(sitelink.KindBMCStorage, sitelink.BMCCommand{Target: tg})
	if s.Status != "ok" || len(s.Disks) == 0 {
		t.Errorf("storage: %+v", s)
	}

	fw := l.run(sitelink.KindBMCFirmware, sitelink.BMCCommand{Target: tg, SHA256: digestOf(l.fw)})
	if fw.Status != "ok" || fw.Firmware == nil {
		t.Errorf("firmware: %+v", fw)
	}
	ups := srv.Updates()
	if len(ups) != 1 || !strings.Contains(ups[0], "/cache/t/") || !strings.HasSuffix(ups[0], "/"+digestOf(l.fw)) {
		t.Fatalf("the BMC was handed %q, want one /cache/t/GRANT/SHA256 URL", ups)
	}
	grant := strings.Split(strings.SplitAfter(ups[0], "/cache/t/")[1], "/")[0]

	if r := l.run(sitelink.KindBMCMediaInsert, sitelink.BMCCommand{Target: tg, SHA256: digestOf(l.fw)}); r.Status != "ok" {
		t.Errorf("media insert: %+v", r)
	}
	if r := l.run(sitelink.KindBMCMediaEject, sitelink.BMCCommand{Target: tg}); r.Status != "ok" {
		t.Errorf("media eject: %+v", r)
	}
	if r := l.run(sitelink.KindBMCMediaInsert, sitelink.BMCCommand{Target: tg, SHA256: digestOf([]byte("not cached"))}); r.Status != "not-sent" || r.ErrorKind != "invalid" {
		t.Errorf("media insert of an image not cached: %+v", r)
	}

	l.plane.SetCredential("bmc/m1-next", bmc.Credential{Username: bmctest.DefaultUsername, Password: "rotated-secret-1"})
	if r := l.run(sitelink.KindBMCRotate, sitelink.BMCCommand{Target: tg, NewCredential: "bmc/m1-next"}); r.Status != "ok" {
		t.Fatalf("rotate: %+v", r)
	}
	if got := srv.Password(bmctest.DefaultUsername); got != "rotated-secret-1" {
		t.Errorf("the BMC's password after rotation = %q", got)
	}
	// The old credential no longer logs in: the BMC says so, with the kind.
	if r := l.run(sitelink.KindBMCQuery, sitelink.BMCCommand{Target: tg}); r.Status == "ok" || r.ErrorKind != "auth" {
		t.Errorf("query with the old password: %+v, want kind auth", r)
	}
	if r := l.run(sitelink.KindBMCPower, sitelink.BMCCommand{Target: sitelink.BMCTarget{Driver: "nosuch", Address: "x", Credential: "bmc/m1"}, Action: "on"}); r.ErrorKind != "unsupported-driver" {
		t.Errorf("unknown driver: %+v", r)
	}

	logs := l.logs.String()
	for _, secret := range []string{bmctest.DefaultPassword, "rotated-secret-1", grant} {
		if strings.Contains(logs, secret) {
			t.Errorf("a secret is in the logs: %q", secret)
		}
	}
	if !strings.Contains(logs, "bmc: operation") {
		t.Errorf("no operation was logged:\n%s", logs)
	}
}

func mustDigest(t *testing.T, s string) imagecache.Digest {
	t.Helper()
	d, err := imagecache.ParseDigest(s)
	if err != nil {
		t.Fatal(err)
	}
	return d
}

// powerPosts counts the Reset actions the fake BMC received.
func powerPosts(srv *bmctest.Server) int {
	n := 0
	for _, r := range srv.Requests() {
		if r.Method == http.MethodPost && strings.HasSuffix(r.Path, "ComputerSystem.Reset") {
			n++
		}
	}
	return n
}

// TestEnsureRamdiskFailoverReusesPowerCycle is the seed's failover test in small: the
// holder is killed right after it power-cycled the machine (its claim report recorded, its
// heartbeat never sent); the standby is promoted once the lease expired, gets its own
// entries, and the power cycle's outcome is reused, not sent again.
func TestEnsureRamdiskFailoverReusesPowerCycle(t *testing.T) {
	l := newBMCLab(t)
	srv := bmctest.NewServer(bmctest.Options{})
	t.Cleanup(srv.Close)
	a := l.agent("agent-a")
	waitUntil(t, "agent-a holds the lease", 10*time.Second, func() bool { return a.Fence().Active })
	b := l.agent("agent-b")

	var killed time.Time
	l.plane.OnBMCReport = func(node string, c sitelink.Command, o bmc.Outcome) {
		if node == "agent-a" && c.Kind == sitelink.KindBMCPower && killed.IsZero() {
			killed = time.Now()
			a.stop()
		}
	}
	mac := hwid.MAC{0x52, 0x54, 0x00, 0x12, 0x34, 0x99}
	entry := sitelink.ProxyDhcpEntry{MAC: mac, Arch: sitelink.ArchX86UEFI, Workflow: "wf-1", NotAfter: time.Now().Add(2 * time.Hour)}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	steps, err := l.plane.EnsureRamdisk(ctx, bmcSite, controlplane.RamdiskMachine{
		Entries: []sitelink.ProxyDhcpEntry{entry},
		BMC:     sitelink.BMCTarget{Driver: "redfish", Address: srv.URL, Credential: "bmc/m1"},
	})
	if err != nil {
		t.Fatalf("EnsureRamdisk: %v (%+v)", err, steps)
	}
	if steps.Agent != "agent-a" || !steps.PowerReused || steps.Power.Status != "ok" {
		t.Errorf("steps = %+v; want the entries on agent-a and the power cycle's outcome reused", steps)
	}
	if n := len(srv.Boots()); n != 1 {
		t.Errorf("the machine booted %d times, want 1", n)
	}
	posts := powerPosts(srv)
	// The standby serves the machine: it has its own entry, and holds the lease.
	waitUntil(t, "agent-b holds the lease with the entry", 10*time.Second, func() bool {
		_, ok := b.Entries().Lookup(mac)
		return ok && b.Fence().Active
	})
	if powerPosts(srv) != posts {
		t.Errorf("the BMC got another power request after the failover")
	}
	rec, _, err := l.plane.Claims().Store.Get(ctx, steps.PowerID)
	if err != nil || rec.State != bmc.ClaimReported || rec.Node != "agent-a" {
		t.Errorf("the power cycle's claim = %+v, %v; want reported by agent-a", rec, err)
	}
}

// TestBMCCommandMovesOrIsUnknown: a command the holder never received moves to the agent
// that takes over and runs there; one the holder claimed and never reported is finished as
// "outcome unknown" and is not sent again.
func TestBMCCommandMovesOrIsUnknown(t *testing.T) {
	l := newBMCLab(t)
	srv := bmctest.NewServer(bmctest.Options{})
	t.Cleanup(srv.Close)
	a := l.agent("agent-a")
	waitUntil(t, "agent-a holds the lease", 10*time.Second, func() bool { return a.Fence().Active })
	b := l.agent("agent-b")
	tg := sitelink.BMCTarget{Driver: "redfish", Address: srv.URL, Credential: "bmc/m1"}
	srv.SetPowerState("Off")

	// agent-a is cut off before it hears of either command; one of them was routed to it
	// and claimed before.
	a.link.SetCut(true)
	ctx := context.Background()
	moved, _ := l.plane.BMC(bmcSite, sitelink.KindBMCPower, sitelink.BMCCommand{Target: tg, Action: "on"})
	unknown, _ := l.plane.BMC(bmcSite, sitelink.KindBMCPower, sitelink.BMCCommand{Target: tg, Action: "off"})
	// The registry grants only what it routed to the claiming node.
	if g, err := l.plane.Claims().Claim(ctx, "agent-a", bmc.ClaimRequest{ID: unknown, Op: "power", Journal: "j-a"}); !errors.Is(err, bmc.ErrNotRouted) || g.Granted {
		t.Fatalf("claim before routing: %+v, %v; want bmc.ErrNotRouted", g, err)
	}
	if d, err := l.plane.Claims().Route(ctx, unknown, sitelink.KindBMCPower, "agent-a"); err != nil || d.Action != bmc.RouteSend {
		t.Fatalf("route: %+v, %v", d, err)
	}
	if g, err := l.plane.Claims().Claim(ctx, "agent-a", bmc.ClaimRequest{ID: unknown, Op: "power", Journal: "j-a"}); err != nil || !g.Granted {
		t.Fatalf("claim: %+v, %v", g, err)
	}
	wctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	rm, err := l.plane.WaitBMC(wctx, moved)
	if err != nil {
		t.Fatal(err)
	}
	ru, err := l.plane.WaitBMC(wctx, unknown)
	if err != nil {
		t.Fatal(err)
	}
	// Run by agent-b: its outcome may reach the plane as agent-b's result or, when a sync
	// routes the command again after agent-b reported its claim and before the result
	// arrived, from that claim record (Replayed); the claim's node below says who ran it.
	if rm.Status != "ok" {
		t.Errorf("moved command: %+v, want run by agent-b", rm)
	}
	if ru.Status != "unknown" || ru.ErrorKind != "outcome-unknown" {
		t.Errorf("claimed, unreported command: %+v, want outcome unknown", ru)
	}
	if rec, _, _ := l.plane.Claims().Store.Get(ctx, moved); rec.Node != "agent-b" {
		t.Errorf("moved command's claim = %+v, want agent-b's", rec)
	}
	if n := powerPosts(srv); n != 1 {
		t.Errorf("the BMC got %d power requests, want 1 (the moved one)", n)
	}
	_ = b
}
