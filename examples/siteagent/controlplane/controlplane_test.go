package controlplane_test

import (
	"bytes"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"path/filepath"
	"regexp"
	"testing"
	"time"

	"github.com/bettercompute/siteboot/clock/clocktest"
	"github.com/bettercompute/siteboot/examples/siteagent/controlplane"
	"github.com/bettercompute/siteboot/hwid"
	"github.com/bettercompute/siteboot/sitelink"
	"github.com/bettercompute/siteboot/sitetls"
	"github.com/bettercompute/siteboot/sitetls/sitetlstest"
)

const site = "site-t"

// clock is the plane's fake time: a heartbeat happens when the test says so.
type clock = clocktest.Fake

// rig is a control plane served over mutual TLS on loopback, and a CA that certifies the
// agents calling it (and a stranger: a node with a good certificate for itself).
type rig struct {
	plane *controlplane.Plane
	clk   *clock
	url   string
	ca    *sitetlstest.CA
	dir   string
}

func newRig(t *testing.T) *rig {
	t.Helper()
	r := &rig{clk: clocktest.New(time.Now()), dir: t.TempDir()}
	link, err := sitetlstest.NewLink(r.dir, nil, sitetls.Identity{Site: site, Node: "agent-a"}, nil, "127.0.0.1")
	if err != nil {
		t.Fatal(err)
	}
	r.ca = link.CA
	creds, err := sitetls.Load(link.ServerConfig())
	if err != nil {
		t.Fatal(err)
	}
	r.plane = controlplane.New(nil)
	r.plane.Clock = r.clk
	r.plane.TTL = 2 * time.Second
	r.plane.SessionTimeout = 600 * time.Millisecond
	r.plane.Enroll(site, "agent-a")
	r.plane.Enroll(site, "agent-b")
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: r.plane.Handler(), TLSConfig: creds.ServerConfig(), ReadHeaderTimeout: 5 * time.Second}
	go srv.ServeTLS(ln, "", "")
	t.Cleanup(func() { srv.Close() })
	r.url = "https://" + ln.Addr().String()
	return r
}

// client is an HTTPS client presenting a certificate for node (of site).
func (r *rig) client(t *testing.T, siteID, node string) *http.Client {
	t.Helper()
	p, err := r.ca.Issue(sitetlstest.Request{Node: sitetls.Identity{Site: siteID, Node: node}})
	if err != nil {
		t.Fatal(err)
	}
	cert, key := filepath.Join(r.dir, siteID+"-"+node+".pem"), filepath.Join(r.dir, siteID+"-"+node+".key")
	if err := p.WriteFiles(cert, key); err != nil {
		t.Fatal(err)
	}
	ca := filepath.Join(r.dir, "ca.pem")
	creds, err := sitetls.Load(sitetls.Config{CertFile: cert, KeyFile: key, CAFile: ca})
	if err != nil {
		t.Fatal(err)
	}
	c := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{TLSClientConfig: creds.ClientConfig("127.0.0.1")}}
	t.Cleanup(c.CloseIdleConnections)
	return c
}

// post sends v as JSON and returns the status and the decoded answer.
func (r *rig) post(t *testing.T, c *http.Client, path string, v, out any) int {
	t.Helper()
	b, _ := json.Marshal(v)
	resp, err := c.Post(r.url+path, "application/json", bytes.NewReader(b))
	if err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode == http.StatusOK && out != nil {
		if err := json.Unmarshal(body, out); err != nil {
			t.Fatalf("%s: %v", path, err)
		}
	}
	return resp.StatusCode
}

func (r *rig) sync(t *testing.T, c *http.Client, rep sitelink.StatusReport) (int, sitelink.SyncResponse) {
	t.Helper()
	var d sitelink.SyncResponse
	st := r.post(t, c, "/v1/sync", rep, &d)
	return st, d
}

