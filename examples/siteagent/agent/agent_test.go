package agent_test

import (
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/bettercompute/siteboot/examples/siteagent/agent"
	"github.com/bettercompute/siteboot/examples/siteagent/controlplane"
)

// harness is a control plane and an image origin for agents under test. The control plane is
// the in-process one of examples/siteagent/controlplane, whose link can be cut.
type harness struct {
	plane          *controlplane.Plane
	origin         *httptest.Server
	kernel, initrd string // sha256
	tftpRoot       string
}

func newHarness(t *testing.T, configure ...func(*controlplane.Plane)) *harness {
	t.Helper()
	h := &harness{tftpRoot: t.TempDir()}
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
	h.plane.TTL = 2 * time.Second
	h.plane.Interval = 100 * time.Millisecond
	h.plane.SessionTimeout = 600 * time.Millisecond
	for _, f := range configure {
		f(h.plane)
	}
	h.plane.Enroll("site-t", "agent-t")
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { h.plane.Run(ctx); close(done) }()
	t.Cleanup(func() { cancel(); <-done })
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
	return &agent.Config{
		SiteID: "site-t", NodeID: "agent-t", DataDir: dataDir,
		Log: agent.LogConfig{Format: "text", Level: "info"},
		Boot: agent.BootConfig{
			ProxyDHCP: true, DHCPListen: "127.0.0.1:0", PXEListen: "127.0.0.1:0", ServerIP: "127.0.0.1",
			TFTP: true, TFTPListen: "127.0.0.1:0", TFTPRoot: h.tftpRoot,
			HTTPListen: "127.0.0.1:0", HTTPBase: "http://127.0.0.1:0",
			Kernel: agent.Image{URL: h.origin.URL + "/vmlinuz", SHA256: h.kernel, Format: "kernel"},
			Initrd: agent.Image{URL: h.origin.URL + "/initrd", SHA256: h.initrd, Format: "initrd"},
		},
		Lease:   agent.LeaseConfig{TTL: agent.Duration{Duration: 2 * time.Second}},
		Control: agent.ControlConfig{URL: "http://control.invalid", Heartbeat: agent.Duration{Duration: 100 * time.Millisecond}, Timeout: agent.Duration{Duration: time.Second}},
		Metrics: agent.MetricsConfig{Listen: "127.0.0.1:0"},
	}
}

// start runs an agent until the test ends (or stop is called).
func (h *harness) start(t *testing.T, dataDir string, link agent.Link) (*agent.Agent, func()) {
	t.Helper()
	_, key, _ := ed25519.GenerateKey(rand.Reader)
	ctx, cancel := context.WithCancel(context.Background())
	a, err := agent.New(ctx, h.config(dataDir), link, agent.Options{Signer: key, DHCPClientPort: 10068})
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
	return a, stop
}

func eventually(t *testing.T, what string, limit time.Duration, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(limit)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within %v", what, limit)
		}
		time.Sleep(20 * time.Millisecond)
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

func scriptURL(a *agent.Agent, e agent.Entry) string {
	return a.HTTPBase() + "/boot/ipxe?mac=" + e.MAC.String()
}

