package sitetls_test

import (
	"crypto/ed25519"
	"crypto/rand"
	"errors"
	"log/slog"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/bettercompute/siteboot/clock/clocktest"
	"github.com/bettercompute/siteboot/internal/testlog"
	"github.com/bettercompute/siteboot/sitetls"
	"github.com/bettercompute/siteboot/sitetls/sitetlstest"
)

func nodeKey(t *testing.T) ed25519.PrivateKey {
	t.Helper()
	_, k, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	return k
}

// TestCheckLeaf: the certificate in use must name the node's site and node and be for its
// key; a status without a certificate is no credentials.
func TestCheckLeaf(t *testing.T) {
	clk := clocktest.New(t0)
	ca := newCA(t, clk)
	key, otherKey := nodeKey(t), nodeKey(t)
	st := func(id sitetls.Identity) sitetls.Status {
		p := issue(t, ca, sitetlstest.Request{Node: id, Key: key})
		f := write(t, p, t.TempDir(), "agent")
		return load(t, sitetls.Config{CertFile: f.cert, KeyFile: f.key, CAFile: writeCA(t, t.TempDir(), "ca.pem", ca), Clock: clk}).Status()
	}
	mine := st(nodeA)
	for _, tt := range []struct {
		name string
		st   sitetls.Status
		key  any
		want error
	}{
		{"its own", mine, key.Public(), nil},
		{"another node's", st(nodeB), key.Public(), sitetls.ErrCertIdentity},
		{"another site's", st(sitetls.Identity{Site: "site-other", Node: nodeA.Node}), key.Public(), sitetls.ErrCertIdentity},
		{"another key", mine, otherKey.Public(), sitetls.ErrCertKey},
		{"no key to compare", mine, nil, sitetls.ErrCertKey},
		{"no certificate", sitetls.Status{}, key.Public(), sitetls.ErrNoCredentials},
	} {
		t.Run(tt.name, func(t *testing.T) {
			err := sitetls.CheckLeaf(tt.st, nodeA, tt.key)
			if !errors.Is(err, tt.want) || (tt.want == nil) != (err == nil) {
				t.Errorf("CheckLeaf = %v, want %v", err, tt.want)
			}
		})
	}
}

// TestLoadNode: credentials for another node or another key are refused at load.
func TestLoadNode(t *testing.T) {
	clk := clocktest.New(t0)
	ca := newCA(t, clk)
	dir := t.TempDir()
	caFile := writeCA(t, dir, "ca.pem", ca)
	key := nodeKey(t)
	for _, tt := range []struct {
		name string
		req  sitetlstest.Request
		want error
	}{
		{"its own", sitetlstest.Request{Node: nodeA, Key: key}, nil},
		{"another node's", sitetlstest.Request{Node: nodeB, Key: key}, sitetls.ErrCertIdentity},
		{"another key", sitetlstest.Request{Node: nodeA}, sitetls.ErrCertKey},
	} {
		t.Run(tt.name, func(t *testing.T) {
			f := write(t, issue(t, ca, tt.req), t.TempDir(), "agent")
			c, err := sitetls.LoadNode(sitetls.Config{CertFile: f.cert, KeyFile: f.key, CAFile: caFile, Clock: clk}, nodeA, key.Public())
			if !errors.Is(err, tt.want) || (tt.want == nil) != (err == nil) || (c == nil) != (err != nil) {
				t.Errorf("LoadNode = %v, %v; want %v", c, err, tt.want)
			}
		})
	}
}

// monitored is an agent's credentials under a Monitor, with the Monitor's log.
type monitored struct {
	clk  *clocktest.Fake
	ca   *sitetlstest.CA
	key  ed25519.PrivateKey
	f    files
	caF  string
	mon  *sitetls.Monitor
	logs *testlog.Buffer
}

func newMonitored(t *testing.T) *monitored {
	t.Helper()
	m := &monitored{clk: clocktest.New(t0), key: nodeKey(t), logs: &testlog.Buffer{}}
	m.ca = newCA(t, m.clk)
	dir := t.TempDir()
	m.caF = writeCA(t, dir, "ca.pem", m.ca)
	m.f = write(t, issue(t, m.ca, sitetlstest.Request{Node: nodeA, Key: m.key}), dir, "agent")
	creds := load(t, sitetls.Config{CertFile: m.f.cert, KeyFile: m.f.key, CAFile: m.caF, Clock: m.clk})
	m.mon = &sitetls.Monitor{Credentials: creds, Identity: nodeA, Key: m.key.Public(),
		Logger: slog.New(slog.NewTextHandler(m.logs, nil))}
	return m
}

// renew writes a certificate from ca for id on the node key over the one in use.
func (m *monitored) renew(t *testing.T, ca *sitetlstest.CA, id sitetls.Identity) *sitetlstest.Pair {
	t.Helper()
	m.clk.Advance(time.Hour)
	p := issue(t, ca, sitetlstest.Request{Node: id, Key: m.key, NotBefore: m.clk.Now(), Lifetime: 48 * time.Hour})
	if err := p.WriteFiles(m.f.cert, ""); err != nil {
		t.Fatal(err)
	}
	return p
}

