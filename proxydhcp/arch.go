package proxydhcp

import "github.com/bettercompute/siteboot/hwid"

// Arch is a client system architecture type from DHCP option 93: the shared [hwid.Arch], so
// a host compares a request's arch with a boot entry's and lists it as discovery keeps it.
type Arch = hwid.Arch

// Architectures known by name (see [hwid.Arch]). The x86-64 UEFI firmware of the field
// sends 7 or 9, so both map to ipxe.efi in [DefaultBootFiles].
const (
	ArchBIOS            = hwid.ArchBIOS
	ArchItanium         = hwid.ArchItanium
	ArchIA32EFI         = hwid.ArchIA32EFI
	ArchX86_64EFI       = hwid.ArchX86_64EFI
	ArchEFIBC           = hwid.ArchEFIBC
	ArchARM32EFI        = hwid.ArchARM32EFI
	ArchARM64EFI        = hwid.ArchARM64EFI
	ArchIA32EFIHTTP     = hwid.ArchIA32EFIHTTP
	ArchX86_64EFIHTTP   = hwid.ArchX86_64EFIHTTP
	ArchEFIBCHTTP       = hwid.ArchEFIBCHTTP
	ArchARM32EFIHTTP    = hwid.ArchARM32EFIHTTP
	ArchARM64EFIHTTP    = hwid.ArchARM64EFIHTTP
	ArchBIOSHTTP        = hwid.ArchBIOSHTTP
	ArchARM32UBoot      = hwid.ArchARM32UBoot
	ArchARM64UBoot      = hwid.ArchARM64UBoot
	ArchARM32UBootHTTP  = hwid.ArchARM32UBootHTTP
	ArchARM64UBootHTTP  = hwid.ArchARM64UBootHTTP
	ArchRISCV32EFI      = hwid.ArchRISCV32EFI
	ArchRISCV32EFIHTTP  = hwid.ArchRISCV32EFIHTTP
	ArchRISCV64EFI      = hwid.ArchRISCV64EFI
	ArchRISCV64EFIHTTP  = hwid.ArchRISCV64EFIHTTP
	ArchRISCV128EFI     = hwid.ArchRISCV128EFI
	ArchRISCV128EFIHTTP = hwid.ArchRISCV128EFIHTTP
	ArchLoongArch64EFI  = hwid.ArchLoongArch64EFI
	ArchLoongArch64HTTP = hwid.ArchLoongArch64HTTP
)

// ParseArch returns the architecture named s, as [hwid.Arch.String] spells it.
func ParseArch(s string) (Arch, bool) { return hwid.ParseArch(s) }
