package secureboot_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strings"
	"testing"

	"github.com/bettercompute/siteboot/bootbind"
	"github.com/bettercompute/siteboot/hwid"
	"github.com/bettercompute/siteboot/ipxe"
	"github.com/bettercompute/siteboot/secureboot"
)

// GRUB's configuration name differs by version (Ironic's release note "grub config file
// name", 2023.1: GRUB 2.04 and later ask for grub.cfg-01-MAC before grub.cfg, net.c
// grub_net_search_config_file; a network configuration that sources $net_default_mac.conf
// asks for MAC.conf): every name answers the same Chain, and so the same decision, for the
// MAC it spells.
func TestQuirk_GRUBConfigNameByVersion(t *testing.T) {
	h := newHarness(t, fakeSh, fakeGr)
	from := netip.MustParseAddrPort("127.0.0.1:1024")
	read := func(name string) string {
		t.Helper()
		f, err := h.chain.OpenFrom(name, from)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		defer f.Close()
		b, err := io.ReadAll(f)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		return string(b)
	}
	want := read("grub/grub.cfg")
	dashed := strings.ReplaceAll(mac.String(), ":", "-")
	for _, name := range []string{
		"grub/grub.cfg-01-" + dashed,
		"grub/x86_64-efi/grub.cfg-01-" + dashed,
		"grub/" + mac.String() + ".conf",
		"grub/" + dashed + ".conf",
	} {
		n, err := secureboot.ParseName(name)
		if err != nil || n.Kind != secureboot.NameChain || n.MAC != mac {
			t.Errorf("ParseName(%q) = %+v, %v; want the Chain for %s", name, n, err, mac)
			continue
		}
		if got := read(name); got != want {
			t.Errorf("%s answers\n%s\nwant grub/grub.cfg's\n%s", name, got, want)
		}
	}
	for _, name := range []string{"grub/grub.cfg-01-52-54-00", "grub/grub.cfg-C0A80001", "grub/zz:54:00:5b:00:31.conf"} {
		if n, err := secureboot.ParseName(name); err != nil || n.Kind != secureboot.NameRoot {
			t.Errorf("ParseName(%q) = %+v, %v; want a Root name", name, n, err)
		}
	}
}

// Local boot on purpose under Secure Boot (MAAS LP#1642298, Foreman #10207, Sidero Metal):
// GRUB boots the local disk itself at once, the ESP's own configuration (search, then
// configfile) or else the ESP's loader through shim (chainloader), and leaves with a
// failure status only where there is no disk. Leaving is not enough: Debian 12's shim and
// GRUB 2.06 hand the firmware success for any exit, and UEFI then opens its Boot Manager
// (tinkerbell/tinkerbell #984).
func TestQuirk_LocalBootOnPurposeGRUB(t *testing.T) {
	h := newHarness(t, fakeSh, fakeGr)
	status, body, err := h.chain.Spell(ipxe.Answer{Kind: ipxe.AnswerLocal, Status: http.StatusOK}, ipxe.Query{MAC: mac, Nonce: "k"})
	if err != nil || status != http.StatusOK {
		t.Fatalf("Spell: %d, %v", status, err)
	}
	lines := strings.Split(strings.TrimSpace(string(body)), "\n")
	if last := lines[len(lines)-1]; last != "exit 1" || strings.Contains(string(body), "linux") {
		t.Errorf("configuration ends %q, want \"exit 1\" and no kernel\n%s", last, body)
	}
	cfg, loader := strings.Index(string(body), "\tconfigfile '/EFI/debian/grub.cfg'\n"), strings.Index(string(body), "\t\tchainloader '/EFI/BOOT/BOOTX64.EFI'\n")
	if cfg < 0 || loader < cfg || strings.LastIndex(string(body), "exit 1") < loader {
		t.Errorf("the configuration does not load the ESP's configuration, then its loader, then exit:\n%s", body)
	}
	_, body, err = h.chain.Spell(ipxe.Answer{Kind: ipxe.AnswerExit, Status: http.StatusNotFound}, ipxe.Query{MAC: mac, Nonce: "k"})
	if err != nil || !strings.HasSuffix(string(body), "\nexit 1\n") {
		t.Errorf("the exit configuration (%v):\n%s\nwant it to end \"exit 1\"", err, body)
	}
}

