package proxydhcp_test

import (
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"net/netip"
	"sort"
	"strings"
	"testing"

	"github.com/bettercompute/siteboot/hwid"
	"github.com/bettercompute/siteboot/proxydhcp"
	"github.com/google/go-cmp/cmp"
	"github.com/insomniacslk/dhcp/dhcpv6"
)

// reply6Fields is what a DHCPv6 client (or relay) reads from a reply.
type reply6Fields struct {
	Type      string   // outer message type
	Relays    []string // "link peer interface-id" of each RELAY-REPL, outermost first
	InnerType string
	XID       string
	Options   []int // option codes of the inner message
	ClientID  string
	ServerID  string
	Vendor    string // "enterprise data,..."
	URL       string
	Dest      string
}

func fields6(t testing.TB, resp proxydhcp.Response) reply6Fields {
	t.Helper()
	d, err := dhcpv6.FromBytes(resp.Reply)
	if err != nil {
		t.Fatalf("reply does not parse: %v", err)
	}
	f := reply6Fields{Type: d.Type().String(), Dest: resp.Dest.String()}
	for d.IsRelay() {
		r := d.(*dhcpv6.RelayMessage)
		f.Relays = append(f.Relays, fmt.Sprintf("%d %s %s %s", r.HopCount, r.LinkAddr, r.PeerAddr, r.Options.InterfaceID()))
		if d = r.Options.RelayMessage(); d == nil {
			t.Fatal("RELAY-REPL without a relay message")
		}
	}
	m := d.(*dhcpv6.Message)
	f.InnerType = m.MessageType.String()
	f.XID = m.TransactionID.String()
	for _, o := range m.Options.Options {
		f.Options = append(f.Options, int(o.Code()))
	}
	sort.Ints(f.Options)
	if o := m.GetOneOption(dhcpv6.OptionClientID); o != nil {
		f.ClientID = hex.EncodeToString(o.ToBytes())
	}
	if o := m.GetOneOption(dhcpv6.OptionServerID); o != nil {
		f.ServerID = hex.EncodeToString(o.ToBytes())
	}
	for _, vc := range m.Options.VendorClasses() {
		var data []string
		for _, x := range vc.Data {
			data = append(data, string(x))
		}
		f.Vendor = fmt.Sprintf("%d %s", vc.EnterpriseNumber, strings.Join(data, ","))
	}
	f.URL = m.Options.BootFileURL()
	return f
}

var (
	sidHex   = hex.EncodeToString(serverDUID)
	replyOpt = []int{1, 2, 16, 59} // client ID, server ID, vendor class, boot file URL: never an IA
)

func newServer6(h proxydhcp.HandlerFunc) *proxydhcp.Server {
	return &proxydhcp.Server{Handler: h, ServerDUID: serverDUID}
}

