// Package grubcfg renders GRUB 2 configuration files for machines that boot with UEFI Secure
// Boot enforced, through shim and a signed network GRUB, the way package ipxe renders iPXE
// scripts for the others. It is pure: it writes bytes and does no I/O. The two renderers
// share one core (the kernel command line's grammar, assembly and cap, [Param], [Retry] and
// its back-off, [ValueError]): a [Param] or [Retry] of package ipxe is one of this package,
// and one entry renders the same command line on both paths.
//
// # The chain on a Secure Boot machine
//
// Firmware that enforces Secure Boot runs only images signed by a key in its db; iPXE as
// Debian ships it is not signed. The signed chain is:
//
//  1. proxy DHCP names shim (Debian's shim-signed: shimx64.efi.signed, signed by the UEFI CA)
//     as the boot file over TFTP for PXE; for UEFI HTTP boot it names a RAM disk (see
//     below);
//  2. shim loads grubx64.efi from the directory it was loaded from: the site serves
//     Debian's signed network GRUB (grub-efi-amd64-signed: grubnetx64.efi.signed) under that
//     name; shim checks it against Debian's key, which shim carries;
//  3. GRUB reads its configuration (see below), which is [Chain]: it fetches this machine's
//     own configuration from the site, naming the MAC of the NIC it booted from and
//     presenting the machine's boot key;
//  4. that configuration is [Boot]: GRUB's linux command loads the site's kernel, which
//     shim's protocol verifies (Debian's kernels are signed), then the initrd (not signed:
//     the kernel command line carries the digests and the assertion that let the ramdisk and
//     the control plane check what booted), and boots.
//
// # What the signed GRUB can do (read from the package, not from memory)
//
// Debian 12's grubnetx64.efi.signed (GRUB 2.06-13+deb12u2) has the prefix "/grub" built in
// and an embedded memdisk whose grub.cfg reads:
//
//	if [ -e $prefix/x86_64-efi/grub.cfg ]; then
//		source $prefix/x86_64-efi/grub.cfg
//	else
//		source $prefix/grub.cfg
//	fi
//
// with the prefix's device taken from where GRUB itself was loaded. Its modules, as its
// lsmod lists them in QEMU, are efinet, tftp, linux (linuxefi), configfile, normal, echo,
// test, smbios, sleep, reboot, halt, regexp, search, loopback, memdisk, fat, iso9660, ext2
// and the other disk file systems, chain and the video modules, and no http: "ls
// (http,SERVER)/" answers "disk `http,SERVER' not found", and the monolithic
// grubx64.efi.signed has none either. Under Secure Boot GRUB loads no module from the
// network. So everything after shim goes over TFTP (port 69: GRUB 2.06 names no port in a
// device): the Chain, the machine's configuration, the kernel and the initrd, and every URL
// the renderer takes for GRUB is tftp://HOST/... (http:// renders too, for a GRUB that has
// the module, but the site serves none).
//
// Seen in QEMU with OVMF enforcing Secure Boot (OVMF_CODE_4M.secboot.fd with SMM, a copy of
// OVMF_VARS_4M.ms.fd): after PXE, prefix=(tftp,SERVER)/grub; "[ -e ... ]" is false for any
// file on tftp (the protocol cannot stat), so GRUB sources $prefix/grub.cfg; net_default_mac
// is the booting NIC's MAC with colons, net_default_ip its address, and "smbios --type 1
// --get-uuid 8" gives the SMBIOS UUID in its canonical spelling (the same as QEMU's -smbios
// uuid=). So the site serves [Chain]'s output as grub/grub.cfg (and grub/x86_64-efi/grub.cfg)
// on its TFTP root. Shim asks its directory for revocations_sku.efi, revocations_sbat.efi and
// shim_certificate_0.efi first (optional: "not found" is fine), then grubx64.efi. The same
// runs show the kernel verified through shim ("EFI stub: UEFI Secure Boot is enabled", then
// the kernel's "secureboot: Secure boot enabled") and a kernel with one byte changed refused
// by GRUB's linux command with "bad shim signature".
//
// # UEFI HTTP boot
//
// After UEFI HTTP boot GRUB's prefix is (http,SERVER)/grub, which this GRUB cannot read, and
// it stops at its prompt; shim itself asks the next loader as SERVER/DIR//grubx64.efi (two
// slashes: httpboot.c keeps the URL's last slash and adds "/grubx64.efi"). So the site
// names, for HTTP boot, a RAM disk instead (EDK2 mounts an answer of type
// application/vnd.efi-img and boots \EFI\BOOT\BOOTX64.EFI from it): a FAT image holding
// shim as BOOTX64.EFI, GRUB beside it as grubx64.efi, and /grub/grub.cfg, a [Chain] with the
// machine's MAC and key in it (Key set). GRUB then boots from the disk, with prefix
// (hd0)/grub and cmdpath (hd0)/EFI/BOOT, and no network configured: the Chain runs
// net_bootp first (GRUB's own DHCP; it names no default interface, so the MAC is the one
// the Chain was given), then fetches over TFTP as after PXE.
//
// # Beside the site's DHCP server (proxy DHCP)
//
// shim and GRUB learn the boot server differently. shim (netboot.c) takes the boot file
// from the proxy's answer when the site's DHCP acknowledgement names none, so it fetches
// GRUB from the agent (seen: from the directory of the file EDK2 loaded, the one the 4011
// answer named). GRUB 2.06 configures its network from the acknowledgement alone
// (grub-core/net/drivers/efi/efinet.c grub_efi_net_config_real reads pxe->mode->dhcp_ack,
// never the proxy offer; net/bootp.c grub_net_configure_by_dhcp_ack makes its device
// "tftp," + siaddr, else the sname field). So on a Secure Boot PXE machine the site's DHCP
// server must name the agent as next server (siaddr or sname) while leaving the boot file
// empty, or GRUB looks for its configuration on whatever server the acknowledgement names
// (dnsmasq: dhcp-boot=,,AGENT).
//
// # Giving up: the local disk
//
// Every configuration that gives up on the machine boots its local disk itself: [Exit] (no
// entry, a refusal), [LocalBoot] (an entry that says so), [Fenced] after its wait, and a
// [Chain] or a [Boot] without a fallback after its last attempt. Each runs, in order:
//
//	set siteboot_self="$root"
//	if search --no-floppy --file --set=root '/EFI/debian/grub.cfg'; then
//		configfile '/EFI/debian/grub.cfg'
//	fi
//	(the same for '/EFI/ubuntu/grub.cfg')
//	if search --no-floppy --file --set=root '/EFI/BOOT/BOOTX64.EFI'; then
//		if test "$root" != "$siteboot_self"; then
//			chainloader '/EFI/BOOT/BOOTX64.EFI'
//			boot
//		fi
//	fi
//	exit 1
//
// That is: the ESP's own GRUB configuration ([DiskConfigs]), read by this GRUB (it has the
// search, fat and configfile modules built in, and the ESP's configuration names the root
// file system and its /boot/grub/grub.cfg itself); else the ESP's removable-media loader
// ([DiskLoader]: shim on a disk installed for Secure Boot, Windows' boot manager), which
// GRUB's shim_lock verifier checks through shim before the firmware starts it; and "exit 1"
// only when no disk holds either. The loader is never chainloaded from the device GRUB came
// from (siteboot_self): after UEFI HTTP boot that is the RAM disk, whose shim would run the
// same network boot again. search names only the first device holding a file, so where
// the RAM disk comes first such a machine gets "exit 1" rather than the disk's loader (a
// limit; the ESP's configuration is found either way). GRUB's exit cannot be the way to
// the disk: Debian 12's shim and signed GRUB 2.06 hand the firmware success whatever the
// status, on which OVMF opens its Boot Manager instead of its next boot option; and a
// reboot comes back to the same network boot, over and over where the site's DHCP names
// the agent and no agent is active. A [Boot] or [Wait] whose fallback fails (the server gone mid-boot) still waits
// 10 s and reboots, to reach whichever agent is active now.
//
// # The boot key
//
// A [Chain] presents the machine's boot key as n=KEY, in the query where iPXE's chain script
// puts its boot nonce, so that the site can give the machine's secrets (its token, cache
// grant and assertion) only to the machine it answered by DHCP. After PXE the Chain sources
// a [KeyFile] (KeyURL?mac=MAC, setting siteboot_key) before each attempt; the RAM disk's
// Chain carries its key. The renderer only writes what it is given: how a site binds a key
// to the machine is the site's (see examples/siteagent/agent, "Secure Boot").
//
// # Injection
//
// GRUB's script lexer (grub-core/script/yylex.l) splits words at blanks, ends commands at
// newline, ';', '|', '&', '<' and '>', treats '{' and '}' and reserved words as syntax,
// starts a comment at '#', expands $name and ${name} outside single quotes, and globs '*',
// '?' and '[' in unquoted text when the regexp module is loaded. Inside single quotes nothing
// is special but the closing quote, not even a newline. So every value the renderer writes
// stands inside single quotes, and a value may not contain a single quote, a control byte or
// a non-ASCII byte; kernel parameters follow ipxe's rules on top (no space, '"', backslash
// or '$', because Linux reads the command line again). The only expansions in any output are
// the ones [Chain] and a give-up write themselves, inside double quotes: GRUB's own
// ${net_default_mac} and $root, the SMBIOS UUID that GRUB's smbios command reads, the key
// its key file sets and the device a give-up saved; the MAC and
// key a Chain is given are hex digits and separators, and [A-Za-z0-9_-]. A value that
// cannot be written safely is refused with [ErrUnsafe], never escaped or trimmed.
package grubcfg
