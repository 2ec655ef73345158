package proxydhcp_test

import (
	"bytes"
	"context"
	"encoding/hex"
	"errors"
	"flag"
	"fmt"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/bettercompute/siteboot/hwid"
	"github.com/bettercompute/siteboot/proxydhcp"
	"github.com/google/go-cmp/cmp"
	"github.com/insomniacslk/dhcp/dhcpv4"
	"github.com/insomniacslk/dhcp/iana"
)

var update = flag.Bool("update", false, "rewrite testdata/golden from the current replies")

const (
	serverIP = "192.0.2.2"
	ovmfUUID = "8d3b1b5e-6f1c-4c54-9a39-0e1d2b6c7f10"
)

// ipxeOpt175 is an iPXE encapsulated-options block (feature flags) like the ROM sends: HTTP
// (0x13), iSCSI (0x11), Multiboot (0x19), no HTTPS.
var ipxeOpt175 = []byte{0xb1, 0x05, 0x01, 0x80, 0x86, 0x10, 0x0e, 0x13, 0x01, 0x01, 0x11, 0x01, 0x01, 0x19, 0x01, 0x01}

// ipxeOpt175HTTPS is the block of an iPXE with HTTPS (feature 0x14), as siteboot's builds send.
var ipxeOpt175HTTPS = append(bytes.Clone(ipxeOpt175), 0x14, 0x01, 0x01)

func mustMAC(t testing.TB, s string) net.HardwareAddr {
	t.Helper()
	hw, err := net.ParseMAC(s)
	if err != nil {
		t.Fatal(err)
	}
	return hw
}

func uuidOpt(t testing.TB, s string) dhcpv4.Modifier {
	t.Helper()
	u, err := hwid.ParseUUID(s)
	if err != nil {
		t.Fatal(err)
	}
	return dhcpv4.WithGeneric(dhcpv4.OptionClientMachineIdentifier, append([]byte{0}, u[:]...))
}

// build makes a request packet the way a client would put it on the wire.
func build(t testing.TB, typ dhcpv4.MessageType, mac string, xid uint32, mods ...dhcpv4.Modifier) []byte {
	t.Helper()
	base := []dhcpv4.Modifier{
		dhcpv4.WithTransactionID(dhcpv4.TransactionID{byte(xid >> 24), byte(xid >> 16), byte(xid >> 8), byte(xid)}),
		dhcpv4.WithHwAddr(mustMAC(t, mac)),
		dhcpv4.WithMessageType(typ),
	}
	m, err := dhcpv4.New(append(base, mods...)...)
	if err != nil {
		t.Fatal(err)
	}
	return m.ToBytes()
}

func vendorClass(s string) dhcpv4.Modifier { return dhcpv4.WithOption(dhcpv4.OptClassIdentifier(s)) }
func arch(a iana.Arch) dhcpv4.Modifier     { return dhcpv4.WithOption(dhcpv4.OptClientArch(a)) }
func undi(maj, min byte) dhcpv4.Modifier {
	return dhcpv4.WithGeneric(dhcpv4.OptionClientNetworkInterfaceIdentifier, []byte{1, maj, min})
}

// Packets shaped like each row of PEERS.md "What real firmware sends".
func seabiosIPXE(t testing.TB, mac string) []byte {
	return build(t, dhcpv4.MessageTypeDiscover, mac, 0x1a2b3c4d,
		arch(iana.INTEL_X86PC), undi(2, 1), vendorClass("PXEClient:Arch:00000:UNDI:002001"),
		dhcpv4.WithGeneric(dhcpv4.OptionUserClassInformation, []byte("iPXE")),
		dhcpv4.WithGeneric(dhcpv4.GenericOptionCode(175), ipxeOpt175),
		dhcpv4.WithGeneric(dhcpv4.OptionClientIdentifier, append([]byte{1}, mustMAC(t, mac)...)),
		uuidOpt(t, "00000000-0000-0000-0000-000000000000"),
	)
}

func ovmfPXE(t testing.TB, mac string, mods ...dhcpv4.Modifier) []byte {
	return build(t, dhcpv4.MessageTypeDiscover, mac, 0x5e6f7081, append([]dhcpv4.Modifier{
		arch(iana.EFI_X86_64), undi(3, 0), vendorClass("PXEClient:Arch:00007:UNDI:003000"),
		uuidOpt(t, ovmfUUID), dhcpv4.WithBroadcast(true),
		dhcpv4.WithOption(dhcpv4.OptMaxMessageSize(1472)),
	}, mods...)...)
}

func ovmfBootRequest(t testing.TB, mac string) []byte {
	return build(t, dhcpv4.MessageTypeRequest, mac, 0x5e6f7082,
		arch(iana.EFI_X86_64), undi(3, 0), vendorClass("PXEClient:Arch:00007:UNDI:003000"),
		uuidOpt(t, ovmfUUID), dhcpv4.WithClientIP(net.IPv4(192, 0, 2, 100)),
		dhcpv4.WithOption(dhcpv4.OptMaxMessageSize(1472)),
	)
}

func ipxeEFI(t testing.TB, mac string) []byte {
	return build(t, dhcpv4.MessageTypeDiscover, mac, 0x0badcafe,
		arch(iana.EFI_X86_64), undi(3, 10), vendorClass("PXEClient:Arch:00007:UNDI:003010"),
		dhcpv4.WithGeneric(dhcpv4.OptionUserClassInformation, []byte("iPXE")),
		dhcpv4.WithGeneric(dhcpv4.GenericOptionCode(175), ipxeOpt175),
	)
}

// ipxeEFIHTTPS is ipxeEFI from an iPXE that announces HTTPS.
func ipxeEFIHTTPS(t testing.TB, mac string) []byte {
	return build(t, dhcpv4.MessageTypeDiscover, mac, 0x0badcaff,
		arch(iana.EFI_X86_64), undi(3, 10), vendorClass("PXEClient:Arch:00007:UNDI:003010"),
		dhcpv4.WithGeneric(dhcpv4.OptionUserClassInformation, []byte("iPXE")),
		dhcpv4.WithGeneric(dhcpv4.GenericOptionCode(175), ipxeOpt175HTTPS),
	)
}

func ovmfHTTP(t testing.TB, mac string) []byte {
	return build(t, dhcpv4.MessageTypeDiscover, mac, 0x77665544,
		arch(iana.EFI_X86_64_HTTP), undi(3, 0), vendorClass("HTTPClient:Arch:00016:UNDI:003000"),
		uuidOpt(t, ovmfUUID), dhcpv4.WithBroadcast(true),
	)
}

