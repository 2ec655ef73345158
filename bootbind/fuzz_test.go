package bootbind_test

import (
	"bytes"
	"errors"
	"net/netip"
	"os"
	"path/filepath"
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

// FuzzLoadFile: whatever the file holds, LoadFile keeps the store's bounds and its own
// nonces; a damaged file is a *DamagedError and is set aside byte for byte; what loads
// saves and loads again to the same nonces (a round trip). Seeded from testdata/nonces.
func FuzzLoadFile(f *testing.F) {
	seeds, _ := filepath.Glob(filepath.Join("testdata", "nonces", "*.json"))
	for _, p := range seeds {
		b, err := os.ReadFile(p)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	f.Add([]byte(`{"version":1,"nonces":[]}`))
	f.Add([]byte(`{"version":1,"nonces":null}`))
	clk := clocktest.New(time.Date(2026, 12, 1, 10, 1, 0, 0, time.UTC))
	// One directory for every input (each leaves it empty), to keep an input's cost to
	// the file operations LoadFile itself does.
	dir := f.TempDir()
	path := filepath.Join(dir, "boot-nonces.json")
	f.Fuzz(func(t *testing.T, data []byte) {
		if err := os.WriteFile(path, data, 0o600); err != nil {
			t.Fatal(err)
		}
		defer os.Remove(path)
		cfg := bootbind.Config{Clock: clk, Max: 8}
		a := bootbind.NewNonces(cfg)
		mine, err := a.Issue(hwid.MAC{0x52, 0x54, 0, 0, 0, 0x99}, bootbind.KindShim, netip.Addr{})
		if err != nil {
			t.Fatal(err)
		}
		kept, err := a.LoadFile(path)
		if a.Len() > 8 || a.Len() > kept+1 || !a.Live(mine, bootbind.KindShim) {
			t.Fatalf("LoadFile kept %d, holds %d (bound 8), own nonce live %v", kept, a.Len(), a.Live(mine, bootbind.KindShim))
		}
		if err != nil {
			d, ok := errors.AsType[*bootbind.DamagedError](err)
			if !ok || d.SetAside == "" || d.Kept != kept {
				t.Fatalf("LoadFile: %v, want a *DamagedError with the file set aside", err)
			}
			aside := filepath.Join(dir, d.SetAside)
			defer os.Remove(aside)
			if b, rerr := os.ReadFile(aside); rerr != nil || !bytes.Equal(b, data) {
				t.Fatalf("set-aside file: %v, bytes kept %v", rerr, bytes.Equal(b, data))
			}
			if _, serr := os.Stat(path); !errors.Is(serr, os.ErrNotExist) {
				t.Fatalf("damaged file still at its name: %v", serr)
			}
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
