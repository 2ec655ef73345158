package sitelink_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/bettercompute/siteboot/hwid"
	"github.com/bettercompute/siteboot/sitelink"
	"github.com/bettercompute/siteboot/sitetls"
	"github.com/bettercompute/siteboot/sitetls/sitetlstest"
	"github.com/google/go-cmp/cmp"
)

// fake is a scripted control plane: it answers with its fields and records who asked.
type fake struct {
	mu    sync.Mutex
	peers []sitelink.Peer
	got   []any

	spec  sitelink.SyncResponse
	token string
	err   error // returned by every call when set
	grant sitelink.Grant
	cred  sitelink.Credential
}

func (f *fake) record(p sitelink.Peer, q any) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.peers, f.got = append(f.peers, p), append(f.got, q)
	return f.err
}

func (f *fake) Sync(ctx context.Context, p sitelink.Peer, r sitelink.StatusReport) (sitelink.SyncResponse, error) {
	return f.spec, f.record(p, r)
}

func (f *fake) Token(ctx context.Context, p sitelink.Peer, q sitelink.TokenRequest) (sitelink.TokenResponse, error) {
	if err := f.record(p, q); err != nil {
		return sitelink.TokenResponse{}, err
	}
	if f.token == "" {
		return sitelink.TokenResponse{}, sitelink.ErrNotReady
	}
	return sitelink.TokenResponse{Token: f.token}, nil
}

func (f *fake) Claim(ctx context.Context, p sitelink.Peer, q sitelink.ClaimRequest) (sitelink.Grant, error) {
	return f.grant, f.record(p, q)
}

func (f *fake) ReportClaim(ctx context.Context, p sitelink.Peer, q sitelink.ClaimRequest) error {
	return f.record(p, q)
}

func (f *fake) Credential(ctx context.Context, p sitelink.Peer, q sitelink.CredentialRequest) (sitelink.Credential, error) {
	return f.cred, f.record(p, q)
}

// lab is a Handler over mutual TLS on loopback and a CA for the agents calling it.
type lab struct {
	fake    *fake
	h       *sitelink.Handler
	url     string
	ca      *sitetlstest.CA
	dir     string
	refused []sitelink.Refusal
	mu      sync.Mutex
}

func newLab(t *testing.T) *lab {
	t.Helper()
	l := &lab{fake: &fake{}, dir: t.TempDir()}
	link, err := sitetlstest.NewLink(l.dir, nil, sitetls.Identity{Site: "site-a", Node: "agent-1"}, nil, "127.0.0.1")
	if err != nil {
		t.Fatal(err)
	}
	l.ca = link.CA
	creds, err := sitetls.Load(link.ServerConfig())
	if err != nil {
		t.Fatal(err)
	}
	l.h = &sitelink.Handler{Server: l.fake, BMC: l.fake, OnRefused: func(r *http.Request, why sitelink.Refusal) {
		l.mu.Lock()
		l.refused = append(l.refused, why)
		l.mu.Unlock()
	}}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: l.h, TLSConfig: creds.ServerConfig(), ReadHeaderTimeout: 5 * time.Second}
	go srv.ServeTLS(ln, "", "")
	t.Cleanup(func() { srv.Close() })
	l.url = "https://" + ln.Addr().String()
	return l
}

// client is a sitelink.Client presenting a certificate for node of site.
func (l *lab) client(t *testing.T, site, node string) *sitelink.Client {
	t.Helper()
	p, err := l.ca.Issue(sitetlstest.Request{Node: sitetls.Identity{Site: site, Node: node}})
	if err != nil {
		t.Fatal(err)
	}
	cert, key := l.dir+"/"+site+"-"+node+".pem", l.dir+"/"+site+"-"+node+".key"
	if err := p.WriteFiles(cert, key); err != nil {
		t.Fatal(err)
	}
	creds, err := sitetls.Load(sitetls.Config{CertFile: cert, KeyFile: key, CAFile: l.dir + "/ca.pem"})
	if err != nil {
		t.Fatal(err)
	}
	tr := &http.Transport{TLSClientConfig: creds.ClientConfig("127.0.0.1")}
	t.Cleanup(tr.CloseIdleConnections)
	return &sitelink.Client{Base: l.url, HTTPClient: &http.Client{Timeout: 5 * time.Second, Transport: tr}}
}