func arm64(t testing.TB, mac string, http bool) []byte {
	if http {
		return build(t, dhcpv4.MessageTypeDiscover, mac, 0x00c0ffee,
			arch(iana.EFI_ARM64_HTTP), undi(3, 0), vendorClass("HTTPClient:Arch:00019:UNDI:003000"))
	}
	return build(t, dhcpv4.MessageTypeDiscover, mac, 0x00c0ffed,
		arch(iana.EFI_ARM64), undi(3, 0), vendorClass("PXEClient:Arch:00011:UNDI:003000"))
}

// pxeRequest67 is OVMF's DHCPREQUEST on port 67 after the offers, naming server sid.
func pxeRequest67(t testing.TB, sid string) []byte {
	mods := []dhcpv4.Modifier{arch(iana.EFI_X86_64), undi(3, 0), vendorClass("PXEClient:Arch:00007:UNDI:003000"),
		uuidOpt(t, ovmfUUID), dhcpv4.WithBroadcast(true),
		dhcpv4.WithOption(dhcpv4.OptRequestedIPAddress(net.IPv4(192, 0, 2, 100)))}
	if sid != "" {
		mods = append(mods, dhcpv4.WithOption(dhcpv4.OptServerIdentifier(net.ParseIP(sid))))
	}
	return build(t, dhcpv4.MessageTypeRequest, "52:54:00:00:00:02", 0x5e6f7081, mods...)
}

// capture returns the DHCP requests of the real capture: the BIOS ROM's DISCOVER, and the
// relayed REQUEST of an ordinary (non-PXE) client.
func capture(t testing.TB) (discover, request []byte) {
	for _, p := range readPcap(t, filepath.Join("testdata", "bios-pxe-asrock.pcap")) {
		if p.DstPort != 67 {
			continue
		}
		m, err := dhcpv4.FromBytes(p.Data)
		if err != nil {
			t.Fatalf("capture: %v", err)
		}
		switch m.MessageType() {
		case dhcpv4.MessageTypeDiscover:
			discover = p.Data
		case dhcpv4.MessageTypeRequest:
			request = p.Data
		}
	}
	if discover == nil || request == nil {
		t.Fatal("capture: DISCOVER or REQUEST missing")
	}
	return discover, request
}

// replyFields is what firmware reads from a reply.
type replyFields struct {
	Type, XID, MAC, Flags     string
	CIAddr, YIAddr, SIAddr    string
	GIAddr, SName, File, Dest string
	Options                   []int
	Opt54, Opt60, Opt67       string
	Opt97, Opt43              string // hex
}

func fieldsOf(t testing.TB, resp proxydhcp.Response) replyFields {
	t.Helper()
	m, err := dhcpv4.FromBytes(resp.Reply)
	if err != nil {
		t.Fatalf("reply does not parse: %v", err)
	}
	if m.OpCode != dhcpv4.OpcodeBootReply {
		t.Fatalf("reply op %v", m.OpCode)
	}
	f := replyFields{
		Type: m.MessageType().String(), XID: m.TransactionID.String(), MAC: m.ClientHWAddr.String(),
		Flags: m.FlagsToString(), CIAddr: m.ClientIPAddr.String(), YIAddr: m.YourIPAddr.String(),
		SIAddr: m.ServerIPAddr.String(), GIAddr: m.GatewayIPAddr.String(), SName: m.ServerHostName,
		File: m.BootFileName, Dest: resp.Dest.String(),
		Opt54: net.IP(m.Options.Get(dhcpv4.OptionServerIdentifier)).String(),
		Opt60: string(m.Options.Get(dhcpv4.OptionClassIdentifier)),
		Opt67: string(m.Options.Get(dhcpv4.OptionBootfileName)),
		Opt97: hex.EncodeToString(m.Options.Get(dhcpv4.OptionClientMachineIdentifier)),
		Opt43: hex.EncodeToString(m.Options.Get(dhcpv4.OptionVendorSpecificInformation)),
	}
	for c := range m.Options {
		f.Options = append(f.Options, int(c))
	}
	sort.Ints(f.Options)
	return f
}

func answerAll(ctx context.Context, req *proxydhcp.Request) proxydhcp.Decision {
	return proxydhcp.Answer()
}

func newServer(h proxydhcp.HandlerFunc) *proxydhcp.Server {
	return &proxydhcp.Server{Handler: h}
}

var ovmfOpt97 = "00" + strings.ReplaceAll(ovmfUUID, "-", "")