// TestRestartKeepsAnswering: an entry the agent acknowledged is served after a restart, though
// the control plane never sends it again.
func TestRestartKeepsAnswering(t *testing.T) {
	h := newHarness(t)
	dir := t.TempDir()
	a, stop := h.start(t, dir, h.plane.Link())
	e := entry(1, time.Now().Add(2*time.Hour))
	h.plane.Prepare("agent-t", []agent.Entry{e})
	eventually(t, "entry acknowledged", 5*time.Second, func() bool { return len(h.plane.Pending("agent-t")) == 0 })
	eventually(t, "script served", 10*time.Second, func() bool { return status(t, scriptURL(a, e)) == http.StatusOK })
	stop()

	b, _ := h.start(t, dir, h.plane.Link())
	if n := len(b.Entries().All()); n != 1 {
		t.Fatalf("restarted agent holds %d entries, want 1", n)
	}
	eventually(t, "script served after restart", 10*time.Second, func() bool { return status(t, scriptURL(b, e)) == http.StatusOK })

	// The script's kernel comes from the cache under the entry's grant; two scripts share it.
	kernel := kernelURL(t, scriptURL(b, e))
	if !strings.Contains(kernel, "/cache/t/") || kernel != kernelURL(t, scriptURL(b, e)) {
		t.Fatalf("kernel URL %q: want one cache grant per entry", kernel)
	}
	eventually(t, "kernel cached", 10*time.Second, func() bool { return status(t, kernel) == http.StatusOK })

	// Clean-up reaches the agent, ends the answers and the entry's grant.
	h.plane.CleanUp("agent-t", e.Workflow)
	eventually(t, "clean-up applied", 5*time.Second, func() bool { return status(t, scriptURL(b, e)) == http.StatusNotFound })
	eventually(t, "the cleaned-up entry's grant revoked", 5*time.Second, func() bool { return status(t, kernel) == http.StatusNotFound })
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

// TestLinkDownThenUp: a cut control link leaves the agent answering until its fence ends,
// then silent (503); once the link is back it answers again from the same entries.
func TestLinkDownThenUp(t *testing.T) {
	h := newHarness(t)
	link := h.plane.Link()
	a, _ := h.start(t, t.TempDir(), link)
	e := entry(2, time.Now().Add(2*time.Hour))
	h.plane.Prepare("agent-t", []agent.Entry{e})
	eventually(t, "script served", 10*time.Second, func() bool { return status(t, scriptURL(a, e)) == http.StatusOK })

	link.SetCut(true)
	cut := time.Now()
	if st := status(t, scriptURL(a, e)); st != http.StatusOK {
		t.Errorf("right after the cut: %d, want 200 (the fence still holds)", st)
	}
	eventually(t, "fenced after the cut", 5*time.Second, func() bool { return status(t, scriptURL(a, e)) == http.StatusServiceUnavailable })
	if d := time.Since(cut); d > 2*time.Second {
		t.Errorf("fenced %v after the cut, later than the 2 s lease TTL", d)
	}
	resp, err := http.Get("http://" + a.Addrs()["metrics"] + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if !strings.Contains(string(body), `siteboot_boot_answers_total{answer="fenced"}`) {
		t.Errorf("metrics do not count the fenced answers:\n%s", body)
	}
	if !strings.Contains(string(body), "siteboot_lease_active 0") {
		t.Errorf("metrics do not show the fenced agent:\n%s", body)
	}

	link.SetCut(false)
	eventually(t, "answering again", 10*time.Second, func() bool { return status(t, scriptURL(a, e)) == http.StatusOK })
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
	cfg.Boot.DHCPListen = "127.0.0.1:0"
	cfg.Boot.HTTPListen = taken.Addr().String()
	_, key, _ := ed25519.GenerateKey(rand.Reader)
	if _, err := agent.New(context.Background(), cfg, h.plane.Link(), agent.Options{Signer: key}); err == nil {
		t.Fatal("New succeeded on a port in use")
	}
	// The same config with a free HTTP port starts: nothing the failed New bound is held.
	cfg.Boot.HTTPListen = "127.0.0.1:0"
	a, err := agent.New(context.Background(), cfg, h.plane.Link(), agent.Options{Signer: key})
	if err != nil {
		t.Fatalf("second New: %v", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	a.Run(ctx)
}

// TestFenceHoldsSteady: with a heartbeat of a third of the TTL (the slowest the config
// allows) and the control plane's tick as slow as the heartbeat, the holder's fence never
// lapses while the link is up: the control plane renews on each heartbeat, so every word
// answers the heartbeat just sent.
func TestFenceHoldsSteady(t *testing.T) {
	h := newHarness(t, func(p *controlplane.Plane) { p.TTL, p.Interval = 3*time.Second, time.Second })
	cfg := h.config(t.TempDir())
	cfg.Lease.TTL.Duration = 3 * time.Second
	cfg.Control.Heartbeat.Duration = time.Second
	_, key, _ := ed25519.GenerateKey(rand.Reader)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	a, err := agent.New(ctx, cfg, h.plane.Link(), agent.Options{Signer: key})
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- a.Run(ctx) }()
	defer func() { cancel(); <-done }()
	eventually(t, "active", 5*time.Second, func() bool { return a.Fence().Active })
	for end := time.Now().Add(5 * time.Second); time.Now().Before(end); time.Sleep(10 * time.Millisecond) {
		if fs := a.Fence(); !fs.Active {
			t.Fatalf("fence lapsed with the link up: %+v", fs)
		}
	}
}

// TestCacheURL: boot.cache_url names where machines reach the cache; the script's kernel,
// initrd and bc.cache are under it, with the entry's grant.
func TestCacheURL(t *testing.T) {
	h := newHarness(t)
	cfg := h.config(t.TempDir())
	cfg.Boot.CacheURL = "http://cache.example.net:8080/images/"
	_, key, _ := ed25519.GenerateKey(rand.Reader)
	ctx, cancel := context.WithCancel(context.Background())
	a, err := agent.New(ctx, cfg, h.plane.Link(), agent.Options{Signer: key})
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- a.Run(ctx) }()
	defer func() { cancel(); <-done }()
	e := entry(3, time.Now().Add(2*time.Hour))
	h.plane.Prepare("agent-t", []agent.Entry{e})
	eventually(t, "script served", 10*time.Second, func() bool { return status(t, scriptURL(a, e)) == http.StatusOK })
	resp, err := http.Get(scriptURL(a, e))
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	const base = "http://cache.example.net:8080/images/t/"
	kernel := kernelURL(t, scriptURL(a, e))
	if !strings.HasPrefix(kernel, base) || !strings.HasSuffix(kernel, "/"+h.kernel) {
		t.Errorf("kernel URL %q, want %sGRANT/%s", kernel, base, h.kernel)
	}
	grant := strings.TrimSuffix(strings.TrimPrefix(kernel, base), "/"+h.kernel)
	if want := "bc.cache=" + base + grant + "/"; !strings.Contains(string(body), want) {
		t.Errorf("script lacks %q:\n%s", want, body)
	}
}
