// Package e2e holds siteboot's end-to-end tests against real firmware: QEMU machines with
// SeaBIOS and its iPXE ROM, and with OVMF's own EDK2 PXE and HTTP boot, boot Debian's kernel
// and a busybox initramfs through examples/siteagent on an isolated segment of network
// namespaces, beside dnsmasq as the site's own DHCP server.
//
// The package has no API: everything is in its tests.
//
// # What the tests need
//
// Root (network namespaces, tap devices), qemu-system-x86_64 (qemu-system-x86), OVMF
// (ovmf), QEMU's iPXE ROMs (ipxe-qemu), Debian's iPXE builds (ipxe), dnsmasq, tcpdump,
// busybox-static, a kernel in /boot (linux-image-amd64) and the go command (the tests build
// the agent). Without one of them the tests skip, and fail instead when
// SITEBOOT_REQUIRE_PEERS=1.
//
// # Scenarios
//
//   - TestE2E_BIOS: SeaBIOS with QEMU's iPXE ROM, through proxy DHCP on port 67.
//   - TestE2E_UEFIPXE: OVMF's EDK2 PXE, proxy DHCP on 67 and 4011, ipxe.efi over TFTP.
//   - TestE2E_UEFIHTTP: OVMF's HTTP boot, ipxe.efi from /boot/files/.
//   - TestE2E_Unknown: a machine without a boot entry gets no answer, is listed as
//     discovered, and the firmware falls through.
//   - TestE2E_Fenced: an agent whose lease another enrolled, connected agent holds is
//     silent and its scripts answer 503.
//   - TestE2E_TwoAgentsFailover: two agents on one segment, only the holder answers; then
//     the holder is killed right after a machine's power-on and the standby boots it only
//     after the lease expired.
//
// Each machine boots the agent's ramdisk (the kernel and initramfs it pulled into its
// cache); the initramfs prints /proc/cmdline to the serial console and powers off, and the
// test verifies the discovery assertion on that command line with the control plane's
// verifier. On failure a test prints the serial logs, the agents' and dnsmasq's logs and a
// decoded packet trace of the segment.
package e2e
