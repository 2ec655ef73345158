package sitelink_test

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"testing"
	"time"

	"github.com/bettercompute/siteboot/sitelink"
	"github.com/bettercompute/siteboot/sitetls"
	"github.com/bettercompute/siteboot/sitetls/sitetlstest"
)

// agentCreds loads credentials for agent-1 of site-a, issued by ca, trusting caFile.
func agentCreds(t *testing.T, ca *sitetlstest.CA, caFile string) *sitetls.Credentials {
	t.Helper()
	p, err := ca.Issue(sitetlstest.Request{Node: sitetls.Identity{Site: "site-a", Node: "agent-1"}})
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	cert, key := filepath.Join(dir, "agent.pem"), filepath.Join(dir, "agent.key")
	if err := p.WriteFiles(cert, key); err != nil {
		t.Fatal(err)
	}
	creds, err := sitetls.Load(sitetls.Config{CertFile: cert, KeyFile: key, CAFile: caFile})
	if err != nil {
		t.Fatal(err)
	}
	return creds
}

func newClient(t *testing.T, cfg sitelink.ClientConfig) *sitelink.Client {
	t.Helper()
	c, err := sitelink.NewClient(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.HTTPClient.CloseIdleConnections)
	return c
}

// TestNewClientMutualTLS: the client presents the agent's certificate, so the control plane
// learns the caller from it, and dials directly, with no proxy from the environment.
func TestNewClientMutualTLS(t *testing.T) {
	l := newLab(t)
	c := newClient(t, sitelink.ClientConfig{URL: l.url, Credentials: agentCreds(t, l.ca, filepath.Join(l.dir, "ca.pem")), Timeout: 5 * time.Second})
	if _, err := c.Sync(context.Background(), sitelink.StatusReport{Site: "site-a", Node: "agent-1", Beat: 1}); err != nil {
		t.Fatal(err)
	}
	if got := l.fake.peers; len(got) != 1 || got[0] != verified {
		t.Errorf("the control plane saw %+v, want %+v", got, verified)
	}
	tr, ok := c.HTTPClient.Transport.(*http.Transport)
	if !ok || tr.Proxy != nil || tr.TLSClientConfig == nil || c.HTTPClient.Timeout != 5*time.Second {
		t.Errorf("transport %#v, timeout %v: want no proxy, a TLS configuration and the timeout", c.HTTPClient.Transport, c.HTTPClient.Timeout)
	}
}

// TestNewClientVerifiesServer: a control plane whose certificate does not chain to the
// agent's CA bundle is refused at the handshake, and nothing reaches it.
func TestNewClientVerifiesServer(t *testing.T) {
	l := newLab(t)
	stranger, err := sitetlstest.NewCA("another CA", nil)
	if err != nil {
		t.Fatal(err)
	}
	caFile := filepath.Join(t.TempDir(), "ca.pem")
	if err := stranger.WriteFile(caFile); err != nil {
		t.Fatal(err)
	}
	c := newClient(t, sitelink.ClientConfig{URL: l.url, Credentials: agentCreds(t, stranger, caFile), Timeout: 5 * time.Second})
	_, err = c.Sync(context.Background(), sitelink.StatusReport{Site: "site-a", Node: "agent-1", Beat: 1})
	if !errors.Is(err, sitetls.ErrPeerNotVerified) {
		t.Errorf("Sync to a control plane of another CA: %v, want ErrPeerNotVerified", err)
	}
	if len(l.fake.peers) != 0 {
		t.Errorf("the control plane was reached: %+v", l.fake.peers)
	}
}

// TestNewClientPlainHTTP: an http URL is refused unless InsecurePlainHTTP allows it; then
// calls go through.
func TestNewClientPlainHTTP(t *testing.T) {
	f := &fake{}
	srv := httptest.NewServer(&sitelink.Handler{Server: f, BMC: f, Insecure: true})
	defer srv.Close()
	if _, err := sitelink.NewClient(sitelink.ClientConfig{URL: srv.URL}); !errors.Is(err, sitelink.ErrPlainHTTP) {
		t.Fatalf("NewClient with an http URL: %v, want ErrPlainHTTP", err)
	}
	c := newClient(t, sitelink.ClientConfig{URL: srv.URL, InsecurePlainHTTP: true})
	if _, err := c.Sync(context.Background(), sitelink.StatusReport{Site: "site-a", Node: "agent-1", Beat: 1}); err != nil {
		t.Fatal(err)
	}
	if c.HTTPClient.Timeout != sitelink.DefaultTimeout {
		t.Errorf("Timeout %v, want DefaultTimeout", c.HTTPClient.Timeout)
	}
}

// TestClientConfigValidate: what NewClient refuses.
func TestClientConfigValidate(t *testing.T) {
	for _, tt := range []struct {
		name string
		cfg  sitelink.ClientConfig
		want error
	}{
		{"no URL", sitelink.ClientConfig{}, sitelink.ErrClientConfig},
		{"no scheme", sitelink.ClientConfig{URL: "cp.example:8443"}, sitelink.ErrClientConfig},
		{"another scheme", sitelink.ClientConfig{URL: "ftp://cp.example", InsecurePlainHTTP: true}, sitelink.ErrClientConfig},
		{"https without credentials", sitelink.ClientConfig{URL: "https://cp.example"}, sitetls.ErrNoCredentials},
		{"http not allowed", sitelink.ClientConfig{URL: "http://cp.example"}, sitelink.ErrPlainHTTP},
		{"negative timeout", sitelink.ClientConfig{URL: "http://cp.example", InsecurePlainHTTP: true, Timeout: -time.Second}, sitelink.ErrClientConfig},
	} {
		t.Run(tt.name, func(t *testing.T) {
			if err := tt.cfg.Validate(); !errors.Is(err, tt.want) {
				t.Errorf("Validate = %v, want %v", err, tt.want)
			}
			if c, err := sitelink.NewClient(tt.cfg); c != nil || !errors.Is(err, tt.want) {
				t.Errorf("NewClient = %v, %v; want %v", c, err, tt.want)
			}
		})
	}
	if err := (sitelink.ClientConfig{URL: "http://cp.example", InsecurePlainHTTP: true}).Validate(); err != nil {
		t.Errorf("plain http allowed: %v", err)
	}
}
