// Package ipxebin serves siteboot's own iPXE builds, embedded in the package so that a site
// installs nothing, and patches each binary at serve time to trust the site's CA.
//
// The builds come from firmware/ipxe in the siteboot repository: iPXE v2.0.0 from a pinned
// source archive, built to be reproducible (its README says what is verified), with HTTPS,
// IPv6, VLAN and NTP compiled in, EAPOL compiled out, iPXE's syslog console compiled in on
// every platform (a script's "set syslog ADDRESS" sends what iPXE prints to that syslog
// receiver as well as to the screen), two patches of ours (AES-GCM's GHASH a word at a time,
// which cuts iPXE's cost per byte read over https to a third, and AES with the ARMv8
// instructions in the arm64 build where the CPU has them), and an embedded script that
// runs autoboot on the NIC the firmware booted from and then exits with status 1 so that
// the firmware tries its next boot entry:
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
// (TestE2E_ARM64PXE, TestE2E_ARM64HTTP, TestE2E_ARM64HTTPSFirmware), and SeaBIOS boots
// undionly.kpxe, repacked to trust the CA, over https (TestE2E_BIOSHTTPS); a build trusting
// another CA stops at the handshake (TestE2E_HTTPSOtherCA, TestE2E_ARM64HTTPSOtherCA,
// TestE2E_BIOSHTTPSOtherCA).
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
// The EFI builds hold the fingerprint as it is, and only those 32 bytes change. The BIOS
// build (undionly.kpxe) is compressed by iPXE's zbin: an uncompressed prefix (the PXE loader
// and the decompressor), then packed blocks, each a length, a raw LZMA stream (lc=2, lp=0,
// pb=0, with an end marker, of the block after zbin's x86 branch filter) and a CRC-32. The
// fingerprint is in the last block (.text and .data). [WithTrust] unpacks that block, undoes
// the branch filter, replaces the fingerprint, filters and packs it again with the same LZMA
// properties (a pure-Go encoder: the stream differs from zbin's and is some 7% larger, and
// iPXE's decompressor, which needs only the properties and the end marker, reads it), writes
// the block's length and CRC, and sets the one field of the prefix that depends on the
// image's length (the PXE loader's image size in 16-byte paragraphs, by which it places its
// stack). The prefix and the other blocks stay as built. A repacked image is kept per image
// and CA, so each is packed once (a tenth of a second).
//
// The other way was a BIOS build that takes its root from iPXE's trust setting (DHCP option
// 175.90 or a first script), with ALLOW_TRUST_OVERRIDE: it needs no repacking, but then whoever
// answers DHCP on the segment first chooses the machine's trust, and the BIOS build would
// trust differently from the EFI ones. Repacking keeps one trust model for every build (the
// anchor inside the binary the firmware runs, nothing after it can change it), needs no
// rebuild, and leaves the committed binaries' bytes as they are.
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
// A BIOS machine's first binary still arrives unauthenticated, over TFTP (BIOS PXE has no
// TLS): an active attacker on the segment can hand it a binary of its own, whatever iPXE
// trusts; a passive reader learns nothing, since every secret comes after, over https.
// Repacking handles images laid out as zbin writes them with the placeholder in the last
// block, and refuses others ([ErrImageLayout]) rather than serve an image that might not run.
package ipxebin