func TestGoldenReplies(t *testing.T) {
	bios, _ := capture(t)
	cases := []struct {
		name   string
		pkt    []byte
		port   proxydhcp.Port
		source string
		want   replyFields
	}{
		{
			name: "bios-pxe-asrock", pkt: bios, port: proxydhcp.PortDHCP, source: "0.0.0.0:68",
			want: replyFields{
				Type: "OFFER", XID: "0x9b4e0557", MAC: "d0:50:99:4e:05:57", Flags: "Broadcast",
				CIAddr: "0.0.0.0", YIAddr: "0.0.0.0", SIAddr: serverIP, GIAddr: "0.0.0.0", SName: serverIP,
				File: "undionly.kpxe", Dest: "255.255.255.255:68", Options: []int{43, 53, 54, 60, 97},
				Opt54: serverIP, Opt60: "PXEClient", Opt97: "0000020003000400050006000700080009", Opt43: "060108ff",
			},
		},
		{
			name: "seabios-ipxe", pkt: seabiosIPXE(t, "52:54:00:00:00:01"), port: proxydhcp.PortDHCP, source: "0.0.0.0:68",
			want: replyFields{
				Type: "OFFER", XID: "0x1a2b3c4d", MAC: "52:54:00:00:00:01", Flags: "Unicast",
				CIAddr: "0.0.0.0", YIAddr: "0.0.0.0", SIAddr: serverIP, GIAddr: "0.0.0.0",
				File: "http://192.0.2.2/boot/chain.ipxe", Dest: "255.255.255.255:68", Options: []int{53, 54, 60, 97},
				Opt54: serverIP, Opt60: "PXEClient", Opt97: "00" + strings.Repeat("00", 16),
			},
		},
		{
			name: "ovmf-pxe", pkt: ovmfPXE(t, "52:54:00:00:00:02"), port: proxydhcp.PortDHCP, source: "0.0.0.0:68",
			want: replyFields{
				Type: "OFFER", XID: "0x5e6f7081", MAC: "52:54:00:00:00:02", Flags: "Broadcast",
				CIAddr: "0.0.0.0", YIAddr: "0.0.0.0", SIAddr: serverIP, GIAddr: "0.0.0.0", SName: serverIP,
				File: "ipxe.efi", Dest: "255.255.255.255:68", Options: []int{53, 54, 60, 97},
				Opt54: serverIP, Opt60: "PXEClient", Opt97: ovmfOpt97,
			},
		},
		{
			name: "ovmf-pxe-4011", pkt: ovmfBootRequest(t, "52:54:00:00:00:02"), port: proxydhcp.PortBoot, source: "192.0.2.100:4011",
			want: replyFields{
				Type: "ACK", XID: "0x5e6f7082", MAC: "52:54:00:00:00:02", Flags: "Unicast",
				CIAddr: "192.0.2.100", YIAddr: "0.0.0.0", SIAddr: serverIP, GIAddr: "0.0.0.0", SName: serverIP,
				File: "ipxe.efi", Dest: "192.0.2.100:4011", Options: []int{53, 54, 60, 97},
				Opt54: serverIP, Opt60: "PXEClient", Opt97: ovmfOpt97,
			},
		},
		{
			name: "ipxe-efi", pkt: ipxeEFI(t, "52:54:00:00:00:03"), port: proxydhcp.PortDHCP, source: "0.0.0.0:68",
			want: replyFields{
				Type: "OFFER", XID: "0x0badcafe", MAC: "52:54:00:00:00:03", Flags: "Unicast",
				CIAddr: "0.0.0.0", YIAddr: "0.0.0.0", SIAddr: serverIP, GIAddr: "0.0.0.0",
				File: "http://192.0.2.2/boot/chain.ipxe", Dest: "255.255.255.255:68", Options: []int{53, 54, 60},
				Opt54: serverIP, Opt60: "PXEClient",
			},
		},
		{
			name: "ipxe-rom-4011", pkt: build(t, dhcpv4.MessageTypeRequest, "52:54:00:00:00:01", 0x1a2b3c4e,
				arch(iana.INTEL_X86PC), vendorClass("PXEClient:Arch:00000:UNDI:002001"),
				dhcpv4.WithGeneric(dhcpv4.OptionUserClassInformation, []byte("iPXE")),
				dhcpv4.WithClientIP(net.IPv4(192, 0, 2, 101))),
			port: proxydhcp.PortBoot, source: "192.0.2.101:68",
			want: replyFields{
				Type: "ACK", XID: "0x1a2b3c4e", MAC: "52:54:00:00:00:01", Flags: "Unicast",
				CIAddr: "192.0.2.101", YIAddr: "0.0.0.0", SIAddr: serverIP, GIAddr: "0.0.0.0",
				File: "http://192.0.2.2/boot/chain.ipxe", Dest: "192.0.2.101:68", Options: []int{53, 54, 60},
				Opt54: serverIP, Opt60: "PXEClient",
			},
		},
		{
			name: "pxe-request-67-to-us", pkt: pxeRequest67(t, serverIP), port: proxydhcp.PortDHCP, source: "0.0.0.0:68",
			want: replyFields{
				Type: "ACK", XID: "0x5e6f7081", MAC: "52:54:00:00:00:02", Flags: "Broadcast",
				CIAddr: "0.0.0.0", YIAddr: "0.0.0.0", SIAddr: serverIP, GIAddr: "0.0.0.0", SName: serverIP,
				File: "ipxe.efi", Dest: "255.255.255.255:68", Options: []int{53, 54, 60, 97},
				Opt54: serverIP, Opt60: "PXEClient", Opt97: ovmfOpt97,
			},
		},
		{
			name: "ovmf-http", pkt: ovmfHTTP(t, "52:54:00:00:00:04"), port: proxydhcp.PortDHCP, source: "0.0.0.0:68",
			want: replyFields{
				Type: "OFFER", XID: "0x77665544", MAC: "52:54:00:00:00:04", Flags: "Broadcast",
				CIAddr: "0.0.0.0", YIAddr: "0.0.0.0", SIAddr: serverIP, GIAddr: "0.0.0.0",
				File: "http://192.0.2.2/boot/files/ipxe.efi", Dest: "255.255.255.255:68", Options: []int{53, 54, 60, 67, 97},
				Opt54: serverIP, Opt60: "HTTPClient", Opt67: "http://192.0.2.2/boot/files/ipxe.efi", Opt97: ovmfOpt97,
			},
		},
		{
			name: "arm64-pxe", pkt: arm64(t, "52:54:00:00:00:05", false), port: proxydhcp.PortDHCP, source: "0.0.0.0:68",
			want: replyFields{
				Type: "OFFER", XID: "0x00c0ffed", MAC: "52:54:00:00:00:05", Flags: "Unicast",
				CIAddr: "0.0.0.0", YIAddr: "0.0.0.0", SIAddr: serverIP, GIAddr: "0.0.0.0", SName: serverIP,
				File: "ipxe-arm64.efi", Dest: "255.255.255.255:68", Options: []int{53, 54, 60},
				Opt54: serverIP, Opt60: "PXEClient",
			},
		},
		{
			name: "arm64-http", pkt: arm64(t, "52:54:00:00:00:06", true), port: proxydhcp.PortDHCP, source: "0.0.0.0:68",
			want: replyFields{
				Type: "OFFER", XID: "0x00c0ffee", MAC: "52:54:00:00:00:06", Flags: "Unicast",
				CIAddr: "0.0.0.0", YIAddr: "0.0.0.0", SIAddr: serverIP, GIAddr: "0.0.0.0",
				File: "http://192.0.2.2/boot/files/ipxe-arm64.efi", Dest: "255.255.255.255:68", Options: []int{53, 54, 60, 67},
				Opt54: serverIP, Opt60: "HTTPClient", Opt67: "http://192.0.2.2/boot/files/ipxe-arm64.efi",
			},
		},
		{
			name: "ovmf-pxe-relayed", pkt: ovmfPXE(t, "52:54:00:00:00:07", dhcpv4.WithRelay(net.IPv4(198, 51, 100, 1))),
			port: proxydhcp.PortDHCP, source: "198.51.100.1:67",
			want: replyFields{
				Type: "OFFER", XID: "0x5e6f7081", MAC: "52:54:00:00:00:07", Flags: "Broadcast",
				CIAddr: "0.0.0.0", YIAddr: "0.0.0.0", SIAddr: serverIP, GIAddr: "198.51.100.1", SName: serverIP,
				File: "ipxe.efi", Dest: "198.51.100.1:67", Options: []int{53, 54, 60, 97},
				Opt54: serverIP, Opt60: "PXEClient", Opt97: ovmfOpt97,
			},
		},
		{
			// iPXE does not set the broadcast flag; a relay delivers a reply without yiaddr or
			// ciaddr only when the reply sets it.
			name: "ipxe-efi-relayed", pkt: build(t, dhcpv4.MessageTypeDiscover, "52:54:00:00:00:08", 0x0badcaff,
				arch(iana.EFI_X86_64), undi(3, 10), vendorClass("PXEClient:Arch:00007:UNDI:003010"),
				dhcpv4.WithGeneric(dhcpv4.OptionUserClassInformation, []byte("iPXE")),
				dhcpv4.WithRelay(net.IPv4(198, 51, 100, 1))),
			port: proxydhcp.PortDHCP, source: "198.51.100.1:67",
			want: replyFields{
				Type: "OFFER", XID: "0x0badcaff", MAC: "52:54:00:00:00:08", Flags: "Broadcast",
				CIAddr: "0.0.0.0", YIAddr: "0.0.0.0", SIAddr: serverIP, GIAddr: "198.51.100.1",
				File: "http://192.0.2.2/boot/chain.ipxe", Dest: "198.51.100.1:67", Options: []int{53, 54, 60},
				Opt54: serverIP, Opt60: "PXEClient",
			},
		},
	}
	srv := newServer(answerAll)
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			resp := srv.Respond(context.Background(), proxydhcp.Packet{Link: testLink,
				Data: tc.pkt, Port: tc.port, Source: netip.MustParseAddrPort(tc.source), Local: netip.MustParseAddr(serverIP),
			})
			if resp.Reply == nil {
				t.Fatalf("silent: %v (%v)", resp.Reason, resp.Err)
			}
			if diff := cmp.Diff(tc.want, fieldsOf(t, resp)); diff != "" {
				t.Errorf("reply fields (-want +got):\n%s", diff)
			}
			checkGolden(t, tc.name, resp.Reply)
			// The reply is what dhcpv4 itself writes for the message it decodes.
			m, _ := dhcpv4.FromBytes(resp.Reply)
			if diff := cmp.Diff(hexLines(m.ToBytes()), hexLines(resp.Reply)); diff != "" {
				t.Errorf("reply and dhcpv4's encoding of it (-dhcpv4 +reply):\n%s", diff)
			}
		})
	}
}

