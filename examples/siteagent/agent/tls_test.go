package agent_test

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"encoding/json"
	"errors"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/bettercompute/siteboot/examples/siteagent/agent"
	"github.com/bettercompute/siteboot/examples/siteagent/controlplane"
	"github.com/bettercompute/siteboot/sitelink"
	"github.com/bettercompute/siteboot/sitetls"
	"github.com/bettercompute/siteboot/sitetls/sitetlstest"
)

var agentID = sitetls.Identity{Site: "site-t", Node: "agent-t"}

// serveTLS mints the harness's CA at start, a server certificate for the plane and a site
// certificate for agent-t's node key, and serves the plane's API over mutual TLS.
func (h *harness) serveTLS(t *testing.T) {
	t.Helper()
	var err error
	if _, h.key, err = ed25519.GenerateKey(rand.Reader); err != nil {
		t.Fatal(err)
	}
	if h.tls, err = sitetlstest.NewLink(t.TempDir(), h.clk.Now, agentID, h.key, "127.0.0.1"); err != nil {
		t.Fatal(err)
	}
	sc := h.tls.ServerConfig()
	sc.Clock = h.clk
	creds, err := sitetls.Load(sc)
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := h.plane.TLSServer(creds)
	go srv.ServeTLS(ln, "", "")
	t.Cleanup(func() { srv.Close() })
	h.controlURL = "https://" + ln.Addr().String()
}

// tlsLink is the agent's own link over mutual TLS to the harness's plane, with cfg's
// certificate, cut whenever local is.
func (h *harness) tlsLink(t *testing.T, cfg *agent.Config, local *controlplane.LocalLink) (agent.Link, *sitetls.Credentials) {
	t.Helper()
	cc := cfg.Control
	l, creds, err := sitelink.LinkConfig{URL: cc.URL, CertFile: cc.CertFile, KeyFile: cc.KeyFile, CAFile: cc.CAFile,
		IssuerFile: cc.IssuerFile, Insecure: cc.Insecure, Timeout: cc.Timeout}.Open(sitelink.LinkNode{Identity: cfg.Identity(), Key: h.key.Public(), Clock: h.clk})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(l.HTTPClient.CloseIdleConnections)
	return &cutLink{Link: l, local: local}, creds
}

// cutLink fails as a partitioned network would while its in-process twin is cut.
type cutLink struct {
	agent.Link
	local *controlplane.LocalLink
}

func (l *cutLink) Sync(ctx context.Context, r sitelink.StatusReport) (sitelink.SyncResponse, error) {
	if l.local.Cut() {
		return sitelink.SyncResponse{}, controlplane.ErrCut
	}
	return l.Link.Sync(ctx, r)
}

func (l *cutLink) Token(ctx context.Context, q sitelink.TokenRequest) (string, error) {
	if l.local.Cut() {
		return "", controlplane.ErrCut
	}
	return l.Link.Token(ctx, q)
}

// newOwn builds an agent with its own link (a nil Link: New loads the site certificate and
// dials Control.URL itself).
func (h *harness) newOwn(t *testing.T, cfg *agent.Config, log *slog.Logger) (*agent.Agent, error) {
	t.Helper()
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return agent.New(context.Background(), cfg, nil, agent.Options{Signer: h.key, Clock: h.clk, DrainTimeout: time.Second, Logger: log})
}

// runOwn runs an agent built by newOwn until the test ends.
func runOwn(t *testing.T, a *agent.Agent) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- a.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done })
}

// TestOwnLinkOverTLS: with no Link handed in, the agent dials its control plane over mutual
// TLS with its site certificate, and is made the boot server by it.
func TestOwnLinkOverTLS(t *testing.T) {
	h := newHarness(t)
	a, err := h.newOwn(t, h.config(t.TempDir()), nil)
	if err != nil {
		t.Fatal(err)
	}
	runOwn(t, a)
	waitFor(t, "fence active over TLS", func() bool { return a.Fence().Active })
	if st := a.Fence(); st.Epoch != 1 {
		t.Errorf("fence %+v, want epoch 1", st)
	}
	if s := h.plane.Stats(); s != (controlplane.Stats{}) {
		t.Errorf("plane refused the agent's own requests: %+v", s)
	}
}

