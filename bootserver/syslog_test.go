package bootserver_test

import (
	"net/netip"
	"testing"

	"github.com/bettercompute/siteboot/bootserver"
)

// TestSyslogTarget: the chain script points iPXE's console at the host's syslog receiver
// only where iPXE can reach it (an IPv4 address, port 514); an unspecified listen address
// means the server's boot address.
func TestSyslogTarget(t *testing.T) {
	server := netip.MustParseAddr("192.0.2.1")
	for _, c := range []struct {
		listen string
		want   string
	}{
		{"", ""},
		{"192.0.2.5:514", "192.0.2.5"},
		{"0.0.0.0:514", "192.0.2.1"},
		{"[::]:514", "192.0.2.1"},
		{"192.0.2.5:5514", ""},    // iPXE sends only to 514
		{"[2001:db8::1]:514", ""}, // iPXE's syslog takes an IPv4 address
		{"[::ffff:192.0.2.7]:514", "192.0.2.7"},
	} {
		var listen netip.AddrPort
		if c.listen != "" {
			listen = netip.MustParseAddrPort(c.listen)
		}
		got := bootserver.SyslogTarget(listen, server)
		if (c.want == "" && got.IsValid()) || (c.want != "" && got != netip.MustParseAddr(c.want)) {
			t.Errorf("listen %q: %v, want %q", c.listen, got, c.want)
		}
	}
}