func TestGoldenReplies6(t *testing.T) {
	llt, uuid := duidLLT(t, edk2MAC), duidUUID(t, ovmfUUID)
	relayed := relayForw(t, 0, relayLink, edk2LL, "52:54:00:00:00:63", edk2PXESolicit(uuid))
	cases := []struct {
		name   string
		pkt    []byte
		port   proxydhcp.Port
		source string
		local  string
		want   reply6Fields
	}{
		{
			name: "edk2-pxe-solicit", pkt: edk2PXESolicit(llt), port: proxydhcp.PortDHCPv6, source: "[" + edk2LL + "]:546", local: server6,
			want: reply6Fields{Type: "ADVERTISE", InnerType: "ADVERTISE", XID: "0x5e6f70", Options: replyOpt,
				ClientID: hex.EncodeToString(llt), ServerID: sidHex, Vendor: "343 PXEClient",
				URL: "tftp://[2001:db8::2]/ipxe.efi", Dest: "[" + edk2LL + "]:546"},
		},
		{
			name: "edk2-pxe-solicit-duid-uuid", pkt: edk2PXESolicit(uuid), port: proxydhcp.PortDHCPv6, source: "[" + edk2LL + "%eth0]:546", local: server6,
			want: reply6Fields{Type: "ADVERTISE", InnerType: "ADVERTISE", XID: "0x5e6f70", Options: replyOpt,
				ClientID: hex.EncodeToString(uuid), ServerID: sidHex, Vendor: "343 PXEClient",
				URL: "tftp://[2001:db8::2]/ipxe.efi", Dest: "[" + edk2LL + "]:546"},
		},
		{
			name: "edk2-pxe-4011", pkt: edk2BootRequest(llt, serverDUID), port: proxydhcp.PortBoot, source: "[" + edk2Addr + "]:4011", local: server6,
			want: reply6Fields{Type: "REPLY", InnerType: "REPLY", XID: "0x5e6f70", Options: replyOpt,
				ClientID: hex.EncodeToString(llt), ServerID: sidHex, Vendor: "343 PXEClient",
				URL: "tftp://[2001:db8::2]/ipxe.efi", Dest: "[" + edk2Addr + "]:4011"},
		},
		{
			// The site's DHCPv6 server named this server's URL with vendor class PXEClient
			// itself (EDK2's DhcpBinl offer): the REQUEST to 4011 then names no server.
			name: "edk2-pxe-4011-site-named", pkt: edk2BootRequest(llt, nil), port: proxydhcp.PortBoot, source: "[" + edk2Addr + "]:4011", local: server6,
			want: reply6Fields{Type: "REPLY", InnerType: "REPLY", XID: "0x5e6f70", Options: replyOpt,
				ClientID: hex.EncodeToString(llt), ServerID: sidHex, Vendor: "343 PXEClient",
				URL: "tftp://[2001:db8::2]/ipxe.efi", Dest: "[" + edk2Addr + "]:4011"},
		},
		{
			name: "edk2-http-solicit", pkt: edk2HTTPSolicit(llt), port: proxydhcp.PortDHCPv6, source: "[" + edk2LL + "]:546", local: server6,
			want: reply6Fields{Type: "ADVERTISE", InnerType: "ADVERTISE", XID: "0x5e6f70", Options: replyOpt,
				ClientID: hex.EncodeToString(llt), ServerID: sidHex, Vendor: "343 HTTPClient",
				URL: "http://[2001:db8::2]/boot/files/ipxe.efi", Dest: "[" + edk2LL + "]:546"},
		},
		{
			name: "ipxe-information-request", pkt: ipxeInfoRequest(t, edk2MAC), port: proxydhcp.PortDHCPv6, source: "[fe80::1234]:546", local: server6,
			want: reply6Fields{Type: "REPLY", InnerType: "REPLY", XID: "0xa1b2c3", Options: replyOpt,
				ClientID: hex.EncodeToString(duidLL(t, edk2MAC)), ServerID: sidHex, Vendor: "343 PXEClient",
				URL: "http://[2001:db8::2]/boot/chain.ipxe", Dest: "[fe80::1234]:546"},
		},
		{
			name: "edk2-pxe-relayed", pkt: relayed, port: proxydhcp.PortDHCPv6, source: "[2001:db8:ffff::7]:547", local: server6,
			want: reply6Fields{Type: "RELAY-REPL", Relays: []string{"0 " + relayLink + " " + edk2LL + " eth1"}, InnerType: "ADVERTISE", XID: "0x5e6f70",
				Options: replyOpt, ClientID: hex.EncodeToString(uuid), ServerID: sidHex, Vendor: "343 PXEClient",
				URL: "tftp://[2001:db8::2]/ipxe.efi", Dest: "[2001:db8:ffff::7]:547"},
		},
		{
			name: "edk2-pxe-two-relays", pkt: relayForw(t, 1, "::", "2001:db8:ffff::9", "", relayed), port: proxydhcp.PortDHCPv6, source: "[2001:db8:fffe::3]:547", local: server6,
			want: reply6Fields{Type: "RELAY-REPL", Relays: []string{"1 :: 2001:db8:ffff::9 eth1", "0 " + relayLink + " " + edk2LL + " eth1"}, InnerType: "ADVERTISE", XID: "0x5e6f70",
				Options: replyOpt, ClientID: hex.EncodeToString(uuid), ServerID: sidHex, Vendor: "343 PXEClient",
				URL: "tftp://[2001:db8::2]/ipxe.efi", Dest: "[2001:db8:fffe::3]:547"},
		},
	}
	srv := newServer6(answerAll)
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			resp := srv.Respond(context.Background(), proxydhcp.Packet{Link: testLink,
				Data: tc.pkt, Port: tc.port, Source: netip.MustParseAddrPort(tc.source), Local: netip.MustParseAddr(tc.local),
			})
			if resp.Reply == nil {
				t.Fatalf("silent: %v (%v)", resp.Reason, resp.Err)
			}
			if diff := cmp.Diff(tc.want, fields6(t, resp)); diff != "" {
				t.Errorf("reply (-want +got):\n%s", diff)
			}
			checkGolden(t, "v6-"+tc.name, resp.Reply)
		})
	}
}