func checkGolden(t *testing.T, name string, got []byte) {
	t.Helper()
	path := filepath.Join("testdata", "golden", name+".hex")
	enc := hexLines(got)
	if *update {
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(enc), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run with -update to create it)", err)
	}
	if diff := cmp.Diff(string(want), enc); diff != "" {
		t.Errorf("%s (-want +got):\n%s", path, diff)
	}
}

func hexLines(b []byte) string {
	var sb strings.Builder
	for i := 0; i < len(b); i += 16 {
		j := min(i+16, len(b))
		fmt.Fprintf(&sb, "%04x  %s\n", i, hex.EncodeToString(b[i:j]))
	}
	return sb.String()
}

// TestSilence covers every way a request goes unanswered and what the host hears of it.
func TestSilence(t *testing.T) {
	bios, siteRequest := capture(t)
	plain := build(t, dhcpv4.MessageTypeDiscover, "52:54:00:00:00:10", 1) // an ordinary DHCP client
	ia32 := build(t, dhcpv4.MessageTypeDiscover, "52:54:00:00:00:11", 2,
		arch(iana.EFI_IA32), vendorClass("PXEClient:Arch:00006:UNDI:003000"))
	cases := []struct {
		name       string
		pkt        []byte
		port       proxydhcp.Port
		local      string
		decision   proxydhcp.Decision
		want       proxydhcp.Reason
		discovered bool
	}{
		{name: "unknown", pkt: ovmfPXE(t, "52:54:00:00:00:20"), decision: proxydhcp.Silence(proxydhcp.ReasonUnknown), want: proxydhcp.ReasonUnknown, discovered: true},
		{name: "fenced", pkt: ovmfPXE(t, "52:54:00:00:00:21"), decision: proxydhcp.Silence(proxydhcp.ReasonFenced), want: proxydhcp.ReasonFenced},
		{name: "zero-decision", pkt: ovmfPXE(t, "52:54:00:00:00:22"), want: proxydhcp.ReasonDeclined},
		{name: "server-reason-from-host", pkt: ovmfPXE(t, "52:54:00:00:00:23"), decision: proxydhcp.Silence(proxydhcp.ReasonOverload), want: proxydhcp.ReasonDeclined},
		{name: "not-pxe", pkt: plain, decision: proxydhcp.Answer(), want: proxydhcp.ReasonNotPXE},
		{name: "truncated", pkt: bios[:200], decision: proxydhcp.Answer(), want: proxydhcp.ReasonMalformed},
		{name: "no-end-option", pkt: bios[:strings.Index(string(bios), "UNDI:002001")+11], decision: proxydhcp.Answer(), want: proxydhcp.ReasonMalformed},
		{name: "relayed-plain-request", pkt: siteRequest, decision: proxydhcp.Answer(), want: proxydhcp.ReasonNotPXE},
		{name: "request-to-site-dhcp", pkt: pxeRequest67(t, "192.0.2.1"), decision: proxydhcp.Answer(), want: proxydhcp.ReasonIgnored},
		{name: "request-without-server-id", pkt: pxeRequest67(t, ""), decision: proxydhcp.Answer(), want: proxydhcp.ReasonIgnored},
		{name: "discover-on-4011", pkt: bios, port: proxydhcp.PortBoot, decision: proxydhcp.Answer(), want: proxydhcp.ReasonIgnored},
		{name: "no-file-for-ia32", pkt: ia32, decision: proxydhcp.Answer(), want: proxydhcp.ReasonNoBootFile},
		{name: "no-server-address", pkt: bios, local: "0.0.0.0", decision: proxydhcp.Answer(), want: proxydhcp.ReasonNoServerAddress},
		{name: "bad-override", pkt: bios, decision: proxydhcp.AnswerFile("a b"), want: proxydhcp.ReasonError},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var heard []string
			srv := &proxydhcp.Server{
				Handler: proxydhcp.HandlerFunc(func(context.Context, *proxydhcp.Request) proxydhcp.Decision { return tc.decision }),
				Discoverer: proxydhcp.DiscovererFunc(func(_ context.Context, r *proxydhcp.Request) {
					heard = append(heard, r.MAC.String())
				}),
			}
			local := serverIP
			if tc.local != "" {
				local = tc.local
			}
			resp := srv.Respond(context.Background(), proxydhcp.Packet{Link: testLink,
				Data: tc.pkt, Port: tc.port, Source: netip.MustParseAddrPort("0.0.0.0:68"), Local: netip.MustParseAddr(local),
			})
			if resp.Reply != nil || resp.Reason != tc.want {
				t.Fatalf("got reply=%v reason %v (%v), want silence for %v", resp.Reply != nil, resp.Reason, resp.Err, tc.want)
			}
			if got := len(heard) > 0; got != tc.discovered {
				t.Errorf("discovered = %v (%v), want %v", got, heard, tc.discovered)
			}
			st := srv.Stats().Port(tc.port)
			if st.Silent.Of(tc.want) != 1 || st.Answered != 0 {
				t.Errorf("stats %+v: want one silent for %v", st, tc.want)
			}
		})
	}
}

