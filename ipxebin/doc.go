// Package ipxebin serves siteboot's own iPXE builds, embedded in the package so that a site
// installs nothing, and patches each binary at serve time to trust the site's CA.
//
// The builds come from firmware/ipxe in the siteboot repository: iPXE v2.0.0 from a pinned
// source archive, built to be reproducible (its README says what is verified), with HTTPS,
// IPv6, VLAN and NTP compiled in, EAPOL compiled out, iPXE's syslog console compiled in on
// every platform (a script's "set syslog ADDRESS" sends what iPXE prints to that syslog
// receiver as well as to the screen), and an embedded script that runs autoboot on the NIC the firmware booted from and then exits with status 1
// so that the firmware tries its next boot entry:
//
//   - [UndionlyKPXE]: BIOS PXE (undionly.kpxe)
//   - [SnponlyX8664]: x86-64 UEFI, the firmware's own network stack (snponly.efi)
//   - [IPXEX8664]: x86-64 UEFI with iPXE's native drivers (ipxe.efi)
//   - [SnponlyARM64]: arm64 UEFI, the firmware's own network stack (snponly.efi)
//
// With real firmware (the e2e tests TestE2E_OVMFExitFallsThrough, TestE2E_LocalBootUEFI and
// TestE2E_LocalBootBIOSOwnIPXE), OVMF boots its next Boot#### option whenever the x86-64
// snponly.efi gives up, even after a chained script's plain "exit", and undionly.kpxe boots
// the local disk's boot sector with sanboot. AAVMF boots the arm64 snponly.efi over PXE and
// over UEFI HTTP and HTTPS boot to Debian's arm64 kernel, over https with the CA patched in
// (TestE2E_ARM64PXE, TestE2E_ARM64HTTP, TestE2E_ARM64HTTPSFirmware).
//
// A site supplies its own builds by setting [Builds.FS]. [FS] serves the builds as a file
// system (to a TFTP server, or under an HTTP path), each open patched for the CA of that
// moment, so that a renewed site CA is trusted without a restart.
//
// # Trust of the site CA
//
// Each build is compiled to trust exactly one root certificate: a placeholder whose private key
// was discarded when it was made, so an unpatched build trusts no server at all. [WithTrust]
// replaces the placeholder's SHA-256 fingerprint (iPXE keeps its trusted roots as a list of
// fingerprints) with the fingerprint of the site CA, and [Builds.ReadFile] does so for every
// binary it hands out when [Builds.CA] is set. The TLS server iPXE then talks to must send the
// CA certificate itself at the end of its chain, since iPXE checks the root by fingerprint.
//
// This is safe because the trust anchor travels inside the binary that the firmware executes:
// whoever can replace that binary on the segment already runs code on the machine, and gains
// nothing more by choosing its trust. Nothing iPXE receives after it starts (DHCP options, a
// script, a setting) can change the list: iPXE's "trust" setting is compiled out (no
// ALLOW_TRUST_OVERRIDE), so an attacker on the segment cannot feed it a root of its own. Getting
// the binary itself to the machine without tampering is the firmware's side: UEFI HTTPS boot
// with the site CA enrolled, or a segment the site controls for TFTP and plain HTTP.
//
// # Syslog console
//
// The syslog console sends iPXE's output as plain UDP datagrams to port 514: anyone
// on the segment reads it. iPXE prints the URIs it fetches without their user, password,
// query and fragment, so a secret carried in a query string stays out of the log, and one in
// a path does not. The EFI builds also have iPXE's encrypted syslog console ("set syslogs
// NAME", syslog over TLS under the same trust as HTTPS); the BIOS build has the plain one only.
//
// # Limits
//
// BIOS images are compressed (iPXE's zbin), so the fingerprint in undionly.kpxe cannot be
// replaced in place: [WithTrust] returns [ErrNoTrustArea] for it, and [Builds.ReadFile] refuses
// to hand it out while a CA is set rather than serve a binary that would trust nothing.
package ipxebin