// What the Handler and the Discoverer see of DHCPv6 requests: the MAC from each source, the
// UUID of a DUID-UUID, the relay's link address and the client's own address.
func TestRequestSeenByHandler6(t *testing.T) {
	u, _ := hwid.ParseUUID(ovmfUUID)
	mac := func(s string) hwid.MAC { m, _ := hwid.ParseMAC(s); return m }
	a := netip.MustParseAddr
	for _, tc := range []struct {
		name   string
		pkt    []byte
		source string
		want   proxydhcp.Request
	}{
		{"duid-llt", edk2PXESolicit(duidLLT(t, edk2MAC)), "[fe80::99]:546", proxydhcp.Request{
			Type: proxydhcp.MessageSolicit, XID: 0x5e6f70, MAC: mac(edk2MAC), MACSource: proxydhcp.MACFromDUIDLLT, Kind: proxydhcp.KindPXE,
			Arch: hwid.ArchX86_64EFI, HasArch: true, UNDI: [2]uint8{3, 0}, ClientIP: a("fe80::99"), IPv6: true}},
		{"duid-uuid-eui64", edk2HTTPSolicit(duidUUID(t, ovmfUUID)), "[" + edk2LL + "]:546", proxydhcp.Request{
			Type: proxydhcp.MessageSolicit, XID: 0x5e6f70, MAC: mac(edk2MAC), MACSource: proxydhcp.MACFromLinkLocal, Kind: proxydhcp.KindHTTP,
			Arch: hwid.ArchX86_64EFIHTTP, HasArch: true, UUID: u, HasUUID: true, UNDI: [2]uint8{3, 0}, ClientIP: a(edk2LL), IPv6: true}},
		{"ipxe-duid-ll", ipxeInfoRequest(t, "52:54:00:00:00:70"), "[fe80::1]:546", proxydhcp.Request{
			Type: proxydhcp.MessageInformationRequest, XID: 0xa1b2c3, MAC: mac("52:54:00:00:00:70"), MACSource: proxydhcp.MACFromDUIDLL,
			Kind: proxydhcp.KindPXE, IPXE: true, ClientIP: a("fe80::1"), IPv6: true}},
		{"relayed-option-79", relayForw(t, 0, relayLink, edk2LL, "52:54:00:00:00:63", edk2PXESolicit(duidLLT(t, edk2MAC))), "[2001:db8:ffff::7]:547", proxydhcp.Request{
			Type: proxydhcp.MessageSolicit, XID: 0x5e6f70, MAC: mac("52:54:00:00:00:63"), MACSource: proxydhcp.MACFromRelay, Kind: proxydhcp.KindPXE,
			Arch: hwid.ArchX86_64EFI, HasArch: true, UNDI: [2]uint8{3, 0}, Relay: a(relayLink), ClientIP: a(edk2LL), IPv6: true}},
		{"relay-without-link-address", relayForw(t, 0, "::", edk2LL, "", edk2PXESolicit(duidUUID(t, ovmfUUID))), "[2001:db8:ffff::7]:547", proxydhcp.Request{
			Type: proxydhcp.MessageSolicit, XID: 0x5e6f70, MAC: mac(edk2MAC), MACSource: proxydhcp.MACFromLinkLocal, Kind: proxydhcp.KindPXE,
			Arch: hwid.ArchX86_64EFI, HasArch: true, UUID: u, HasUUID: true, UNDI: [2]uint8{3, 0}, Relay: a("2001:db8:ffff::7"), ClientIP: a(edk2LL), IPv6: true}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var got *proxydhcp.Request
			srv := newServer6(func(_ context.Context, r *proxydhcp.Request) proxydhcp.Decision {
				c := *r
				got = &c
				return proxydhcp.Silence(proxydhcp.ReasonFenced)
			})
			src := netip.MustParseAddrPort(tc.source)
			srv.Respond(context.Background(), proxydhcp.Packet{Link: testLink, Data: tc.pkt, Port: proxydhcp.PortDHCPv6, Source: src, Local: a(server6)})
			if got == nil {
				t.Fatal("the handler was not asked")
			}
			tc.want.Port, tc.want.Source, tc.want.Server = proxydhcp.PortDHCPv6, src, a(server6)
			if diff := cmp.Diff(tc.want, *got, cmp.Comparer(func(a, b netip.Addr) bool { return a == b }), cmp.Comparer(func(a, b netip.AddrPort) bool { return a == b })); diff != "" {
				t.Errorf("request (-want +got):\n%s", diff)
			}
		})
	}
}

