package secureboot_test

import (
	"context"
	"errors"
	"io"
	"net/netip"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/bettercompute/siteboot/bootbind"
	"github.com/bettercompute/siteboot/hwid"
	"github.com/bettercompute/siteboot/ipxe"
	"github.com/bettercompute/siteboot/secureboot"
)

// siteCache is the image cache as ipxe's handler sees it: every boot gets the same grant.
type siteCache struct{}

func (siteCache) CacheURL(context.Context, ipxe.Entry) (string, error) {
	return cache + "/t/" + grant + "/", nil
}
func (siteCache) ISOReady(context.Context, string) (bool, error) { return false, nil }
func (siteCache) SanbootURL(context.Context, ipxe.Entry) (string, error) {
	return "", ipxe.ErrNotReady
}

// TestWithIPXEHandler: the chain asks the real boot handler (ipxe.Handler.Decide) for the
// machine that presented its key, from the address the key went to, with the GRUB loader's
// name; the handler's decision (the kernel and initrd as cache images under the machine's
// grant, the token, the assertion; fenced; waiting for the token; no entry) reaches the
// machine in GRUB's words, the images over TFTP. The host's entry rule binds GRUB's requests
// with the chain's Bind.
func TestWithIPXEHandler(t *testing.T) {
	var (
		active   atomic.Bool
		tokenOK  atomic.Bool
		chain    *secureboot.Chain
		other    = hwid.MAC{0x52, 0x54, 0x00, 0x5b, 0x00, 0x99}
		signedIP atomic.Value
	)
	active.Store(true)
	h, err := ipxe.NewHandler(ipxe.Config{
		Entries: ipxe.EntriesFunc(func(ctx context.Context, q ipxe.Query) (ipxe.Entry, bool, error) {
			if q.MAC != mac {
				return ipxe.Entry{}, false, nil
			}
			if q.Loader != secureboot.LoaderName {
				return ipxe.Entry{}, false, errors.New("only GRUB asks in this test")
			}
			if err := chain.Bind(q); err != nil {
				return ipxe.Entry{}, false, err
			}
			return ipxe.Entry{MAC: mac, Workflow: "wf_sb"}, true, nil
		}),
		Fence: ipxe.FenceFunc(func() (uint64, bool) { return 7, active.Load() }),
		Tokens: ipxe.TokensFunc(func(context.Context, ipxe.Entry) (string, error) {
			if !tokenOK.Load() {
				return "", ipxe.ErrNotReady
			}
			return "TOKEN", nil
		}),
		Signer: ipxe.SignerFunc(func(_ context.Context, c ipxe.Claims) (string, error) {
			signedIP.Store(c.IP)
			return "SIGNED", nil
		}),
		Cache:   siteCache{},
		Kernel:  ipxe.CacheImage(kernel),
		Initrds: []string{ipxe.CacheImage(initrd)},
		Cmdline: "console=ttyS0",
	})
	if err != nil {
		t.Fatal(err)
	}
	keys := bootbind.NewKeys(bootbind.Config{})
	hs := newHarness(t, fakeSh, fakeGr, func(c *secureboot.Config) { c.Keys, c.Decider = keys, h })
	chain = hs.chain
	from := netip.MustParseAddrPort("192.0.2.10:1024")
	key, _ := keys.Issue(mac, from.Addr())
	otherKey, _ := keys.Issue(other, from.Addr())
	open := func(m hwid.MAC, key string) (string, error) {
		f, err := chain.OpenFrom("boot/grub.cfg?mac="+m.String()+"&n="+key, from)
		if err != nil {
			return "", err
		}
		b, err := io.ReadAll(f)
		return string(b), err
	}

	// The token on its way: the machine waits and asks its own configuration again.
	if cfg, err := open(mac, key); err != nil || !strings.Contains(cfg, "configfile '(tftp,127.0.0.1)/boot/grub.cfg?mac="+mac.String()+"&n="+key+"'") || hasSecret(cfg) {
		t.Errorf("token not ready: %v\n%s", err, cfg)
	}
	tokenOK.Store(true)
	cfg, err := open(mac, key)
	if err != nil {
		t.Fatal(err)
	}
	for _, w := range []string{
		"linux '(tftp,127.0.0.1)/cache/t/" + grant + "/" + kernel + "'", "initrd '(tftp,127.0.0.1)/cache/t/" + grant + "/" + initrd + "'",
		"'bc.token=TOKEN'", "'bc.assertion=SIGNED'", "'console=ttyS0'",
	} {
		if !strings.Contains(cfg, w) {
			t.Errorf("boot configuration lacks %q:\n%s", w, cfg)
		}
	}
	if ip, _ := signedIP.Load().(netip.Addr); ip != from.Addr() {
		t.Errorf("the assertion states %v, want the address the key went to, %v", ip, from.Addr())
	}

	active.Store(false)
	if cfg, err := open(mac, key); err != nil || !strings.Contains(cfg, "sleep 10\n") || strings.Contains(cfg, "reboot") ||
		!strings.Contains(cfg, "chainloader '/EFI/BOOT/BOOTX64.EFI'") || hasSecret(cfg) {
		t.Errorf("fenced: %v, want a wait and then the local disk\n%s", err, cfg)
	}
	active.Store(true)
	if cfg, err := open(other, otherKey); err != nil || !strings.HasSuffix(cfg, "\nexit 1\n") || hasSecret(cfg) {
		t.Errorf("a MAC without an entry: %v, want the exit configuration\n%s", err, cfg)
	}
	if st := chain.Stats(); st.Boots != 1 || st.Fenced != 1 || st.Exits != 1 || st.Waits != 1 {
		t.Errorf("boots %d, fenced %d, exits %d, waits %d", st.Boots, st.Fenced, st.Exits, st.Waits)
	}
	if st := h.Stats(); st.Scripts != 1 || st.Fenced != 1 || st.Unknown != 1 || st.TokenWaits != 1 {
		t.Errorf("the handler counted scripts %d, fenced %d, unknown %d, token waits %d", st.Scripts, st.Fenced, st.Unknown, st.TokenWaits)
	}
}
