package bootbind_test

import (
	"net/netip"
	"testing"
	"time"

	"github.com/bettercompute/siteboot/bootbind"
	"github.com/bettercompute/siteboot/clock/clocktest"
	"github.com/bettercompute/siteboot/hwid"
)

// FuzzParseToken: a token that parses is exactly TokenLen lowercase hex digits and comes back
// unchanged.
func FuzzParseToken(f *testing.F) {
	for _, s := range []string{"", "0123456789abcdef0123456789abcdef", "0123456789ABCDEF0123456789abcdef", "../../etc/passwd", "ffffffffffffffffffffffffffffffff0"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		got, err := bootbind.ParseToken(s)
		if err != nil {
			return
		}
		if got != s || len(got) != bootbind.TokenLen {
			t.Fatalf("ParseToken(%q) = %q", s, got)
		}
		for _, c := range got {
			if (c < '0' || c > '9') && (c < 'a' || c > 'f') {
				t.Fatalf("ParseToken(%q) accepted %q", s, c)
			}
		}
	})
}

// FuzzLoad: whatever a saved file holds, Load keeps the store's bounds, and what it kept
// saves and loads again to the same nonces (a round trip).
func FuzzLoad(f *testing.F) {
	clk := clocktest.New(time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC))
	s := bootbind.NewNonces(bootbind.Config{Clock: clk})
	s.Issue(hwid.MAC{0x52, 0x54, 0, 0, 0, 1}, bootbind.KindChain, netip.MustParseAddr("192.0.2.10"))
	s.Issue(hwid.MAC{0x52, 0x54, 0, 0, 0, 1}, bootbind.KindShim, netip.Addr{})
	data, _, _ := s.Save()
	f.Add(data)
	f.Add([]byte(`{"version":1,"nonces":[{"nonce":"0123456789abcdef0123456789abcdef","kind":9,"mac":"52:54:00:00:00:01","issued":"2026-12-01T10:00:00Z"}]}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		cfg := bootbind.Config{Clock: clk, Max: 8}
		a := bootbind.NewNonces(cfg)
		kept, err := a.Load(data)
		if err != nil {
			return
		}
		if a.Len() > 8 || a.Len() > kept {
			t.Fatalf("Load kept %d, holds %d (bound 8)", kept, a.Len())
		}
		out, _, err := a.Save()
		if err != nil {
			t.Fatal(err)
		}
		b := bootbind.NewNonces(cfg)
		if k, err := b.Load(out); err != nil || k != a.Len() {
			t.Fatalf("round trip: kept %d of %d, %v", k, a.Len(), err)
		}
	})
}
