package sitelink_test

import (
	"errors"
	"testing"
	"time"

	"github.com/bettercompute/siteboot/hwid"
	"github.com/bettercompute/siteboot/sitelink"
)

// TestMatch is the rule of a request's option 93 and option 97 against an entry: the same
// firmware by its PXE or HTTP-boot number, any spelling of the entry's UUID, and nothing
// compared where either side has nothing (or a firmware placeholder) to compare.
func TestMatch(t *testing.T) {
	u := hwid.MustParseUUID("4c4c4544-0031-3510-8052-b4c04f4e4b32")
	other := hwid.MustParseUUID("8f1c0e2a-1b2c-4d5e-9f00-112233445566")
	placeholder := hwid.MustParseUUID("03000200-0400-0500-0006-000700080009")
	entry := func(arch, uuid string) sitelink.ParsedEntry {
		t.Helper()
		p, err := sitelink.ParseEntry(sitelink.ProxyDhcpEntry{MAC: hwid.MustParseMAC("52:54:00:00:00:01"),
			UUID: uuid, Arch: arch, Workflow: "wf", NotAfter: time.Now()})
		if err != nil {
			t.Fatal(err)
		}
		return p
	}
	x86 := entry(sitelink.ArchX86UEFI, u.String())
	for _, tt := range []struct {
		name    string
		entry   sitelink.ParsedEntry
		arch    hwid.Arch
		hasArch bool
		uuid    hwid.UUID
		want    sitelink.Mismatch
	}{
		{"same arch and uuid", x86, hwid.ArchX86_64EFI, true, u, sitelink.NoMismatch},
		{"rfc 4578's x86-64 number", x86, hwid.ArchEFIBC, true, u, sitelink.NoMismatch},
		{"the same firmware's http boot", x86, hwid.ArchX86_64EFIHTTP, true, u, sitelink.NoMismatch},
		{"no option 93", x86, hwid.ArchBIOS, false, u, sitelink.NoMismatch},
		{"no option 93 nor 97", x86, 0, false, hwid.UUID{}, sitelink.NoMismatch},
		{"uuid as smbios spells it", x86, hwid.ArchX86_64EFI, true, u.SMBIOS(), sitelink.NoMismatch},
		{"uuid as ipmi spells it", x86, hwid.ArchX86_64EFI, true, u.Reversed(), sitelink.NoMismatch},
		{"placeholder uuid not compared", x86, hwid.ArchX86_64EFI, true, placeholder, sitelink.NoMismatch},
		{"all-ones placeholder not compared", x86, hwid.ArchX86_64EFI, true, hwid.MustParseUUID("ffffffff-ffff-ffff-ffff-ffffffffffff"), sitelink.NoMismatch},
		{"entry without uuid", entry(sitelink.ArchX86UEFI, ""), hwid.ArchX86_64EFI, true, other, sitelink.NoMismatch},
		{"bios pxe rom", x86, hwid.ArchBIOS, true, u, sitelink.MismatchArch},
		{"arm64", x86, hwid.ArchARM64EFI, true, u, sitelink.MismatchArch},
		{"ia32 uefi", x86, hwid.ArchIA32EFI, true, u, sitelink.MismatchArch},
		{"arch before uuid", x86, hwid.ArchBIOS, true, other, sitelink.MismatchArch},
		{"another machine's uuid", x86, hwid.ArchX86_64EFI, true, other, sitelink.MismatchUUID},
		{"another machine's uuid, no option 93", x86, 0, false, other, sitelink.MismatchUUID},
		{"bios entry, bios http boot", entry(sitelink.ArchBIOS, ""), hwid.ArchBIOSHTTP, true, hwid.UUID{}, sitelink.NoMismatch},
		{"bios entry, uefi", entry(sitelink.ArchBIOS, ""), hwid.ArchX86_64EFI, true, hwid.UUID{}, sitelink.MismatchArch},
		{"arm64 entry, arm64 http boot", entry(sitelink.ArchARM64EFI, ""), hwid.ArchARM64EFIHTTP, true, hwid.UUID{}, sitelink.NoMismatch},
		{"arm64 entry, x86-64", entry(sitelink.ArchARM64EFI, ""), hwid.ArchX86_64EFI, true, hwid.UUID{}, sitelink.MismatchArch},
	} {
		t.Run(tt.name, func(t *testing.T) {
			if got := tt.entry.Match(tt.arch, tt.hasArch, tt.uuid); got != tt.want {
				t.Errorf("Match(%s, %v, %s) = %s, want %s", tt.arch, tt.hasArch, tt.uuid, got, tt.want)
			}
		})
	}
}

