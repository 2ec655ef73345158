// Package grubcfg renders GRUB 2 configuration files for machines that boot with UEFI Secure
// Boot enforced, through shim and a signed network GRUB, the way package ipxe renders iPXE
// scripts for the others. It is pure: it writes bytes and does no I/O.
//
// # The chain on a Secure Boot machine
//
// Firmware that enforces Secure Boot runs only images signed by a key in its db; iPXE as
// Debian ships it is not signed. The signed chain is:
//
//  1. proxy DHCP names shim (Debian's shim-signed: shimx64.efi.signed, signed by the UEFI CA)
//     as the boot file, over TFTP for PXE or as an http:// URL for UEFI HTTP boot;
//  2. shim loads grubx64.efi from the directory it was loaded from: the site serves
//     Debian's signed network GRUB (grub-efi-amd64-signed: grubnetx64.efi.signed) under that
//     name; shim checks it against Debian's key, which shim carries;
//  3. GRUB reads its configuration (see below), which is [Chain]: it fetches this machine's
//     own configuration from the agent over HTTP, naming the MAC of the NIC it booted from;
//  4. that configuration is [Boot]: GRUB's linux command loads the site's kernel, which
//     shim's protocol verifies (Debian's kernels are signed), then the initrd (not signed:
//     the kernel command line carries the digests and the assertion that let the ramdisk and
//     the control plane check what booted), and boots.
//
// # Where the signed GRUB looks (read from the package, not from memory)
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
// with the prefix's device taken from where GRUB itself was loaded: (tftp,SERVER) after PXE,
// (http,SERVER) after UEFI HTTP boot. Seen in QEMU with OVMF enforcing Secure Boot
// (OVMF_CODE_4M.secboot.fd, OVMF_VARS_4M.ms.fd), shim and this GRUB fetched over TFTP:
// prefix=(tftp,SERVER)/grub; "[ -e ... ]" is false for any file on tftp (the protocol cannot
// stat), so GRUB sources $prefix/grub.cfg, not the x86_64-efi one; net_default_mac is the
// booting NIC's MAC with colons, net_default_ip its address, and "smbios --type 1 --get-uuid
// 8" gives the SMBIOS UUID in its canonical spelling (the same as QEMU's -smbios uuid=).
// So the site serves [Chain]'s output as /grub/grub.cfg (and, for a GRUB whose test can stat
// the file, /grub/x86_64-efi/grub.cfg too) on its TFTP root and its HTTP server. The same run
// showed the kernel verified through shim ("EFI stub: UEFI Secure Boot is enabled", then the
// kernel's "secureboot: Secure boot enabled") and a kernel with one byte changed refused by
// GRUB's linux command with "bad shim signature".
//
// The image has these modules built in (so no module is loaded from the network, which
// Secure Boot would refuse): efinet, tftp, http, linux, initrd, configfile, source, smbios,
// regexp, test, echo, sleep, reboot, halt, exit, chainloader. Its net code knows no port in a
// device name, so the agent's HTTP server must be on port 80 and TFTP on 69; GRUB 2.06 has no
// TLS, so https is refused. Its parser has no "&&" or "||": conditions are if/then/fi.
//
// # Beside the site's DHCP server (proxy DHCP)
//
// shim and GRUB learn the boot server differently. shim (netboot.c) takes the boot file
// from the proxy offer when the site's DHCP acknowledgement names none, so it fetches GRUB
// from the agent. GRUB 2.06 configures its network from the acknowledgement alone
// (grub-core/net/drivers/efi/efinet.c grub_efi_net_config_real reads pxe->mode->dhcp_ack,
// never the proxy offer; net/bootp.c grub_net_configure_by_dhcp_ack makes its device
// "tftp," + siaddr, else the sname field). So on a Secure Boot PXE machine the site's DHCP
// server must name the agent as next server (siaddr or sname) while leaving the boot file
// empty, or GRUB looks for its configuration on whatever server the acknowledgement names.
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
// the ones [Chain] writes itself: GRUB's own ${net_default_mac} and ${net_default_ip} and the
// SMBIOS UUID that GRUB's smbios command reads. A value that cannot be written safely is
// refused with [ErrUnsafe], never escaped or trimmed.
package grubcfg
