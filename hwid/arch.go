package hwid

import (
	"errors"
	"strconv"
	"strings"
)

// Arch is a client system architecture type as DHCP option 93 carries it (RFC 4578, section
// 2.1, and the IANA "Processor Architecture Types" registry). Proxy DHCP reads it from the
// request, a boot entry names the one its machine must send, and the discovery list keeps
// the last one a machine sent: one type for all three.
type Arch uint16

// ErrBadArch is the error of [Arch.UnmarshalText] for a name [ParseArch] does not know.
var ErrBadArch = errors.New("hwid: unknown architecture name")

// Architectures known by name. The x86-64 UEFI firmware of the field sends 7 (IANA's
// "x64 UEFI") or 9 (RFC 4578's original "EFI x86-64"; IANA's "EBC").
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

// platforms maps each HTTP-boot number, and RFC 4578's x86-64 number, to the PXE number of
// the same firmware: one machine asks with either.
var platforms = map[Arch]Arch{
	ArchEFIBC:           ArchX86_64EFI,
	ArchX86_64EFIHTTP:   ArchX86_64EFI,
	ArchEFIBCHTTP:       ArchX86_64EFI,
	ArchIA32EFIHTTP:     ArchIA32EFI,
	ArchARM32EFIHTTP:    ArchARM32EFI,
	ArchARM64EFIHTTP:    ArchARM64EFI,
	ArchBIOSHTTP:        ArchBIOS,
	ArchARM32UBootHTTP:  ArchARM32UBoot,
	ArchARM64UBootHTTP:  ArchARM64UBoot,
	ArchRISCV32EFIHTTP:  ArchRISCV32EFI,
	ArchRISCV64EFIHTTP:  ArchRISCV64EFI,
	ArchRISCV128EFIHTTP: ArchRISCV128EFI,
	ArchLoongArch64HTTP: ArchLoongArch64EFI,
}

// String returns the architecture's short name ("bios", "x86_64-efi", "arm64-efi-http"), or
// "arch-N" for a number without one. The result always matches [a-z0-9_-]{1,32}.
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

// Platform returns the PXE number of the firmware a enters: x86-64 UEFI for 7, 9, 16 and 17,
// legacy BIOS for 0 and 20, and so on. The same machine sends its PXE number to proxy DHCP
// and its HTTP-boot number when it boots by HTTP, so two numbers name one machine when their
// Platforms are equal ([SameArch]).
func (a Arch) Platform() Arch {
	if p, ok := platforms[a]; ok {
		return p
	}
	return a
}

// SameArch reports whether a and b are one firmware platform ([Arch.Platform]).
func SameArch(a, b Arch) bool { return a.Platform() == b.Platform() }

// MarshalText implements encoding.TextMarshaler with [Arch.String].
func (a Arch) MarshalText() ([]byte, error) { return []byte(a.String()), nil }

// UnmarshalText implements encoding.TextUnmarshaler with [ParseArch].
func (a *Arch) UnmarshalText(b []byte) error {
	v, ok := ParseArch(string(b))
	if !ok {
		return ErrBadArch
	}
	*a = v
	return nil
}

// efiNames are the architecture suffixes of UEFI file names (UEFI 2.10, section 3.5.1.1:
// \EFI\BOOT\BOOTX64.EFI and so on), by PXE number.
var efiNames = map[Arch]string{
	ArchIA32EFI:        "ia32",
	ArchX86_64EFI:      "x64",
	ArchARM32EFI:       "arm",
	ArchARM64EFI:       "aa64",
	ArchRISCV32EFI:     "riscv32",
	ArchRISCV64EFI:     "riscv64",
	ArchRISCV128EFI:    "riscv128",
	ArchLoongArch64EFI: "loongarch64",
}

// EFIName returns the suffix UEFI file names carry for the firmware a enters ([Arch.Platform]),
// in lower case: "x64" for x86-64 UEFI (7, 9 and its HTTP boot numbers), "aa64" for arm64,
// and so on. The removable-media loader is BOOT<SUFFIX>.EFI; shim is shim<suffix>.efi and
// loads grub<suffix>.efi from its own directory (see [Arch.ShimFile]). ok is false for
// legacy BIOS, U-Boot and numbers without a UEFI name.
func (a Arch) EFIName() (name string, ok bool) {
	name, ok = efiNames[a.Platform()]
	return name, ok
}

// ShimFile returns the file names of the Secure Boot chain for the firmware a enters: shim
// (shimx64.efi), signed by the UEFI CA, and the boot loader it loads from the directory it
// was itself loaded from (grubx64.efi). ok is false where [Arch.EFIName] is.
func (a Arch) ShimFile() (shim, loader string, ok bool) {
	n, ok := a.EFIName()
	if !ok {
		return "", "", false
	}
	return "shim" + n + ".efi", "grub" + n + ".efi", true
}
