package bootserver_test

import (
	"net/netip"
	"testing"

	"github.com/bettercompute/siteboot/bootserver"
)

func TestCheckURLs(t *testing.T) {
	for _, tc := range []struct {
		url         string
		base, cache bool // accepted as a base URL, as a cache URL
	}{
		{"http://192.0.2.2", true, true},
		{"https://boot.example.net:8443/", true, true},
		{"http://[2001:db8::2]:8080", true, true},
		{"http://192.0.2.2/cache", false, true},
		{"http://192.0.2.2/?x=1", false, true},
		{"tftp://192.0.2.2", false, false},
		{"http://0.0.0.0:80", false, false},
		{"http://255.255.255.255", false, false},
		{"http://[ff02::1]", false, false},
		{"http:///x", false, false},
	} {
		if got := bootserver.CheckBaseURL(tc.url) == nil; got != tc.base {
			t.Errorf("CheckBaseURL(%q) accepted %v, want %v", tc.url, got, tc.base)
		}
		if got := bootserver.CheckCacheURL(tc.url) == nil; got != tc.cache {
			t.Errorf("CheckCacheURL(%q) accepted %v, want %v", tc.url, got, tc.cache)
		}
	}
	if bootserver.Reachable(netip.MustParseAddr("fe80::1%eth0")) || !bootserver.Reachable(netip.MustParseAddr("198.51.100.7")) {
		t.Error("Reachable: a zoned address or a plain one misjudged")
	}
}

// TestBaseURL: the plain and HTTPS sides' base URLs, the scheme's own port left out, IPv6
// bracketed, a set URL kept with its port 0 replaced.
func TestBaseURL(t *testing.T) {
	for _, tc := range []struct {
		tls  bool
		set  string
		ip   string
		port uint16
		want string
	}{
		{false, "", "192.0.2.2", 80, "http://192.0.2.2"},
		{false, "", "192.0.2.2", 8080, "http://192.0.2.2:8080"},
		{false, "", "2001:db8::2", 8080, "http://[2001:db8::2]:8080"},
		{false, "http://boot.example.net:0", "192.0.2.2", 8081, "http://boot.example.net:8081"},
		{false, "https://boot.example.net", "192.0.2.2", 8081, "https://boot.example.net"},
		{false, "", "", 80, ""},
		{true, "", "192.0.2.2", 443, "https://192.0.2.2"},
		{true, "", "192.0.2.2", 8443, "https://192.0.2.2:8443"},
		{true, "", "2001:db8::2", 443, "https://[2001:db8::2]"},
		{true, "", "2001:db8::2", 8443, "https://[2001:db8::2]:8443"},
		{true, "https://boot.example.net:0", "192.0.2.2", 8443, "https://boot.example.net:8443"},
		{true, "", "", 443, ""},
	} {
		var ip netip.Addr
		if tc.ip != "" {
			ip = netip.MustParseAddr(tc.ip)
		}
		f, name := bootserver.BaseURL, "BaseURL"
		if tc.tls {
			f, name = bootserver.BaseURLTLS, "BaseURLTLS"
		}
		if got := f(tc.set, ip, tc.port); got != tc.want {
			t.Errorf("%s(%q, %v, %d) = %q, want %q", name, tc.set, ip, tc.port, got, tc.want)
		}
	}
}
