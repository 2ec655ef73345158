package agent

import (
	"bytes"
	"net/netip"
	"testing"
	"time"

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

// TestBootNonceRules: a nonce binds to the MAC it was handed to and to the first address
// that presents it, within the window after the DHCP answer, on the injected clock; its
// bytes come from the injected Rand.
func TestBootNonceRules(t *testing.T) {
	now := time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)
	s := newBootNonces(func() time.Time { return now }, &countingRand{}, time.Minute)
	mac := hwid.MAC{0x52, 0x54, 0, 0, 0, 1}
	other := hwid.MAC{0x52, 0x54, 0, 0, 0, 2}
	machine, attacker := netip.MustParseAddr("192.0.2.10"), netip.MustParseAddr("192.0.2.66")
	n, err := s.issue(mac, nonceIPXE)
	if err != nil {
		t.Fatal(err)
	}
	if want := string(bytes.Repeat([]byte("01"), 16)); n != want {
		t.Errorf("nonce %q, want %q (from the injected Rand)", n, want)
	}
	for _, step := range []struct {
		nonce string
		mac   hwid.MAC
		from  netip.Addr
		after time.Duration
		want  unbound
	}{
		{"", mac, machine, 0, unboundNoNonce},
		{"ffffffffffffffffffffffffffffffff", mac, machine, 0, unboundUnknown},
		{n, other, machine, 0, unboundOtherMAC},
		{n, mac, machine, 0, bound},                   // the first address owns it
		{n, mac, attacker, 0, unboundOtherOwner},      // anyone else is refused
		{n, mac, machine, 59 * time.Second, bound},    // the owner's retries, within the window
		{n, mac, machine, time.Second, unboundLapsed}, // the window is over
		{n, mac, machine, 0, unboundUnknown},          // and the nonce forgotten
	} {
		now = now.Add(step.after)
		if got := s.claim(step.nonce, step.mac, step.from); got != step.want {
			t.Errorf("claim(%q, %s, %s) at +%v: %s, want %s", step.nonce, step.mac, step.from, step.after, got, step.want)
		}
	}
}

// TestBootNoncesBounded: one MAC holds at most MaxNoncesPerMAC nonces (the oldest give way),
// and the store at most MaxNonces, lapsed ones dropped first.
func TestBootNoncesBounded(t *testing.T) {
	now := time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)
	s := newBootNonces(func() time.Time { return now }, nil, time.Minute)
	mac := hwid.MAC{0x52, 0x54, 0, 0, 0, 1}
	var first []string
	for range MaxNoncesPerMAC + 2 {
		n, err := s.issue(mac, nonceIPXE)
		if err != nil {
			t.Fatal(err)
		}
		first = append(first, n)
	}
	if len(s.t.m) != MaxNoncesPerMAC {
		t.Errorf("one MAC holds %d nonces, want %d", len(s.t.m), MaxNoncesPerMAC)
	}
	if got := s.claim(first[0], mac, netip.MustParseAddr("192.0.2.1")); got != unboundUnknown {
		t.Errorf("the oldest nonce of a MAC over its bound: %s, want unknown-nonce", got)
	}
	if got := s.claim(first[len(first)-1], mac, netip.MustParseAddr("192.0.2.1")); got != bound {
		t.Errorf("the newest nonce: %s, want bound", got)
	}
	// A nonce in use outlives a burst of answers for its MAC (spoofed DHCP requests, say).
	for range 2 * MaxNoncesPerMAC {
		if _, err := s.issue(mac, nonceIPXE); err != nil {
			t.Fatal(err)
		}
	}
	if got := s.claim(first[len(first)-1], mac, netip.MustParseAddr("192.0.2.1")); got != bound {
		t.Errorf("the nonce in use after a burst of answers: %s, want bound", got)
	}
	for i := range MaxNonces + 100 {
		if i == MaxNonces/2 {
			now = now.Add(time.Minute) // the first half lapse
		}
		if _, err := s.issue(hwid.MAC{0x52, 0x55, 0, 0, byte(i >> 8), byte(i)}, nonceIPXE); err != nil {
			t.Fatal(err)
		}
	}
	if len(s.t.m) > MaxNonces || len(s.t.byMAC) > MaxNonces {
		t.Errorf("store holds %d nonces for %d MACs, bound %d", len(s.t.m), len(s.t.byMAC), MaxNonces)
	}
	total := 0
	for _, l := range s.t.byMAC {
		total += len(l)
	}
	if total != len(s.t.m) {
		t.Errorf("the per-MAC lists hold %d nonces, the store %d", total, len(s.t.m))
	}
}
