package agent_test

import (
	"net"
	"net/http"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/insomniacslk/dhcp/dhcpv4"
	"github.com/insomniacslk/dhcp/iana"

	"github.com/bettercompute/siteboot/examples/siteagent/agent"
)

// TestNonceSurvivesRestart: a machine between its chain and its script
// when the agent restarts still gets its script with the nonce of its DHCP answer (the
// binding is saved in the data directory and loaded on start), from its own address only.
func TestNonceSurvivesRestart(t *testing.T) {
	h := newHarness(t)
	dir := t.TempDir()
	a, stop := h.start(t, h.config(dir), h.plane.Link())
	e := entry(41, h.clk.Now().Add(2*time.Hour))
	h.prepare(t, a, e)
	n := nonceParam(a, e.MAC)
	if n == "" {
		t.Fatal("no nonce from proxy DHCP")
	}
	stop()
	b, _ := h.start(t, h.config(dir), h.plane.Link())
	h.beat(t, b)
	u := b.HTTPBase() + "/boot/ipxe?mac=" + e.MAC.String() + n
	if st, body := getFrom(t, "127.0.0.2", u, http.MethodGet); st != http.StatusOK || hasSecret(body) {
		t.Errorf("another address with the machine's nonce after the restart: status %d, secret %v", st, hasSecret(body))
	}
	if st, body := getFrom(t, "127.0.0.1", u, http.MethodGet); st != http.StatusOK || !hasSecret(body) {
		t.Fatalf("the machine with its nonce after the restart: status %d (unknown-nonce %d)\n%s", st, b.Stats()["boot_unbound_unknown-nonce"], body)
	}
}

// TestRequestsForMACKeepMachineNonce (S1): a host that makes proxy DHCP answer
// the machine's MAC again and again (four 4011 REQUESTs and more, from its own address) does
// not push out the nonce the machine got and has not presented yet.
func TestRequestsForMACKeepMachineNonce(t *testing.T) {
	h := newHarness(t)
	a, _ := h.start(t, h.config(t.TempDir()), h.plane.Link())
	e := entry(42, h.clk.Now().Add(2*time.Hour))
	h.prepare(t, a, e)
	n := nonceParam(a, e.MAC)
	if n == "" {
		t.Fatal("no nonce from proxy DHCP")
	}
	for range 6 {
		f, err := askPXEFrom(a, netip.MustParseAddr("127.0.0.2"), e.MAC, "PXEClient:Arch:00007:UNDI:003010", iana.EFI_X86_64,
			dhcpv4.WithGeneric(dhcpv4.OptionUserClassInformation, []byte("iPXE")))
		if err != nil || nonceOf(f) == "" {
			t.Fatalf("the other host's request: %q, %v", f, err)
		}
	}
	if st, body := getFrom(t, "127.0.0.1", a.HTTPBase()+"/boot/ipxe?mac="+e.MAC.String()+n, http.MethodGet); st != http.StatusOK || !hasSecret(body) {
		t.Errorf("the machine's nonce after six answers for its MAC to another address: status %d, want 200 with its secrets", st)
	}
}

// TestSlowConnectionsKeepMetricsUp (S4): sixteen connections to /metrics that
// send half a request and hold it (four from each of four addresses) do not keep a scraper
// out: its request is answered at once.
func TestSlowConnectionsKeepMetricsUp(t *testing.T) {
	h := newHarness(t)
	a, _ := h.start(t, h.config(t.TempDir()), h.plane.Link())
	addr := a.Addrs()["metrics"]
	for i := range 16 {
		d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.IPv4(127, 0, 0, byte(2+i/4))}}
		c, err := d.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		if _, err := c.Write([]byte("GET /metrics HTTP/1.1\r\nHost: x\r\n")); err != nil {
			t.Fatal(err)
		}
	}
	c := &http.Client{Timeout: 3 * time.Second}
	resp, err := c.Get("http://" + addr + "/metrics")
	if err != nil {
		t.Fatalf("/metrics with sixteen slow connections held: %v", err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Errorf("/metrics with sixteen slow connections held: status %d", resp.StatusCode)
	}
}

// TestDamagedNoncesFileSetAside: a damaged saved binding does not stop the agent: it
// starts, sets the file aside (renamed, never deleted) and boots machines as before.
func TestDamagedNoncesFileSetAside(t *testing.T) {
	h := newHarness(t)
	dir := t.TempDir()
	path := filepath.Join(dir, agent.NoncesFileName)
	if err := os.WriteFile(path, []byte("{not json"), 0o600); err != nil {
		t.Fatal(err)
	}
	a, _ := h.start(t, h.config(dir), h.plane.Link())
	aside, _ := filepath.Glob(path + ".damaged-*")
	if len(aside) != 1 {
		t.Errorf("the damaged file set aside as %v, want one", aside)
	}
	e := entry(43, h.clk.Now().Add(2*time.Hour))
	h.prepare(t, a, e)
	if st, body := getFrom(t, "127.0.0.1", scriptURL(a, e), http.MethodGet); st != http.StatusOK || !hasSecret(body) {
		t.Errorf("a machine after the start with a damaged file: status %d", st)
	}
}

// TestNonceSavedBeforeAnyStop: a nonce is in the saved binding as soon as
// it was issued, before any stop: an agent killed right after answering loses no boot.
func TestNonceSavedBeforeAnyStop(t *testing.T) {
	h := newHarness(t)
	dir := t.TempDir()
	a, _ := h.start(t, h.config(dir), h.plane.Link())
	e := entry(44, h.clk.Now().Add(2*time.Hour))
	h.prepare(t, a, e)
	n := nonceOf(ipxeDHCP(a, e.MAC, iana.EFI_X86_64))
	if n == "" {
		t.Fatal("no nonce from proxy DHCP")
	}
	waitFor(t, "the nonce in "+agent.NoncesFileName, func() bool {
		b, err := os.ReadFile(filepath.Join(dir, agent.NoncesFileName))
		return err == nil && strings.Contains(string(b), n)
	})
}