// TestMismatchString: the names hosts use as metric labels.
func TestMismatchString(t *testing.T) {
	for m, want := range map[sitelink.Mismatch]string{
		sitelink.NoMismatch:    "match",
		sitelink.MismatchArch:  "arch-mismatch",
		sitelink.MismatchUUID:  "uuid-mismatch",
		sitelink.NumMismatches: "mismatch(3)",
	} {
		if got := m.String(); got != want {
			t.Errorf("Mismatch(%d).String() = %q, want %q", m, got, want)
		}
	}
}

// TestParseEntry: an invalid entry is refused; a valid one carries its parsed fields.
func TestParseEntry(t *testing.T) {
	_, err := sitelink.ParseEntry(sitelink.ProxyDhcpEntry{MAC: hwid.MustParseMAC("52:54:00:00:00:01"), Arch: "PDP11", Workflow: "wf", NotAfter: time.Now()})
	if !errors.Is(err, sitelink.ErrBadEntry) {
		t.Errorf("ParseEntry of an unknown arch: %v, want ErrBadEntry", err)
	}
	for name, want := range map[string]hwid.Arch{sitelink.ArchBIOS: hwid.ArchBIOS, sitelink.ArchX86UEFI: hwid.ArchX86_64EFI, sitelink.ArchARM64EFI: hwid.ArchARM64EFI} {
		if got, ok := sitelink.EntryArch(name); !ok || got != want {
			t.Errorf("EntryArch(%q) = %s, %v; want %s", name, got, ok, want)
		}
	}
	if _, ok := sitelink.EntryArch("x86_64-efi"); ok {
		t.Error("EntryArch knows a name Validate refuses")
	}
}

// No option 97 (pixiecore #21: some Intel cards send no client GUID). Match answers such a
// machine on its MAC and arch; UUIDUnchecked says so when the entry has a UUID that was
// not compared, and only then, so that the host's decision can say so (proxydhcp's
// Decision.NoUUID).
func TestQuirk_NoOption97UUIDUnchecked(t *testing.T) {
	u := hwid.MustParseUUID("4c4c4544-0031-3510-8052-b4c04f4e4b32")
	entry := func(uuid string) sitelink.ParsedEntry {
		t.Helper()
		p, err := sitelink.ParseEntry(sitelink.ProxyDhcpEntry{MAC: hwid.MustParseMAC("52:54:00:00:00:01"),
			UUID: uuid, Arch: sitelink.ArchX86UEFI, Workflow: "wf", NotAfter: time.Now()})
		if err != nil {
			t.Fatal(err)
		}
		return p
	}
	for _, tt := range []struct {
		name  string
		entry sitelink.ParsedEntry
		uuid  hwid.UUID
		want  bool
	}{
		{"entry uuid, no option 97", entry(u.String()), hwid.UUID{}, true},
		{"entry uuid, placeholder sent", entry(u.String()), hwid.MustParseUUID("03000200-0400-0500-0006-000700080009"), true},
		{"entry uuid, same uuid sent", entry(u.String()), u.SMBIOS(), false},
		{"entry uuid, another sent (a mismatch, not unchecked)", entry(u.String()), hwid.MustParseUUID("8f1c0e2a-1b2c-4d5e-9f00-112233445566"), false},
		{"no entry uuid, none sent", entry(""), hwid.UUID{}, false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			if got := tt.entry.UUIDUnchecked(tt.uuid); got != tt.want {
				t.Errorf("UUIDUnchecked(%s) = %v, want %v", tt.uuid, got, tt.want)
			}
			if tt.want {
				if m := tt.entry.Match(hwid.ArchX86_64EFI, true, tt.uuid); m != sitelink.NoMismatch {
					t.Errorf("Match = %s, want match: a machine without option 97 is answered", m)
				}
			}
		})
	}
}
