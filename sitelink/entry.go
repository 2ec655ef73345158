package sitelink

import (
	"errors"
	"fmt"
	"regexp"

	"github.com/bettercompute/siteboot/hwid"
)

// ErrBadEntry is the cause of an entry refused by ProxyDhcpEntry.Validate.
var ErrBadEntry = errors.New("sitelink: bad boot entry")

// refRE is what a workflow and a token reference may be.
var refRE = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_.:-]{0,127}$`)

// Validate checks an entry as it arrives from the control plane: a MAC, a canonical UUID
// when there is one, a known arch, a workflow and token reference of 1 to 128 of
// [A-Za-z0-9_.:-] (starting with a letter or digit), a deadline, a sanboot digest of 64
// lower-case hex digits (not with local_boot), and Secure Boot only for an X86_64_EFI entry that boots no ISO.
func (e ProxyDhcpEntry) Validate() error {
	bad := func(format string, args ...any) error {
		return fmt.Errorf("%w %s: %s", ErrBadEntry, e.MAC, fmt.Sprintf(format, args...))
	}
	if e.MAC.IsZero() {
		return bad("zero MAC")
	}
	if e.UUID != "" {
		u, err := hwid.ParseUUID(e.UUID)
		if err != nil || u.String() != e.UUID {
			return bad("product_uuid %q is not canonical", e.UUID)
		}
	}
	switch e.Arch {
	case ArchBIOS, ArchX86UEFI, ArchARM64EFI:
	default:
		return bad("arch %q", e.Arch)
	}
	if !refRE.MatchString(e.Workflow) {
		return bad("workflow %q", e.Workflow)
	}
	if e.NotAfter.IsZero() {
		return bad("no not_after")
	}
	if e.TokenRef != "" && !refRE.MatchString(e.TokenRef) {
		return bad("token_ref %q", e.TokenRef)
	}
	if e.SanbootSHA256 != "" && !isSHA256Hex(e.SanbootSHA256) {
		return bad("sanboot_sha256 %q", e.SanbootSHA256)
	}
	if e.LocalBoot && e.SanbootSHA256 != "" {
		return bad("local_boot with sanboot_sha256: the machine boots one or the other")
	}
	if e.SecureBoot != nil && *e.SecureBoot {
		if e.Arch != ArchX86UEFI {
			return bad("secure_boot: the signed chain is served to %s machines only, not %s", ArchX86UEFI, e.Arch)
		}
		if e.SanbootSHA256 != "" {
			return bad("secure_boot with sanboot_sha256: an ISO is booted by iPXE, which is not signed")
		}
	}
	return nil
}

func isSHA256Hex(s string) bool {
	if len(s) != 64 {
		return false
	}
	for i := 0; i < len(s); i++ {
		if c := s[i]; !('0' <= c && c <= '9' || 'a' <= c && c <= 'f') {
			return false
		}
	}
	return true
}
