package proxydhcp

import (
	"strconv"
	"strings"
)

// Arch is a client system architecture type from DHCP option 93 (RFC 4578, section 2.1, and
// the IANA "Processor Architecture Types" registry).
type Arch uint16

// Architectures known by name. The x86-64 UEFI firmware of the field sends 7 (IANA's
// "x64 UEFI") or 9 (RFC 4578's original "EFI x86-64"; IANA's "EBC"), so both map to ipxe.efi
// in [DefaultBootFiles].
const (
	ArchBIOS            Arch = 0  // x86 legacy BIOS PXE
	ArchItanium         Arch = 2  // Itanium
	ArchIA32EFI         Arch = 6  // x86 (32-bit) UEFI
	ArchX86_64EFI       Arch = 7  // x86-64 UEFI
	ArchEFIBC           Arch = 9  // EFI byte code; x86-64 UEFI in RFC 4578
	ArchARM32EFI        Arch = 10 // ARM 32-bit UEFI
	ArchARM64EFI        Arch = 11 // ARM 64-bit UEFI
	ArchIA32EFIHTTP     Arch = 15 // x86 UEFI HTTP boot
	ArchX86_64EFIHTTP   Arch = 16 // x86-64 UEFI HTTP boot
	ArchEFIBCHTTP       Arch = 17 // EBC UEFI HTTP boot
	ArchARM32EFIHTTP    Arch = 18 // ARM 32-bit UEFI HTTP boot
	ArchARM64EFIHTTP    Arch = 19 // ARM 64-bit UEFI HTTP boot
	ArchBIOSHTTP        Arch = 20 // x86 BIOS HTTP boot
	ArchARM32UBoot      Arch = 21 // ARM 32-bit U-Boot
	ArchARM64UBoot      Arch = 22 // ARM 64-bit U-Boot
	ArchARM32UBootHTTP  Arch = 23 // ARM 32-bit U-Boot HTTP boot
	ArchARM64UBootHTTP  Arch = 24 // ARM 64-bit U-Boot HTTP boot
	ArchRISCV32EFI      Arch = 25 // RISC-V 32-bit UEFI
	ArchRISCV32EFIHTTP  Arch = 26 // RISC-V 32-bit UEFI HTTP boot
	ArchRISCV64EFI      Arch = 27 // RISC-V 64-bit UEFI
	ArchRISCV64EFIHTTP  Arch = 28 // RISC-V 64-bit UEFI HTTP boot
	ArchRISCV128EFI     Arch = 29 // RISC-V 128-bit UEFI
	ArchRISCV128EFIHTTP Arch = 30 // RISC-V 128-bit UEFI HTTP boot
	ArchLoongArch64EFI  Arch = 39 // LoongArch 64-bit UEFI
	ArchLoongArch64HTTP Arch = 40 // LoongArch 64-bit UEFI HTTP boot
)

var archNames = map[Arch]string{
	ArchBIOS:            "bios",
	ArchItanium:         "itanium-efi",
	ArchIA32EFI:         "ia32-efi",
	ArchX86_64EFI:       "x86_64-efi",
	ArchEFIBC:           "efi-bc",
	ArchARM32EFI:        "arm32-efi",
	ArchARM64EFI:        "arm64-efi",
	ArchIA32EFIHTTP:     "ia32-efi-http",
	ArchX86_64EFIHTTP:   "x86_64-efi-http",
	ArchEFIBCHTTP:       "efi-bc-http",
	ArchARM32EFIHTTP:    "arm32-efi-http",
	ArchARM64EFIHTTP:    "arm64-efi-http",
	ArchBIOSHTTP:        "bios-http",
	ArchARM32UBoot:      "arm32-uboot",
	ArchARM64UBoot:      "arm64-uboot",
	ArchARM32UBootHTTP:  "arm32-uboot-http",
	ArchARM64UBootHTTP:  "arm64-uboot-http",
	ArchRISCV32EFI:      "riscv32-efi",
	ArchRISCV32EFIHTTP:  "riscv32-efi-http",
	ArchRISCV64EFI:      "riscv64-efi",
	ArchRISCV64EFIHTTP:  "riscv64-efi-http",
	ArchRISCV128EFI:     "riscv128-efi",
	ArchRISCV128EFIHTTP: "riscv128-efi-http",
	ArchLoongArch64EFI:  "loongarch64-efi",
	ArchLoongArch64HTTP: "loongarch64-efi-http",
}

// String returns the architecture's short name ("bios", "x86_64-efi", "arm64-efi-http"), or
// "arch-N" for a number without one. The result always matches [a-z0-9_-]{1,32}, so it can be
// stored as a discovered machine's arch as it is.
func (a Arch) String() string {
	if n, ok := archNames[a]; ok {
		return n
	}
	return "arch-" + strconv.Itoa(int(a))
}

// ParseArch returns the architecture named s, as [Arch.String] spells it.
func ParseArch(s string) (Arch, bool) {
	for a, n := range archNames {
		if n == s {
			return a, true
		}
	}
	if rest, ok := strings.CutPrefix(s, "arch-"); ok {
		n, err := strconv.ParseUint(rest, 10, 16)
		if err == nil && strconv.FormatUint(n, 10) == rest {
			return Arch(n), true
		}
	}
	return 0, false
}