func (l *lab) refusals() []sitelink.Refusal {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]sitelink.Refusal(nil), l.refused...)
}

var verified = sitelink.Peer{Site: "site-a", Node: "agent-1", Verified: true}

// TestClientHandler: each operation goes from the Client to the Server over mutual TLS with
// its message intact, the Server learns the caller from its certificate, and the answer
// comes back intact.
func TestClientHandler(t *testing.T) {
	l := newLab(t)
	c := l.client(t, "site-a", "agent-1")
	ctx := context.Background()
	now := time.Date(2026, 12, 4, 10, 0, 0, 0, time.UTC)
	yes := true
	l.fake.spec = sitelink.SyncResponse{
		SiteSpec: sitelink.SiteSpec{Lease: sitelink.BootLeaseState{Holds: true, Epoch: 3, TTLMs: 15000, Beat: 9},
			CacheImages: []sitelink.CacheImage{{URL: "https://images.example/k", SHA256: strings.Repeat("ab", 32), Format: "kernel"}}},
		Commands: []sitelink.Command{
			{ID: "c1", Kind: sitelink.KindPrepareRamdisk, Entries: []sitelink.ProxyDhcpEntry{{MAC: hwid.MustParseMAC("52:54:00:00:00:01"),
				Arch: sitelink.ArchX86UEFI, Workflow: "wf", NotAfter: now, TokenRef: "tok", SecureBoot: &yes}}},
			{ID: "c2", Kind: sitelink.KindBMCRotate, BMC: &sitelink.BMCCommand{Target: sitelink.BMCTarget{Driver: "redfish", Address: "198.51.100.1", Credential: "bmc-1"}, NewCredential: "bmc-1-next"}},
		},
	}
	l.fake.token = "bcjt_token"
	l.fake.grant = sitelink.Grant{Granted: true, State: sitelink.ClaimGranted, Node: "agent-1"}
	l.fake.cred = sitelink.Credential{Username: "admin", Password: "pw-secret"}

	report := sitelink.StatusReport{Site: "site-a", Node: "agent-1", Beat: 9, DiscoveredDigest: "d",
		Discovered: []sitelink.DiscoveredMachine{{MAC: "52:54:00:00:00:02", FirstSeen: now, LastSeen: now, Count: 2}},
		Counters:   map[string]uint64{"answers": 5}, Acked: []string{"c0"},
		BMC: []sitelink.BMCResult{{ID: "b1", Kind: sitelink.KindBMCStorage, Status: sitelink.StatusOK, Disks: []sitelink.Disk{{Name: "d0", CapacityBytes: 1 << 40}}}}}
	d, err := c.Sync(ctx, report)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(l.fake.spec, d); diff != "" {
		t.Errorf("sync answer (-sent +got):\n%s", diff)
	}
	tq := sitelink.TokenRequest{Node: "agent-1", Workflow: "wf", Ref: "tok"}
	if tok, err := c.Token(ctx, tq); err != nil || tok != "bcjt_token" {
		t.Errorf("token: %q %v", tok, err)
	}
	cq := sitelink.ClaimRequest{Node: "agent-1", ID: "c2", Op: "rotate", Journal: "j1"}
	if g, err := c.Claim(ctx, cq); err != nil || g != l.fake.grant {
		t.Errorf("claim: %+v %v", g, err)
	}
	rq := cq
	rq.Outcome = &sitelink.Outcome{Status: sitelink.StatusOK}
	if err := c.ReportClaim(ctx, rq); err != nil {
		t.Errorf("report: %v", err)
	}
	crq := sitelink.CredentialRequest{Node: "agent-1", Ref: "bmc-1"}
	if cr, err := c.Credential(ctx, crq); err != nil || cr != l.fake.cred {
		t.Errorf("credential: %v", err)
	}
	want := []any{report, tq, cq, rq, crq}
	if diff := cmp.Diff(want, l.fake.got); diff != "" {
		t.Errorf("what the server got (-sent +got):\n%s", diff)
	}
	for i, p := range l.fake.peers {
		if p != verified {
			t.Errorf("call %d: peer %+v, want %+v", i, p, verified)
		}
	}
	if r := l.refusals(); len(r) != 0 {
		t.Errorf("refusals %v, want none", r)
	}
}