// TestFakeControlPlane: a control plane the agent's CA did not certify (one that answers
// every heartbeat with "you hold the lease at epoch 42" and an entry for an attacker's
// machine) is never believed: the handshake fails, the agent stays fenced and holds no entry.
func TestFakeControlPlane(t *testing.T) {
	h := newHarness(t)
	other, err := sitetlstest.NewLink(t.TempDir(), h.clk.Now, agentID, nil, "127.0.0.1")
	if err != nil {
		t.Fatal(err)
	}
	fakeCreds, err := sitetls.Load(other.ServerConfig())
	if err != nil {
		t.Fatal(err)
	}
	fake := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var rep sitelink.StatusReport
		json.NewDecoder(r.Body).Decode(&rep)
		json.NewEncoder(w).Encode(sitelink.SyncResponse{
			SiteSpec: sitelink.SiteSpec{Lease: sitelink.BootLeaseState{Holds: true, Epoch: 42, TTLMs: 60000, Beat: rep.Beat}},
			Commands: []sitelink.Command{{ID: "x", Kind: sitelink.KindPrepareRamdisk, Entries: []sitelink.ProxyDhcpEntry{entry(9, h.clk.Now().Add(time.Hour))}}},
		})
	}))
	fake.TLS = fakeCreds.ServerConfig()
	fake.StartTLS()
	defer fake.Close()

	cfg := h.config(t.TempDir())
	cfg.Control.URL = fake.URL
	a, err := h.newOwn(t, cfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	runOwn(t, a)
	waitFor(t, "a failed heartbeat", func() bool { return syncErrors(t, a) > 0 })
	for range 3 {
		h.clk.Advance(cfg.Control.Heartbeat)
		h.clk.waitTimer(t, cfg.Control.Heartbeat)
	}
	if fs := a.Fence(); fs.Active || fs.Epoch != 0 {
		t.Errorf("fence %+v after heartbeats to a plane of another CA; want fenced at epoch 0", fs)
	}
	if n := len(a.Entries().All()); n != 0 {
		t.Errorf("the agent took %d entries from a plane of another CA", n)
	}
}

// syncErrors reads the failed heartbeats from /metrics.
func syncErrors(t *testing.T, a *agent.Agent) int {
	t.Helper()
	_, body := get(t, "http://"+a.Addrs()["metrics"]+"/metrics")
	for _, line := range strings.Split(body, "\n") {
		if v, ok := strings.CutPrefix(line, "siteboot_control_sync_errors_total "); ok && v != "0" {
			return 1
		}
	}
	return 0
}