func TestRespondOverridesAndTable(t *testing.T) {
	bios, _ := capture(t)
	srv := &proxydhcp.Server{
		HTTPPort: 8080,
		Handler: proxydhcp.HandlerFunc(func(_ context.Context, r *proxydhcp.Request) proxydhcp.Decision {
			if r.MAC.String() == "52:54:00:00:00:02" {
				return proxydhcp.AnswerFile("shimx64.efi")
			}
			return proxydhcp.Answer()
		}),
	}
	files := srv.CurrentBootFiles()
	files.ByArch[hwid.ArchBIOS] = "ipxe-legacy.kpxe"
	files.ByArch[hwid.ArchIA32EFI] = "ipxe-ia32.efi"
	files.ChainPath = "/custom/chain.ipxe"
	if err := srv.SetBootFiles(files); err != nil {
		t.Fatal(err)
	}
	files.ByArch[hwid.ArchBIOS] = "changed-after-set" // the server keeps its own copy
	if err := srv.SetBootFiles(proxydhcp.BootFiles{ByArch: map[hwid.Arch]string{0: "bad\x00name"}}); err == nil {
		t.Error("SetBootFiles accepted a NUL byte")
	}
	ia32 := build(t, dhcpv4.MessageTypeDiscover, "52:54:00:00:00:11", 2,
		arch(iana.EFI_IA32), vendorClass("PXEClient:Arch:00006:UNDI:003000"))
	long := strings.Repeat("x", 150) + ".efi"
	srvLong := &proxydhcp.Server{Handler: proxydhcp.HandlerFunc(func(context.Context, *proxydhcp.Request) proxydhcp.Decision {
		return proxydhcp.AnswerFile("http://192.0.2.2/" + long)
	})}
	srvTLS := &proxydhcp.Server{HTTPPort: 8080, HTTPSPort: 8443, Handler: proxydhcp.HandlerFunc(answerAll)}
	srvTLS443 := &proxydhcp.Server{HTTPSPort: 443, Handler: proxydhcp.HandlerFunc(answerAll)}
	srvUpgrade := &proxydhcp.Server{HTTPPort: 8080, HTTPSPort: 8443, UpgradeIPXE: true, Handler: proxydhcp.HandlerFunc(answerAll)}
	srvUpgrade443 := &proxydhcp.Server{HTTPSPort: 443, UpgradeIPXE: true, Handler: proxydhcp.HandlerFunc(answerAll)}
	srvUpgradePlain := &proxydhcp.Server{HTTPPort: 8080, UpgradeIPXE: true, Handler: proxydhcp.HandlerFunc(answerAll)}
	srvBootTLS := &proxydhcp.Server{HTTPPort: 8080, HTTPSPort: 8443, HTTPBootTLS: true, Handler: proxydhcp.HandlerFunc(answerAll)}
	for _, tc := range []struct {
		name             string
		srv              *proxydhcp.Server
		pkt              []byte
		wantFile, want67 string
	}{
		{"table-bios", srv, bios, "ipxe-legacy.kpxe", ""},
		{"table-ia32", srv, ia32, "ipxe-ia32.efi", ""},
		{"override", srv, ovmfPXE(t, "52:54:00:00:00:02"), "shimx64.efi", ""},
		{"chain-port", srv, ipxeEFI(t, "52:54:00:00:00:03"), "http://192.0.2.2:8080/custom/chain.ipxe", ""},
		{"http-port", srv, ovmfHTTP(t, "52:54:00:00:00:04"), "http://192.0.2.2:8080/boot/files/ipxe.efi", "http://192.0.2.2:8080/boot/files/ipxe.efi"},
		{"https-chain", srvTLS, ipxeEFIHTTPS(t, "52:54:00:00:00:05"), "https://192.0.2.2:8443/boot/chain.ipxe", ""},
		{"https-chain-443", srvTLS443, ipxeEFIHTTPS(t, "52:54:00:00:00:05"), "https://192.0.2.2/boot/chain.ipxe", ""},
		// With UpgradeIPXE, an iPXE without HTTPS gets, while the chain is https, its arch's
		// build over TFTP (one that speaks https), and the plain chain while it is not;
		// without UpgradeIPXE the https chain (the table's builds may lack https too).
		{"upgrade-ipxe-without-https", srvUpgrade, ipxeEFI(t, "52:54:00:00:00:05"), "ipxe.efi", ""},
		{"upgrade-bios-rom-without-https", srvUpgrade443, seabiosIPXE(t, "52:54:00:00:00:05"), "undionly.kpxe", ""},
		{"upgrade-ipxe-with-https", srvUpgrade443, ipxeEFIHTTPS(t, "52:54:00:00:00:05"), "https://192.0.2.2/boot/chain.ipxe", ""},
		{"upgrade-plain-chain", srvUpgradePlain, ipxeEFI(t, "52:54:00:00:00:05"), "http://192.0.2.2:8080/boot/chain.ipxe", ""},
		{"no-upgrade-ipxe-without-https", srvTLS443, seabiosIPXE(t, "52:54:00:00:00:05"), "https://192.0.2.2/boot/chain.ipxe", ""},
		{"https-leaves-http-boot-on-http", srvTLS, ovmfHTTP(t, "52:54:00:00:00:06"), "http://192.0.2.2:8080/boot/files/ipxe.efi", "http://192.0.2.2:8080/boot/files/ipxe.efi"},
		{"https-http-boot", srvBootTLS, ovmfHTTP(t, "52:54:00:00:00:07"), "https://192.0.2.2:8443/boot/files/ipxe.efi", "https://192.0.2.2:8443/boot/files/ipxe.efi"},
		{"long-url-in-67", srvLong, ovmfHTTP(t, "52:54:00:00:00:04"), "", "http://192.0.2.2/" + long},
	} {
		t.Run(tc.name, func(t *testing.T) {
			resp := tc.srv.Respond(context.Background(), proxydhcp.Packet{Link: testLink, Data: tc.pkt, Local: netip.MustParseAddr(serverIP)})
			if resp.Reply == nil {
				t.Fatalf("silent: %v %v", resp.Reason, resp.Err)
			}
			f := fieldsOf(t, resp)
			if diff := cmp.Diff([2]string{tc.wantFile, tc.want67}, [2]string{f.File, f.Opt67}); diff != "" {
				t.Errorf("file, option 67 (-want +got):\n%s", diff)
			}
		})
	}
}