// TestHandlerRefuses: a request in another node's or site's name is refused with 403
// before the Server sees it, and counted; the body of every error answer is a code and
// never the Server's error text.
func TestHandlerRefuses(t *testing.T) {
	l := newLab(t)
	ctx := context.Background()
	b := l.client(t, "site-a", "agent-2")
	x := l.client(t, "site-b", "agent-1") // same node name, another site
	for _, tt := range []struct {
		name string
		call func() error
	}{
		{"report in agent-1's name", func() error {
			_, err := b.Sync(ctx, sitelink.StatusReport{Site: "site-a", Node: "agent-1"})
			return err
		}},
		{"report for another site", func() error {
			_, err := x.Sync(ctx, sitelink.StatusReport{Site: "site-a", Node: "agent-1"})
			return err
		}},
		{"token in agent-1's name", func() error {
			_, err := b.Token(ctx, sitelink.TokenRequest{Node: "agent-1", Workflow: "wf", Ref: "tok"})
			return err
		}},
		{"claim in agent-1's name", func() error {
			_, err := b.Claim(ctx, sitelink.ClaimRequest{Node: "agent-1", ID: "c1"})
			return err
		}},
		{"credential in agent-1's name", func() error {
			_, err := b.Credential(ctx, sitelink.CredentialRequest{Node: "agent-1", Ref: "bmc-1"})
			return err
		}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.call()
			var se *sitelink.StatusError
			if !errors.Is(err, sitelink.ErrForbidden) || !errors.As(err, &se) || se.Status != http.StatusForbidden {
				t.Errorf("got %v, want 403 ErrForbidden", err)
			}
		})
	}
	if len(l.fake.got) != 0 {
		t.Errorf("the server was called for refused requests: %v", l.fake.got)
	}
	want := []sitelink.Refusal{sitelink.RefusedOtherNode, sitelink.RefusedOtherNode, sitelink.RefusedOtherNode, sitelink.RefusedOtherNode, sitelink.RefusedOtherNode}
	if diff := cmp.Diff(want, l.refusals()); diff != "" {
		t.Errorf("refusals (-want +got):\n%s", diff)
	}

	// The Server's errors: their text stays in the control plane.
	a := l.client(t, "site-a", "agent-1")
	for _, tt := range []struct {
		err    error
		want   error
		status int
	}{
		{fmt.Errorf("node not enrolled: %w", sitelink.ErrForbidden), sitelink.ErrForbidden, 403},
		{sitelink.ErrNotFound, sitelink.ErrNotFound, 404},
		{errors.New("database password pw-db-secret rejected"), sitelink.ErrUnavailable, 503},
	} {
		l.fake.err = tt.err
		_, err := a.Credential(ctx, sitelink.CredentialRequest{Node: "agent-1", Ref: "bmc-1"})
		var se *sitelink.StatusError
		if !errors.Is(err, tt.want) || !errors.As(err, &se) || se.Status != tt.status {
			t.Errorf("server error %q: client got %v, want %d", tt.err, err, tt.status)
		}
		if strings.Contains(err.Error(), "secret") || strings.Contains(err.Error(), "enrolled") {
			t.Errorf("the server's error text reached the client: %v", err)
		}
	}
	l.fake.err = nil
	if _, err := a.Token(ctx, sitelink.TokenRequest{Node: "agent-1", Workflow: "wf", Ref: "tok"}); !errors.Is(err, sitelink.ErrNotReady) {
		t.Errorf("token not minted: %v, want ErrNotReady", err)
	}
}