// TestSilence6 covers every way a DHCPv6 request goes unanswered.
func TestSilence6(t *testing.T) {
	llt, uuid := duidLLT(t, edk2MAC), duidUUID(t, ovmfUUID)
	otherSID := []byte{0, 3, 0, 1, 2, 0, 0, 0, 0, 9}
	plain := msg6(1, 7, opt6(1, llt), opt6(8, u16(0)), opt6(3, u32(1), u32(0), u32(0))) // an ordinary DHCPv6 client
	deep := edk2PXESolicit(llt)
	for range 9 {
		deep = relayForw(t, 0, relayLink, edk2LL, "", deep)
	}
	solicitWithSID := append(edk2PXESolicit(llt), opt6(2, serverDUID)...)
	ia32 := edk2Solicit(llt, 6, "PXEClient:Arch:00006:UNDI:003000")
	ll, relaySrc := "["+edk2LL+"]:546", "[2001:db8:ffff::7]:547"
	cases := []struct {
		name       string
		pkt        []byte
		port       proxydhcp.Port
		source     string
		local      string
		relays     []netip.Addr
		decision   proxydhcp.Decision
		want       proxydhcp.Reason
		wantErr    error
		discovered bool
	}{
		{name: "unknown", pkt: edk2PXESolicit(llt), decision: proxydhcp.Silence(proxydhcp.ReasonUnknown), want: proxydhcp.ReasonUnknown, discovered: true},
		{name: "fenced", pkt: edk2PXESolicit(llt), decision: proxydhcp.Silence(proxydhcp.ReasonFenced), want: proxydhcp.ReasonFenced},
		{name: "no-mac-duid-uuid-not-eui64", pkt: edk2PXESolicit(uuid), source: "[fe80::1:2:3:4]:546", decision: proxydhcp.Answer(), want: proxydhcp.ReasonNoMAC, wantErr: proxydhcp.ErrNoMAC},
		{name: "no-mac-relayed-without-79", pkt: relayForw(t, 0, relayLink, "2001:db8:1::99", "", edk2PXESolicit(uuid)), source: relaySrc, decision: proxydhcp.Answer(), want: proxydhcp.ReasonNoMAC, wantErr: proxydhcp.ErrNoMAC},
		{name: "not-pxe", pkt: plain, decision: proxydhcp.Answer(), want: proxydhcp.ReasonNotPXE, wantErr: proxydhcp.ErrNotPXE},
		{name: "truncated", pkt: edk2PXESolicit(llt)[:30], decision: proxydhcp.Answer(), want: proxydhcp.ReasonMalformed, wantErr: proxydhcp.ErrMalformed},
		{name: "no-client-id", pkt: msg6(1, 7, edk2Options(7, "PXEClient")...), decision: proxydhcp.Answer(), want: proxydhcp.ReasonMalformed, wantErr: proxydhcp.ErrMalformed},
		{name: "nine-relays", pkt: deep, source: relaySrc, decision: proxydhcp.Answer(), want: proxydhcp.ReasonMalformed, wantErr: proxydhcp.ErrMalformed},
		{name: "advertise-from-a-server", pkt: msg6(2, 7, opt6(1, llt), opt6(2, otherSID), edk2Options(7, "PXEClient")[3]), decision: proxydhcp.Answer(), want: proxydhcp.ReasonMalformed, wantErr: proxydhcp.ErrMalformed},
		{name: "request-on-547", pkt: edk2BootRequest(llt, serverDUID), decision: proxydhcp.Answer(), want: proxydhcp.ReasonIgnored},
		{name: "solicit-naming-a-server", pkt: solicitWithSID, decision: proxydhcp.Answer(), want: proxydhcp.ReasonIgnored},
		{name: "4011-other-server", pkt: edk2BootRequest(llt, otherSID), port: proxydhcp.PortBoot, source: "[" + edk2Addr + "]:4011", decision: proxydhcp.Answer(), want: proxydhcp.ReasonIgnored},
		{name: "solicit-on-4011", pkt: edk2PXESolicit(llt), port: proxydhcp.PortBoot, source: "[" + edk2Addr + "]:4011", decision: proxydhcp.Answer(), want: proxydhcp.ReasonIgnored},
		{name: "relay-not-allowed", pkt: relayForw(t, 0, relayLink, edk2LL, "", edk2PXESolicit(llt)), source: relaySrc, relays: []netip.Addr{netip.MustParseAddr("2001:db8:ffff::8")}, decision: proxydhcp.Silence(proxydhcp.ReasonUnknown), want: proxydhcp.ReasonRelayNotAllowed},
		{name: "no-server-address", pkt: edk2PXESolicit(llt), local: "fe80::2", decision: proxydhcp.Answer(), want: proxydhcp.ReasonNoServerAddress},
		{name: "no-file-for-ia32", pkt: ia32, decision: proxydhcp.Answer(), want: proxydhcp.ReasonNoBootFile},
		{name: "bad-override", pkt: edk2PXESolicit(llt), decision: proxydhcp.AnswerFile("http://x/a b"), want: proxydhcp.ReasonError},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var heard []string
			srv := &proxydhcp.Server{
				ServerDUID: serverDUID, Relays: tc.relays,
				Handler: proxydhcp.HandlerFunc(func(context.Context, *proxydhcp.Request) proxydhcp.Decision { return tc.decision }),
				Discoverer: proxydhcp.DiscovererFunc(func(_ context.Context, r *proxydhcp.Request) {
					heard = append(heard, r.MAC.String())
				}),
			}
			port, source, local := tc.port, tc.source, tc.local
			if port == 0 {
				port = proxydhcp.PortDHCPv6
			}
			if source == "" {
				source = ll
			}
			if local == "" {
				local = server6
			}
			resp := srv.Respond(context.Background(), proxydhcp.Packet{Link: testLink,
				Data: tc.pkt, Port: port, Source: netip.MustParseAddrPort(source), Local: netip.MustParseAddr(local),
			})
			if resp.Reply != nil || resp.Reason != tc.want {
				t.Fatalf("got reply=%v reason %v (%v), want silence for %v", resp.Reply != nil, resp.Reason, resp.Err, tc.want)
			}
			if tc.wantErr != nil && !errors.Is(resp.Err, tc.wantErr) {
				t.Errorf("err %v, want %v", resp.Err, tc.wantErr)
			}
			if got := len(heard) > 0; got != tc.discovered {
				t.Errorf("discovered = %v (%v), want %v", got, heard, tc.discovered)
			}
			if st := srv.Stats().Port(port); st.Silent.Of(tc.want) != 1 || st.Answered != 0 {
				t.Errorf("stats %+v: want one silent for %v", st, tc.want)
			}
		})
	}
}

