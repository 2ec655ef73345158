package agent_test

import (
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/bettercompute/siteboot/examples/siteagent/agent"
	"github.com/bettercompute/siteboot/examples/siteagent/controlplane"
	"github.com/bettercompute/siteboot/lease"
	"github.com/bettercompute/siteboot/sitelink"
	"github.com/bettercompute/siteboot/sitetls/sitetlstest"
)

// harness is a control plane and an image origin for agents under test. The control plane is
// the in-process one of examples/siteagent/controlplane, whose link can be cut.
//
// Agents and control plane share one fake clock: a heartbeat happens when the test moves
// the clock (beat), and the fence, the lease, entries and grants see only that time.
type harness struct {
	plane          *controlplane.Plane
	tls            *sitetlstest.Link  // the CA, the plane's certificate and agent-t's
	key            ed25519.PrivateKey // agent-t's node key, which its certificate is for
	controlURL     string             // the plane over mutual TLS
	origin         *httptest.Server
	kernel, initrd string // sha256
	tftpRoot       string
	clk            *fakeClock
	logger         *slog.Logger // the agents' logger; nil discards
}

func newHarness(t *testing.T, configure ...func(*controlplane.Plane)) *harness {
	t.Helper()
	h := &harness{tftpRoot: t.TempDir(), clk: newFakeClock()}
	images := map[string][]byte{"vmlinuz": randBytes(64 << 10), "initrd": randBytes(128 << 10)}
	h.kernel, h.initrd = sum(images["vmlinuz"]), sum(images["initrd"])
	h.origin = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, ok := images[strings.TrimPrefix(r.URL.Path, "/")]
		if !ok {
			http.NotFound(w, r)
			return
		}
		w.Write(b)
	}))
	t.Cleanup(h.origin.Close)
	os.WriteFile(filepath.Join(h.tftpRoot, "ipxe.efi"), randBytes(1000), 0o644)

	h.plane = controlplane.New(nil)
	h.plane.Clock = h.clk
	h.plane.TTL = 2 * time.Second
	h.plane.SessionTimeout = 600 * time.Millisecond
	for _, f := range configure {
		f(h.plane)
	}
	// No periodic lease tick: the plane ticks the site on each heartbeat, which is all one
	// agent needs.
	h.plane.Enroll("site-t", "agent-t")
	h.serveTLS(t)
	return h
}

func randBytes(n int) []byte {
	b := make([]byte, n)
	rand.Read(b)
	return b
}

func sum(b []byte) string {
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:])
}

func (h *harness) config(dataDir string) *agent.Config {
	lo := netip.MustParseAddrPort("127.0.0.1:0")
	c := agent.DefaultConfig()
	c.SiteID, c.NodeID, c.DataDir = "site-t", "agent-t", dataDir
	c.Boot.ProxyDHCP, c.Boot.DHCPListen, c.Boot.PXEListen, c.Boot.ServerIP = true, lo, lo, netip.MustParseAddr("127.0.0.1")
	c.Boot.TFTP, c.Boot.TFTPListen, c.Boot.TFTPRoot = true, lo, h.tftpRoot
	c.Boot.HTTPListen = lo
	c.Boot.Kernel = agent.Image{URL: h.origin.URL + "/vmlinuz", SHA256: h.kernel, Format: "kernel"}
	c.Boot.Initrd = agent.Image{URL: h.origin.URL + "/initrd", SHA256: h.initrd, Format: "initrd"}
	c.Lease.TTL = 2 * time.Second
	// Timeout bounds a heartbeat's request in real time (the harness's clock is fake and
	// drives everything else): as long as the lease may, so that a loaded machine under
	// -race does not fail a heartbeat by accident, which would lapse the fence a test
	// expects to hold.
	c.Control = agent.ControlConfig{URL: h.controlURL, Heartbeat: 100 * time.Millisecond, Timeout: c.Lease.TTL,
		CertFile: h.tls.AgentCert, KeyFile: h.tls.AgentKey, CAFile: h.tls.CAFile}
	c.Metrics.Listen = lo
	c.Boot.AllowedSourceNetworks = []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8")} // the test's origin
	return &c
}

// countingLink is the host's own Link around the plane's: it counts finished heartbeats,
// so a test knows when one has been answered (or has failed).
type countingLink struct {
	agent.Link
	n atomic.Uint64
}

