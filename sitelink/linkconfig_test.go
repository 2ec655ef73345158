package sitelink_test

import (
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"errors"
	"net"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/bettercompute/siteboot/sitelink"
	"github.com/bettercompute/siteboot/sitetls"
	"github.com/bettercompute/siteboot/sitetls/sitetlstest"
)

// TestLinkConfigValidate: each refusal names its field; a complete https config and an
// insecure http one pass.
func TestLinkConfigValidate(t *testing.T) {
	const u = "https://cp.example:8443"
	for _, tc := range []struct {
		name  string
		c     sitelink.LinkConfig
		field string
		is    error
	}{
		{"https with files", sitelink.LinkConfig{URL: u, CertFile: "a.pem", CAFile: "ca.pem"}, "", nil},
		{"https, host's own credentials", sitelink.LinkConfig{URL: u}, "", nil},
		{"insecure http", sitelink.LinkConfig{URL: "http://cp.example", Insecure: true}, "", nil},
		{"no URL", sitelink.LinkConfig{}, "URL", nil},
		{"no host", sitelink.LinkConfig{URL: "https:///v1"}, "URL", nil},
		{"ftp", sitelink.LinkConfig{URL: "ftp://cp.example"}, "URL", nil},
		{"plain http", sitelink.LinkConfig{URL: "http://cp.example"}, "URL", sitelink.ErrPlainHTTP},
		{"http with a certificate", sitelink.LinkConfig{URL: "http://cp.example", Insecure: true, CAFile: "ca.pem"}, "CertFile", nil},
		{"CA without certificate", sitelink.LinkConfig{URL: u, CAFile: "ca.pem"}, "CertFile", nil},
		{"certificate without CA", sitelink.LinkConfig{URL: u, CertFile: "a.pem"}, "CAFile", nil},
		{"key without certificate", sitelink.LinkConfig{URL: u, KeyFile: "a.key"}, "CertFile", nil},
		{"issuer without certificate", sitelink.LinkConfig{URL: u, IssuerFile: "i.pem"}, "CertFile", nil},
		{"negative timeout", sitelink.LinkConfig{URL: u, Timeout: -1}, "Timeout", nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.c.Validate()
			if tc.field == "" {
				if err != nil {
					t.Fatalf("Validate: %v", err)
				}
				return
			}
			var le *sitelink.LinkConfigError
			if !errors.As(err, &le) || le.Field != tc.field || (tc.is != nil && !errors.Is(err, tc.is)) {
				t.Errorf("Validate: %v, want a LinkConfigError for %s (wrapping %v)", err, tc.field, tc.is)
			}
		})
	}
}

// TestLinkConfigOpen: over https Open loads the agent's own site certificate (its key the
// node key's file when KeyFile is empty) and the link it returns syncs with a control
// plane that verifies it; a certificate for another node is refused; over insecure http
// it loads no credentials.
func TestLinkConfigOpen(t *testing.T) {
	pub, key, _ := ed25519.GenerateKey(rand.Reader)
	id := sitetls.Identity{Site: "site-a", Node: "agent-1"}
	lab, err := sitetlstest.NewLink(t.TempDir(), nil, id, key, "127.0.0.1")
	if err != nil {
		t.Fatal(err)
	}
	srvCreds, err := sitetls.Load(lab.ServerConfig())
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: &sitelink.Handler{Server: &fake{}}, TLSConfig: srvCreds.ServerConfig()}
	go srv.ServeTLS(ln, "", "")
	t.Cleanup(func() { srv.Close() })

	c := sitelink.LinkConfig{URL: "https://" + ln.Addr().String(), CertFile: lab.AgentCert, CAFile: lab.CAFile}
	node := sitelink.LinkNode{Identity: id, Key: pub, KeyFile: lab.AgentKey}
	cl, creds, err := c.Open(node)
	if err != nil {
		t.Fatal(err)
	}
	defer cl.HTTPClient.CloseIdleConnections()
	if creds == nil || creds.Status().Identity != id {
		t.Fatalf("credentials %v, want %v's", creds, id)
	}
	if _, err := cl.Sync(context.Background(), sitelink.StatusReport{Site: id.Site, Node: id.Node}); err != nil {
		t.Errorf("Sync over the opened link: %v", err)
	}

	other := node
	other.Identity.Node = "agent-2"
	if _, _, err := c.Open(other); !errors.Is(err, sitetls.ErrCertIdentity) {
		t.Errorf("another node's certificate: %v, want ErrCertIdentity", err)
	}
	if _, err := (sitelink.LinkConfig{URL: c.URL}).LoadCredentials(node); !errors.Is(err, sitetls.ErrNoCredentials) {
		t.Errorf("https without files: %v, want ErrNoCredentials", err)
	}

	plain := httptest.NewServer(&sitelink.Handler{Server: &fake{}, Insecure: true})
	defer plain.Close()
	cl, creds, err = sitelink.LinkConfig{URL: plain.URL, Insecure: true}.Open(node)
	if err != nil || creds != nil {
		t.Fatalf("insecure http: %v, credentials %v; want a link without", err, creds)
	}
	if _, err := cl.Sync(context.Background(), sitelink.StatusReport{Site: id.Site, Node: id.Node}); err != nil {
		t.Errorf("Sync over plain http: %v", err)
	}
}