// The Decision's boot file, the table and the ports shape the URL.
func TestBootURL6(t *testing.T) {
	llt := duidLLT(t, edk2MAC)
	for _, tc := range []struct {
		name string
		srv  *proxydhcp.Server
		pkt  []byte
		want string
	}{
		{"override-file", &proxydhcp.Server{TFTPPort: 6969, Handler: proxydhcp.HandlerFunc(func(context.Context, *proxydhcp.Request) proxydhcp.Decision {
			return proxydhcp.AnswerFile("shimx64.efi")
		})}, edk2PXESolicit(llt), "tftp://[2001:db8::2]:6969/shimx64.efi"},
		{"override-url", &proxydhcp.Server{Handler: proxydhcp.HandlerFunc(func(context.Context, *proxydhcp.Request) proxydhcp.Decision {
			return proxydhcp.AnswerFile("http://[2001:db8::5]/x.efi")
		})}, edk2HTTPSolicit(llt), "http://[2001:db8::5]/x.efi"},
		{"http-port", &proxydhcp.Server{HTTPPort: 8080, Handler: proxydhcp.HandlerFunc(answerAll)}, edk2HTTPSolicit(llt), "http://[2001:db8::2]:8080/boot/files/ipxe.efi"},
		{"https-chain", &proxydhcp.Server{HTTPSPort: 8443, Handler: proxydhcp.HandlerFunc(answerAll)}, ipxeInfoRequest(t, edk2MAC), "https://[2001:db8::2]:8443/boot/chain.ipxe"},
		{"https-http-boot", &proxydhcp.Server{HTTPSPort: 443, HTTPBootTLS: true, Handler: proxydhcp.HandlerFunc(answerAll)}, edk2HTTPSolicit(llt), "https://[2001:db8::2]/boot/files/ipxe.efi"},
		{"server-ip6", &proxydhcp.Server{ServerIP6: netip.MustParseAddr("2001:db8:5::1"), Handler: proxydhcp.HandlerFunc(answerAll)}, ipxeInfoRequest(t, edk2MAC), "http://[2001:db8:5::1]/boot/chain.ipxe"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			resp := tc.srv.Respond(context.Background(), proxydhcp.Packet{Link: testLink, Data: tc.pkt, Port: proxydhcp.PortDHCPv6,
				Source: netip.MustParseAddrPort("[" + edk2LL + "]:546"), Local: netip.MustParseAddr(server6)})
			if resp.Reply == nil {
				t.Fatalf("silent: %v %v", resp.Reason, resp.Err)
			}
			if got := fields6(t, resp).URL; got != tc.want {
				t.Errorf("URL %q, want %q", got, tc.want)
			}
		})
	}
	if err := (&proxydhcp.Server{Handler: proxydhcp.HandlerFunc(answerAll), ServerIP6: netip.MustParseAddr("fe80::1")}).Validate(); err == nil {
		t.Error("Validate accepted a link-local ServerIP6")
	}
	if err := (&proxydhcp.Server{Handler: proxydhcp.HandlerFunc(answerAll), HTTPBootTLS: true}).Validate(); err == nil {
		t.Error("Validate accepted HTTPBootTLS without HTTPSPort")
	}
	if err := (&proxydhcp.Server{Handler: proxydhcp.HandlerFunc(answerAll), ServerDUID: []byte{0, 1}}).Validate(); err == nil {
		t.Error("Validate accepted a 2-byte DUID")
	}
}

