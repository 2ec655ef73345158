package agent

import (
	"net/netip"
	"testing"
)

// TestTLSBase: the https base URL of an address and port, 443 left out, IPv6 bracketed.
func TestTLSBase(t *testing.T) {
	for _, c := range []struct {
		ip   string
		port uint16
		want string
	}{
		{"192.0.2.2", 443, "https://192.0.2.2"},
		{"192.0.2.2", 8443, "https://192.0.2.2:8443"},
		{"2001:db8::2", 443, "https://[2001:db8::2]"},
		{"2001:db8::2", 8443, "https://[2001:db8::2]:8443"},
	} {
		if got := tlsBase(netip.MustParseAddr(c.ip), c.port); got != c.want {
			t.Errorf("tlsBase(%s, %d) = %q, want %q", c.ip, c.port, got, c.want)
		}
	}
	if got := tlsBase(netip.Addr{}, 443); got != "" {
		t.Errorf("tlsBase of no address = %q, want empty", got)
	}
}