func (m *monitored) inUse() string {
	return serial(&sitetlstest.Pair{Cert: m.mon.Credentials.Status().Leaf})
}

func (m *monitored) lines(level string) int {
	return strings.Count(m.logs.String(), "level="+level+" ")
}

// TestMonitorRenewal: a renewed certificate is taken on the next Check; one from a CA the
// peers do not trust keeps the renewed one in use and is reported (Untrusted, Health,
// logged once however many checks see it) until a good one replaces it.
func TestMonitorRenewal(t *testing.T) {
	m := newMonitored(t)
	if err := m.mon.Check(); err != nil || m.mon.Health() != "" || m.mon.Untrusted() {
		t.Fatalf("first check: %v, health %q, untrusted %v", err, m.mon.Health(), m.mon.Untrusted())
	}
	renewed := m.renew(t, m.ca, nodeA)
	if err := m.mon.Check(); err != nil {
		t.Fatalf("check after a renewal: %v", err)
	}
	if m.inUse() != serial(renewed) {
		t.Fatalf("in use: %s, want the renewal %s", m.inUse(), serial(renewed))
	}

	other := newCA(t, m.clk)
	m.renew(t, other, nodeA)
	for range 3 {
		if err := m.mon.Check(); !errors.Is(err, sitetls.ErrUntrustedCert) {
			t.Fatalf("check with an untrusted renewal: %v, want ErrUntrustedCert", err)
		}
	}
	if m.inUse() != serial(renewed) {
		t.Errorf("in use: %s, want the trusted renewal %s kept", m.inUse(), serial(renewed))
	}
	if !m.mon.Untrusted() {
		t.Error("Untrusted false with an untrusted renewal on disk")
	}
	if h := m.mon.Health(); !strings.HasPrefix(h, "control link certificate: ") || !strings.Contains(h, m.f.cert) {
		t.Errorf("Health = %q, want the problem naming %s", h, m.f.cert)
	}
	if n := m.lines("ERROR"); n != 1 {
		t.Errorf("%d error lines for one problem seen three times, want 1:\n%s", n, m.logs)
	}

	good := m.renew(t, m.ca, nodeA)
	if err := m.mon.Check(); err != nil {
		t.Fatalf("check after a good renewal: %v", err)
	}
	if m.mon.Untrusted() || m.mon.Health() != "" || m.inUse() != serial(good) {
		t.Errorf("after a good renewal: untrusted %v, health %q, in use %s (want %s)", m.mon.Untrusted(), m.mon.Health(), m.inUse(), serial(good))
	}
	if n := m.lines("INFO"); n != 1 {
		t.Errorf("%d info lines, want 1 (back in order):\n%s", n, m.logs)
	}
}

// TestMonitorWrongRenewal: a renewal the CA issued for another node, or a broken file, is
// reported by Check and Health, naming the file and not its content.
func TestMonitorWrongRenewal(t *testing.T) {
	m := newMonitored(t)
	m.renew(t, m.ca, nodeB)
	if err := m.mon.Check(); !errors.Is(err, sitetls.ErrCertIdentity) {
		t.Fatalf("check with another node's certificate: %v, want ErrCertIdentity", err)
	}
	if h := m.mon.Health(); !strings.Contains(h, nodeB.String()) {
		t.Errorf("Health = %q, want it to name %s", h, nodeB)
	}
	if err := os.WriteFile(m.f.cert+".new", []byte("secret junk"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(m.f.cert+".new", m.f.cert); err != nil {
		t.Fatal(err)
	}
	if err := m.mon.Check(); !errors.Is(err, sitetls.ErrNoCertificate) {
		t.Fatalf("check with a broken file: %v, want ErrNoCertificate", err)
	}
	if h := m.mon.Health(); !strings.Contains(h, m.f.cert) || strings.Contains(h, "secret junk") {
		t.Errorf("Health = %q, want it to name the file and not its content", h)
	}
	if n := m.lines("ERROR"); n != 2 {
		t.Errorf("%d error lines for two problems, want 2:\n%s", n, m.logs)
	}
}

// TestMonitorExpired: a certificate in use that expired is reported by Health though no
// check failed.
func TestMonitorExpired(t *testing.T) {
	m := newMonitored(t)
	if err := m.mon.Check(); err != nil {
		t.Fatal(err)
	}
	m.clk.Advance(sitetlstest.DefaultLifetime + time.Hour)
	if h := m.mon.Health(); !strings.Contains(h, "expired") {
		t.Errorf("Health with an expired certificate = %q", h)
	}
}

// TestMonitorWithout: no credentials, or a plain http link.
func TestMonitorWithout(t *testing.T) {
	var none sitetls.Monitor
	if err := none.Check(); err != nil || none.Health() != "" || none.Untrusted() {
		t.Errorf("no credentials: %v, %q, %v", err, none.Health(), none.Untrusted())
	}
	plain := sitetls.Monitor{Insecure: true}
	if h := plain.Health(); !strings.HasPrefix(h, "insecure: ") {
		t.Errorf("plain http: Health = %q", h)
	}
}
