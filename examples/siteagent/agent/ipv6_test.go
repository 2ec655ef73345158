package agent_test

import (
	"encoding/binary"
	"errors"
	"net"
	"net/http"
	"net/netip"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/bettercompute/siteboot/examples/siteagent/agent"
	"github.com/bettercompute/siteboot/hwid"
)

// ipv6Config is the harness's config with IPv6 boot on over loopback: DHCPv6 on [::1], the
// TFTP and HTTP listeners dual-stack on [::], machines over IPv6 sent to http://[::1]:PORT.
// ServerIP6 is a documentation address no test binds: proxy DHCP's tftp:// URLs name it.
func (h *harness) ipv6Config(dataDir string) *agent.Config {
	c := h.config(dataDir)
	any := netip.MustParseAddrPort("[::]:0")
	c.Boot.TFTPListen, c.Boot.HTTPListen = any, any
	c.Boot.ServerIP6 = netip.MustParseAddr("2001:db8::2")
	c.Boot.HTTPBase6 = "http://[::1]:0"
	c.Boot.DHCPv6 = true
	c.Boot.DHCPv6Listen = netip.MustParseAddrPort("[::1]:0")
	c.Boot.PXEListen6 = netip.MustParseAddrPort("[::1]:0")
	return c
}

func opt6(code uint16, data ...[]byte) []byte {
	b := binary.BigEndian.AppendUint16(nil, code)
	n := 0
	for _, d := range data {
		n += len(d)
	}
	b = binary.BigEndian.AppendUint16(b, uint16(n))
	for _, d := range data {
		b = append(b, d...)
	}
	return b
}

// edk2Solicit6 sends, from [::1], the SOLICIT EDK2's PXE sends for mac on a machine without
// an SMBIOS UUID (DUID-LLT, arch 7, vendor class 343 PXEClient), and returns the boot file
// URL (option 59) of the answer, "" when none came within a second.
func edk2Solicit6(t *testing.T, a *running, mac hwid.MAC) string {
	t.Helper()
	return send6(t, a, solicit6(mac))
}

// solicit6 is EDK2's PXE SOLICIT for mac (DUID-LLT, arch 7, vendor class 343 PXEClient).
func solicit6(mac hwid.MAC) []byte {
	class := "PXEClient:Arch:00007:UNDI:003016"
	duid := append([]byte{0, 1, 0, 1, 0x30, 0x5a, 0x1e, 0x00}, mac[:]...)
	msg := []byte{1, 0x12, 0x34, 0x56}
	for _, o := range [][]byte{
		opt6(1, duid), opt6(8, []byte{0, 0}), opt6(6, []byte{0, 59, 0, 60, 0, 23, 0, 16}),
		opt6(62, []byte{1, 3, 0}), opt6(61, []byte{0, 7}),
		opt6(16, []byte{0, 0, 1, 0x57}, binary.BigEndian.AppendUint16(nil, uint16(len(class))), []byte(class)),
		opt6(3, []byte{0, 0, 0, 1}, make([]byte, 8)),
	} {
		msg = append(msg, o...)
	}
	return msg
}

// relayed6 wraps msg in a RELAY-FORW from a relay whose link address is link, with option
// 79 (RFC 6939) naming mac, as dnsmasq's dhcp-relay sends it.
func relayed6(msg []byte, link netip.Addr, mac hwid.MAC) []byte {
	peer := netip.MustParseAddr("fe80::5054:ff:fe00:1").As16()
	l := link.As16()
	b := append([]byte{12, 0}, l[:]...)
	b = append(b, peer[:]...)
	b = append(b, opt6(9, msg)...)
	return append(b, opt6(79, []byte{0, 1}, mac[:])...)
}

