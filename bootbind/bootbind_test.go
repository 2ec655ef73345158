package bootbind_test

import (
	"bytes"
	"errors"
	"net"
	"net/netip"
	"testing"
	"time"

	"github.com/bettercompute/siteboot/bootbind"
	"github.com/bettercompute/siteboot/clock/clocktest"
	"github.com/bettercompute/siteboot/hwid"
)

// countingRand is a deterministic Rand: each read fills the buffer with the next counter byte.
type countingRand struct{ n byte }

func (r *countingRand) Read(b []byte) (int, error) {
	r.n++
	for i := range b {
		b[i] = r.n
	}
	return len(b), nil
}

var (
	t0      = time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)
	mac     = hwid.MAC{0x52, 0x54, 0, 0, 0, 1}
	other   = hwid.MAC{0x52, 0x54, 0, 0, 0, 2}
	machine = netip.MustParseAddr("192.0.2.10")
	thief   = netip.MustParseAddr("192.0.2.66")
)

// TestNonceRefusals: each refusal of a chain nonce, in turn, with its reason; its bytes come
// from the injected Rand and its window from the injected clock.
func TestNonceRefusals(t *testing.T) {
	clk := clocktest.New(t0)
	s := bootbind.NewNonces(bootbind.Config{Clock: clk, Rand: &countingRand{}, Window: time.Minute})
	unicast, err := s.Issue(mac, bootbind.KindChain, machine)
	if err != nil {
		t.Fatal(err)
	}
	if want := string(bytes.Repeat([]byte("01"), 16)); unicast != want {
		t.Errorf("nonce %q, want %q (from the injected Rand)", unicast, want)
	}
	broadcast, err := s.Issue(mac, bootbind.KindChain, netip.Addr{})
	if err != nil {
		t.Fatal(err)
	}
	shim, _ := s.Issue(mac, bootbind.KindShim, machine)
	for _, step := range []struct {
		name  string
		nonce string
		mac   hwid.MAC
		from  netip.Addr
		after time.Duration
		want  bootbind.Reason
	}{
		{"no nonce", "", mac, machine, 0, bootbind.NoNonce},
		{"guessed", "ffffffffffffffffffffffffffffffff", mac, machine, 0, bootbind.UnknownNonce},
		{"another kind", shim, mac, machine, 0, bootbind.UnknownNonce},
		{"another MAC", unicast, other, machine, 0, bootbind.OtherMAC},
		{"not the address the answer went to", unicast, mac, thief, 0, bootbind.OtherAddress},
		{"the address the answer went to", unicast, mac, machine, 0, bootbind.Bound},
		{"broadcast answer: the first presenter owns it", broadcast, mac, machine, 0, bootbind.Bound},
		{"broadcast answer: a second address", broadcast, mac, thief, 0, bootbind.OtherAddress},
		{"retry within the window", unicast, mac, machine, 59 * time.Second, bootbind.Bound},
		{"window over", unicast, mac, machine, time.Second, bootbind.Lapsed},
		{"forgotten", unicast, mac, machine, 0, bootbind.UnknownNonce},
	} {
		clk.Advance(step.after)
		if got := s.Claim(step.nonce, step.mac, step.from); got != step.want {
			t.Errorf("%s: Claim = %s, want %s", step.name, got, step.want)
		}
	}
	if s.Refused(bootbind.OtherAddress) != 2 || s.Refused(bootbind.Bound) != 3 || s.Issued() != 3 {
		t.Errorf("counters: other-address %d bound %d issued %d", s.Refused(bootbind.OtherAddress), s.Refused(bootbind.Bound), s.Issued())
	}
	if err := bootbind.OtherAddress.Err(); !errors.Is(err, bootbind.ErrUnbound) || bootbind.Bound.Err() != nil {
		t.Errorf("Err: %v", err)
	}
}

