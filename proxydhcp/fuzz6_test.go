package proxydhcp_test

import (
	"bytes"
	"context"
	"errors"
	"net/netip"
	"path/filepath"
	"testing"

	"github.com/bettercompute/siteboot/proxydhcp"
	"github.com/insomniacslk/dhcp/dhcpv6"
)

// seeds6 are the datagrams of the OVMF capture and DHCPv6 requests shaped like each client
// the package answers, bare and relayed.
func seeds6(t testing.TB) [][]byte {
	llt, uuid := duidLLT(t, edk2MAC), duidUUID(t, ovmfUUID)
	relayed := relayForw(t, 0, relayLink, edk2LL, "52:54:00:00:00:63", edk2PXESolicit(uuid))
	var captured [][]byte // real OVMF's, and the replies it got
	for _, p := range readPcap(t, filepath.Join("testdata", ovmf6Pcap)) {
		captured = append(captured, p.Data)
	}
	return append(captured,
		edk2PXESolicit(llt), edk2PXESolicit(uuid), edk2HTTPSolicit(llt), edk2BootRequest(llt, serverDUID),
		ipxeInfoRequest(t, edk2MAC), relayed, relayForw(t, 1, "::", "2001:db8:ffff::9", "", relayed),
	)
}

// FuzzParse6 feeds raw datagrams to Parse6 and to the whole DHCPv6 decision, on port 547 and
// on 4011. Nothing may panic; a parsed request must be typed and well-formed; a reply must
// parse, be an ADVERTISE or REPLY (inside RELAY-REPLs exactly when relayed) for the client
// that asked, and never carry an address, a prefix or a status code.
func FuzzParse6(f *testing.F) {
	for _, s := range seeds6(f) {
		f.Add(s)
	}
	srv := newServer6(answerAll)
	f.Fuzz(func(t *testing.T, b []byte) {
		r, err := proxydhcp.Parse6(b)
		if err != nil {
			var pe *proxydhcp.ParseError
			if !errors.As(err, &pe) {
				t.Fatalf("error %v is not a *ParseError", err)
			}
			if !errors.Is(err, proxydhcp.ErrMalformed) && !errors.Is(err, proxydhcp.ErrNotPXE) && !errors.Is(err, proxydhcp.ErrNoMAC) {
				t.Fatalf("error %v is none of ErrMalformed, ErrNotPXE, ErrNoMAC", err)
			}
		} else {
			checkRequest6(t, r)
		}
		for _, p := range []struct {
			port proxydhcp.Port
			src  string
		}{{proxydhcp.PortDHCPv6, "[" + edk2LL + "]:546"}, {proxydhcp.PortBoot, "[" + edk2Addr + "]:4011"}} {
			resp := srv.Respond(context.Background(), proxydhcp.Packet{Link: testLink, Data: b, Port: p.port, Source: netip.MustParseAddrPort(p.src), Local: netip.MustParseAddr(server6)})
			if resp.Request != nil {
				checkRequest6(t, resp.Request)
			}
			if resp.Reply != nil {
				checkReply6(t, b, resp.Reply)
			}
		}
	})
}

func checkRequest6(t *testing.T, r *proxydhcp.Request) {
	if !r.IPv6 || (r.Kind != proxydhcp.KindPXE && r.Kind != proxydhcp.KindHTTP) {
		t.Fatalf("IPv6 %v kind %v", r.IPv6, r.Kind)
	}
	switch r.Type &^ 0x80 { // the client's messages of RFC 8415 section 7.3
	case 1, 3, 4, 5, 6, 8, 9, 11:
	default:
		t.Fatalf("type %v", r.Type)
	}
	if r.Type&0x80 == 0 {
		t.Fatalf("type %v is not a DHCPv6 one", r.Type)
	}
	if r.MAC[0]&1 != 0 || r.MAC == ([6]byte{}) || r.MACSource > proxydhcp.MACFromLinkLocal {
		t.Fatalf("MAC %v from %v", r.MAC, r.MACSource)
	}
	for _, a := range []netip.Addr{r.Relay, r.ClientIP} {
		if a.IsValid() && (!a.Is6() || a.Is4In6() || a.IsUnspecified() || a.Zone() != "") {
			t.Fatalf("address %v", a)
		}
	}
}

func checkReply6(t *testing.T, req, reply []byte) {
	if len(reply) > len(req)+300 {
		t.Fatalf("reply of %d bytes to %d", len(reply), len(req))
	}
	in, err := dhcpv6.FromBytes(req)
	if err != nil {
		t.Fatalf("answered a request the library does not parse: %v", err)
	}
	out, err := dhcpv6.FromBytes(reply)
	if err != nil {
		t.Fatalf("reply does not parse: %v", err)
	}
	if in.IsRelay() != (out.Type() == dhcpv6.MessageTypeRelayReply) {
		t.Fatalf("request relayed %v, reply %v", in.IsRelay(), out.Type())
	}
	im, err := in.GetInnerMessage()
	if err != nil {
		t.Fatal(err)
	}
	om, err := out.GetInnerMessage()
	if err != nil {
		t.Fatalf("reply: %v", err)
	}
	if om.MessageType != dhcpv6.MessageTypeAdvertise && om.MessageType != dhcpv6.MessageTypeReply {
		t.Fatalf("reply type %v", om.MessageType)
	}
	if om.TransactionID != im.TransactionID {
		t.Fatalf("xid %v, asked %v", om.TransactionID, im.TransactionID)
	}
	for _, c := range []dhcpv6.OptionCode{dhcpv6.OptionIANA, dhcpv6.OptionIATA, dhcpv6.OptionIAPD, dhcpv6.OptionStatusCode, dhcpv6.OptionPreference} {
		if om.GetOneOption(c) != nil {
			t.Fatalf("reply carries %v", c)
		}
	}
	if !bytes.Equal(om.GetOneOption(dhcpv6.OptionClientID).ToBytes(), im.GetOneOption(dhcpv6.OptionClientID).ToBytes()) {
		t.Fatal("reply names another client")
	}
	if om.Options.BootFileURL() == "" {
		t.Fatal("reply without a boot file URL")
	}
}