// send6 sends msg to the agent's DHCPv6 socket from [::1] and returns the boot file URL
// (option 59) of the answer, "" when none came within a second.
func send6(t *testing.T, a *running, msg []byte) string {
	t.Helper()
	dst, err := netip.ParseAddrPort(a.Addrs()["dhcpv6"])
	if err != nil {
		t.Fatalf("no dhcpv6 socket: %v (addrs %v)", err, a.Addrs())
	}
	conn, err := net.ListenUDP("udp6", net.UDPAddrFromAddrPort(netip.MustParseAddrPort("[::1]:0")))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if _, err := conn.WriteToUDPAddrPort(msg, dst); err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 1500)
	conn.SetReadDeadline(time.Now().Add(time.Second))
	n, _, err := conn.ReadFromUDPAddrPort(buf)
	if err != nil || n < 4 || buf[0] != 2 {
		return ""
	}
	for b := buf[4:n]; len(b) >= 4; {
		code, l := binary.BigEndian.Uint16(b), int(binary.BigEndian.Uint16(b[2:]))
		if len(b) < 4+l {
			break
		}
		if code == 59 {
			return string(b[4 : 4+l])
		}
		b = b[4+l:]
	}
	return ""
}

// tftpRead asks the TFTP socket at dst for ipxe.efi from the local address from and reports
// whether the first DATA block came back.
func tftpRead(t *testing.T, from string, dst netip.AddrPort) bool {
	t.Helper()
	conn, err := net.ListenUDP("udp", net.UDPAddrFromAddrPort(netip.MustParseAddrPort(from)))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	rrq := append([]byte{0, 1}, "ipxe.efi\x00octet\x00"...)
	if _, err := conn.WriteToUDPAddrPort(rrq, dst); err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 600)
	conn.SetReadDeadline(time.Now().Add(2 * time.Second))
	n, _, err := conn.ReadFromUDPAddrPort(buf)
	return err == nil && n >= 4 && buf[1] == 3 && buf[3] == 1
}