// TestNonceNotEvictedByOthersAnswers: a host that makes the agent answer for a MAC many
// times (four 4011 REQUESTs from its own address, say) pushes out only its own nonces,
// never the machine's nonce it has not presented yet.
func TestNonceNotEvictedByOthersAnswers(t *testing.T) {
	clk := clocktest.New(t0)
	s := bootbind.NewNonces(bootbind.Config{Clock: clk})
	n, err := s.Issue(mac, bootbind.KindChain, machine)
	if err != nil {
		t.Fatal(err)
	}
	for range 4 * bootbind.MaxNoncesPerMAC {
		if _, err := s.Issue(mac, bootbind.KindChain, thief); err != nil {
			t.Fatal(err)
		}
	}
	if got := s.Claim(n, mac, machine); got != bootbind.Bound {
		t.Errorf("the machine's nonce after a burst of answers to another address: %s, want bound", got)
	}
	if s.Len() > bootbind.MaxNoncesPerMAC {
		t.Errorf("%d nonces held for one MAC, bound %d", s.Len(), bootbind.MaxNoncesPerMAC)
	}
}

// TestNoncesBounded: the store holds at most Config.Max nonces; lapsed ones go first.
func TestNoncesBounded(t *testing.T) {
	clk := clocktest.New(t0)
	s := bootbind.NewNonces(bootbind.Config{Clock: clk, Max: 64, Window: time.Minute})
	first, _ := s.Issue(hwid.MAC{0x52, 0x55, 0, 0, 0, 0xff}, bootbind.KindChain, machine)
	for i := range 100 {
		if i == 32 {
			clk.Advance(30 * time.Second)
		}
		if _, err := s.Issue(hwid.MAC{0x52, 0x55, 0, 0, 0, byte(i)}, bootbind.KindChain, machine); err != nil {
			t.Fatal(err)
		}
	}
	if s.Len() > 64 {
		t.Errorf("%d nonces held, bound 64", s.Len())
	}
	if got := s.Claim(first, hwid.MAC{0x52, 0x55, 0, 0, 0, 0xff}, machine); got != bootbind.UnknownNonce {
		t.Errorf("the oldest nonce of a full store: %s, want unknown-nonce", got)
	}
}

// TestNoncesSurviveRestart: nonces saved and loaded into a new store keep their MAC,
// address and age (a restart within the window loses no boot); lapsed ones are not loaded.
func TestNoncesSurviveRestart(t *testing.T) {
	clk := clocktest.New(t0)
	s := bootbind.NewNonces(bootbind.Config{Clock: clk, Window: time.Minute})
	n, _ := s.Issue(mac, bootbind.KindChain, machine)
	clk.Advance(10 * time.Second)
	old, _ := s.Issue(other, bootbind.KindChain, machine)
	data, changed, err := s.Save()
	if err != nil || !changed {
		t.Fatalf("Save: changed %v, %v", changed, err)
	}
	if _, changed, _ := s.Save(); changed {
		t.Error("a second Save with nothing new says changed")
	}
	clk.Advance(55 * time.Second) // n has lapsed, old has 5 s left
	r := bootbind.NewNonces(bootbind.Config{Clock: clk, Window: time.Minute})
	kept, err := r.Load(data)
	if err != nil || kept != 1 {
		t.Fatalf("Load kept %d, %v; want 1", kept, err)
	}
	if got := r.Claim(n, mac, machine); got != bootbind.UnknownNonce {
		t.Errorf("a lapsed nonce after the restart: %s", got)
	}
	if got := r.Claim(old, other, thief); got != bootbind.OtherAddress {
		t.Errorf("a loaded nonce from another address: %s, want nonce-other-address", got)
	}
	if got := r.Claim(old, other, machine); got != bootbind.Bound {
		t.Errorf("a loaded nonce from its address: %s, want bound", got)
	}
	clk.Advance(5 * time.Second)
	if got := r.Claim(old, other, machine); got != bootbind.Lapsed {
		t.Errorf("a loaded nonce past its original window: %s, want nonce-lapsed", got)
	}
	for _, bad := range []string{"", "{", `{"version":2}`, `{"version":1,"nonces":[{"nonce":"../x","mac":"52:54:00:00:00:01"}]}`} {
		if k, err := r.Load([]byte(bad)); k != 0 || (err == nil && bad != `{"version":1,"nonces":[{"nonce":"../x","mac":"52:54:00:00:00:01"}]}`) {
			t.Errorf("Load(%q) = %d, %v", bad, k, err)
		}
	}
}

