package sitelink_test

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/bettercompute/siteboot/hwid"
	"github.com/bettercompute/siteboot/sitelink"
)

// TestEntryValidate: a well-formed entry passes; each malformed field is refused with
// ErrBadEntry.
func TestEntryValidate(t *testing.T) {
	good := sitelink.ProxyDhcpEntry{MAC: hwid.MustParseMAC("52:54:00:00:00:01"), UUID: "4c4c4544-0051-3510-8057-b7c04f4b3232",
		Arch: sitelink.ArchX86UEFI, Workflow: "wf-1", NotAfter: time.Now(), TokenRef: "tok:1"}
	if err := good.Validate(); err != nil {
		t.Fatalf("good entry: %v", err)
	}
	yes := true
	for name, mut := range map[string]func(*sitelink.ProxyDhcpEntry){
		"zero MAC":              func(e *sitelink.ProxyDhcpEntry) { e.MAC = hwid.MAC{} },
		"UUID not canonical":    func(e *sitelink.ProxyDhcpEntry) { e.UUID = strings.ToUpper(e.UUID) },
		"unknown arch":          func(e *sitelink.ProxyDhcpEntry) { e.Arch = "x86_64_efi" },
		"empty workflow":        func(e *sitelink.ProxyDhcpEntry) { e.Workflow = "" },
		"workflow with a space": func(e *sitelink.ProxyDhcpEntry) { e.Workflow = "wf 1" },
		"workflow too long":     func(e *sitelink.ProxyDhcpEntry) { e.Workflow = strings.Repeat("w", 129) },
		"no deadline":           func(e *sitelink.ProxyDhcpEntry) { e.NotAfter = time.Time{} },
		"token ref":             func(e *sitelink.ProxyDhcpEntry) { e.TokenRef = "../tok" },
		"sanboot digest":        func(e *sitelink.ProxyDhcpEntry) { e.SanbootSHA256 = strings.Repeat("A", 64) },
		"secure boot on BIOS":   func(e *sitelink.ProxyDhcpEntry) { e.Arch, e.SecureBoot = sitelink.ArchBIOS, &yes },
		"secure boot with an ISO": func(e *sitelink.ProxyDhcpEntry) {
			e.SecureBoot, e.SanbootSHA256 = &yes, strings.Repeat("a", 64)
		},
	} {
		e := good
		mut(&e)
		if err := e.Validate(); !errors.Is(err, sitelink.ErrBadEntry) {
			t.Errorf("%s: %v, want ErrBadEntry", name, err)
		}
	}
}

// Local boot on purpose (MAAS LP#1642298, Foreman #10207, Sidero Metal): an entry may say
// "boot from the local disk" (local_boot), which goes over the wire under that name, is
// valid with Secure Boot, and is refused beside an ISO to sanboot.
func TestQuirk_LocalBootEntry(t *testing.T) {
	yes := true
	e := sitelink.ProxyDhcpEntry{MAC: hwid.MustParseMAC("52:54:00:00:00:01"), Arch: sitelink.ArchX86UEFI,
		Workflow: "wf-1", NotAfter: time.Now(), LocalBoot: true, SecureBoot: &yes}
	if err := e.Validate(); err != nil {
		t.Fatalf("local boot entry: %v", err)
	}
	b, err := json.Marshal(e)
	if err != nil || !strings.Contains(string(b), `"local_boot":true`) {
		t.Fatalf("JSON %s, %v: want local_boot", b, err)
	}
	var back sitelink.ProxyDhcpEntry
	if err := json.Unmarshal(b, &back); err != nil || !back.LocalBoot {
		t.Errorf("round trip: %+v, %v", back, err)
	}
	e.SecureBoot, e.SanbootSHA256 = nil, strings.Repeat("a", 64)
	if err := e.Validate(); !errors.Is(err, sitelink.ErrBadEntry) {
		t.Errorf("local_boot with sanboot_sha256: %v, want ErrBadEntry", err)
	}
}
