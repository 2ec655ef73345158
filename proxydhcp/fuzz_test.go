package proxydhcp_test

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"net"
	"net/netip"
	"path/filepath"
	"testing"

	"github.com/bettercompute/siteboot/proxydhcp"
	"github.com/google/go-cmp/cmp"
	"github.com/insomniacslk/dhcp/dhcpv4"
	"github.com/insomniacslk/dhcp/iana"
)

// seeds are the capture's datagrams and a packet shaped like each firmware row.
func seeds(t testing.TB) [][]byte {
	var out [][]byte
	for _, p := range readPcap(t, filepath.Join("testdata", "bios-pxe-asrock.pcap")) {
		out = append(out, p.Data)
	}
	return append(out,
		seabiosIPXE(t, "52:54:00:00:00:01"), ovmfPXE(t, "52:54:00:00:00:02"), ovmfBootRequest(t, "52:54:00:00:00:02"),
		ipxeEFI(t, "52:54:00:00:00:03"), ovmfHTTP(t, "52:54:00:00:00:04"), arm64(t, "52:54:00:00:00:05", true),
		pxeRequest67(t, serverIP),
	)
}

// encode writes r back as a packet, from its fields only.
func encode(t testing.TB, r *proxydhcp.Request) []byte {
	var xid dhcpv4.TransactionID
	binary.BigEndian.PutUint32(xid[:], r.XID)
	mods := []dhcpv4.Modifier{
		dhcpv4.WithTransactionID(xid),
		dhcpv4.WithHwAddr(net.HardwareAddr(r.MAC[:])),
		dhcpv4.WithGeneric(dhcpv4.OptionDHCPMessageType, []byte{byte(r.Type)}),
		dhcpv4.WithOption(dhcpv4.OptClassIdentifier(r.Kind.String())),
		dhcpv4.WithBroadcast(r.Broadcast),
	}
	if r.HasArch {
		mods = append(mods, dhcpv4.WithOption(dhcpv4.OptClientArch(iana.Arch(r.Arch))))
	} else if r.Arch != 0 {
		t.Fatalf("Arch %d without option 93 from a vendor class this encoder does not write", r.Arch)
	}
	if r.HasUUID {
		mods = append(mods, dhcpv4.WithGeneric(dhcpv4.OptionClientMachineIdentifier, append([]byte{0}, r.UUID[:]...)))
	} else if r.UUID != ([16]byte{}) {
		t.Fatal("UUID without HasUUID")
	}
	if r.UNDI != [2]uint8{} {
		mods = append(mods, dhcpv4.WithGeneric(dhcpv4.OptionClientNetworkInterfaceIdentifier, []byte{1, r.UNDI[0], r.UNDI[1]}))
	}
	if r.IPXE {
		// Option 175 lists iPXE's features: HTTP (0x13) always, HTTPS (0x14) unless NoHTTPS.
		features := []byte{0x13, 1, 1}
		if !r.NoHTTPS {
			features = append(features, 0x14, 1, 1)
		}
		mods = append(mods, dhcpv4.WithGeneric(dhcpv4.GenericOptionCode(175), features))
	} else if r.NoHTTPS {
		t.Fatal("NoHTTPS without IPXE")
	}
	ip := func(a netip.Addr) net.IP { b := a.As4(); return net.IP(b[:]) }
	if r.Relay.IsValid() {
		mods = append(mods, dhcpv4.WithGatewayIP(ip(r.Relay)))
	}
	if r.ClientIP.IsValid() {
		mods = append(mods, dhcpv4.WithClientIP(ip(r.ClientIP)))
	}
	if r.ServerID.IsValid() {
		mods = append(mods, dhcpv4.WithOption(dhcpv4.OptServerIdentifier(ip(r.ServerID))))
	}
	m, err := dhcpv4.New(mods...)
	if err != nil {
		t.Fatal(err)
	}
	return m.ToBytes()
}