var entry = sitelink.ProxyDhcpEntry{MAC: hwid.MustParseMAC("52:54:00:00:00:01"), Arch: sitelink.ArchX86UEFI, Workflow: "wf-1", TokenRef: "tok-1"}

// TestForgedAcknowledgement: another node's certificate (agent-b, enrolled at the same site)
// cannot acknowledge agent-a's commands by naming agent-a in a report; the command stays
// pending and reaches agent-a.
func TestForgedAcknowledgement(t *testing.T) {
	r := newRig(t)
	e := entry
	e.NotAfter = r.clk.Now().Add(time.Hour)
	id := r.plane.PrepareRamdisk("agent-a", []sitelink.ProxyDhcpEntry{e})
	b := r.client(t, site, "agent-b")
	st, _ := r.sync(t, b, sitelink.StatusReport{Site: site, Node: "agent-a", Beat: 1, Acked: []string{id}})
	if st != http.StatusForbidden {
		t.Errorf("agent-b's report in agent-a's name: %d, want 403", st)
	}
	if p := r.plane.Pending("agent-a"); len(p) != 1 || p[0] != id {
		t.Fatalf("agent-a's pending commands after the forged acknowledgement: %v, want [%s]", p, id)
	}
	// agent-a itself still gets the command.
	st, d := r.sync(t, r.client(t, site, "agent-a"), sitelink.StatusReport{Site: site, Node: "agent-a", Beat: 1})
	if st != http.StatusOK || len(d.Commands) != 1 || d.Commands[0].ID != id {
		t.Errorf("agent-a's own heartbeat: %d, %+v; want its command %s", st, d.Commands, id)
	}
}

// TestCommandIDsUnguessable: command ids are 128 random bits, not a sequence one agent can
// read off its own and use for another's.
func TestCommandIDsUnguessable(t *testing.T) {
	r := newRig(t)
	idRE := regexp.MustCompile(`^cmd-[0-9a-f]{32}$`)
	seen := map[string]bool{}
	for range 100 {
		id := r.plane.CleanUp("agent-a", "wf-1")
		if !idRE.MatchString(id) || seen[id] {
			t.Fatalf("command id %q: want cmd- and 32 hex digits, never repeated", id)
		}
		seen[id] = true
	}
}

// TestForgedHeartbeatsForDeadHolder: once agent-a (the holder) stops, heartbeats in its
// name from another node's certificate are refused, so they cannot keep its lease alive:
// the honest standby, agent-b, is promoted when agent-a's lease ends.
func TestForgedHeartbeatsForDeadHolder(t *testing.T) {
	r := newRig(t)
	a, b := r.client(t, site, "agent-a"), r.client(t, site, "agent-b")
	x := r.client(t, "site-other", "agent-x") // a node of another site, with a good certificate
	beat := uint64(0)
	hb := func(c *http.Client, node string) (int, sitelink.BootLeaseState) {
		beat++
		st, d := r.sync(t, c, sitelink.StatusReport{Site: site, Node: node, Beat: beat})
		return st, d.Lease
	}
	if st, w := hb(a, "agent-a"); st != http.StatusOK || !w.Holds {
		t.Fatalf("agent-a's first heartbeat: %d, %+v; want it to hold the lease", st, w)
	}
	// agent-a dies. For twice the lease TTL, agent-b heartbeats honestly, and two strangers
	// send heartbeats in agent-a's name every 100 ms.
	promoted := false
	forged := 0
	for range 40 {
		r.clk.Advance(100 * time.Millisecond)
		for _, c := range []*http.Client{b, x} {
			if st, _ := hb(c, "agent-a"); st == http.StatusOK {
				forged++
			}
		}
		if _, w := hb(b, "agent-b"); w.Holds {
			promoted = true
			break
		}
	}
	if forged > 0 {
		t.Errorf("%d heartbeats in agent-a's name from other nodes were answered", forged)
	}
	if !promoted {
		t.Errorf("agent-b not promoted within %v of agent-a's last heartbeat", 4*time.Second)
	}
}

