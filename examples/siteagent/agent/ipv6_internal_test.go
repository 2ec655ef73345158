package agent

import (
	"net/netip"
	"testing"
	"time"

	"github.com/bettercompute/siteboot/hwid"
)

// TestBootPassRules: an IPv6 boot pass is the MAC's for the window after its firmware's
// DHCPv6 answer; the first IPv6 address that uses it owns it, another address is refused,
// an IPv4 (or IPv4-mapped) address never holds one, and a new answer issues a fresh pass.
func TestBootPassRules(t *testing.T) {
	now := time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)
	p := newBootPasses(func() time.Time { return now }, time.Minute)
	mac, other := hwid.MAC{0x52, 0x54, 0, 0, 0, 1}, hwid.MAC{0x52, 0x54, 0, 0, 0, 2}
	a, b := netip.MustParseAddr("2001:db8::100"), netip.MustParseAddr("2001:db8::101")
	if p.claim(mac, a) {
		t.Fatal("a pass before any DHCPv6 answer")
	}
	p.issue(mac)
	for _, tc := range []struct {
		name string
		mac  hwid.MAC
		from netip.Addr
		want bool
	}{
		{"ipv4 never", mac, netip.MustParseAddr("192.0.2.100"), false},
		{"ipv4-mapped never", mac, netip.MustParseAddr("::ffff:192.0.2.100"), false},
		{"another MAC", other, a, false},
		{"first address owns it", mac, a, true},
		{"its retry", mac, a, true},
		{"another address", mac, b, false},
	} {
		if got := p.claim(tc.mac, tc.from); got != tc.want {
			t.Errorf("%s: claim %v, want %v", tc.name, got, tc.want)
		}
	}
	p.issue(mac) // the firmware answered again: a fresh pass, no owner yet
	if !p.claim(mac, b) || p.claim(mac, a) {
		t.Error("after a new answer the pass is the next first address's alone")
	}
	now = now.Add(time.Minute)
	if p.claim(mac, b) {
		t.Error("a pass used after its window")
	}
	if p.issued.Load() != 2 || p.used.Load() != 3 {
		t.Errorf("issued %d used %d, want 2 and 3", p.issued.Load(), p.used.Load())
	}
}

// TestBootPassesBounded: the passes held never exceed MaxNonces; the oldest gives way.
func TestBootPassesBounded(t *testing.T) {
	now := time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)
	p := newBootPasses(func() time.Time { return now }, time.Hour)
	for i := range MaxNonces + 10 {
		now = now.Add(time.Millisecond)
		p.issue(hwid.MAC{0x52, 0x54, 0, byte(i >> 16), byte(i >> 8), byte(i)})
	}
	if n := len(p.m); n != MaxNonces {
		t.Errorf("%d passes held, want %d", n, MaxNonces)
	}
	if p.claim(hwid.MAC{0x52, 0x54, 0, 0, 0, 0}, netip.MustParseAddr("2001:db8::1")) {
		t.Error("the oldest pass was not the one evicted")
	}
}