// TestIPv6Boot: with Boot.ServerIP6 and Boot.DHCPv6, one agent boots a machine over IPv6
// the whole way, beside its IPv4 service on the same sockets. Proxy DHCP answers EDK2's
// SOLICIT with a tftp:// URL naming [ServerIP6] and the TFTP socket's port; TFTP answers on
// IPv6 and IPv4; the chain script fetched over IPv6 names the IPv6 base and sends
// ${netX/ip6} (over IPv4: the IPv4 base and ${netX/ip}); the script request over IPv6,
// without a nonce (the site's DHCPv6 server named the chain URL), gets the machine's
// script because its firmware was answered over DHCPv6 (the boot pass), with kernel,
// initrd and bc.cache under the bracketed IPv6 base, served by the cache; a MAC whose
// firmware was never answered gets no script. The counters reach Stats and /metrics.
func TestIPv6Boot(t *testing.T) {
	h := newHarness(t)
	a, _ := h.start(t, h.ipv6Config(t.TempDir()), h.plane.Link())
	e := entry(60, h.clk.Now().Add(2*time.Hour))
	never := entry(61, h.clk.Now().Add(2*time.Hour))
	h.prepare(t, a, e, never)

	httpPort := a.Addrs()["http"][strings.LastIndexByte(a.Addrs()["http"], ':')+1:]
	base6 := "http://[::1]:" + httpPort
	if a.HTTPBase6() != base6 {
		t.Fatalf("HTTPBase6 %q, want %q", a.HTTPBase6(), base6)
	}
	tftp, err := netip.ParseAddrPort(a.Addrs()["tftp"])
	if err != nil {
		t.Fatal(err)
	}
	want := "tftp://[2001:db8::2]:" + strconv.Itoa(int(tftp.Port())) + "/ipxe.efi"
	if got := edk2Solicit6(t, a, e.MAC); got != want {
		t.Fatalf("ADVERTISE boot file URL %q, want %q", got, want)
	}
	if got := edk2Solicit6(t, a, hwid.MAC{0x52, 0x54, 0, 0, 0x99, 0x99}); got != "" {
		t.Errorf("an unknown MAC's SOLICIT was answered with %q", got)
	}
	for _, from := range []string{"::1", "127.0.0.1"} {
		src := netip.MustParseAddr(from)
		if dst := netip.AddrPortFrom(src, tftp.Port()); !tftpRead(t, netip.AddrPortFrom(src, 0).String(), dst) {
			t.Errorf("TFTP from %s to %v: no first block", from, dst)
		}
	}

	// The chain script names the base of the family the machine came over.
	_, chain6 := getFrom(t, "::1", base6+"/boot/chain.ipxe", http.MethodGet)
	if want := base6 + "/boot/ipxe?mac=${netX/mac:hexhyp}&uuid=${uuid}&ip=${netX/ip6}&"; !strings.Contains(chain6, want) {
		t.Errorf("chain script over IPv6 lacks %q:\n%s", want, chain6)
	}
	_, chain4 := getFrom(t, "127.0.0.1", a.HTTPBase()+"/boot/chain.ipxe", http.MethodGet)
	if want := a.HTTPBase() + "/boot/ipxe?mac=${netX/mac:hexhyp}&uuid=${uuid}&ip=${netX/ip}&"; !strings.Contains(chain4, want) {
		t.Errorf("chain script over IPv4 lacks %q:\n%s", want, chain4)
	}

	// The machine never answered over DHCPv6 gets nothing over IPv6 without a nonce.
	if st, body := getFrom(t, "::1", base6+"/boot/ipxe?mac="+never.MAC.String(), http.MethodGet); st != http.StatusOK || hasSecret(body) {
		t.Errorf("a MAC whose firmware was not answered: status %d, secret %v; want 200 (the exit script) and none", st, hasSecret(body))
	}
	// The machine whose firmware was answered gets its script over IPv6.
	st, body := getFrom(t, "::1", base6+"/boot/ipxe?mac="+e.MAC.String()+"&ip=::1&platform=efi&buildarch=x86_64", http.MethodGet)
	if st != http.StatusOK || !hasSecret(body) {
		t.Fatalf("the machine over IPv6: status %d\n%s", st, body)
	}
	if want := "bc.cache=" + base6 + "/cache/t/"; !strings.Contains(body, want) {
		t.Errorf("script lacks %q:\n%s", want, body)
	}
	var kernel string
	for _, line := range strings.Split(body, "\n") {
		if f := strings.Fields(line); len(f) > 1 && f[0] == "kernel" {
			kernel = f[1]
		}
	}
	if !strings.HasPrefix(kernel, base6+"/cache/t/") || !strings.HasSuffix(kernel, "/"+h.kernel) {
		t.Fatalf("kernel URL %q, want %s/cache/t/GRANT/%s", kernel, base6, h.kernel)
	}
	waitFor(t, "kernel served over IPv6", func() bool { st, _ := getFrom(t, "::1", kernel, http.MethodGet); return st == http.StatusOK })

	m := a.Stats()
	if m["proxydhcp_answered_547"] != 1 || m["boot_v6_passes_issued"] != 1 || m["boot_v6_passes_used"] != 1 || m["boot_scripts"] != 1 {
		t.Errorf("stats: answered 547 %d, passes issued %d used %d, scripts %d; want 1 each",
			m["proxydhcp_answered_547"], m["boot_v6_passes_issued"], m["boot_v6_passes_used"], m["boot_scripts"])
	}
	if m["boot_unbound_no-nonce"] != 1 {
		t.Errorf("boot_unbound_no-nonce %d, want 1 (the MAC never answered over DHCPv6)", m["boot_unbound_no-nonce"])
	}
	_, metrics := get(t, "http://"+a.Addrs()["metrics"]+"/metrics")
	for _, want := range []string{`siteboot_proxydhcp_answered_total{port="547"} 1`, `siteboot_proxydhcp_resent_total{port="4011"} 0`,
		`siteboot_proxydhcp_silent_total{port="547",reason="unknown"} 1`, `siteboot_boot_answers_total{answer="script"} 1`,
		`siteboot_boot_v6_passes_total{event="issued"} 1`, `siteboot_boot_v6_passes_total{event="used"} 1`} {
		if !strings.Contains(metrics, want) {
			t.Errorf("/metrics lacks %q", want)
		}
	}
	// The unknown MAC's SOLICIT is listed, as a DHCP sighting.
	var listed bool
	for _, d := range a.Discovered().Entries {
		listed = listed || d.MAC == (hwid.MAC{0x52, 0x54, 0, 0, 0x99, 0x99})
	}
	if !listed {
		t.Errorf("the unknown MAC's DHCPv6 SOLICIT is not in the discovered list: %+v", a.Discovered().Entries)
	}

	// An unknown machine behind a DHCPv6 relay is listed with the relay's link address and
	// the MAC its option 79 names (the inner DUID names another).
	link, relayedMAC := netip.MustParseAddr("2001:db8:1::1"), hwid.MAC{0x52, 0x54, 0, 0, 0x77, 0x77}
	if got := send6(t, a, relayed6(solicit6(hwid.MAC{0x52, 0x54, 0, 0, 0x77, 0x00}), link, relayedMAC)); got != "" {
		t.Errorf("the relayed unknown SOLICIT was answered with %q", got)
	}
	var relay netip.Addr
	waitFor(t, "relayed sighting", func() bool {
		for _, d := range a.Discovered().Entries {
			if d.MAC == relayedMAC {
				relay = d.Relay
				return true
			}
		}
		return false
	})
	if relay != link {
		t.Errorf("relayed sighting's relay %v, want the link address %v", relay, link)
	}
}