// TestKeyRefusals: a key works only for its MAC, from the address it was delivered to,
// within the window, and only while it is the MAC's newest active key.
func TestKeyRefusals(t *testing.T) {
	clk := clocktest.New(t0)
	s := bootbind.NewKeys(bootbind.Config{Clock: clk, Window: time.Minute})
	k1, err := s.Issue(mac, machine)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		key  string
		mac  hwid.MAC
		from netip.Addr
		want bootbind.Reason
	}{
		{"", mac, machine, bootbind.NoNonce},
		{k1, other, machine, bootbind.OtherMAC},
		{k1, mac, thief, bootbind.OtherAddress},
		{k1, mac, machine, bootbind.Bound},
	} {
		if got := s.Claim(tc.key, tc.mac, tc.from); got != tc.want {
			t.Errorf("Claim(%q, %s, %s) = %s, want %s", tc.key, tc.mac, tc.from, got, tc.want)
		}
	}
	// A pending key works only once its transfer is resolved to the machine.
	k2, err := s.Issue(mac, netip.Addr{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Issue(mac, netip.Addr{}); !errors.Is(err, bootbind.ErrKeyInFlight) {
		t.Errorf("a second pending key: %v, want ErrKeyInFlight", err)
	}
	if got := s.Claim(k2, mac, machine); got != bootbind.UnknownNonce {
		t.Errorf("a pending key: %s, want unknown-nonce", got)
	}
	if pending, active := s.Resolve(mac, machine, true); !pending || !active {
		t.Fatalf("Resolve: pending %v active %v", pending, active)
	}
	if got := s.Claim(k2, mac, machine); got != bootbind.Bound {
		t.Errorf("the newer key: %s, want bound", got)
	}
	if got := s.Claim(k1, mac, machine); got == bootbind.Bound {
		t.Error("the older key still works after a newer one was delivered")
	}
	clk.Advance(time.Minute)
	if got := s.Claim(k2, mac, machine); got != bootbind.Lapsed {
		t.Errorf("a key past its window: %s", got)
	}
}

// TestPassRefusals: an IPv6 pass holds for the address that got the DHCPv6 answer, the
// MAC's EUI-64 addresses and addresses the neighbour table resolves to the MAC, on the
// provisioning segment, within the window; never for another address of the segment that
// asks first, an address off the segment, or IPv4.
func TestPassRefusals(t *testing.T) {
	clk := clocktest.New(t0)
	p := bootbind.NewPasses(bootbind.Config{Clock: clk, Window: time.Minute})
	seg := netip.MustParsePrefix("2001:db8::/64")
	p.Segment = seg.Contains
	leased := netip.MustParseAddr("2001:db8::1a3")
	p.Neighbor = func(a netip.Addr) (hwid.MAC, bool) { return mac, a == leased }
	answered := netip.MustParseAddr("2001:db8::150")
	eui := netip.MustParseAddr("2001:db8::5054:ff:fe00:1")
	if got := p.Claim(mac, answered); got != bootbind.NoPass {
		t.Errorf("before any answer: %s", got)
	}
	p.Issue(mac, answered)
	for _, tc := range []struct {
		name string
		mac  hwid.MAC
		from netip.Addr
		want bootbind.Reason
	}{
		{"attacker on the segment, first", mac, netip.MustParseAddr("2001:db8::99"), bootbind.OtherAddress},
		{"off the segment", mac, netip.MustParseAddr("2001:db8:1::5054:ff:fe00:1"), bootbind.OffSegment},
		{"ipv4", mac, netip.MustParseAddr("203.0.113.50"), bootbind.NoPass},
		{"ipv4-mapped", mac, netip.MustParseAddr("::ffff:192.0.2.10"), bootbind.NoPass},
		{"another MAC", other, answered, bootbind.NoPass},
		{"the answered address", mac, answered, bootbind.Bound},
		{"the MAC's EUI-64", mac, eui, bootbind.Bound},
		{"a neighbour with the MAC", mac, leased, bootbind.Bound},
	} {
		if got := p.Claim(tc.mac, tc.from); got != tc.want {
			t.Errorf("%s: Claim(%s, %s) = %s, want %s", tc.name, tc.mac, tc.from, got, tc.want)
		}
	}
	clk.Advance(time.Minute)
	if got := p.Claim(mac, answered); got != bootbind.Lapsed {
		t.Errorf("after the window: %s", got)
	}
	if !bootbind.IsEUI64(netip.MustParseAddr("fe80::5054:ff:fe00:1"), mac) || bootbind.IsEUI64(netip.MustParseAddr("fe80::5054:ff:fe00:2"), mac) {
		t.Error("IsEUI64")
	}
}

// TestPassesBounded: the passes held never exceed Config.Max; the oldest gives way.
func TestPassesBounded(t *testing.T) {
	clk := clocktest.New(t0)
	p := bootbind.NewPasses(bootbind.Config{Clock: clk, Max: 16, Window: time.Hour})
	for i := range 20 {
		clk.Advance(time.Millisecond)
		p.Issue(hwid.MAC{0x52, 0x54, 0, 0, 0, byte(i)}, netip.MustParseAddr("2001:db8::1"))
	}
	if got := p.Claim(hwid.MAC{0x52, 0x54, 0, 0, 0, 0}, netip.MustParseAddr("2001:db8::1")); got != bootbind.NoPass {
		t.Errorf("the oldest pass: %s, want no-pass (evicted)", got)
	}
	if got := p.Claim(hwid.MAC{0x52, 0x54, 0, 0, 0, 19}, netip.MustParseAddr("2001:db8::1")); got != bootbind.Bound {
		t.Errorf("the newest pass: %s", got)
	}
}

// TestNeighborGuardsBroadcastNonce: a nonce of an answer no single address received (a
// broadcast offer to UEFI HTTP boot) is not taken by a first presenter on the link whose
// address resolves to another MAC (a bystander that read the broadcast); the machine's
// own address, and an address off the link (not in the table), may take it.
func TestNeighborGuardsBroadcastNonce(t *testing.T) {
	clk := clocktest.New(t0)
	s := bootbind.NewNonces(bootbind.Config{Clock: clk})
	s.Neighbor = func(a netip.Addr) (hwid.MAC, bool) {
		switch a {
		case thief:
			return other, true
		case machine:
			return mac, true
		}
		return hwid.MAC{}, false
	}
	n, _ := s.Issue(mac, bootbind.KindImage, netip.Addr{})
	if _, r := s.Fetched(n, bootbind.KindImage, thief); r != bootbind.OtherAddress {
		t.Errorf("a bystander with another MAC fetching first: %s, want nonce-other-address", r)
	}
	if _, r := s.Fetched(n, bootbind.KindImage, machine); r != bootbind.Bound {
		t.Errorf("the machine after the bystander: %s, want bound", r)
	}
	off, _ := s.Issue(mac, bootbind.KindImage, netip.Addr{})
	if _, r := s.Fetched(off, bootbind.KindImage, netip.MustParseAddr("198.51.100.150")); r != bootbind.Bound {
		t.Errorf("an address off the link: %s, want bound (first presenter)", r)
	}
}

// TestOnLink: link-local addresses, the configured segments and the interface's own IPv6
// prefixes are on a provisioning segment; other addresses, and every address of an
// interface that does not exist but those two, are not.
func TestOnLink(t *testing.T) {
	segments := []netip.Prefix{netip.MustParsePrefix("2001:db8:1::/64")}
	loopback := netip.IPv6Loopback()
	hasLoopback6 := false
	if addrs, err := net.InterfaceAddrs(); err == nil {
		for _, a := range addrs {
			if n, ok := a.(*net.IPNet); ok && n.IP.Equal(net.IPv6loopback) {
				hasLoopback6 = true
			}
		}
	}
	for _, tc := range []struct {
		iface string
		addr  netip.Addr
		want  bool
	}{
		{"", netip.MustParseAddr("fe80::5054:ff:fe00:1"), true},
		{"", netip.MustParseAddr("2001:db8:1::10"), true},
		{"", netip.MustParseAddr("2001:db8:2::10"), false},
		{"", loopback, hasLoopback6},
		{"no-such-interface", netip.MustParseAddr("fe80::1"), true},
		{"no-such-interface", netip.MustParseAddr("2001:db8:1::10"), true},
		{"no-such-interface", loopback, false},
	} {
		if got := bootbind.OnLink(tc.iface, segments)(tc.addr); got != tc.want {
			t.Errorf("OnLink(%q)(%v) = %v, want %v", tc.iface, tc.addr, got, tc.want)
		}
	}
}