// TestHandlerBadRequests: what does not decode or validate is 400 and never reaches the
// Server; a body over its bound is refused; no identity (plain http) is 403.
func TestHandlerBadRequests(t *testing.T) {
	f := &fake{}
	var refused []sitelink.Refusal
	h := &sitelink.Handler{Server: f, BMC: f, OnRefused: func(_ *http.Request, why sitelink.Refusal) { refused = append(refused, why) }}
	post := func(h http.Handler, path, body string) (int, string) {
		w := httptest.NewRecorder()
		r := httptest.NewRequest(http.MethodPost, path, strings.NewReader(body))
		r.TLS = nil
		h.ServeHTTP(w, r)
		b, _ := io.ReadAll(w.Result().Body)
		return w.Code, string(b)
	}
	// Without TLS there is no identity.
	if st, body := post(h, sitelink.PathSync, `{"site":"site-a","node":"agent-1"}`); st != 403 || body != `{"code":"forbidden"}`+"\n" {
		t.Errorf("plain http: %d %q", st, body)
	}
	if len(refused) != 1 || refused[0] != sitelink.RefusedNoIdentity {
		t.Errorf("refusals %v", refused)
	}
	ins := &sitelink.Handler{Server: f, BMC: f, Insecure: true}
	for _, tt := range []struct {
		path, body string
		status     int
	}{
		{sitelink.PathSync, `{"site":"site-a"`, 400},
		{sitelink.PathSync, `{"site":"site-a","node":""}`, 400},
		{sitelink.PathSync, `{"site":"site-a","node":"a"} {}`, 400},
		{sitelink.PathSync, `{"site":"site-a","node":"` + strings.Repeat("n", 300) + `"}`, 400},
		{sitelink.PathToken, `{"node":"a","workflow":"wf"}`, 400},
		{sitelink.PathBMCClaim, `{"node":"a","id":"c","outcome":{"Status":"ok"}}`, 400},
		{sitelink.PathBMCReport, `{"node":"a","id":"c"}`, 400},
		{sitelink.PathBMCReport, `{"node":"a","id":"c","outcome":{"Status":"fine"}}`, 400},
		{sitelink.PathBMCCredential, `{"node":"a","ref":"` + strings.Repeat("r", sitelink.MaxRequestBytes) + `"}`, 400},
		{"/v1/other", `{}`, 404},
	} {
		if st, _ := post(ins, tt.path, tt.body); st != tt.status {
			t.Errorf("%s %.60s: %d, want %d", tt.path, tt.body, st, tt.status)
		}
	}
	if len(f.got) != 0 {
		t.Errorf("the server was called for bad requests: %v", f.got)
	}
	noBMC := &sitelink.Handler{Server: f, Insecure: true}
	if st, _ := post(noBMC, sitelink.PathBMCCredential, `{"node":"a","ref":"r"}`); st != 404 {
		t.Errorf("no BMC access: %d, want 404", st)
	}
	w := httptest.NewRecorder()
	ins.ServeHTTP(w, httptest.NewRequest(http.MethodGet, sitelink.PathSync, nil))
	if w.Code != http.StatusMethodNotAllowed {
		t.Errorf("GET: %d, want 405", w.Code)
	}
	// Insecure: the named node is the peer, unverified.
	if st, _ := post(ins, sitelink.PathSync, `{"site":"site-a","node":"agent-9"}`); st != 200 || f.peers[0] != (sitelink.Peer{Site: "site-a", Node: "agent-9"}) {
		t.Errorf("insecure sync: %d %+v", st, f.peers)
	}
}

// TestCredentialRedacted: a credential prints redacted with every verb.
func TestCredentialRedacted(t *testing.T) {
	c := sitelink.Credential{Username: "admin", Password: "pw-secret"}
	for _, s := range []string{fmt.Sprint(c), fmt.Sprintf("%v %+v %#v %s %q", c, c, c, c, c), fmt.Sprintf("%v", &c)} {
		if strings.Contains(s, "pw-secret") {
			t.Errorf("printed %q", s)
		}
	}
}
