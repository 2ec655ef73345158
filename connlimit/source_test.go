package connlimit

import (
	"net"
	"net/netip"
	"testing"
)

func TestSource(t *testing.T) {
	tests := []struct {
		addr   net.Addr
		v6bits int
		want   string
	}{
		{&net.TCPAddr{IP: net.IPv4(192, 0, 2, 7), Port: 1}, 64, "192.0.2.7/32"},
		{&net.TCPAddr{IP: net.ParseIP("::ffff:192.0.2.7"), Port: 1}, 64, "192.0.2.7/32"},
		{&net.TCPAddr{IP: net.ParseIP("2001:db8:1:2:aaaa::1"), Port: 1}, 64, "2001:db8:1:2::/64"},
		{&net.TCPAddr{IP: net.ParseIP("2001:db8:1:2:bbbb::9"), Port: 1, Zone: "eth0"}, 64, "2001:db8:1:2::/64"},
		{&net.TCPAddr{IP: net.ParseIP("2001:db8:1:2:bbbb::9"), Port: 1}, 128, "2001:db8:1:2:bbbb::9/128"},
		{&net.UDPAddr{IP: net.IPv4(198, 51, 100, 1), Port: 1}, 64, "198.51.100.1/32"},
		{&net.UnixAddr{Name: "@x", Net: "unix"}, 64, "invalid Prefix"},
	}
	for _, tt := range tests {
		t.Run(tt.addr.String(), func(t *testing.T) {
			if got := source(tt.addr, tt.v6bits).String(); got != tt.want {
				t.Errorf("source(%v) = %s, want %s", tt.addr, got, tt.want)
			}
		})
	}
	if source(&net.UnixAddr{Name: "a"}, 64) != (netip.Prefix{}) {
		t.Error("a Unix address is not the zero bucket")
	}
}
