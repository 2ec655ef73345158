package sitelink

import (
	"fmt"

	"github.com/bettercompute/siteboot/hwid"
)

// EntryArch returns the option 93 number the firmware an entry's arch names sends over
// PXE (ArchBIOS 0, ArchX86UEFI 7, ArchARM64EFI 11); the same firmware's HTTP-boot number
// matches it too ([hwid.SameArch]). ok is false for a name Validate refuses.
func EntryArch(arch string) (a hwid.Arch, ok bool) {
	switch arch {
	case ArchBIOS:
		return hwid.ArchBIOS, true
	case ArchX86UEFI:
		return hwid.ArchX86_64EFI, true
	case ArchARM64EFI:
		return hwid.ArchARM64EFI, true
	}
	return 0, false
}

// ParsedEntry is a valid ProxyDhcpEntry with its UUID and arch parsed once, for the
// lookups of every DHCP and HTTP request. Build one with ParseEntry or get one from
// EntryStore.LookupParsed.
type ParsedEntry struct {
	ProxyDhcpEntry
	uuid hwid.UUID // zero when the entry names none
	arch hwid.Arch
}

// ParseEntry validates e (ProxyDhcpEntry.Validate) and parses its UUID and arch.
func ParseEntry(e ProxyDhcpEntry) (ParsedEntry, error) {
	if err := e.Validate(); err != nil {
		return ParsedEntry{}, err
	}
	return parsed(e), nil
}

// parsed is ParseEntry for an entry already validated.
func parsed(e ProxyDhcpEntry) ParsedEntry {
	p := ParsedEntry{ProxyDhcpEntry: e}
	p.arch, _ = EntryArch(e.Arch)
	if e.UUID != "" {
		p.uuid, _ = hwid.ParseUUID(e.UUID) // Validate checked it
	}
	return p
}

// MachineUUID is the entry's SMBIOS UUID, the zero UUID when it names none.
func (p ParsedEntry) MachineUUID() hwid.UUID { return p.uuid }

// PXEArch is the option 93 number of the entry's firmware over PXE ([EntryArch]).
func (p ParsedEntry) PXEArch() hwid.Arch { return p.arch }

// Mismatch says why a machine is not the one its boot entry names. A boot server answers
// such a machine with silence (proxy DHCP) or a script without secrets (HTTP), and a host
// counts each by its String, which is stable and fit for a metric label.
type Mismatch uint8

// The results of ParsedEntry.Match.
const (
	// NoMismatch ("match"): the machine matches, or sent nothing to compare.
	NoMismatch Mismatch = iota
	// MismatchArch ("arch-mismatch"): option 93 (or iPXE's platform) names another firmware.
	MismatchArch
	// MismatchUUID ("uuid-mismatch"): option 97 (or iPXE's ${uuid}) is no spelling of the
	// entry's UUID.
	MismatchUUID
	// NumMismatches is one more than the highest Mismatch, to size arrays of counters
	// indexed by it.
	NumMismatches
)

// String returns the reason's name: "match", "arch-mismatch", "uuid-mismatch".
func (m Mismatch) String() string {
	switch m {
	case NoMismatch:
		return "match"
	case MismatchArch:
		return "arch-mismatch"
	case MismatchUUID:
		return "uuid-mismatch"
	}
	return fmt.Sprintf("mismatch(%d)", uint8(m))
}

// Match is the one decision on whether the machine asking is the one p names. The arch is
// compared when the request has one (hasArch): the firmware's PXE and HTTP-boot numbers
// both match ([hwid.SameArch]). The UUID is compared when both sides have one, in any
// spelling against any other ([hwid.DifferentMachines]); the zero UUID stands for none,
// and a firmware placeholder UUID identifies nothing, so neither is ever compared.
func (p ParsedEntry) Match(arch hwid.Arch, hasArch bool, uuid hwid.UUID) Mismatch {
	if hasArch && !hwid.SameArch(arch, p.arch) {
		return MismatchArch
	}
	if hwid.DifferentMachines(p.uuid, uuid) {
		return MismatchUUID
	}
	return NoMismatch
}

// SecureBootBy says whether the entry's machine boots through the signed chain (shim and
// GRUB): the entry's own word (SecureBoot), else siteDefault for an x86-64 UEFI entry that
// boots no ISO (a sanboot entry is booted by iPXE).
func (p ParsedEntry) SecureBootBy(siteDefault bool) bool {
	if p.SecureBoot != nil {
		return *p.SecureBoot
	}
	return siteDefault && p.Arch == ArchX86UEFI && p.SanbootSHA256 == ""
}

// UUIDUnchecked reports whether Match could not compare UUIDs because the machine sent
// none: p names an SMBIOS UUID, and uuid is the zero UUID or a firmware placeholder (a
// DHCP request without option 97, as some Intel cards send). Match then decides on the
// MAC and arch alone; a host answering says so (proxydhcp's Decision.NoUUID).
func (p ParsedEntry) UUIDUnchecked(uuid hwid.UUID) bool {
	return !p.uuid.IsPlaceholder() && uuid.IsPlaceholder()
}
