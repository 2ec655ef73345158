package agent_test

import (
	"context"
	"io"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/insomniacslk/dhcp/dhcpv4"
	"github.com/insomniacslk/dhcp/iana"

	"github.com/bettercompute/siteboot/hwid"
)

// ipxeDHCP asks the agent's proxy DHCP (port 4011) as iPXE does for the machine mac, from
// 127.0.0.1, and returns the boot file of the answer: the chain URL with its boot nonce.
// It returns "" when no answer comes within a second (a fenced agent, an unknown MAC).
func ipxeDHCP(a *running, mac hwid.MAC, arch iana.Arch) string {
	f, _ := askPXE(a, mac, "PXEClient:Arch:00007:UNDI:003010", arch,
		dhcpv4.WithGeneric(dhcpv4.OptionUserClassInformation, []byte("iPXE")))
	return f
}

// askPXE sends a DHCPREQUEST for mac with vendor class and arch (and more) to the agent's
// port 4011 from 127.0.0.1, and returns the answer's boot file: "" with no error when no
// answer came within a second; an error only when the request could not be sent.
func askPXE(a *running, mac hwid.MAC, class string, arch iana.Arch, more ...dhcpv4.Modifier) (string, error) {
	return askPXEFrom(a, netip.MustParseAddr("127.0.0.1"), mac, class, arch, more...)
}

// askPXEFrom is askPXE from the address from (ciaddr too).
func askPXEFrom(a *running, from netip.Addr, mac hwid.MAC, class string, arch iana.Arch, more ...dhcpv4.Modifier) (string, error) {
	pxe, err := netip.ParseAddrPort(a.Addrs()["pxe"])
	if err != nil {
		return "", err
	}
	conn, err := net.ListenUDP("udp4", net.UDPAddrFromAddrPort(netip.AddrPortFrom(from, 0)))
	if err != nil {
		return "", err
	}
	defer conn.Close()
	req, err := dhcpv4.New(append([]dhcpv4.Modifier{
		dhcpv4.WithHwAddr(net.HardwareAddr(mac[:])),
		dhcpv4.WithMessageType(dhcpv4.MessageTypeRequest),
		dhcpv4.WithClientIP(net.IP(from.AsSlice())),
		dhcpv4.WithOption(dhcpv4.OptClassIdentifier(class)),
		dhcpv4.WithOption(dhcpv4.OptClientArch(arch)),
	}, more...)...)
	if err != nil {
		return "", err
	}
	if _, err := conn.WriteToUDPAddrPort(req.ToBytes(), pxe); err != nil {
		return "", err
	}
	buf := make([]byte, 1500)
	conn.SetReadDeadline(time.Now().Add(time.Second))
	for {
		n, _, err := conn.ReadFromUDPAddrPort(buf)
		if err != nil {
			return "", nil
		}
		if rep, err := dhcpv4.FromBytes(buf[:n]); err == nil && rep.TransactionID == req.TransactionID {
			if f := rep.BootFileNameOption(); f != "" {
				return f, nil
			}
			return rep.BootFileName, nil
		}
	}
}

// nonceParam is "&n=NONCE" for the boot nonce of a fresh proxy DHCP answer to mac as iPXE,
// or "" when proxy DHCP did not answer.
func nonceParam(a *running, mac hwid.MAC) string {
	n := nonceOf(ipxeDHCP(a, mac, iana.EFI_X86_64))
	if n == "" {
		return ""
	}
	return "&n=" + n
}

func nonceOf(chainURL string) string {
	u, err := url.Parse(chainURL)
	if err != nil {
		return ""
	}
	return u.Query().Get("n")
}

