package bootserver_test

import (
	"context"
	"errors"
	"net"
	"net/netip"
	"strings"
	"testing"

	"github.com/bettercompute/siteboot/bootserver"
)

// TestListen: Listen binds what Addrs names and the host did not hand in, keeps a socket
// handed in, and fails on a port in use naming the part.
func TestListen(t *testing.T) {
	lo := netip.MustParseAddrPort("127.0.0.1:0")
	mine, err := net.ListenPacket("udp4", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer mine.Close()
	l, err := bootserver.Listeners{TFTP: mine}.Listen(context.Background(), bootserver.Addrs{DHCP: lo, PXE: lo, TFTP: lo, HTTP: lo})
	if err != nil {
		t.Fatal(err)
	}
	if l.TFTP != mine || l.DHCP == nil || l.PXE == nil || l.HTTP == nil || l.DHCPv6 != nil {
		t.Fatalf("Listeners %+v: want TFTP handed in, DHCP, PXE and HTTP bound, no DHCPv6", l)
	}
	addrs := l.Addrs()
	if addrs["tftp"] != mine.LocalAddr().String() || !strings.HasPrefix(addrs["http"], "127.0.0.1:") || len(addrs) != 4 {
		t.Errorf("Addrs %v", addrs)
	}
	// The HTTP port is taken now: a second Listen fails.
	taken := netip.MustParseAddrPort(addrs["http"])
	var bound bootserver.Listeners
	_, err = bound.Listen(context.Background(), bootserver.Addrs{DHCP: lo, HTTP: taken})
	if err == nil || !strings.Contains(err.Error(), "http") {
		t.Fatalf("Listen on a port in use: %v; want an error naming http", err)
	}
	l.Close()
	if _, err := mine.WriteTo([]byte("x"), mine.LocalAddr()); err == nil {
		t.Error("Close left the TFTP socket open")
	}
	// With DualStack a wildcard is bound on [::] for both families.
	if n, a := bootserver.ListenNetwork("udp", netip.MustParseAddrPort("0.0.0.0:69"), true); n != "udp" || a != "[::]:69" {
		t.Errorf("ListenNetwork dual-stack = %s %s", n, a)
	}
	if n, a := bootserver.ListenNetwork("udp", netip.MustParseAddrPort("192.0.2.2:69"), true); n != "udp4" || a != "192.0.2.2:69" {
		t.Errorf("ListenNetwork for one address = %s %s", n, a)
	}
}

// TestAddrsValidate: with DualStack, TFTP and HTTP must be wildcards; DHCPv6 and PXE6
// must be IPv6; Listen binds nothing for addresses Validate refuses.
func TestAddrsValidate(t *testing.T) {
	ap := netip.MustParseAddrPort
	for _, tc := range []struct {
		name string
		a    bootserver.Addrs
		part string
	}{
		{"dual-stack wildcards", bootserver.Addrs{TFTP: ap("0.0.0.0:69"), HTTP: ap("[::]:80"), DualStack: true}, ""},
		{"one family, any address", bootserver.Addrs{TFTP: ap("192.0.2.1:69"), HTTP: ap("192.0.2.1:80")}, ""},
		{"dual-stack TFTP on one address", bootserver.Addrs{TFTP: ap("192.0.2.1:69"), HTTP: ap("0.0.0.0:80"), DualStack: true}, "tftp"},
		{"dual-stack HTTP on one address", bootserver.Addrs{HTTP: ap("[2001:db8::1]:80"), DualStack: true}, "http"},
		{"DHCPv6 on IPv4", bootserver.Addrs{DHCPv6: ap("0.0.0.0:547")}, "dhcpv6"},
		{"PXE6 on IPv4", bootserver.Addrs{DHCPv6: ap("[::]:547"), PXE6: ap("0.0.0.0:4011")}, "pxe6"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.a.Validate()
			var ae *bootserver.AddrError
			if tc.part == "" {
				if err != nil {
					t.Fatalf("Validate: %v", err)
				}
				return
			}
			if !errors.As(err, &ae) || ae.Part != tc.part {
				t.Errorf("Validate: %v, want an AddrError for %s", err, tc.part)
			}
		})
	}
	l, err := bootserver.Listeners{}.Listen(context.Background(), bootserver.Addrs{TFTP: ap("127.0.0.1:0"), HTTP: ap("127.0.0.1:0"), DualStack: true})
	var ae *bootserver.AddrError
	if !errors.As(err, &ae) || l.TFTP != nil || l.HTTP != nil {
		t.Errorf("Listen with refused addresses: %v, %+v; want an AddrError and nothing bound", err, l)
	}
}