// FuzzParse feeds raw datagrams to Parse and to the whole decision. Nothing may panic; a
// parsed request must be typed and well-formed, must encode back into a packet that parses
// to the same request, and a reply must be a bounded, well-formed offer or ACK without an
// address.
func FuzzParse(f *testing.F) {
	for _, s := range seeds(f) {
		f.Add(s)
	}
	f.Fuzz(checkPacket)
}

// FuzzOptions fuzzes the options of an otherwise well-formed BOOTREQUEST, where most
// mutations of whole packets never reach: b is the options area (an End option is added).
func FuzzOptions(f *testing.F) {
	for _, s := range seeds(f) {
		if len(s) > 240 {
			opts := s[240:]
			if i := bytes.LastIndexByte(opts, 255); i >= 0 {
				opts = opts[:i]
			}
			f.Add(opts)
		}
	}
	header := seeds(f)[0][:240]
	f.Fuzz(func(t *testing.T, b []byte) {
		pkt := append(append(append([]byte{}, header...), b...), 255)
		checkPacket(t, pkt)
	})
}

var fuzzServer = &proxydhcp.Server{Handler: proxydhcp.HandlerFunc(answerAll)}

// checkPacket is the property both fuzz targets check for one datagram.
func checkPacket(t *testing.T, b []byte) {
	srv, local := fuzzServer, netip.MustParseAddr(serverIP)
	r, err := proxydhcp.Parse(b)
	if err != nil {
		if !errors.Is(err, proxydhcp.ErrMalformed) && !errors.Is(err, proxydhcp.ErrNotPXE) {
			t.Fatalf("error %v is neither ErrMalformed nor ErrNotPXE", err)
		}
		var pe *proxydhcp.ParseError
		if !errors.As(err, &pe) {
			t.Fatalf("error %v is not a *ParseError", err)
		}
	} else {
		if r.Kind != proxydhcp.KindPXE && r.Kind != proxydhcp.KindHTTP {
			t.Fatalf("kind %v", r.Kind)
		}
		if r.MAC[0]&1 != 0 || r.MAC == ([6]byte{}) {
			t.Fatalf("MAC %v is not unicast", r.MAC)
		}
		for _, a := range []netip.Addr{r.Relay, r.ClientIP, r.ServerID} {
			if a.IsValid() && (!a.Is4() || a.IsUnspecified()) {
				t.Fatalf("address %v", a)
			}
		}
		if !r.HasArch {
			// Arch read from option 60: encode cannot say it that way, so compare the rest.
			r.Arch = 0
		}
		again, err := proxydhcp.Parse(encode(t, r))
		if err != nil {
			t.Fatalf("re-encoded request does not parse: %v", err)
		}
		if diff := cmp.Diff(r, again, cmp.Comparer(func(a, b netip.Addr) bool { return a == b }),
			cmp.Comparer(func(a, b netip.AddrPort) bool { return a == b })); diff != "" {
			t.Fatalf("round trip (-parsed +reparsed):\n%s", diff)
		}
	}
	for _, port := range []proxydhcp.Port{proxydhcp.PortDHCP, proxydhcp.PortBoot} {
		resp := srv.Respond(context.Background(), proxydhcp.Packet{Link: testLink, Data: b, Port: port, Source: netip.MustParseAddrPort("192.0.2.50:68"), Local: local})
		if resp.Reply == nil {
			continue
		}
		if len(resp.Reply) > 600 {
			t.Fatalf("reply of %d bytes", len(resp.Reply))
		}
		m, err := dhcpv4.FromBytes(resp.Reply)
		if err != nil {
			t.Fatalf("reply does not parse: %v", err)
		}
		if !m.YourIPAddr.IsUnspecified() {
			t.Fatalf("reply hands out %v", m.YourIPAddr)
		}
		if mt := m.MessageType(); mt != dhcpv4.MessageTypeOffer && mt != dhcpv4.MessageTypeAck {
			t.Fatalf("reply type %v", mt)
		}
		if again := m.ToBytes(); !bytes.Equal(again, resp.Reply) {
			t.Fatalf("reply differs from dhcpv4's encoding of it:\n%x\n%x", resp.Reply, again)
		}
	}
}
