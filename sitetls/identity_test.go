package sitetls_test

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/bettercompute/siteboot/clock/clocktest"
	"github.com/bettercompute/siteboot/sitetls"
	"github.com/bettercompute/siteboot/sitetls/sitetlstest"
	"github.com/google/go-cmp/cmp"
)

func TestParseIdentity(t *testing.T) {
	long := strings.Repeat("n", sitetls.MaxIDLen)
	tests := []struct {
		in   string
		want sitetls.Identity // zero: refused
	}{
		{"spiffe://site-fsn1/agent/node-agent-a", nodeA},
		{"spiffe://site_01k5w/agent/node_01K5W.x", sitetls.Identity{Site: "site_01k5w", Node: "node_01K5W.x"}},
		{"spiffe://s/agent/" + long, sitetls.Identity{Site: "s", Node: long}},
		{"spiffe://s/agent/" + long + "n", sitetls.Identity{}},
		{"spiffe://Site-Fsn1/agent/a", sitetls.Identity{}}, // trust domains are lower case
		{"spiffe://site:443/agent/a", sitetls.Identity{}},
		{"spiffe://user@site/agent/a", sitetls.Identity{}},
		{"spiffe://site/agent/a?x=1", sitetls.Identity{}},
		{"spiffe://site/agent/a#f", sitetls.Identity{}},
		{"spiffe://site/agent/a/b", sitetls.Identity{}},
		{"spiffe://site/agent/a/", sitetls.Identity{}},
		{"spiffe://site/agent/a%2Fb", sitetls.Identity{}},
		{"spiffe://site/agent/..", sitetls.Identity{}},
		{"spiffe://site/agent/.", sitetls.Identity{}},
		{"spiffe://site/agent/", sitetls.Identity{}},
		{"spiffe:///agent/a", sitetls.Identity{}},
		{"spiffe://site/node/a", sitetls.Identity{}},
		{"SPIFFE://site/agent/a", sitetls.Identity{}},
		{"https://site/agent/a", sitetls.Identity{}},
		{"spiffe://site/agent/a b", sitetls.Identity{}},
		{"", sitetls.Identity{}},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			got, err := sitetls.ParseIdentity(tt.in)
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("ParseIdentity(%q) (-want +got):\n%s", tt.in, diff)
			}
			if (tt.want == sitetls.Identity{}) != (err != nil) {
				t.Errorf("err = %v", err)
			}
			if err != nil && !errors.Is(err, sitetls.ErrNoIdentity) {
				t.Errorf("err = %v, want ErrNoIdentity", err)
			}
			if err == nil && got.String() != tt.in {
				t.Errorf("String() = %q, want the input", got.String())
			}
		})
	}
}

// FuzzParseIdentity: whatever a peer's certificate says, ParseIdentity never panics, and
// what it accepts is canonical: it prints back as the input and survives the URI a
// certificate would carry.
func FuzzParseIdentity(f *testing.F) {
	seeds, err := os.ReadFile(filepath.Join("testdata", "identities.txt"))
	if err != nil {
		f.Fatal(err)
	}
	for _, s := range strings.Split(string(seeds), "\n") {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		id, err := sitetls.ParseIdentity(s)
		if err != nil {
			if !errors.Is(err, sitetls.ErrNoIdentity) {
				t.Fatalf("error %v does not wrap ErrNoIdentity", err)
			}
			return
		}
		if id.String() != s {
			t.Fatalf("ParseIdentity(%q).String() = %q", s, id.String())
		}
		again, err := sitetls.ParseIdentity(id.URI().String())
		if err != nil || again != id {
			t.Fatalf("URI round trip of %q: %+v, %v", s, again, err)
		}
	})
}

// TestNodeFrom: the identity comes only from a verified chain's leaf.
func TestNodeFrom(t *testing.T) {
	clock := clocktest.New(t0)
	ca := newCA(t, clock)
	good := issue(t, ca, sitetlstest.Request{Node: nodeA}).Cert
	two := clientCertWithURIs(ca, "spiffe://site-fsn1/agent/node-agent-a", "spiffe://site-fsn1/agent/node-agent-b").Cert
	other := clientCertWithURIs(ca, "https://site-fsn1/agent/node-agent-a").Cert
	tests := []struct {
		name    string
		state   *tls.ConnectionState
		want    sitetls.Identity
		wantErr error
	}{
		{"plain http", nil, sitetls.Identity{}, sitetls.ErrNoTLS},
		{"unverified certificate", &tls.ConnectionState{PeerCertificates: []*x509.Certificate{good}}, sitetls.Identity{}, sitetls.ErrNoVerifiedCert},
		{"verified", &tls.ConnectionState{PeerCertificates: []*x509.Certificate{good},
			VerifiedChains: [][]*x509.Certificate{{good, ca.Cert}}}, nodeA, nil},
		{"two URI names", &tls.ConnectionState{VerifiedChains: [][]*x509.Certificate{{two, ca.Cert}}}, sitetls.Identity{}, sitetls.ErrNoIdentity},
		{"another scheme", &tls.ConnectionState{VerifiedChains: [][]*x509.Certificate{{other, ca.Cert}}}, sitetls.Identity{}, sitetls.ErrNoIdentity},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := httptest.NewRequest("POST", "/v1/sync", nil)
			r.TLS = tt.state
			got, err := sitetls.NodeFrom(r)
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
			if !errors.Is(err, tt.wantErr) {
				t.Errorf("err = %v, want %v", err, tt.wantErr)
			}
		})
	}
}
