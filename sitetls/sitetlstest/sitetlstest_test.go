package sitetlstest_test

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"errors"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/bettercompute/siteboot/clock/clocktest"
	"github.com/bettercompute/siteboot/sitetls"
	"github.com/bettercompute/siteboot/sitetls/sitetlstest"
	"github.com/google/go-cmp/cmp"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

var (
	t0   = time.Date(2026, 12, 1, 9, 0, 0, 0, time.UTC)
	node = sitetls.Identity{Site: "site-fsn1", Node: "node-agent-a"}
)

func TestIssue(t *testing.T) {
	clock := clocktest.New(t0)
	ca, err := sitetlstest.NewCA("test CA", clock.Now)
	if err != nil {
		t.Fatal(err)
	}
	p256, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	type got struct {
		URIs, DNS, IPs []string
		EKU            []x509.ExtKeyUsage
		NotBefore      time.Time
		NotAfter       time.Time
	}
	tests := []struct {
		name    string
		req     sitetlstest.Request
		want    got
		wantErr error
	}{
		{"node", sitetlstest.Request{Node: node}, got{
			URIs: []string{"spiffe://site-fsn1/agent/node-agent-a"}, EKU: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
			NotBefore: t0.Add(-time.Hour), NotAfter: t0.Add(23 * time.Hour)}, nil},
		{"server", sitetlstest.Request{Hosts: []string{"control.example", "127.0.0.1", "::1"}}, got{
			DNS: []string{"control.example"}, IPs: []string{"127.0.0.1", "::1"}, EKU: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
			NotBefore: t0.Add(-time.Hour), NotAfter: t0.Add(23 * time.Hour)}, nil},
		{"short-lived node on an ECDSA key", sitetlstest.Request{Node: node, Key: p256, NotBefore: t0, Lifetime: time.Minute}, got{
			URIs: []string{"spiffe://site-fsn1/agent/node-agent-a"}, EKU: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
			NotBefore: t0, NotAfter: t0.Add(time.Minute)}, nil},
		{"neither node nor host", sitetlstest.Request{}, got{}, sitetlstest.ErrRequest},
		{"bad identity", sitetlstest.Request{Node: sitetls.Identity{Site: "Site", Node: "a"}}, got{}, sitetlstest.ErrRequest},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p, err := ca.Issue(tt.req)
			if !errors.Is(err, tt.wantErr) {
				t.Fatalf("err = %v, want %v", err, tt.wantErr)
			}
			if err != nil {
				return
			}
			g := got{DNS: p.Cert.DNSNames, EKU: p.Cert.ExtKeyUsage, NotBefore: p.Cert.NotBefore, NotAfter: p.Cert.NotAfter}
			for _, u := range p.Cert.URIs {
				g.URIs = append(g.URIs, u.String())
			}
			for _, ip := range p.Cert.IPAddresses {
				g.IPs = append(g.IPs, ip.String())
			}
			if diff := cmp.Diff(tt.want, g); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
			if tt.req.Key != nil && !p.Cert.PublicKey.(*ecdsa.PublicKey).Equal(tt.req.Key.Public()) {
				t.Error("certificate is not for the given key")
			}
			_, err = p.Cert.Verify(x509.VerifyOptions{Roots: ca.Pool(), CurrentTime: p.Cert.NotBefore.Add(time.Second),
				KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageAny}})
			if err != nil {
				t.Errorf("does not chain to the CA: %v", err)
			}
		})
	}
}

// TestNewLink: the files are 0600 and load as both sides of the link, with the agent's
// identity.
func TestNewLink(t *testing.T) {
	dir := t.TempDir()
	clock := clocktest.New(t0)
	l, err := sitetlstest.NewLink(dir, clock.Now, node, nil, "127.0.0.1")
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{l.CAFile, l.ServerCert, l.ServerKey, l.AgentCert, l.AgentKey} {
		fi, err := os.Stat(p)
		if err != nil {
			t.Fatal(err)
		}
		if fi.Mode().Perm() != 0o600 || filepath.Dir(p) != dir {
			t.Errorf("%s: mode %#o in %s, want 0600 in %s", p, fi.Mode().Perm(), filepath.Dir(p), dir)
		}
	}
	srv, err := sitetls.Load(l.ServerConfig())
	if err != nil {
		t.Fatal(err)
	}
	ag, err := sitetls.Load(l.AgentConfig())
	if err != nil {
		t.Fatal(err)
	}
	if id := ag.Status().Identity; id != node {
		t.Errorf("agent identity %v, want %v", id, node)
	}
	if ips := srv.Status().Leaf.IPAddresses; len(ips) != 1 || !ips[0].Equal(net.IPv4(127, 0, 0, 1)) {
		t.Errorf("server IPs %v", ips)
	}
}