func TestServerIPFixed(t *testing.T) {
	srv := &proxydhcp.Server{Handler: proxydhcp.HandlerFunc(answerAll), ServerIP: netip.MustParseAddr("203.0.113.7")}
	resp := srv.Respond(context.Background(), proxydhcp.Packet{Link: testLink, Data: ovmfHTTP(t, "52:54:00:00:00:04"), Local: netip.MustParseAddr(serverIP)})
	f := fieldsOf(t, resp)
	got := []string{f.Opt54, f.SIAddr, f.File}
	want := []string{"203.0.113.7", "203.0.113.7", "http://203.0.113.7/boot/files/ipxe.efi"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
	if err := (&proxydhcp.Server{Handler: proxydhcp.HandlerFunc(answerAll), ServerIP: netip.MustParseAddr("255.255.255.255")}).Validate(); err == nil {
		t.Error("Validate accepted a broadcast ServerIP")
	}
	if err := (&proxydhcp.Server{}).Validate(); !errors.Is(err, proxydhcp.ErrNoHandler) {
		t.Errorf("Validate without Handler = %v, want ErrNoHandler", err)
	}
}

func TestHandlerPanicRecovered(t *testing.T) {
	srv := &proxydhcp.Server{Handler: proxydhcp.HandlerFunc(func(context.Context, *proxydhcp.Request) proxydhcp.Decision {
		panic("host bug")
	})}
	resp := srv.Respond(context.Background(), proxydhcp.Packet{Link: testLink, Data: ovmfPXE(t, "52:54:00:00:00:02"), Local: netip.MustParseAddr(serverIP)})
	if resp.Reply != nil || resp.Reason != proxydhcp.ReasonError || resp.Err == nil {
		t.Fatalf("got %+v, want silence for error", resp)
	}
	if got := srv.Stats().DHCP.Silent.Of(proxydhcp.ReasonError); got != 1 {
		t.Errorf("error counter = %d, want 1", got)
	}
}

// The handler sees what the packet said; concurrent use is safe.
func TestRequestSeenByHandler(t *testing.T) {
	bios, _ := capture(t)
	var mu sync.Mutex
	var got []proxydhcp.Request
	srv := &proxydhcp.Server{Handler: proxydhcp.HandlerFunc(func(_ context.Context, r *proxydhcp.Request) proxydhcp.Decision {
		mu.Lock()
		got = append(got, *r)
		mu.Unlock()
		return proxydhcp.Silence(proxydhcp.ReasonFenced)
	})}
	relayed := ovmfPXE(t, "52:54:00:00:00:07", dhcpv4.WithRelay(net.IPv4(198, 51, 100, 1)))
	for _, p := range [][]byte{bios, relayed, ovmfHTTP(t, "52:54:00:00:00:04"), seabiosIPXE(t, "52:54:00:00:00:01")} {
		srv.Respond(context.Background(), proxydhcp.Packet{Link: testLink, Data: p, Source: netip.MustParseAddrPort("198.51.100.1:67"), Local: netip.MustParseAddr(serverIP)})
	}
	u := func(s string) hwid.UUID { x, _ := hwid.ParseUUID(s); return x }
	m := func(s string) hwid.MAC { x, _ := hwid.ParseMAC(s); return x }
	src := netip.MustParseAddrPort("198.51.100.1:67")
	sv := netip.MustParseAddr(serverIP)
	want := []proxydhcp.Request{
		{Type: proxydhcp.MessageDiscover, XID: 0x9b4e0557, MAC: m("d0:50:99:4e:05:57"), Kind: proxydhcp.KindPXE, Arch: hwid.ArchBIOS, HasArch: true,
			UUID: u("00020003-0004-0005-0006-000700080009"), HasUUID: true, UNDI: [2]uint8{2, 1}, Broadcast: true, Source: src, Server: sv},
		{Type: proxydhcp.MessageDiscover, XID: 0x5e6f7081, MAC: m("52:54:00:00:00:07"), Kind: proxydhcp.KindPXE, Arch: hwid.ArchX86_64EFI, HasArch: true,
			UUID: u(ovmfUUID), HasUUID: true, UNDI: [2]uint8{3, 0}, Relay: netip.MustParseAddr("198.51.100.1"), Source: src, Server: sv},
		{Type: proxydhcp.MessageDiscover, XID: 0x77665544, MAC: m("52:54:00:00:00:04"), Kind: proxydhcp.KindHTTP, Arch: hwid.ArchX86_64EFIHTTP, HasArch: true,
			UUID: u(ovmfUUID), HasUUID: true, UNDI: [2]uint8{3, 0}, Broadcast: true, Source: src, Server: sv},
		{Type: proxydhcp.MessageDiscover, XID: 0x1a2b3c4d, MAC: m("52:54:00:00:00:01"), Kind: proxydhcp.KindPXE, Arch: hwid.ArchBIOS, HasArch: true,
			IPXE: true, NoHTTPS: true, HasUUID: true, UNDI: [2]uint8{2, 1}, Source: src, Server: sv},
	}
	if diff := cmp.Diff(want, got, cmp.Comparer(func(a, b netip.Addr) bool { return a == b }), cmp.Comparer(func(a, b netip.AddrPort) bool { return a == b })); diff != "" {
		t.Errorf("requests (-want +got):\n%s", diff)
	}
}

func TestIPXEDetection(t *testing.T) {
	for _, tc := range []struct {
		name string
		mods []dhcpv4.Modifier
		want bool
	}{
		{"none", nil, false},
		{"user-class-bare", []dhcpv4.Modifier{dhcpv4.WithGeneric(dhcpv4.OptionUserClassInformation, []byte("iPXE"))}, true},
		{"user-class-rfc3004", []dhcpv4.Modifier{dhcpv4.WithUserClass("iPXE", true)}, true},
		{"user-class-rfc3004-second", []dhcpv4.Modifier{dhcpv4.WithOption(dhcpv4.OptRFC3004UserClass([]string{"foo", "iPXE"}))}, true},
		{"user-class-other", []dhcpv4.Modifier{dhcpv4.WithGeneric(dhcpv4.OptionUserClassInformation, []byte("gPXE"))}, false},
		{"option-175-only", []dhcpv4.Modifier{dhcpv4.WithGeneric(dhcpv4.GenericOptionCode(175), ipxeOpt175)}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := build(t, dhcpv4.MessageTypeDiscover, "52:54:00:00:00:30", 9, append([]dhcpv4.Modifier{
				arch(iana.EFI_X86_64), vendorClass("PXEClient:Arch:00007:UNDI:003000")}, tc.mods...)...)
			r, err := proxydhcp.Parse(p)
			if err != nil {
				t.Fatal(err)
			}
			if r.IPXE != tc.want {
				t.Errorf("IPXE = %v, want %v", r.IPXE, tc.want)
			}
		})
	}
}

