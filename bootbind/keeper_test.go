package bootbind_test

import (
	"context"
	"net/netip"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/bettercompute/siteboot/bootbind"
	"github.com/bettercompute/siteboot/clock/clocktest"
	"github.com/bettercompute/siteboot/hwid"
)

// TestKeeper: Run saves after a Wake and after Every passes (a nonce bound since), a new
// store's Keeper loads them, and a damaged file is set aside while the host starts.
func TestKeeper(t *testing.T) {
	clk := clocktest.New(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	path := filepath.Join(t.TempDir(), "boot-nonces.json")
	nonces := bootbind.NewNonces(bootbind.Config{Clock: clk})
	k := &bootbind.Keeper{Nonces: nonces, Path: path, Clock: clk}
	if n := k.Load(); n != 0 {
		t.Fatalf("Load of no file kept %d", n)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- k.Run(ctx) }()
	defer func() { cancel(); <-done }()

	saved := func() string {
		b, _ := os.ReadFile(path)
		return string(b)
	}
	wait := func(what string, cond func() bool) {
		t.Helper()
		for deadline := time.Now().Add(10 * time.Second); !cond(); time.Sleep(time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatal(what)
			}
		}
	}
	mac, ip := hwid.MAC{0x52, 0x54, 0, 0, 0, 1}, netip.MustParseAddr("192.0.2.150")
	nonce, err := nonces.Issue(mac, bootbind.KindChain, ip)
	if err != nil {
		t.Fatal(err)
	}
	k.Wake()
	wait("not saved after Wake", func() bool { return saved() != "" })
	before := saved()
	// The nonce changes (bound to its first presenter); Every later it is saved again.
	if r := nonces.Claim(nonce, mac, ip); r != bootbind.Bound {
		t.Fatalf("Claim = %v", r)
	}
	if err := clk.BlockUntilTimer(ctx, bootbind.DefaultSaveEvery); err != nil {
		t.Fatal(err)
	}
	clk.Advance(bootbind.DefaultSaveEvery)
	wait("the bound nonce not saved after Every", func() bool { return saved() != before })

	again := bootbind.NewNonces(bootbind.Config{Clock: clk})
	if n := (&bootbind.Keeper{Nonces: again, Path: path}).Load(); n != 1 {
		t.Fatalf("a new store's Load kept %d, want 1", n)
	}
	if err := os.WriteFile(path, []byte("{not json"), 0o600); err != nil {
		t.Fatal(err)
	}
	if n := (&bootbind.Keeper{Nonces: bootbind.NewNonces(bootbind.Config{Clock: clk}), Path: path}).Load(); n != 0 {
		t.Errorf("a damaged file kept %d", n)
	}
	if m, _ := filepath.Glob(path + bootbind.SetAsideInfix + "*"); len(m) != 1 {
		t.Errorf("damaged file not set aside: %v", m)
	}
}
