package secureboot_test

import (
	"bytes"
	"errors"
	"strings"
	"testing"
	"testing/fstest"

	"github.com/bettercompute/siteboot/bootserver"
	"github.com/bettercompute/siteboot/proxydhcp"
	"github.com/bettercompute/siteboot/secureboot"
)

// TestBootserverMounts: the chain mounted in bootserver's TFTP file system (Mounts, with
// the cache's grants at bootserver's t/): the PXE chain runs as over the chain's own FS,
// and the machine's configuration names the kernel and initrd where bootserver serves them.
func TestBootserverMounts(t *testing.T) {
	h := newHarness(t, fakeSh, fakeGr, func(c *secureboot.Config) { c.TFTPCacheDir, c.Cache, c.Root = ".", nil, nil })
	h.serveFS(t, bootserver.FS{
		Builds: fstest.MapFS{"ipxe.efi": {Data: []byte("MZ ipxe")}},
		Grants: fstest.MapFS{"t/" + grant + "/" + kernel: {Data: []byte("the kernel")}},
		Mounts: h.chain.Mounts(),
	})
	m := mac.String()
	file := h.dhcp(t, proxydhcp.KindPXE, proxydhcp.PortBoot)
	if got, err := h.tftpGet(t, "127.0.0.1", file); err != nil || !bytes.Equal(got, fakeSh) {
		t.Fatalf("%s: %q, %v", file, got, err)
	}
	waitFor(t, "the nonce bound to its fetcher", func() bool { return h.chain.Stats().NonceFetches == 1 })
	for name, want := range map[string]string{"sb/grubx64.efi": string(fakeGr), "ipxe.efi": "MZ ipxe"} {
		if got, err := h.tftpGet(t, "127.0.0.1", name); err != nil || string(got) != want {
			t.Errorf("%s: %q, %v", name, got, err)
		}
	}
	if got, err := h.tftpGet(t, "127.0.0.1", "grub/grub.cfg"); err != nil || !strings.Contains(string(got), "source \"(tftp,127.0.0.1)/sb/key?mac=${net_default_mac}\"") {
		t.Errorf("grub/grub.cfg: %v\n%s", err, got)
	}
	b, err := h.tftpGet(t, "127.0.0.1", "sb/key?mac="+m)
	if err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the machine's key activated", func() bool { return h.chain.Stats().Keys.Activated == 1 })
	key := keyRE.FindStringSubmatch(string(b))[1]
	if _, err := h.tftpGet(t, "127.0.0.2", "boot/grub.cfg?mac="+m+"&n="+key); !errors.Is(err, errTFTPNotFound) {
		t.Errorf("the key from another address: %v", err)
	}
	cfg, err := h.tftpGet(t, "127.0.0.1", "boot/grub.cfg?mac="+m+"&n="+key)
	if err != nil || !strings.Contains(string(cfg), "linux '(tftp,127.0.0.1)/t/"+grant+"/"+kernel+"'") {
		t.Fatalf("the machine's configuration: %v\n%s", err, cfg)
	}
	if got, err := h.tftpGet(t, "127.0.0.1", "t/"+grant+"/"+kernel); err != nil || string(got) != "the kernel" {
		t.Errorf("the kernel by the name the configuration gives: %q, %v", got, err)
	}
}