// `exit` must fall through, for GRUB too (tinkerbell/tinkerbell #984; Sidero Metal's notes
// on UEFI boot order): GRUB runs a configuration only when it got one (TFTP has no status,
// and its http module reads only a 200's body), and a missing one makes the Chain's
// back-off retry and then reboot into the same network boot. So every path that gives up
// on the machine, whatever the boot handler's reason, and a query no Chain sends, answers
// the exit configuration (the local disk, else "exit 1": a plain exit makes UEFI open its
// Boot Manager), over TFTP and over HTTP, with no secret. On 3328321 each of these was
// "file not found" or 404.
func TestQuirk_GRUBGiveUpsFallThrough(t *testing.T) {
	var (
		chain    *secureboot.Chain
		unknown  = hwid.MAC{0x52, 0x54, 0x00, 0x5b, 0x40, 0x01}
		mismatch = hwid.MAC{0x52, 0x54, 0x00, 0x5b, 0x40, 0x02}
		unbound  = hwid.MAC{0x52, 0x54, 0x00, 0x5b, 0x40, 0x03}
		entryU   = hwid.MustParseUUID("4c4c4544-0031-3510-8052-b4c04f4e4b32")
		otherU   = hwid.MustParseUUID("8f1c0e2a-1b2c-4d5e-9f00-112233445566")
		from     = netip.MustParseAddrPort("192.0.2.10:1024")
	)
	h, err := ipxe.NewHandler(ipxe.Config{
		Entries: ipxe.EntriesFunc(func(ctx context.Context, q ipxe.Query) (ipxe.Entry, bool, error) {
			if err := chain.Bind(q); err != nil {
				return ipxe.Entry{}, false, err
			}
			switch q.MAC {
			case unknown:
				return ipxe.Entry{}, false, nil
			case mismatch:
				return ipxe.Entry{}, false, fmt.Errorf("%w: arch-mismatch", ipxe.ErrMismatch)
			case unbound:
				return ipxe.Entry{}, false, fmt.Errorf("%w: the host's own rule", ipxe.ErrUnbound)
			}
			return ipxe.Entry{MAC: q.MAC, UUID: entryU, Workflow: "wf_sb"}, true, nil
		}),
		Fence:   ipxe.FenceFunc(func() (uint64, bool) { return 7, true }),
		Tokens:  ipxe.TokensFunc(func(context.Context, ipxe.Entry) (string, error) { return "TOKEN", nil }),
		Signer:  ipxe.SignerFunc(func(context.Context, ipxe.Claims) (string, error) { return "SIGNED", nil }),
		Cache:   siteCache{},
		Kernel:  ipxe.CacheImage(kernel),
		Initrds: []string{ipxe.CacheImage(initrd)},
	})
	if err != nil {
		t.Fatal(err)
	}
	keys := bootbind.NewKeys(bootbind.Config{})
	chain = newHarness(t, fakeSh, fakeGr, func(c *secureboot.Config) { c.Keys, c.Decider = keys, h }).chain
	key := func(m hwid.MAC) string {
		k, err := keys.Issue(m, from.Addr())
		if err != nil {
			t.Fatal(err)
		}
		return k
	}
	query := func(m hwid.MAC, u hwid.UUID, ip string) string {
		q := "mac=" + m.String() + "&n=" + key(m)
		if u != (hwid.UUID{}) {
			q += "&uuid=" + u.String()
		}
		if ip != "" {
			q += "&ip=" + ip
		}
		return q
	}
	for _, tc := range []struct {
		name  string
		query func() string
		count func(ipxe.Stats, secureboot.Stats) uint64
	}{
		{"unknown", func() string { return query(unknown, hwid.UUID{}, "") }, func(s ipxe.Stats, _ secureboot.Stats) uint64 { return s.Unknown }},
		{"mismatch", func() string { return query(mismatch, hwid.UUID{}, "") }, func(s ipxe.Stats, _ secureboot.Stats) uint64 { return s.Mismatched }},
		{"unbound", func() string { return query(unbound, hwid.UUID{}, "") }, func(s ipxe.Stats, _ secureboot.Stats) uint64 { return s.Unbound }},
		{"uuid-refused", func() string { return query(mac, otherU, "") }, func(s ipxe.Stats, _ secureboot.Stats) uint64 { return s.UUIDRefused }},
		{"ip-refused", func() string { return query(mac, entryU, "192.0.2.66") }, func(s ipxe.Stats, _ secureboot.Stats) uint64 { return s.IPRefused }},
		{"bad-query", func() string { return "mac=zz&n=" + key(mac) }, func(_ ipxe.Stats, s secureboot.Stats) uint64 { return s.BadQueries }},
	} {
		for _, via := range []string{"tftp", "http"} {
			t.Run(tc.name+"/"+via, func(t *testing.T) {
				before := tc.count(h.Stats(), chain.Stats())
				var body string
				if via == "tftp" {
					f, err := chain.OpenFrom("boot/grub.cfg?"+tc.query(), from)
					if err != nil {
						t.Fatalf("open: %v (GRUB reads a missing file: its Chain retries, then reboots)", err)
					}
					b, err := io.ReadAll(f)
					f.Close()
					if err != nil {
						t.Fatal(err)
					}
					body = string(b)
				} else {
					r := httptest.NewRequest(http.MethodGet, "http://127.0.0.1"+secureboot.PathConfig+"?"+tc.query(), nil)
					r.RemoteAddr = from.String()
					w := httptest.NewRecorder()
					chain.ServeHTTP(w, r)
					if w.Code != http.StatusOK {
						t.Errorf("status %d: GRUB's http module reads no body but a 200's", w.Code)
					}
					body = w.Body.String()
				}
				lines := strings.Split(strings.TrimSpace(body), "\n")
				if last := strings.TrimSpace(lines[len(lines)-1]); last != "exit 1" {
					t.Errorf("configuration ends %q, want \"exit 1\"\n%s", last, body)
				}
				for _, l := range lines {
					if f := strings.Fields(l); len(f) > 0 && (f[0] == "exit" && (len(f) == 1 || f[1] == "0") || f[0] == "reboot" || f[0] == "linux") {
						t.Errorf("configuration has %q\n%s", l, body)
					}
				}
				if hasSecret(body) {
					t.Errorf("a give-up carries a secret\n%s", body)
				}
				if n := tc.count(h.Stats(), chain.Stats()) - before; n != 1 {
					t.Errorf("counted %d times, want once", n)
				}
			})
		}
	}
	if st := chain.Stats(); st.Exits != 10 || st.Boots != 0 {
		t.Errorf("the chain spelled %d exits and %d boots, want 10 and 0", st.Exits, st.Boots)
	}
}
