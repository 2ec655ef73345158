package secureboot_test

import (
	"io"
	"net/http"
	"net/netip"
	"strings"
	"testing"

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
// GRUB is told to leave with a failure status at once, so the firmware boots its next boot
// option, the disk's own loader with the ESP's own configuration; a plain `exit` would make
// UEFI open its Boot Manager (tinkerbell/tinkerbell #984).
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
	_, body, err = h.chain.Spell(ipxe.Answer{Kind: ipxe.AnswerExit, Status: http.StatusNotFound}, ipxe.Query{MAC: mac, Nonce: "k"})
	if err != nil || !strings.HasSuffix(string(body), "\nexit 1\n") {
		t.Errorf("the exit configuration (%v):\n%s\nwant it to end \"exit 1\"", err, body)
	}
}