// TestIPv6ConfigRefused: the IPv6 fields' checks name the field at fault.
func TestIPv6ConfigRefused(t *testing.T) {
	h := newHarness(t)
	for _, tc := range []struct {
		name, field string
		change      func(c *agent.Config)
	}{
		{"link-local server", "Boot.ServerIP6", func(c *agent.Config) { c.Boot.ServerIP6 = netip.MustParseAddr("fe80::1") }},
		{"v4 as server_ip6", "Boot.ServerIP6", func(c *agent.Config) { c.Boot.ServerIP6 = netip.MustParseAddr("192.0.2.1") }},
		{"http not wildcard", "Boot.HTTPListen", func(c *agent.Config) { c.Boot.HTTPListen = netip.MustParseAddrPort("127.0.0.1:0") }},
		{"dhcpv6 without server", "Boot.DHCPv6", func(c *agent.Config) { c.Boot.ServerIP6 = netip.Addr{}; c.Boot.HTTPBase6 = "" }},
		{"dhcpv6 without proxy", "Boot.DHCPv6", func(c *agent.Config) { c.Boot.ProxyDHCP = false }},
		{"dhcpv6 listen v4", "Boot.DHCPv6Listen", func(c *agent.Config) { c.Boot.DHCPv6Listen = netip.MustParseAddrPort("0.0.0.0:547") }},
		{"base6 multicast", "Boot.HTTPBase6", func(c *agent.Config) { c.Boot.HTTPBase6 = "http://[ff02::1]" }},
		{"relay multicast", "Boot.Relays[0]", func(c *agent.Config) { c.Boot.Relays = []netip.Addr{netip.MustParseAddr("ff02::1:2")} }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := h.ipv6Config(t.TempDir())
			if err := c.Validate(); err != nil {
				t.Fatalf("the base config: %v", err)
			}
			tc.change(c)
			var fe *agent.FieldError
			err := c.Validate()
			if !errors.As(err, &fe) || fe.Field != tc.field {
				t.Errorf("Validate: %v, want a FieldError for %s", err, tc.field)
			}
		})
	}
	// An IPv6 relay is a relay.
	c := h.ipv6Config(t.TempDir())
	c.Boot.Relays = []netip.Addr{netip.MustParseAddr("2001:db8:1::1"), netip.MustParseAddr("198.51.100.1")}
	if err := c.Validate(); err != nil {
		t.Errorf("IPv6 and IPv4 relays: %v", err)
	}
}