// TestCertificateReload: a renewed site certificate written over the old one is taken on the
// next heartbeat, with no restart and no lapse of the fence; a broken one written after it
// leaves the renewed pair in use, and /healthz names the problem until it is fixed.
func TestCertificateReload(t *testing.T) {
	h := newHarness(t)
	cfg := h.config(t.TempDir())
	a, _ := h.start(t, cfg, h.plane.Link())
	notAfter := func() string {
		_, body := get(t, "http://"+a.Addrs()["metrics"]+"/metrics")
		for _, line := range strings.Split(body, "\n") {
			if v, ok := strings.CutPrefix(line, "siteboot_control_cert_not_after_seconds "); ok {
				return v
			}
		}
		return ""
	}
	before := notAfter()
	renewed, err := h.tls.CA.Issue(sitetlstest.Request{Node: agentID, Key: h.key, NotBefore: h.clk.Now(), Lifetime: 48 * time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	if err := renewed.WriteFiles(cfg.Control.CertFile, ""); err != nil {
		t.Fatal(err)
	}
	h.beat(t, a)
	if got := notAfter(); got == before || got == "" {
		t.Fatalf("cert expiry after the renewal: %s, want a new one (was %s)", got, before)
	}
	if !a.Fence().Active {
		t.Fatal("fence lapsed across the renewal")
	}
	// A broken certificate: the renewed one stays in use, heartbeats go on, /healthz says so.
	if err := os.WriteFile(cfg.Control.CertFile+".new", []byte("not a certificate"), 0o600); err != nil {
		t.Fatal(err)
	}
	os.Rename(cfg.Control.CertFile+".new", cfg.Control.CertFile)
	for range 3 {
		h.beat(t, a)
	}
	if !a.Fence().Active {
		t.Error("fence lapsed with a broken certificate on disk (the last good one should stay in use)")
	}
	st, body := get(t, "http://"+a.Addrs()["metrics"]+"/healthz")
	if st != http.StatusOK || !strings.Contains(body, "control link certificate") || !strings.Contains(body, cfg.Control.CertFile) {
		t.Errorf("/healthz with a broken certificate file: %d %q, want 200 naming the file", st, body)
	}
	if strings.Contains(body, "not a certificate") {
		t.Errorf("/healthz shows the file's content: %q", body)
	}
	if err := renewed.WriteFiles(cfg.Control.CertFile, ""); err != nil {
		t.Fatal(err)
	}
	h.beat(t, a)
	if _, body := get(t, "http://"+a.Addrs()["metrics"]+"/healthz"); body != "ok\n" {
		t.Errorf("/healthz after the fix: %q, want ok", body)
	}
}

// TestCredentialsRefused: the agent does not start with a site certificate that is not its
// own (another node's, or one for another key), or with key or certificate files that
// group or others may read.
func TestCredentialsRefused(t *testing.T) {
	h := newHarness(t)
	issue := func(t *testing.T, id sitetls.Identity, key ed25519.PrivateKey) *agent.Config {
		cfg := h.config(t.TempDir())
		r := sitetlstest.Request{Node: id}
		if key != nil {
			r.Key = key
		}
		p, err := h.tls.CA.Issue(r)
		if err != nil {
			t.Fatal(err)
		}
		dir := t.TempDir()
		cfg.Control.CertFile = filepath.Join(dir, "site.pem")
		keyFile := "" // the certificate is for the node key, already on disk
		if key == nil {
			keyFile = filepath.Join(dir, "site.key")
			cfg.Control.KeyFile = keyFile
		}
		if err := p.WriteFiles(cfg.Control.CertFile, keyFile); err != nil {
			t.Fatal(err)
		}
		return cfg
	}
	for _, tt := range []struct {
		name string
		cfg  func(t *testing.T) *agent.Config
		want error
	}{
		{"another node's certificate", func(t *testing.T) *agent.Config {
			return issue(t, sitetls.Identity{Site: "site-t", Node: "agent-u"}, h.key)
		}, sitetls.ErrCertIdentity},
		{"another site's certificate", func(t *testing.T) *agent.Config {
			return issue(t, sitetls.Identity{Site: "site-u", Node: "agent-t"}, h.key)
		}, sitetls.ErrCertIdentity},
		{"a certificate for another key", func(t *testing.T) *agent.Config {
			return issue(t, agentID, nil)
		}, sitetls.ErrCertKey},
		{"key readable by group", func(t *testing.T) *agent.Config {
			cfg := h.config(t.TempDir())
			os.Chmod(cfg.Control.KeyFile, 0o640)
			t.Cleanup(func() { os.Chmod(cfg.Control.KeyFile, 0o600) })
			return cfg
		}, sitetls.ErrInsecureFile},
		{"certificate readable by all", func(t *testing.T) *agent.Config {
			cfg := h.config(t.TempDir())
			os.Chmod(cfg.Control.CertFile, 0o644)
			t.Cleanup(func() { os.Chmod(cfg.Control.CertFile, 0o600) })
			return cfg
		}, sitetls.ErrInsecureFile},
	} {
		t.Run(tt.name, func(t *testing.T) {
			_, err := h.newOwn(t, tt.cfg(t), nil)
			if !errors.Is(err, tt.want) {
				t.Errorf("New: %v, want %v", err, tt.want)
			}
		})
	}
}

// TestPlainHTTP: an http:// control URL is refused unless Control.Insecure; with it, the
// agent runs and says so at start, in /healthz and in /metrics.
func TestPlainHTTP(t *testing.T) {
	h := newHarness(t)
	plain := httptest.NewServer(h.plane.InsecureHandler())
	defer plain.Close()
	cfg := h.config(t.TempDir())
	cfg.Control = agent.ControlConfig{URL: plain.URL, Heartbeat: cfg.Control.Heartbeat, Timeout: cfg.Control.Timeout}
	if err := cfg.Validate(); !errors.Is(err, agent.ErrPlainHTTP) {
		t.Fatalf("Validate with an http URL: %v, want ErrPlainHTTP", err)
	}
	cfg.Control.Insecure = true
	var logs bytes.Buffer
	var mu sync.Mutex
	a, err := h.newOwn(t, cfg, slog.New(slog.NewTextHandler(&lockedWriter{w: &logs, mu: &mu}, nil)))
	if err != nil {
		t.Fatal(err)
	}
	runOwn(t, a)
	waitFor(t, "fence active over plain http", func() bool { return a.Fence().Active })
	mu.Lock()
	log := logs.String()
	mu.Unlock()
	if !strings.Contains(log, "level=WARN") || !strings.Contains(log, "plain http") {
		t.Errorf("no warning at start about the plain http link:\n%s", log)
	}
	if st, body := get(t, "http://"+a.Addrs()["metrics"]+"/healthz"); st != http.StatusOK || !strings.Contains(body, "insecure") {
		t.Errorf("/healthz: %d %q, want 200 saying insecure", st, body)
	}
	if _, body := get(t, "http://"+a.Addrs()["metrics"]+"/metrics"); !strings.Contains(body, "siteboot_control_insecure 1") {
		t.Error("/metrics lacks siteboot_control_insecure 1")
	}
}

type lockedWriter struct {
	w  *bytes.Buffer
	mu *sync.Mutex
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}

// TestUntrustedRenewal: a site certificate written over the old one by a CA the control
// plane does not trust is not adopted (the old one stays in use and the fence holds), and
// the status and /metrics say so until a good one is written.
func TestUntrustedRenewal(t *testing.T) {
	h := newHarness(t)
	cfg := h.config(t.TempDir())
	a, _ := h.start(t, cfg, h.plane.Link())
	other, err := sitetlstest.NewLink(t.TempDir(), h.clk.Now, agentID, h.key, "127.0.0.1")
	if err != nil {
		t.Fatal(err)
	}
	stranger, err := other.CA.Issue(sitetlstest.Request{Node: agentID, Key: h.key, NotBefore: h.clk.Now(), Lifetime: 48 * time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	metric := func() string {
		_, body := get(t, "http://"+a.Addrs()["metrics"]+"/metrics")
		for _, line := range strings.Split(body, "\n") {
			if v, ok := strings.CutPrefix(line, "siteboot_control_cert_untrusted "); ok {
				return v
			}
		}
		return ""
	}
	if n, m := a.Stats()["control_cert_untrusted"], metric(); n != 0 || m != "0" {
		t.Fatalf("before: control_cert_untrusted %d, metric %q; want 0", n, m)
	}
	if err := stranger.WriteFiles(cfg.Control.CertFile, ""); err != nil {
		t.Fatal(err)
	}
	for range 3 {
		h.beat(t, a)
	}
	if n, m := a.Stats()["control_cert_untrusted"], metric(); n != 1 || m != "1" {
		t.Errorf("with a certificate from another CA: control_cert_untrusted %d, metric %q; want 1", n, m)
	}
	if !a.Fence().Active {
		t.Error("fence lapsed: the untrusted certificate was adopted")
	}
	renewed, err := h.tls.CA.Issue(sitetlstest.Request{Node: agentID, Key: h.key, NotBefore: h.clk.Now(), Lifetime: 48 * time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	if err := renewed.WriteFiles(cfg.Control.CertFile, ""); err != nil {
		t.Fatal(err)
	}
	h.beat(t, a)
	if n := a.Stats()["control_cert_untrusted"]; n != 0 {
		t.Errorf("after a good renewal: control_cert_untrusted %d, want 0", n)
	}
}
