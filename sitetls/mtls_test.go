package sitetls_test

import (
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"math/big"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/bettercompute/siteboot/clock/clocktest"
	"github.com/bettercompute/siteboot/sitetls"
	"github.com/bettercompute/siteboot/sitetls/sitetlstest"
)

// TestMutualTLS runs the link end to end on loopback: which agents the control plane admits,
// which control planes the agent trusts, and the node identity a handler sees.
func TestMutualTLS(t *testing.T) {
	p256, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	type setup struct {
		ca, otherCA *sitetlstest.CA
		clock       *clocktest.Fake
	}
	tests := []struct {
		name string
		// server and agent return the pairs each side loads; both trust ca unless
		// agentTrusts/serverTrusts say otherwise.
		server, agent     func(s setup) *sitetlstest.Pair
		serverTrustsOther bool
		serverName        string // for ClientConfig; default testIP
		rawAgent          bool   // the agent presents no certificate at all
		advance           time.Duration
		wantBody          string // prefix; empty means the request must fail
		wantErr           error  // errors.Is on the client's error, when set
		wantHandled       bool
	}{
		{
			name:     "ed25519 agent and server",
			wantBody: "spiffe://site-fsn1/agent/node-agent-a ", wantHandled: true,
		},
		{
			name: "ecdsa agent key",
			agent: func(s setup) *sitetlstest.Pair {
				return issueNoT(s.ca, sitetlstest.Request{Node: nodeA, Key: p256})
			},
			wantBody: "spiffe://site-fsn1/agent/node-agent-a ", wantHandled: true,
		},
		{
			name: "ecdsa server key",
			server: func(s setup) *sitetlstest.Pair {
				return issueNoT(s.ca, sitetlstest.Request{Hosts: []string{testIP}, Key: p256, Lifetime: 48 * time.Hour})
			},
			wantBody: "spiffe://site-fsn1/agent/node-agent-a ", wantHandled: true,
		},
		{
			name:     "agent presents no certificate",
			rawAgent: true,
		},
		{
			name: "agent certificate from another CA",
			agent: func(s setup) *sitetlstest.Pair {
				return issueNoT(s.otherCA, sitetlstest.Request{Node: nodeA})
			},
		},
		{
			name: "server certificate from another CA",
			server: func(s setup) *sitetlstest.Pair {
				return issueNoT(s.otherCA, sitetlstest.Request{Hosts: []string{testIP}})
			},
			wantErr: sitetls.ErrPeerNotVerified,
		},
		{
			name:       "server certificate for another name",
			serverName: "control.example",
			wantErr:    sitetls.ErrPeerNotVerified,
		},
		{
			name: "node certificate presented as a server certificate",
			server: func(s setup) *sitetlstest.Pair {
				return issueNoT(s.ca, sitetlstest.Request{Node: nodeB})
			},
			wantErr: sitetls.ErrPeerNotVerified,
		},
		{
			name: "server certificate presented as a node certificate",
			agent: func(s setup) *sitetlstest.Pair {
				return issueNoT(s.ca, sitetlstest.Request{Hosts: []string{"agent.example"}})
			},
		},
		{
			name:    "agent certificate expired since it was loaded",
			advance: 25 * time.Hour,
		},
		{
			name: "node certificate that also names a host",
			agent: func(s setup) *sitetlstest.Pair {
				return issueNoT(s.ca, sitetlstest.Request{Node: nodeA, Hosts: []string{"x.example"}})
			},
			// Still one URI name: admitted as the node.
			wantBody: "spiffe://site-fsn1/agent/node-agent-a ", wantHandled: true,
		},
		{
			name: "client certificate without a node identity",
			agent: func(s setup) *sitetlstest.Pair {
				return clientCertWithURIs(s.ca)
			},
			// The handshake verifies; NodeFrom refuses.
			wantBody: "sitetls: no node identity: certificate has 0 URI names", wantHandled: true,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			clock := clocktest.New(t0)
			s := setup{ca: newCA(t, clock), otherCA: newCA(t, clock), clock: clock}
			srvPair := issue(t, s.ca, sitetlstest.Request{Hosts: []string{testIP}, Lifetime: 48 * time.Hour})
			if tt.server != nil {
				srvPair = tt.server(s)
			}
			agPair := issue(t, s.ca, sitetlstest.Request{Node: nodeA})
			if tt.agent != nil {
				agPair = tt.agent(s)
			}
			caFile := writeCA(t, dir, "ca.pem", s.ca)
			sf, af := write(t, srvPair, dir, "server"), write(t, agPair, dir, "agent")
			srvCreds := load(t, sitetls.Config{CertFile: sf.cert, KeyFile: sf.key, CAFile: caFile, Clock: clock})
			agCreds := load(t, sitetls.Config{CertFile: af.cert, KeyFile: af.key, CAFile: caFile, Clock: clock})
			srv := serve(t, srvCreds)
			clock.Advance(tt.advance)

			name := tt.serverName
			if name == "" {
				name = testIP
			}
			cfg := agCreds.ClientConfig(name)
			if tt.rawAgent {
				pool := x509.NewCertPool()
				pool.AddCert(s.ca.Cert)
				cfg = &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS13, Time: clock.Now}
			}
			got := get(client(t, cfg), srv.url)
			if tt.wantBody != "" {
				wantStatus := 200
				if strings.HasPrefix(tt.wantBody, "sitetls:") {
					wantStatus = 403
				}
				if got.err != nil || got.status != wantStatus || !strings.HasPrefix(got.body, tt.wantBody) {
					t.Fatalf("got %d %q (err %v), want %d %q...", got.status, got.body, got.err, wantStatus, tt.wantBody)
				}
				if want := " " + serial(agPair); wantStatus == 200 && !strings.HasSuffix(got.body, want) {
					t.Errorf("body %q: the handler saw another certificate than the agent's (serial%s)", got.body, want)
				}
				if got.serverSerial != serial(srvPair) {
					t.Errorf("server serial %s, want %s", got.serverSerial, serial(srvPair))
				}
			} else if got.err == nil {
				t.Fatalf("request succeeded (%d %q), want a failed handshake", got.status, got.body)
			}
			if tt.wantErr != nil && !errors.Is(got.err, tt.wantErr) {
				t.Errorf("error %v, want errors.Is %v", got.err, tt.wantErr)
			}
			if h := srv.handled.Load() > 0; h != tt.wantHandled {
				t.Errorf("handler reached: %v, want %v", h, tt.wantHandled)
			}
		})
	}
}