func TestArchWithoutOption93(t *testing.T) {
	p := build(t, dhcpv4.MessageTypeDiscover, "52:54:00:00:00:31", 9, vendorClass("PXEClient:Arch:00011:UNDI:003000"))
	r, err := proxydhcp.Parse(p)
	if err != nil {
		t.Fatal(err)
	}
	if r.Arch != hwid.ArchARM64EFI || r.HasArch {
		t.Errorf("Arch %v HasArch %v, want arm64-efi from option 60", r.Arch, r.HasArch)
	}
	bad := build(t, dhcpv4.MessageTypeDiscover, "52:54:00:00:00:31", 9, vendorClass("PXEClient"),
		dhcpv4.WithGeneric(dhcpv4.OptionClientSystemArchitectureType, []byte{0, 7, 1}))
	if _, err := proxydhcp.Parse(bad); !errors.Is(err, proxydhcp.ErrMalformed) {
		t.Errorf("odd-length option 93: err %v, want ErrMalformed", err)
	}
	var pe *proxydhcp.ParseError
	if _, err := proxydhcp.Parse(bad); !errors.As(err, &pe) || pe.Field != "option 93" {
		t.Errorf("ParseError field = %+v, want option 93", pe)
	}
}

func TestArchNames(t *testing.T) {
	for a := 0; a <= 0xffff; a += 1 {
		n := hwid.Arch(a).String()
		if len(n) < 1 || len(n) > 32 || strings.Trim(n, "abcdefghijklmnopqrstuvwxyz0123456789_-") != "" {
			t.Fatalf("Arch(%d) = %q: not [a-z0-9_-]{1,32}", a, n)
		}
		back, ok := hwid.ParseArch(n)
		if !ok || back != hwid.Arch(a) {
			t.Fatalf("ParseArch(%q) = %v %v, want %d", n, back, ok, a)
		}
		if a > 64 {
			a += 997
		}
	}
	want := map[hwid.Arch]string{0: "bios", 7: "x86_64-efi", 11: "arm64-efi", 16: "x86_64-efi-http", 19: "arm64-efi-http", 25: "riscv32-efi", 27: "riscv64-efi", 6: "ia32-efi", 10: "arm32-efi", 200: "arch-200"}
	got := map[hwid.Arch]string{}
	for a := range want {
		got[a] = a.String()
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
}

func TestHandlerTimeout(t *testing.T) {
	for _, timeout := range []time.Duration{0, 250 * time.Millisecond} {
		var left time.Duration
		var has bool
		srv := &proxydhcp.Server{HandlerTimeout: timeout, Handler: proxydhcp.HandlerFunc(func(ctx context.Context, r *proxydhcp.Request) proxydhcp.Decision {
			var d time.Time
			d, has = ctx.Deadline()
			left = time.Until(d)
			return proxydhcp.Answer()
		})}
		srv.Respond(context.Background(), proxydhcp.Packet{Link: testLink, Data: ovmfPXE(t, "52:54:00:00:00:02"), Local: netip.MustParseAddr(serverIP)})
		if has != (timeout > 0) || (has && (left <= 0 || left > timeout)) {
			t.Errorf("HandlerTimeout %v: deadline %v, %v left", timeout, has, left)
		}
	}
}

// A reply through a relay to a client without an address sets the broadcast flag, so the relay
// broadcasts it on the client's segment; with a client address, or without a relay, the flag
// is the request's.
func TestRelayedBroadcastFlag(t *testing.T) {
	relay := dhcpv4.WithRelay(net.IPv4(198, 51, 100, 1))
	ipxe := func(mods ...dhcpv4.Modifier) []byte {
		return build(t, dhcpv4.MessageTypeDiscover, "52:54:00:00:00:09", 0x1234, append([]dhcpv4.Modifier{
			arch(iana.EFI_X86_64), vendorClass("PXEClient:Arch:00007:UNDI:003010"),
			dhcpv4.WithGeneric(dhcpv4.OptionUserClassInformation, []byte("iPXE"))}, mods...)...)
	}
	srv := newServer(answerAll)
	for _, tc := range []struct {
		name string
		pkt  []byte
		want string
	}{
		{"relayed-no-address", ipxe(relay), "Broadcast"},
		{"relayed-with-ciaddr", ipxe(relay, dhcpv4.WithClientIP(net.IPv4(198, 51, 100, 20))), "Unicast"},
		{"on-link-no-flag", ipxe(), "Unicast"},
		{"on-link-flag", ipxe(dhcpv4.WithBroadcast(true)), "Broadcast"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			resp := srv.Respond(context.Background(), proxydhcp.Packet{Link: testLink, Data: tc.pkt, Local: netip.MustParseAddr(serverIP)})
			if resp.Reply == nil {
				t.Fatalf("silent: %v", resp.Reason)
			}
			if got := fieldsOf(t, resp).Flags; got != tc.want {
				t.Errorf("flags %s, want %s", got, tc.want)
			}
		})
	}
}