// Without ServerDUID, a server draws one DUID and keeps it: the 4011 request names it.
func TestServerDUIDDrawnOnce(t *testing.T) {
	srv := &proxydhcp.Server{Handler: proxydhcp.HandlerFunc(answerAll)}
	p := proxydhcp.Packet{Link: testLink, Data: edk2PXESolicit(duidLLT(t, edk2MAC)), Port: proxydhcp.PortDHCPv6,
		Source: netip.MustParseAddrPort("[" + edk2LL + "]:546"), Local: netip.MustParseAddr(server6)}
	a, b := fields6(t, srv.Respond(context.Background(), p)), fields6(t, srv.Respond(context.Background(), p))
	if a.ServerID != b.ServerID || !strings.HasPrefix(a.ServerID, "0004") || len(a.ServerID) != 36 {
		t.Fatalf("server IDs %s, %s: want one DUID-UUID", a.ServerID, b.ServerID)
	}
	sid, _ := hex.DecodeString(a.ServerID)
	resp := srv.Respond(context.Background(), proxydhcp.Packet{Link: testLink, Data: edk2BootRequest(duidLLT(t, edk2MAC), sid), Port: proxydhcp.PortBoot,
		Source: netip.MustParseAddrPort("[" + edk2Addr + "]:4011"), Local: netip.MustParseAddr(server6)})
	if resp.Reply == nil {
		t.Fatalf("the boot-server request naming the drawn DUID got silence: %v", resp.Reason)
	}
}