// TestTokenForStranger: a machine's discovery token goes only to the agent its entry was
// sent to: another node asking in its own name or in the agent's is refused, and gets no
// token.
func TestTokenForStranger(t *testing.T) {
	r := newRig(t)
	e := entry
	e.NotAfter = r.clk.Now().Add(time.Hour)
	r.plane.PrepareRamdisk("agent-a", []sitelink.ProxyDhcpEntry{e})
	want := r.plane.TokenFor(e.Workflow, e.TokenRef)
	q := func(node string) map[string]string {
		return map[string]string{"node": node, "workflow": e.Workflow, "ref": e.TokenRef}
	}
	for _, tt := range []struct {
		who    string
		c      *http.Client
		asks   string
		status int
	}{
		{"agent-b in agent-a's name", r.client(t, site, "agent-b"), "agent-a", http.StatusForbidden},
		{"a stranger in agent-a's name", r.client(t, "site-other", "agent-x"), "agent-a", http.StatusForbidden},
		{"agent-b in its own name", r.client(t, site, "agent-b"), "agent-b", http.StatusConflict},
		{"agent-a", r.client(t, site, "agent-a"), "agent-a", http.StatusOK},
	} {
		var out struct{ Token string }
		st := r.post(t, tt.c, "/v1/token", q(tt.asks), &out)
		if st != tt.status {
			t.Errorf("%s: %d, want %d", tt.who, st, tt.status)
		}
		if got := out.Token; (st == http.StatusOK) != (got == want && got != "") {
			t.Errorf("%s got token %q, want it only for agent-a", tt.who, got)
		}
	}
}

// TestRefusalsCounted: the refusals above are counted by reason; a request without a
// client certificate never completes the handshake.
func TestRefusalsCounted(t *testing.T) {
	r := newRig(t)
	b, x := r.client(t, site, "agent-b"), r.client(t, "site-other", "agent-x")
	r.sync(t, b, sitelink.StatusReport{Site: site, Node: "agent-a"})
	r.sync(t, b, sitelink.StatusReport{Site: "site-other", Node: "agent-b"})
	r.post(t, b, "/v1/token", map[string]string{"node": "agent-a", "workflow": "wf-1", "ref": "tok-1"}, nil)
	r.sync(t, x, sitelink.StatusReport{Site: "site-other", Node: "agent-x"})
	want := controlplane.Stats{RefusedOtherNode: 3, RefusedUnknown: 1}
	if got := r.plane.Stats(); got != want {
		t.Errorf("stats %+v, want %+v", got, want)
	}
	// No certificate: the TLS handshake fails (the server requires one).
	creds, err := sitetls.Load(sitetls.Config{CertFile: filepath.Join(r.dir, "server.pem"), KeyFile: filepath.Join(r.dir, "server.key"), CAFile: filepath.Join(r.dir, "ca.pem")})
	if err != nil {
		t.Fatal(err)
	}
	cfg := creds.ClientConfig("127.0.0.1")
	cfg.GetClientCertificate = nil
	anon := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{TLSClientConfig: cfg}}
	if resp, err := anon.Post(r.url+"/v1/token", "application/json", bytes.NewReader([]byte(`{}`))); err == nil {
		resp.Body.Close()
		t.Errorf("a client without a certificate got %d, want a failed handshake", resp.StatusCode)
	}
	// Over plain http the handler has no identity to go by: 403, counted.
	plainLn, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: r.plane.Handler(), ReadHeaderTimeout: time.Second}
	go srv.Serve(plainLn)
	defer srv.Close()
	resp, err := http.Post("http://"+plainLn.Addr().String()+"/v1/sync", "application/json", bytes.NewReader([]byte(`{"site":"site-t","node":"agent-a"}`)))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusForbidden || r.plane.Stats().RefusedNoIdentity != 1 {
		t.Errorf("plain http sync: %d, stats %+v; want 403 counted", resp.StatusCode, r.plane.Stats())
	}
}