// With Server.Relays set, a request relayed by any other giaddr is dropped and counted before
// the Handler or the Discoverer hear of it; requests from the segment itself are not affected.
func TestRelaysAllowed(t *testing.T) {
	var asked, heard int
	srv := &proxydhcp.Server{
		Relays: []netip.Addr{netip.MustParseAddr("198.51.100.1")},
		Handler: proxydhcp.HandlerFunc(func(_ context.Context, r *proxydhcp.Request) proxydhcp.Decision {
			asked++
			if r.MAC.String() == "52:54:00:00:00:99" {
				return proxydhcp.Silence(proxydhcp.ReasonUnknown)
			}
			return proxydhcp.Answer()
		}),
		Discoverer: proxydhcp.DiscovererFunc(func(context.Context, *proxydhcp.Request) { heard++ }),
	}
	if err := srv.Validate(); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name   string
		pkt    []byte
		answer bool
	}{
		{"listed-relay", ovmfPXE(t, "52:54:00:00:00:07", dhcpv4.WithRelay(net.IPv4(198, 51, 100, 1))), true},
		{"other-relay", ovmfPXE(t, "52:54:00:00:00:07", dhcpv4.WithRelay(net.IPv4(203, 0, 113, 9))), false},
		{"other-relay-unknown-mac", ovmfPXE(t, "52:54:00:00:00:99", dhcpv4.WithRelay(net.IPv4(203, 0, 113, 9))), false},
		{"not-relayed", ovmfPXE(t, "52:54:00:00:00:07"), true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			asked, heard = 0, 0
			resp := srv.Respond(context.Background(), proxydhcp.Packet{Link: testLink, Data: tc.pkt, Local: netip.MustParseAddr(serverIP)})
			if got := resp.Reply != nil; got != tc.answer {
				t.Fatalf("answered %v (reason %v), want %v", got, resp.Reason, tc.answer)
			}
			if !tc.answer && (resp.Reason != proxydhcp.ReasonRelayNotAllowed || asked != 0 || heard != 0) {
				t.Errorf("reason %v, handler asked %d, discoverer heard %d: want relay-not-allowed, 0, 0", resp.Reason, asked, heard)
			}
		})
	}
	if got := srv.Stats().DHCP.Silent.Of(proxydhcp.ReasonRelayNotAllowed); got != 2 {
		t.Errorf("relay-not-allowed counted %d, want 2", got)
	}
	if got := proxydhcp.ReasonRelayNotAllowed.String(); got != "relay-not-allowed" {
		t.Errorf("name %q", got)
	}
	bad := &proxydhcp.Server{Handler: proxydhcp.HandlerFunc(answerAll), Relays: []netip.Addr{{}}}
	if err := bad.Validate(); err == nil {
		t.Error("Validate accepted an invalid relay address")
	}
}

// TestIPXEWithoutHTTPS: Parse reads from option 175 whether iPXE can fetch https; with
// UpgradeIPXE while the chain is https, an iPXE that cannot (a NIC ROM's) gets its arch's
// build over TFTP and no Binder token (it would not fetch the chain), and one that can gets
// the bound chain URL.
func TestIPXEWithoutHTTPS(t *testing.T) {
	for _, tc := range []struct {
		name    string
		opt175  []byte
		noHTTPS bool
	}{
		{"rom", ipxeOpt175, true},
		{"https", ipxeOpt175HTTPS, false},
		{"https-version-0", append(bytes.Clone(ipxeOpt175), 0x14, 0x01, 0x00), true},
		{"pad-and-end", []byte{0, 0x14, 0x01, 0x01, 0xff}, false},
		{"after-end", []byte{0xff, 0x14, 0x01, 0x01}, true},
		{"truncated", []byte{0x13, 0x01, 0x01, 0x14, 0x05, 0x01}, true},
		{"empty", []byte{}, true},
	} {
		req, err := proxydhcp.Parse(build(t, dhcpv4.MessageTypeDiscover, "52:54:00:00:00:71", 9,
			arch(iana.INTEL_X86PC), vendorClass("PXEClient:Arch:00000:UNDI:002001"),
			dhcpv4.WithGeneric(dhcpv4.GenericOptionCode(175), tc.opt175)))
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		if !req.IPXE || req.NoHTTPS != tc.noHTTPS {
			t.Errorf("%s: IPXE %v NoHTTPS %v, want true %v", tc.name, req.IPXE, req.NoHTTPS, tc.noHTTPS)
		}
	}
	if req, err := proxydhcp.Parse(build(t, dhcpv4.MessageTypeDiscover, "52:54:00:00:00:71", 9, vendorClass("PXEClient"),
		dhcpv4.WithGeneric(dhcpv4.OptionUserClassInformation, []byte("iPXE")))); err != nil || !req.IPXE || req.NoHTTPS {
		t.Errorf("iPXE by user class alone: %+v, %v; want IPXE and no claim about HTTPS", req, err)
	}

	calls := 0
	srv := &proxydhcp.Server{HTTPSPort: 443, UpgradeIPXE: true, Handler: proxydhcp.HandlerFunc(answerAll),
		Binder: proxydhcp.BinderFunc(func(context.Context, hwid.MAC, netip.Addr) (string, error) {
			calls++
			return "0123456789abcdef0123456789abcdef", nil
		})}
	local := netip.MustParseAddr(serverIP)
	machine := netip.MustParseAddr("192.0.2.150")
	for _, tc := range []struct {
		name, mac string
		opt175    []byte
		want      string
		calls     int
	}{
		{"rom", "52:54:00:00:00:72", ipxeOpt175, "undionly.kpxe", 0},
		{"own build", "52:54:00:00:00:73", ipxeOpt175HTTPS, "https://" + serverIP + "/boot/chain.ipxe?n=0123456789abcdef0123456789abcdef", 1},
	} {
		calls = 0
		pkt := build(t, dhcpv4.MessageTypeRequest, tc.mac, 10, arch(iana.INTEL_X86PC), vendorClass("PXEClient:Arch:00000:UNDI:002001"),
			dhcpv4.WithGeneric(dhcpv4.OptionUserClassInformation, []byte("iPXE")),
			dhcpv4.WithGeneric(dhcpv4.GenericOptionCode(175), tc.opt175), dhcpv4.WithClientIP(net.IP(machine.AsSlice())))
		resp := srv.Respond(context.Background(), proxydhcp.Packet{Data: pkt, Port: proxydhcp.PortBoot,
			Source: netip.AddrPortFrom(machine, 68), Local: local, Link: testLink})
		if f := fieldsOf(t, resp); resp.Reply == nil || f.File != tc.want {
			t.Errorf("%s: file %q (%v), want %q", tc.name, f.File, resp.Reason, tc.want)
		}
		if calls != tc.calls {
			t.Errorf("%s: Binder called %d times, want %d", tc.name, calls, tc.calls)
		}
	}
}