// clientCertWithURIs issues a client-auth certificate carrying the given URI names (none,
// or several), which sitetlstest does not make.
func clientCertWithURIs(ca *sitetlstest.CA, uris ...string) *sitetlstest.Pair {
	_, key, _ := ed25519.GenerateKey(rand.Reader)
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(4242),
		Subject:      pkix.Name{CommonName: "node-agent-a"},
		NotBefore:    ca.Now().Add(-time.Hour),
		NotAfter:     ca.Now().Add(time.Hour),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
	}
	for _, u := range uris {
		pu, err := url.Parse(u)
		if err != nil {
			panic(err)
		}
		tmpl.URIs = append(tmpl.URIs, pu)
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.Cert, key.Public(), ca.Key)
	if err != nil {
		panic(err)
	}
	cert, _ := x509.ParseCertificate(der)
	k, _ := x509.MarshalPKCS8PrivateKey(key)
	return &sitetlstest.Pair{Cert: cert, Key: key,
		CertPEM: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
		KeyPEM:  pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: k})}
}

func issueNoT(ca *sitetlstest.CA, r sitetlstest.Request) *sitetlstest.Pair {
	p, err := ca.Issue(r)
	if err != nil {
		panic(err)
	}
	return p
}

// TestNoServerName: a client config without a server name, for a URL with an IP address,
// has no name to verify the server for, and refuses rather than accepting any name; for a
// URL with a host name, the connection's name is verified.
func TestNoServerName(t *testing.T) {
	dir := t.TempDir()
	clock := clocktest.New(t0)
	ca := newCA(t, clock)
	caFile := writeCA(t, dir, "ca.pem", ca)
	sf := write(t, issue(t, ca, sitetlstest.Request{Hosts: []string{"localhost"}}), dir, "server")
	af := write(t, issue(t, ca, sitetlstest.Request{Node: nodeA}), dir, "agent")
	srv := serve(t, load(t, sitetls.Config{CertFile: sf.cert, KeyFile: sf.key, CAFile: caFile, Clock: clock}))
	ag := load(t, sitetls.Config{CertFile: af.cert, KeyFile: af.key, CAFile: caFile, Clock: clock})

	got := get(client(t, ag.ClientConfig("")), srv.url)
	if !errors.Is(got.err, sitetls.ErrNoServerName) {
		t.Errorf("IP URL, no server name: %v, want ErrNoServerName", got.err)
	}
	got = get(client(t, ag.ClientConfig("")), "https://localhost:"+srv.port+"/")
	if got.err != nil || got.status != 200 {
		t.Errorf("localhost URL, no server name: %d %v, want 200", got.status, got.err)
	}
}

// TestPerSiteIntermediate: a per-site intermediate CA constrained to its site's trust domain
// gets its own site's agents admitted, with the intermediate sent in the agent's chain, and
// cannot mint an identity in another site.
func TestPerSiteIntermediate(t *testing.T) {
	tests := []struct {
		name   string
		id     sitetls.Identity
		wantOK bool
	}{
		{"own site", nodeA, true},
		{"another site", sitetls.Identity{Site: "site-other", Node: "node-agent-a"}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			clock := clocktest.New(t0)
			root := newCA(t, clock)
			site, err := root.NewIntermediate("site-fsn1 issuer", "site-fsn1")
			if err != nil {
				t.Fatal(err)
			}
			caFile := writeCA(t, dir, "ca.pem", root) // the control plane trusts the root only
			sf := write(t, issue(t, root, sitetlstest.Request{Hosts: []string{testIP}}), dir, "server")
			agPair := issue(t, site, sitetlstest.Request{Node: tt.id})
			af := write(t, agPair, dir, "agent")
			srv := serve(t, load(t, sitetls.Config{CertFile: sf.cert, KeyFile: sf.key, CAFile: caFile, Clock: clock}))
			ag := load(t, sitetls.Config{CertFile: af.cert, KeyFile: af.key, CAFile: caFile, Clock: clock})
			got := get(client(t, ag.ClientConfig(testIP)), srv.url)
			if ok := got.err == nil && got.status == 200; ok != tt.wantOK {
				t.Fatalf("admitted %v (%d %q, %v), want %v", ok, got.status, got.body, got.err, tt.wantOK)
			}
			if tt.wantOK && !strings.HasPrefix(got.body, tt.id.String()+" ") {
				t.Errorf("body %q, want %s", got.body, tt.id)
			}
		})
	}
}