func (l *countingLink) Sync(ctx context.Context, r sitelink.StatusReport) (sitelink.SyncResponse, error) {
	defer l.n.Add(1)
	return l.Link.Sync(ctx, r)
}

// running is an agent under test.
type running struct {
	*agent.Agent
	link *countingLink
	cfg  *agent.Config
}

// start runs an agent on the harness's clock until the test ends (or stop is called), and
// waits for its first heartbeat.
//
// The plane's in-process link stands for the agent's own link over mutual TLS (tls_test.go):
// heartbeats and token requests go over HTTPS to the plane, cut when the in-process link is.
func (h *harness) start(t *testing.T, cfg *agent.Config, link agent.Link) (*running, func()) {
	t.Helper()
	opt := agent.Options{Signer: h.key, DHCPClientPort: 10068, Clock: h.clk, DrainTimeout: 2 * time.Second, Logger: h.logger}
	if local, ok := link.(*controlplane.LocalLink); ok {
		link, opt.Credentials = h.tlsLink(t, cfg, local)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cl := &countingLink{Link: link}
	a, err := agent.New(ctx, cfg, cl, opt)
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- a.Run(ctx) }()
	stopped := false
	stop := func() {
		if !stopped {
			stopped = true
			cancel()
			if err := <-done; err != nil {
				t.Errorf("Run: %v", err)
			}
		}
	}
	t.Cleanup(stop)
	r := &running{Agent: a, link: cl, cfg: cfg}
	waitFor(t, "first heartbeat", func() bool { return cl.n.Load() > 0 })
	h.clk.waitTimer(t, cfg.Control.Heartbeat)
	applied(t, r)
	return r, stop
}

// beat moves the clock by one heartbeat interval and waits for that heartbeat to be
// answered and its answer applied.
func (h *harness) beat(t *testing.T, r *running) {
	t.Helper()
	hb := r.cfg.Control.Heartbeat
	h.clk.waitTimer(t, hb)
	n := r.link.n.Load()
	h.clk.Advance(hb)
	waitFor(t, "heartbeat answered", func() bool { return r.link.n.Load() > n })
	h.clk.waitTimer(t, hb) // the next one is set once the answer is handed over
	applied(t, r)
}

// applied waits until the boot commands the agent received are applied (off its heartbeat).
func applied(t *testing.T, r *running) {
	t.Helper()
	waitFor(t, "commands applied", func() bool { return r.Stats()["commands_queued"] == 0 })
}

// prepare hands the agent entries and beats until it acknowledged them.
func (h *harness) prepare(t *testing.T, r *running, entries ...sitelink.ProxyDhcpEntry) {
	t.Helper()
	h.plane.PrepareRamdisk("agent-t", entries)
	for i := 0; len(h.plane.Pending("agent-t")) > 0; i++ {
		if i == 5 {
			t.Fatalf("entries not acknowledged after %d heartbeats", i)
		}
		h.beat(t, r)
	}
}

