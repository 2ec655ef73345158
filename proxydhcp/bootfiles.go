package proxydhcp

import (
	"fmt"
	"maps"
	"strings"

	"github.com/bettercompute/siteboot/hwid"
)

// Default paths of the boot HTTP server (package ipxe serves them).
const (
	DefaultChainPath = "/boot/chain.ipxe"
	DefaultFilesPath = "/boot/files/"
	// MaxBootFileLen is the longest boot file a reply carries in the BOOTP file field; a longer
	// one (an HTTP URL) goes in option 67 only.
	MaxBootFileLen = 127
)

// BootFiles is the table of what each client is told to load. It is plain data: a host
// builds one (usually from [DefaultBootFiles]), changes it and hands it to the server with
// [Server.SetBootFiles] at any time.
type BootFiles struct {
	// ByArch maps a client architecture (option 93) to the iPXE build for it: a TFTP file
	// name for PXE firmware, and the name under FilesPath on the boot HTTP server for UEFI
	// HTTP boot clients. An architecture not listed is answered with silence (reason
	// no-boot-file).
	ByArch map[hwid.Arch]string

	// ChainPath is the URL path handed to clients that are iPXE already.
	// Default DefaultChainPath.
	ChainPath string

	// FilesPath is the URL path prefix under which UEFI HTTP boot clients fetch the build.
	// Default DefaultFilesPath.
	FilesPath string
}

// DefaultBootFiles returns the table of DESIGN P4: legacy BIOS undionly.kpxe over TFTP,
// x86-64 UEFI (7 and 9) ipxe.efi, arm64 UEFI ipxe-arm64.efi, UEFI HTTP boot the same builds as
// URLs, iPXE itself /boot/chain.ipxe. The other architectures have names ([Arch.String]) but
// no file until a host adds one.
func DefaultBootFiles() BootFiles {
	return BootFiles{
		ByArch: map[hwid.Arch]string{
			hwid.ArchBIOS:          "undionly.kpxe",
			hwid.ArchX86_64EFI:     "ipxe.efi",
			hwid.ArchEFIBC:         "ipxe.efi",
			hwid.ArchARM64EFI:      "ipxe-arm64.efi",
			hwid.ArchX86_64EFIHTTP: "ipxe.efi",
			hwid.ArchARM64EFIHTTP:  "ipxe-arm64.efi",
		},
		ChainPath: DefaultChainPath,
		FilesPath: DefaultFilesPath,
	}
}

// Clone returns a deep copy of t.
func (t BootFiles) Clone() BootFiles {
	t.ByArch = maps.Clone(t.ByArch)
	return t
}

// Validate reports a table entry that could not be put in a reply: empty, with a NUL or
// control byte, a space, or longer than 255 bytes.
func (t BootFiles) Validate() error {
	for a, f := range t.ByArch {
		if err := checkFile(f); err != nil {
			return fmt.Errorf("proxydhcp: boot file for %s: %w", a, err)
		}
	}
	for name, p := range map[string]string{"ChainPath": t.ChainPath, "FilesPath": t.FilesPath} {
		if p == "" {
			continue
		}
		if !strings.HasPrefix(p, "/") {
			return fmt.Errorf("proxydhcp: %s %q does not start with /", name, p)
		}
		if err := checkFile(p); err != nil {
			return fmt.Errorf("proxydhcp: %s: %w", name, err)
		}
	}
	return nil
}

func (t BootFiles) chainPath() string {
	if t.ChainPath == "" {
		return DefaultChainPath
	}
	return t.ChainPath
}

func (t BootFiles) filesPath() string {
	if t.FilesPath == "" {
		return DefaultFilesPath
	}
	return t.FilesPath
}

// checkFile accepts what firmware can take in a file field or option 67.
func checkFile(f string) error {
	if f == "" {
		return fmt.Errorf("empty")
	}
	if len(f) > 255 {
		return fmt.Errorf("%d bytes, more than 255", len(f))
	}
	for i := 0; i < len(f); i++ {
		if c := f[i]; c <= ' ' || c >= 0x7f {
			return fmt.Errorf("byte %#x at %d", c, i)
		}
	}
	return nil
}