// EDK2's boot-server REQUEST comes from its new address: a client with a DUID-UUID is known
// only by the ADVERTISE the server sent it, for that client DUID and transaction.
func TestMACRememberedFor4011(t *testing.T) {
	uuid := duidUUID(t, ovmfUUID)
	var macs []string
	srv := newServer6(func(_ context.Context, r *proxydhcp.Request) proxydhcp.Decision {
		macs = append(macs, r.MAC.String()+" "+r.MACSource.String())
		return proxydhcp.Answer()
	})
	boot := func(s *proxydhcp.Server, pkt []byte) proxydhcp.Response {
		return s.Respond(context.Background(), proxydhcp.Packet{Link: testLink, Data: pkt, Port: proxydhcp.PortBoot,
			Source: netip.MustParseAddrPort("[" + edk2Addr + "]:4011"), Local: netip.MustParseAddr(server6)})
	}
	req := edk2BootRequest(uuid, serverDUID)
	if resp := boot(srv, req); resp.Reason != proxydhcp.ReasonNoMAC {
		t.Fatalf("before any ADVERTISE: reason %v, want no-mac", resp.Reason)
	}
	adv := srv.Respond(context.Background(), proxydhcp.Packet{Link: testLink, Data: edk2PXESolicit(uuid), Port: proxydhcp.PortDHCPv6,
		Source: netip.MustParseAddrPort("[" + edk2LL + "]:546"), Local: netip.MustParseAddr(server6)})
	if adv.Reply == nil {
		t.Fatalf("SOLICIT: %v", adv.Reason)
	}
	if resp := boot(srv, req); resp.Reply == nil {
		t.Fatalf("after the ADVERTISE: silent for %v", resp.Reason)
	}
	other := append([]byte(nil), req...)
	other[3] ^= 1 // another transaction
	if resp := boot(srv, other); resp.Reason != proxydhcp.ReasonNoMAC {
		t.Errorf("another transaction: reason %v, want no-mac", resp.Reason)
	}
	if resp := boot(newServer6(answerAll), req); resp.Reason != proxydhcp.ReasonNoMAC {
		t.Errorf("another server: reason %v, want no-mac", resp.Reason)
	}
	if diff := cmp.Diff([]string{edk2MAC + " link-local-eui64", edk2MAC + " link-local-eui64"}, macs); diff != "" {
		t.Errorf("the handler saw (-want +got):\n%s", diff)
	}
}