func status(t *testing.T, u string) int {
	t.Helper()
	resp, err := http.Get(u)
	if err != nil {
		return 0
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return resp.StatusCode
}

// scriptURL is the script URL machine e's iPXE asks, with the boot nonce of a fresh proxy
// DHCP answer to it (none when proxy DHCP is off or silent).
func scriptURL(a *running, e sitelink.ProxyDhcpEntry) string {
	return a.HTTPBase() + "/boot/ipxe?mac=" + e.MAC.String() + nonceParam(a, e.MAC)
}

// get answers a URL's status and body.
func get(t *testing.T, u string) (int, string) {
	t.Helper()
	resp, err := http.Get(u)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// TestRestartKeepsAnswering: an entry the agent acknowledged is served after a restart, though
// the control plane never sends it again.
func TestRestartKeepsAnswering(t *testing.T) {
	h := newHarness(t)
	dir := t.TempDir()
	a, stop := h.start(t, h.config(dir), h.plane.Link())
	e := entry(1, h.clk.Now().Add(2*time.Hour))
	h.prepare(t, a, e)
	if st := status(t, scriptURL(a, e)); st != http.StatusOK {
		t.Fatalf("script: %d, want 200", st)
	}
	stop()

	b, _ := h.start(t, h.config(dir), h.plane.Link())
	if n := len(b.Entries().All()); n != 1 {
		t.Fatalf("restarted agent holds %d entries, want 1", n)
	}
	if st := status(t, scriptURL(b, e)); st != http.StatusOK {
		t.Fatalf("script after restart: %d, want 200", st)
	}

	// The script's kernel comes from the cache under the entry's grant; two scripts share it.
	kernel := kernelURL(t, scriptURL(b, e))
	if !strings.Contains(kernel, "/cache/t/") || kernel != kernelURL(t, scriptURL(b, e)) {
		t.Fatalf("kernel URL %q: want one cache grant per entry", kernel)
	}
	waitFor(t, "kernel cached", func() bool { return status(t, kernel) == http.StatusOK })

	// Clean-up reaches the agent, ends the answers and the entry's grant.
	h.plane.CleanUp("agent-t", e.Workflow)
	h.beat(t, b)
	if st := status(t, scriptURL(b, e)); st != http.StatusOK {
		t.Errorf("script after clean-up: %d, want 200 (the exit script)", st)
	}
	if st := status(t, kernel); st != http.StatusNotFound {
		t.Errorf("the cleaned-up entry's grant: %d, want 404 (revoked)", st)
	}
}

// kernelURL fetches a script and returns the URL its kernel command loads.
func kernelURL(t *testing.T, script string) string {
	t.Helper()
	resp, err := http.Get(script)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	for _, line := range strings.Split(string(body), "\n") {
		if f := strings.Fields(line); len(f) > 1 && f[0] == "kernel" {
			return f[1]
		}
	}
	t.Fatalf("no kernel line in:\n%s", body)
	return ""
}

// TestLinkDownThenUp: a cut control link leaves the agent answering until its fence ends
// (the lease TTL less the fence's margin after the last answered heartbeat was sent), then
// silent (503); once the link is back it answers again from the same entries.
func TestLinkDownThenUp(t *testing.T) {
	h := newHarness(t)
	link := h.plane.Link()
	a, _ := h.start(t, h.config(t.TempDir()), link)
	e := entry(2, h.clk.Now().Add(2*time.Hour))
	h.prepare(t, a, e)
	if st := status(t, scriptURL(a, e)); st != http.StatusOK {
		t.Fatalf("script: %d, want 200", st)
	}
	window := a.cfg.Lease.TTL - lease.DefaultMargin
	link.SetCut(true)
	h.clk.Advance(window - time.Millisecond)
	if st := status(t, scriptURL(a, e)); st != http.StatusOK {
		t.Errorf("%v after the last answered heartbeat: %d, want 200 (the fence still holds)", window-time.Millisecond, st)
	}
	h.clk.Advance(time.Millisecond)
	if st := status(t, scriptURL(a, e)); st != http.StatusServiceUnavailable {
		t.Errorf("%v after the last answered heartbeat: %d, want 503 (fenced)", window, st)
	}
	_, body := get(t, "http://"+a.Addrs()["metrics"]+"/metrics")
	if !strings.Contains(body, `siteboot_boot_answers_total{answer="fenced"} 1`) {
		t.Errorf("metrics do not count the fenced answer:\n%s", body)
	}
	if !strings.Contains(body, "siteboot_lease_active 0") {
		t.Errorf("metrics do not show the fenced agent:\n%s", body)
	}

	link.SetCut(false)
	h.beat(t, a)
	if st := status(t, scriptURL(a, e)); st != http.StatusOK {
		t.Errorf("after the link came back: %d, want 200", st)
	}
	if n := len(a.Entries().All()); n != 1 {
		t.Errorf("%d entries after the link came back, want 1", n)
	}
}

// TestNewPortTaken: a port already in use is an error from New (not a panic), and New
// releases the sockets it had bound.
func TestNewPortTaken(t *testing.T) {
	h := newHarness(t)
	taken, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer taken.Close()
	cfg := h.config(t.TempDir())
	cfg.Boot.HTTPListen = netip.MustParseAddrPort(taken.Addr().String())
	_, key, _ := ed25519.GenerateKey(rand.Reader)
	if _, err := agent.New(context.Background(), cfg, h.plane.Link(), agent.Options{Signer: key, Clock: h.clk}); err == nil {
		t.Fatal("New succeeded on a port in use")
	}
	// The same config with a free HTTP port starts: nothing the failed New bound is held.
	cfg.Boot.HTTPListen = netip.MustParseAddrPort("127.0.0.1:0")
	a, err := agent.New(context.Background(), cfg, h.plane.Link(), agent.Options{Signer: key, Clock: h.clk})
	if err != nil {
		t.Fatalf("second New: %v", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	a.Run(ctx)
}

// TestFenceHoldsSteady: with a heartbeat of a third of the TTL (the slowest the config
// allows), the holder's fence never lapses while the link is up: the control plane renews
// on each heartbeat, so every word answers the heartbeat just sent and the fence's window
// starts again from it. Twenty heartbeats of fake time.
func TestFenceHoldsSteady(t *testing.T) {
	h := newHarness(t, func(p *controlplane.Plane) { p.TTL, p.SessionTimeout = 3*time.Second, 3*time.Second })
	cfg := h.config(t.TempDir())
	cfg.Lease.TTL = 3 * time.Second
	cfg.Control.Timeout = cfg.Lease.TTL
	cfg.Control.Heartbeat = time.Second
	a, _ := h.start(t, cfg, h.plane.Link())
	window := cfg.Lease.TTL - lease.DefaultMargin
	hb := cfg.Control.Heartbeat
	for i := range 20 {
		h.clk.waitTimer(t, hb)
		// Just before the next heartbeat is due, the fence still holds.
		h.clk.Advance(hb - time.Millisecond)
		if fs := a.Fence(); !fs.Active {
			t.Fatalf("fence lapsed before heartbeat %d: %+v", i+2, fs)
		}
		n := a.link.n.Load()
		h.clk.Advance(time.Millisecond)
		waitFor(t, "heartbeat answered", func() bool { return a.link.n.Load() > n })
		h.clk.waitTimer(t, hb)
		if fs := a.Fence(); !fs.Active || fs.Remaining != window || fs.Epoch != 1 {
			t.Fatalf("after heartbeat %d: %+v; want active at epoch 1 for the whole %v", i+2, fs, window)
		}
	}
}

// TestCacheURL: Boot.CacheURL names where machines reach the cache; the script's kernel,
// initrd and bc.cache are under it, with the entry's grant.
func TestCacheURL(t *testing.T) {
	h := newHarness(t)
	cfg := h.config(t.TempDir())
	cfg.Boot.CacheURL = "http://cache.example.net:8080/images/"
	a, _ := h.start(t, cfg, h.plane.Link())
	e := entry(3, h.clk.Now().Add(2*time.Hour))
	h.prepare(t, a, e)
	st, body := get(t, scriptURL(a, e))
	if st != http.StatusOK {
		t.Fatalf("script: %d, want 200", st)
	}
	const base = "http://cache.example.net:8080/images/t/"
	kernel := kernelURL(t, scriptURL(a, e))
	if !strings.HasPrefix(kernel, base) || !strings.HasSuffix(kernel, "/"+h.kernel) {
		t.Errorf("kernel URL %q, want %sGRANT/%s", kernel, base, h.kernel)
	}
	grant := strings.TrimSuffix(strings.TrimPrefix(kernel, base), "/"+h.kernel)
	if want := "bc.cache=" + base + grant + "/"; !strings.Contains(body, want) {
		t.Errorf("script lacks %q:\n%s", want, body)
	}
}

// TestHostBoundSockets: sockets the host bound itself are served instead of the config's
// addresses (here addresses no test may bind), and the agent answers on them.
func TestHostBoundSockets(t *testing.T) {
	h := newHarness(t)
	cfg := h.config(t.TempDir())
	unbindable := netip.MustParseAddrPort("192.0.2.254:1") // TEST-NET-1: not this host's
	cfg.Boot.DHCPListen, cfg.Boot.PXEListen, cfg.Boot.TFTPListen, cfg.Boot.HTTPListen = unbindable, unbindable, unbindable, unbindable
	cfg.Metrics.Listen = netip.AddrPort{}
	udp := func() net.PacketConn {
		c, err := net.ListenPacket("udp4", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	tcp := func() net.Listener {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		return l
	}
	opt := agent.Options{DHCPConn: udp(), PXEConn: udp(), TFTPConn: udp(), HTTPListener: tcp(), MetricsListener: tcp(), Clock: h.clk}
	_, key, _ := ed25519.GenerateKey(rand.Reader)
	opt.Signer = key
	ctx, cancel := context.WithCancel(context.Background())
	a, err := agent.New(ctx, cfg, h.plane.Link(), opt)
	if err != nil {
		cancel()
		t.Fatalf("New with host-bound sockets: %v", err)
	}
	done := make(chan error, 1)
	go func() { done <- a.Run(ctx) }()
	defer func() { cancel(); <-done }()
	want := map[string]string{
		"dhcp": opt.DHCPConn.LocalAddr().String(), "pxe": opt.PXEConn.LocalAddr().String(),
		"tftp": opt.TFTPConn.LocalAddr().String(), "http": opt.HTTPListener.Addr().String(),
		"metrics": opt.MetricsListener.Addr().String(),
	}
	if diff := cmp.Diff(want, a.Addrs()); diff != "" {
		t.Errorf("addrs (-want +got):\n%s", diff)
	}
	if base := "http://" + want["http"]; a.HTTPBase() != base {
		t.Errorf("HTTPBase %q, want %q: the URLs handed to machines name the host's listener", a.HTTPBase(), base)
	}
	if st, _ := get(t, "http://"+want["metrics"]+"/healthz"); st != http.StatusServiceUnavailable && st != http.StatusOK {
		t.Errorf("/healthz on the host's metrics listener: %d", st)
	}
	if st, _ := get(t, "http://"+want["http"]+"/boot/chain.ipxe"); st != http.StatusOK {
		t.Errorf("/boot/chain.ipxe on the host's listener: %d", st)
	}
}

// TestDamagedEntriesFile: a boot entries file that does not parse, or holds one entry that
// does not, stops nothing: the agent starts, serves the valid entries, renames the damaged
// file aside (its bytes kept) and says so in its status.
func TestDamagedEntriesFile(t *testing.T) {
	h := newHarness(t)
	good := entry(1, h.clk.Now().Add(2*time.Hour))
	gb, err := json.Marshal(good)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name    string
		file    string
		served  bool   // the valid entry is served
		dropped uint64 // 0: the list itself did not parse
	}{
		{"one entry invalid", `[` + string(gb) + `,{"mac":"52:54:00:00:00:02","arch":"Z80","workflow":"wf","not_after":"2099-01-01T00:00:00Z"}]`, true, 1},
		{"one entry undecodable", `[` + string(gb) + `,{"mac":"not a mac","arch":"BIOS"}]`, true, 1},
		{"two bad entries", `[{"mac":5},` + string(gb) + `,{"arch":"BIOS","workflow":"wf","not_after":"2099-01-01T00:00:00Z"}]`, true, 2},
		{"truncated", `[` + string(gb) + `,{"mac":"52:5`, false, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			path := filepath.Join(dir, agent.EntriesFileName)
			if err := os.WriteFile(path, []byte(tc.file), 0o600); err != nil {
				t.Fatal(err)
			}
			a, stop := h.start(t, h.config(dir), h.plane.Link())
			defer stop()
			if _, ok := a.Entries().Lookup(good.MAC); ok != tc.served {
				t.Errorf("the agent holds the valid entry: %v, want %v", ok, tc.served)
			}
			if !tc.served {
				if st := status(t, scriptURL(a, good)); st != http.StatusOK {
					t.Errorf("script of an entry in a file that did not parse: %d, want 200 (the exit script)", st)
				}
			}
			st := a.Stats()
			if st["boot_entries_damaged"] != 1 || st["boot_entries_dropped"] != tc.dropped {
				t.Errorf("status: boot_entries_damaged=%d boot_entries_dropped=%d, want 1 and %d", st["boot_entries_damaged"], st["boot_entries_dropped"], tc.dropped)
			}
			aside, _ := filepath.Glob(path + ".damaged-*")
			if len(aside) != 1 {
				t.Fatalf("set-aside files %v, want one", aside)
			}
			if b, _ := os.ReadFile(aside[0]); string(b) != tc.file {
				t.Errorf("the set-aside file holds %q, want the damaged bytes", b)
			}
			// What is left in place is sound: a second start finds no damage.
			stop()
			b, stop2 := h.start(t, h.config(dir), h.plane.Link())
			defer stop2()
			if n := b.Stats()["boot_entries_damaged"]; n != 0 {
				t.Errorf("second start: boot_entries_damaged=%d, want 0", n)
			}
			if _, ok := b.Entries().Lookup(good.MAC); ok != tc.served {
				t.Errorf("second start holds the valid entry: %v, want %v", ok, tc.served)
			}
		})
	}
}
