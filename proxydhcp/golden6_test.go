package proxydhcp_test

import (
	"bytes"
	"context"
	"net/netip"
	"path/filepath"
	"testing"

	"github.com/bettercompute/siteboot/proxydhcp"
)

const (
	agent6    = "2001:db8::10"
	ovmf6Pcap = "ovmf-ipv6-pxe.pcap" // made by TestQEMU_OVMFIPv6PXE -update
)

// TestGoldenOVMFIPv6Capture replays the DHCPv6 exchange TestQEMU_OVMFIPv6PXE captured from
// real OVMF: each request OVMF sent to this server (its SOLICIT to ff02::1:2 and its REQUEST
// to UDP 4011, from an address that does not carry its MAC) must get the same reply byte for
// byte as the server sent then, and the golden file's.
func TestGoldenOVMFIPv6Capture(t *testing.T) {
	path := filepath.Join("testdata", ovmf6Pcap)
	pkts := readPcap(t, path) // made by TestQEMU_OVMFIPv6PXE -update
	srv := &proxydhcp.Server{ServerDUID: serverDUID, ServerIP6: netip.MustParseAddr(agent6), Handler: proxydhcp.HandlerFunc(answerAll)}
	var cases int
	golden := map[string]bool{}
	for i, p := range pkts {
		if p.Dst.IsMulticast() && p.DstPort != 547 || !p.Dst.IsMulticast() && p.Dst.String() != agent6 {
			continue // the site's server's traffic, and replies
		}
		port, name := proxydhcp.PortDHCPv6, "v6-ovmf-solicit"
		if p.DstPort == 4011 {
			port, name = proxydhcp.PortBoot, "v6-ovmf-4011"
		}
		resp := srv.Respond(context.Background(), proxydhcp.Packet{Data: p.Data, Port: port,
			Source: netip.AddrPortFrom(p.Src, p.SrcPort), Local: p.Dst})
		if resp.Reply == nil {
			continue // a request for the site's server
		}
		var sent []byte // what the server sent back then: the next datagram from it to that client
		for _, q := range pkts[i+1:] {
			if q.Dst == p.Src && q.DstPort == p.SrcPort && q.SrcPort == p.DstPort && bytes.Contains(q.Data, serverDUID) {
				sent = q.Data
				break
			}
		}
		if !bytes.Equal(sent, resp.Reply) {
			t.Errorf("%s: reply differs from the one sent to OVMF:\n%s\nsent:\n%s", name, hexLines(resp.Reply), hexLines(sent))
		}
		if !golden[name] {
			golden[name] = true
			checkGolden(t, name, resp.Reply)
		}
		cases++
		if port == proxydhcp.PortBoot {
			break
		}
	}
	if cases < 2 {
		t.Errorf("the capture holds %d requests this server answered, want the SOLICIT and the 4011 REQUEST", cases)
	}
}
