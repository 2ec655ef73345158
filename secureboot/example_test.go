package secureboot_test

import (
	"context"
	"fmt"
	"net/http"
	"net/netip"
	"os"
	"path/filepath"

	"github.com/bettercompute/siteboot/bootbind"
	"github.com/bettercompute/siteboot/hwid"
	"github.com/bettercompute/siteboot/ipxe"
	"github.com/bettercompute/siteboot/proxydhcp"
	"github.com/bettercompute/siteboot/secureboot"
	"github.com/bettercompute/siteboot/tftpd"
)

// fixedRand is the randomness of the example's nonces, so that its output is fixed.
type fixedRand struct{}

func (fixedRand) Read(b []byte) (int, error) {
	for i := range b {
		b[i] = 0xa5
	}
	return len(b), nil
}

// The wiring of the chain beside proxy DHCP, TFTP and the boot handler. The shim and GRUB
// here are stand-ins for Debian's signed files (DefaultShim, DefaultGRUB).
func Example() {
	dir, _ := os.MkdirTemp("", "secureboot-example")
	defer os.RemoveAll(dir)
	shim, grub := filepath.Join(dir, "shimx64.efi.signed"), filepath.Join(dir, "grubnetx64.efi.signed")
	os.WriteFile(shim, []byte("MZ shim"), 0o644)
	os.WriteFile(grub, []byte("MZ grub"), 0o644)

	// The nonces proxy DHCP binds its answers with (proxydhcp.Server.Binder = nonces.Bind).
	nonces := bootbind.NewNonces(bootbind.Config{Rand: fixedRand{}})
	// The decision: in a host, the *ipxe.Handler that answers /boot/ipxe.
	var decider secureboot.Decider = secureboot.DeciderFunc(func(ctx context.Context, q ipxe.Query) ipxe.Answer {
		return ipxe.Answer{Kind: ipxe.AnswerFenced, Status: http.StatusServiceUnavailable, Query: q, Delay: ipxe.DefaultFencedDelay}
	})
	chain, err := secureboot.New(secureboot.Config{
		Shim: shim, GRUB: grub,
		Server: netip.MustParseAddr("192.0.2.1"), HTTPPort: 8080,
		Nonces: nonces, Decider: decider,
		CacheURLs: []string{"http://192.0.2.1:8080/cache"},
		// Cache: cache.GrantFS(), Root: root.FS(),
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer chain.Close()

	// TFTP serves the chain's file system and tells it what it delivered.
	_ = &tftpd.Server{FS: chain.FS(), OnTransfer: chain.OnTransfer}
	// HTTP serves the RAM disk of UEFI HTTP boot and the configurations.
	mux := http.NewServeMux()
	mux.Handle(secureboot.PathSB, chain)
	mux.Handle(secureboot.PathConfig, chain)

	// Proxy DHCP names shim to the firmware of a machine that boots with Secure Boot...
	mac := hwid.MAC{0x52, 0x54, 0x00, 0x12, 0x34, 0x56}
	req := &proxydhcp.Request{MAC: mac, Kind: proxydhcp.KindPXE, Arch: hwid.ArchX86_64EFI, Port: proxydhcp.PortDHCP,
		Source: netip.MustParseAddrPort("192.0.2.50:68"), Server: netip.MustParseAddr("192.0.2.1")}
	fmt.Println(chain.AnswerDHCP(req).BootFile)
	// ... and a RAM disk under a nonce to its UEFI HTTP boot.
	req.Kind = proxydhcp.KindHTTP
	fmt.Println(chain.AnswerDHCP(req).BootFile)

	// The boot handler's cache URLs become TFTP names, the one protocol the signed GRUB has.
	fmt.Println(secureboot.TFTPCacheURL("http://192.0.2.1:8080/cache/t/GRANT/SHA256", "tftp://192.0.2.1/cache",
		"http://192.0.2.1:8080/cache"))
	// Output:
	// sb/shimx64.efi
	// http://192.0.2.1:8080/sb/a5a5a5a5a5a5a5a5a5a5a5a5a5a5a5a5/boot.img
	// tftp://192.0.2.1/cache/t/GRANT/SHA256 <nil>
}
