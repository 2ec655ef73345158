package bootserver_test

import (
	"context"
	"errors"
	"io/fs"
	"net/http"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"testing/fstest"

	"github.com/bettercompute/siteboot/bootbind"
	"github.com/bettercompute/siteboot/bootserver"
	"github.com/bettercompute/siteboot/ipxe"
	"github.com/bettercompute/siteboot/secureboot"
	"github.com/bettercompute/siteboot/tftpd"
	"github.com/bettercompute/siteboot/tftpd/tftpdtest"
)

// newChain is a Secure Boot chain over fake shim and GRUB files (not signed: nothing here
// runs them) on the Server's nonces, deciding through *srv's boot handler.
func newChain(t *testing.T, nonces *bootbind.Nonces, srv **bootserver.Server) *secureboot.Chain {
	t.Helper()
	dir := t.TempDir()
	shim, grub := filepath.Join(dir, "shimx64.efi.signed"), filepath.Join(dir, "grubnetx64.efi.signed")
	for p, b := range map[string]string{shim: "MZ fake shim", grub: "MZ fake grub"} {
		if err := os.WriteFile(p, []byte(b), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	ch, err := secureboot.New(secureboot.Config{
		Shim: shim, GRUB: grub, Server: netip.MustParseAddr("127.0.0.1"), Nonces: nonces,
		Decider: secureboot.DeciderFunc(func(ctx context.Context, q ipxe.Query) ipxe.Answer { return (*srv).Boot().Decide(ctx, q) }),
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ch.Close() })
	return ch
}

// TestServerSecureBoot: with Config.SecureBoot the chain's TFTP files are served beside the
// builds, the host's transfer hook still hears every transfer, and a host mount, handler
// or loader that takes one of the chain's names is refused, as is a chain without TFTP.
func TestServerSecureBoot(t *testing.T) {
	l := listen(t)
	cfg := config(t, l, nil)
	cfg.Nonces = bootbind.NewNonces(bootbind.Config{})
	var srv *bootserver.Server
	cfg.SecureBoot = newChain(t, cfg.Nonces, &srv)
	var heard atomic.Uint64
	cfg.TFTP.OnTransfer = func(tftpd.Transfer) { heard.Add(1) }

	for _, tc := range []struct {
		name  string
		tweak func(*bootserver.Config)
	}{
		{"mount", func(c *bootserver.Config) { c.Mounts = map[string]fs.FS{"sb": fstest.MapFS{}} }},
		{"handler", func(c *bootserver.Config) {
			c.Handlers = map[string]http.Handler{secureboot.PathSB: http.NotFoundHandler()}
		}},
		{"loader", func(c *bootserver.Config) {
			c.Loaders = map[string]bootserver.Claimer{secureboot.LoaderName: bootbind.NewKeys(bootbind.Config{})}
		}},
		{"no tftp", func(c *bootserver.Config) { c.TFTP = nil }},
	} {
		c := cfg
		tc.tweak(&c)
		if _, err := bootserver.New(c); !errors.Is(err, bootserver.ErrInvalid) {
			t.Errorf("%s: New = %v, want ErrInvalid", tc.name, err)
		}
	}

	var err error
	if srv, err = bootserver.New(cfg); err != nil {
		t.Fatal(err)
	}
	served := make(chan error, 1)
	go func() { served <- srv.Serve(l) }()
	addr := l.TFTP.LocalAddr().String()
	b, _, err := tftpdtest.Fetch(addr, "grub/grub.cfg", 512)
	if err != nil || !strings.Contains(string(b), "sb/key?mac=") {
		t.Errorf("grub/grub.cfg over TFTP: %v\n%s", err, b)
	}
	if b, _, err := tftpdtest.Fetch(addr, "ipxe.efi", 512); err != nil || string(b) != "the iPXE build" {
		t.Errorf("ipxe.efi beside the chain: %q, %v", b, err)
	}
	if err := srv.Shutdown(t.Context()); err != nil {
		t.Error(err)
	}
	<-served
	if n := heard.Load(); n != 2 {
		t.Errorf("the host's OnTransfer heard %d transfers, want 2", n)
	}
}