// getFrom GETs u from the local address from, as another host on the segment would.
func getFrom(t *testing.T, from, u string, method string) (int, string) {
	t.Helper()
	c := &http.Client{Transport: &http.Transport{DialContext: (&net.Dialer{
		LocalAddr: &net.TCPAddr{IP: net.ParseIP(from)},
	}).DialContext}}
	defer c.CloseIdleConnections()
	req, err := http.NewRequestWithContext(context.Background(), method, u, nil)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

func hasSecret(body string) bool {
	return strings.Contains(body, "bc.token=") || strings.Contains(body, "bc.assertion=") || strings.Contains(body, "/cache/t/")
}

// TestMACOnlyRequesterGetsNoSecret (S1): with proxy DHCP running, knowing a
// MAC is not enough. A request with no nonce, a guessed one, or one handed to another MAC
// gets the exit script; no token, grant or assertion leaves the agent; each is counted by
// reason. The machine itself, with the nonce of its DHCP answer, boots.
func TestMACOnlyRequesterGetsNoSecret(t *testing.T) {
	h := newHarness(t)
	a, _ := h.start(t, h.config(t.TempDir()), h.plane.Link())
	e, other := entry(21, h.clk.Now().Add(2*time.Hour)), entry(22, h.clk.Now().Add(2*time.Hour))
	h.prepare(t, a, e, other)
	base := a.HTTPBase() + "/boot/ipxe?mac=" + e.MAC.String()
	otherNonce := nonceOf(ipxeDHCP(a, other.MAC, iana.EFI_X86_64))
	if otherNonce == "" {
		t.Error("no boot nonce in proxy DHCP's answer to iPXE")
		otherNonce = "fedcba9876543210fedcba9876543210"
	}
	issued := a.Stats()["assertions_issued"]

	const tries = 30
	secrets := 0
	for i := range tries {
		u := base
		switch i % 3 {
		case 1:
			u += "&n=0123456789abcdef0123456789abcdef" // guessed
		case 2:
			u += "&n=" + otherNonce // another machine's
		}
		st, body := getFrom(t, "127.0.0.1", u, http.MethodGet)
		if st != http.StatusOK || !strings.Contains(body, "exit 1") {
			t.Errorf("%s: status %d\n%s", u, st, body)
		}
		if hasSecret(body) {
			secrets++
		}
	}
	st := a.Stats()
	t.Logf("tokens, grants or assertions handed out to a MAC-only requester: %d of %d requests", secrets, tries)
	if secrets != 0 || st["assertions_issued"] != issued {
		t.Errorf("secrets handed out: %d scripts, %d assertions signed", secrets, st["assertions_issued"]-issued)
	}
	for _, r := range []string{"no-nonce", "unknown-nonce", "nonce-other-mac"} {
		if st["boot_unbound_"+r] != tries/3 {
			t.Errorf("boot_unbound_%s = %d, want %d", r, st["boot_unbound_"+r], tries/3)
		}
	}
	if st["boot_unbound"] != tries || st["boot_scripts"] != 0 {
		t.Errorf("boot_unbound %d, boot_scripts %d; want %d, 0", st["boot_unbound"], st["boot_scripts"], tries)
	}

	// The machine proxy DHCP answered boots, and its own retries keep booting.
	n := nonceParam(a, e.MAC)
	for range 2 {
		if st, body := getFrom(t, "127.0.0.1", base+n, http.MethodGet); st != http.StatusOK || !hasSecret(body) {
			t.Fatalf("the machine with its nonce: status %d\n%s", st, body)
		}
	}
}

// TestNonceBelongsToFirstAddress (S1): a boot nonce
// belongs to the address its proxy DHCP answer went to. Another host presenting the same
// nonce (sniffed off the segment, after or before the machine) gets no secret; the owner's
// retries get their script.
func TestNonceBelongsToFirstAddress(t *testing.T) {
	h := newHarness(t)
	a, _ := h.start(t, h.config(t.TempDir()), h.plane.Link())
	e := entry(23, h.clk.Now().Add(2*time.Hour))
	h.prepare(t, a, e)
	u := a.HTTPBase() + "/boot/ipxe?mac=" + e.MAC.String() + nonceParam(a, e.MAC)

	if st, body := getFrom(t, "127.0.0.1", u, http.MethodGet); st != http.StatusOK || !hasSecret(body) {
		t.Fatalf("owner: status %d\n%s", st, body)
	}
	secrets := 0
	for range 5 {
		st, body := getFrom(t, "127.0.0.2", u, http.MethodGet)
		if st != http.StatusOK {
			t.Errorf("another address with the owner's nonce: status %d", st)
		}
		if hasSecret(body) {
			secrets++
		}
	}
	t.Logf("secrets handed to another address presenting the machine's nonce: %d of 5", secrets)
	if secrets != 0 {
		t.Errorf("%d scripts with a secret went to another address", secrets)
	}
	if st, _ := getFrom(t, "127.0.0.1", u, http.MethodGet); st != http.StatusOK {
		t.Errorf("the owner's retry: status %d, want 200", st)
	}
	if n := a.Stats()["boot_unbound_nonce-other-address"]; n != 5 {
		t.Errorf("boot_unbound_nonce-other-address = %d, want 5", n)
	}

	// The attacker first (a bystander that read the nonce presents it
	// before the machine): the nonce belongs to the address its answer went to, so the
	// attacker gets no secret and the machine still boots with it.
	u2 := a.HTTPBase() + "/boot/ipxe?mac=" + e.MAC.String() + nonceParam(a, e.MAC)
	if st, body := getFrom(t, "127.0.0.2", u2, http.MethodGet); st != http.StatusOK || hasSecret(body) {
		t.Errorf("another address presenting the machine's fresh nonce first: status %d, secret %v", st, hasSecret(body))
	}
	if st, body := getFrom(t, "127.0.0.1", u2, http.MethodGet); st != http.StatusOK || !hasSecret(body) {
		t.Errorf("the machine after another address presented its nonce: status %d, want 200 with its secrets", st)
	}
}

// TestChainCarriesNonce (S1): the chain URL proxy DHCP names for iPXE holds a boot nonce,
// and the agent's chain script carries it into /boot/ipxe; each DHCP answer has its own.
func TestChainCarriesNonce(t *testing.T) {
	h := newHarness(t)
	a, _ := h.start(t, h.config(t.TempDir()), h.plane.Link())
	e := entry(24, h.clk.Now().Add(2*time.Hour))
	h.prepare(t, a, e)
	chain := ipxeDHCP(a, e.MAC, iana.EFI_X86_64)
	n := nonceOf(chain)
	if want := a.HTTPBase() + "/boot/chain.ipxe?n="; !strings.HasPrefix(chain, want) || len(n) != 32 {
		t.Fatalf("chain URL %q: want %sNONCE with 128 bits in hex", chain, want)
	}
	if again := nonceOf(ipxeDHCP(a, e.MAC, iana.EFI_X86_64)); again == n || again == "" {
		t.Errorf("two DHCP answers named the nonce %q and %q", n, again)
	}
	st, body := get(t, chain)
	if st != http.StatusOK || !strings.Contains(body, "&buildarch=${buildarch}&n="+n+" ") {
		t.Fatalf("chain script: status %d, does not carry the nonce:\n%s", st, body)
	}
}

// TestAssertionFromWhatTheAgentKnows (S2): the assertion's IP is the
// connection's, its UUID the entry's; a query IP that differs, or a query UUID that is no
// spelling of the entry's, gets no secret; HEAD /boot/ipxe signs nothing (405).
func TestAssertionFromWhatTheAgentKnows(t *testing.T) {
	h := newHarness(t)
	a, _ := h.start(t, h.config(t.TempDir()), h.plane.Link())
	u := hwid.MustParseUUID("4c4c4544-0031-3510-8052-b4c04f4e4b33")
	e := entry(25, h.clk.Now().Add(2*time.Hour))
	e.UUID = u.String()
	h.prepare(t, a, e)
	issued := a.Stats()["assertions_issued"]
	for _, tc := range []struct {
		name, query, method string
		status              int
	}{
		{"a query ip that is not the connection's", "&ip=192.0.2.10", http.MethodGet, http.StatusOK},
		{"a query uuid overriding the entry's", "&uuid=8f1c0e2a-1b2c-4d5e-9f00-112233445566", http.MethodGet, http.StatusOK},
		{"head", "", http.MethodHead, http.StatusMethodNotAllowed},
	} {
		t.Run(tc.name, func(t *testing.T) {
			st, body := getFrom(t, "127.0.0.1", a.HTTPBase()+"/boot/ipxe?mac="+e.MAC.String()+nonceParam(a, e.MAC)+tc.query, tc.method)
			if st != tc.status || hasSecret(body) {
				t.Errorf("status %d, want %d; secret %v", st, tc.status, hasSecret(body))
			}
		})
	}
	if n := a.Stats()["assertions_issued"] - issued; n != 0 {
		t.Errorf("%d assertions signed for refused requests", n)
	}
	// The machine's own request: its IP and UUID spelled as SMBIOS stores it.
	st, body := getFrom(t, "127.0.0.1", a.HTTPBase()+"/boot/ipxe?mac="+e.MAC.String()+nonceParam(a, e.MAC)+"&ip=127.0.0.1&uuid="+u.SMBIOS().String(), http.MethodGet)
	if st != http.StatusOK || !hasSecret(body) {
		t.Fatalf("the machine itself: status %d\n%s", st, body)
	}
	if st := a.Stats(); st["boot_ip_refused"] != 1 || st["boot_uuid-mismatch"] != 1 || st["assertions_issued"] != issued+1 {
		t.Errorf("counters: ip refused %d, uuid mismatch %d, assertions %d", st["boot_ip_refused"], st["boot_uuid-mismatch"], st["assertions_issued"]-issued)
	}
}

// TestWithoutProxyDHCPOldRule: a site whose own DHCP server sends machines to the agent has
// no nonce to check: a known MAC's script goes to whoever asks (package doc, "Boot
// secrets"), with the assertion bound to the connection's address.
func TestWithoutProxyDHCPOldRule(t *testing.T) {
	h := newHarness(t)
	cfg := h.config(t.TempDir())
	cfg.Boot.ProxyDHCP = false
	a, _ := h.start(t, cfg, h.plane.Link())
	e := entry(26, h.clk.Now().Add(2*time.Hour))
	h.prepare(t, a, e)
	if st, body := get(t, scriptURL(a, e)); st != http.StatusOK || !hasSecret(body) {
		t.Fatalf("status %d\n%s", st, body)
	}
	if _, ok := a.Stats()["boot_unbound_no-nonce"]; ok {
		t.Error("nonce counters without proxy DHCP")
	}
}

// TestStartSweepsCrashedWrites: the temporary files interrupted writes of
// the boot entries and the node key left are removed on start; look-alikes stay.
func TestStartSweepsCrashedWrites(t *testing.T) {
	h := newHarness(t)
	dir := t.TempDir()
	cfg := h.config(dir)
	cfg.KeyFile = filepath.Join(dir, "node.key")
	planted := []string{".tmp-boot-entries.json-1234567890", ".tmp-boot-entries.json-42", ".tmp-node.key-987654321"}
	kept := []string{".tmp-boot-entries.json-x", ".tmp-boot-entries.json.bak-1", "boot-entries.json.old"}
	for _, n := range append(planted, kept...) {
		if err := os.WriteFile(filepath.Join(dir, n), []byte(strings.Repeat("x", 1<<16)), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	h.start(t, cfg, h.plane.Link())
	for _, n := range planted {
		if _, err := os.Stat(filepath.Join(dir, n)); !os.IsNotExist(err) {
			t.Errorf("%s is still there after start: %v", n, err)
		}
	}
	for _, n := range kept {
		if _, err := os.Stat(filepath.Join(dir, n)); err != nil {
			t.Errorf("%s was removed: %v", n, err)
		}
	}
}
