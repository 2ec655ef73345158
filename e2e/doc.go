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
// busybox-static, a kernel in /boot (linux-image-amd64; Debian's is signed) and the go
// command (the tests build the agent); the Secure Boot scenarios also need shim-signed and
// grub-efi-amd64-signed (and OVMF's Secure Boot build, in ovmf), the BMC scenarios
// openipmi and sushy-emulator's sources (internal/testpeer installs them), with
// libvirt-daemon, libvirt-daemon-driver-qemu, libvirt-clients and python3-libvirt for its
// libvirt driver, the arm64
// scenarios qemu-system-aarch64 (qemu-system-arm), AAVMF (qemu-efi-aarch64) and Debian's
// arm64 kernel and static busybox, which e2e/arm64-ramdisk.sh downloads with apt-get
// download and unpacks into /var/cache/siteboot-e2e/arm64 ($SITEBOOT_ARM64_CACHE), nothing
// of arm64 installed. Without one of them the tests skip, and fail instead when
// SITEBOOT_REQUIRE_PEERS=1.
//
// # Scenarios
//
//   - TestE2E_BIOS: SeaBIOS with QEMU's iPXE ROM, through proxy DHCP on port 67;
//     `siteagent explain MAC` then prints "booted" and the path from DHCP to the assertion.
//   - TestE2E_UEFIPXE: OVMF's EDK2 PXE, proxy DHCP on 67 and 4011, ipxe.efi over TFTP.
//   - TestE2E_UEFIHTTP: OVMF's HTTP boot, ipxe.efi from /boot/files/.
//   - TestE2E_Unknown: a machine without a boot entry gets no answer, is listed as
//     discovered, and the firmware falls through; `siteagent explain MAC` says it is
//     unknown here.
//   - TestE2E_Fenced: an agent whose lease another enrolled, connected agent holds is
//     silent and its scripts answer 503; `siteagent explain MAC` says it is fenced.
//   - TestE2E_TwoAgentsFailover: two agents on one segment, only the holder answers; then
//     the holder is killed right after a machine's power-on and the standby boots it only
//     after the lease expired, within bounds that follow from the lab's lease TTL, session
//     timeout, tick and heartbeat, and at most one firmware start from the standby becoming
//     active to the kernel.
//   - TestE2E_TwoNICsBIOS, TestE2E_TwoNICsUEFIPXE: a machine with two NICs and an entry
//     only for the second; NIC 1 gets no answer and is listed as discovered, the machine
//     boots from NIC 2, and the chain script's query and the assertion name NIC 2's MAC.
//   - TestE2E_RelayBIOS, TestE2E_RelayUEFIPXE: machines on a second segment
//     (198.51.100.0/24) behind a router running dnsmasq as a DHCP relay boot through it.
//   - TestE2E_RelayUnknown: an unknown machine behind the relay is listed as discovered
//     with the relay's address.
//   - TestE2E_UUIDMismatch: a machine whose option 97 is not its entry's UUID (in any
//     spelling) gets no answer, counted under a reason of its own; `siteagent explain MAC`
//     names both UUIDs.
//   - TestE2E_ExplainUnpluggedNIC, TestE2E_ExplainRelayForwardsNothing,
//     TestE2E_ExplainTFTPBlocked, TestE2E_ExplainStolenNonce: `siteagent explain MAC` names
//     what broke the boot: an entry for a NIC whose cable is out (and the NIC that asked is
//     unknown), a relay that forwards nothing to the agent, TFTP dropped between OVMF and
//     the agent after the 4011 answer (policy routing in the agent's namespace drops UDP 69:
//     the test machines have neither nft nor iptables, nor tc's actions), and a host that
//     replays a booted machine's nonce from its own address.
//   - TestE2E_UUIDSpellingsBIOS, TestE2E_UUIDSpellingsUEFIPXE: three machines whose UUIDs
//     QEMU gives as SMBIOS type 1 fields (-smbios type=1,uuid=), each with an entry holding
//     its UUID in one of the three spellings (as given, SMBIOS order, reversed as IPMI
//     prints it), under SeaBIOS and under OVMF: whichever spelling option 97 and iPXE's
//     query carry, each machine boots, its assertion carries the entry's spelling and
//     verifies for a machine reporting any of the three, and no UUID mismatch is counted.
//   - TestE2E_IPv6PXE, TestE2E_IPv6HTTPBoot: on an IPv6-only segment (router advertisements
//     and a DHCPv6 address server from dnsmasq), OVMF's IPv6 PXE and IPv6 HTTP boot boot the
//     ramdisk through the agent's DHCPv6 proxy, and the assertion names the IPv6 address.
//   - TestE2E_IPv6Unknown, TestE2E_IPv6Fenced: an unknown machine is listed, a fenced agent
//     is silent over IPv6 as over IPv4.
//   - TestE2E_IPv6DualStack: on a dual-stack segment one machine boots over IPv4, one over
//     IPv6, through the same sockets.
//   - TestE2E_SecureBootPXE, TestE2E_SecureBootHTTP: OVMF enforcing Secure Boot
//     (OVMF_CODE_4M.secboot.fd with SMM, the Microsoft keys of OVMF_VARS_4M.ms.fd) boots
//     through shim, Debian's signed network GRUB and Debian's signed kernel into the ramdisk,
//     everything after shim over the agent's TFTP (PXE: shim under a boot nonce; HTTP boot:
//     the agent's RAM disk with shim and GRUB), beside dnsmasq naming the agent as next
//     server with an empty boot file; the assertion verifies and the serial log's Secure
//     Boot lines are logged ("EFI stub: UEFI Secure Boot is enabled", "secureboot: Secure
//     boot enabled").
//   - TestE2E_SecureBootRefusesUnsignedIPXE: an entry without Secure Boot gets Debian's
//     unsigned ipxe.efi, which the firmware downloads and refuses ("Access Denied").
//   - TestE2E_SecureBootRefusesModifiedKernel: the site's kernel with one byte changed
//     reaches GRUB through the signed chain and is refused ("bad shim signature").
//   - TestE2E_BMCIPMIEnsureRamdisk: OpenIPMI's ipmi_sim (Debian openipmi) on a host of the
//     segment in front of a QEMU machine, powered on and halted with nothing to boot; the
//     control plane's EnsureRamdisk sends the entry, a one-time PXE boot and a power cycle
//     through the agent's bmc.* commands; ipmi_sim's chassis script hands power off and on
//     to the test, which stops and starts the machine; the machine boots the ramdisk and its
//     assertion verifies. The chassis log shows one power cycle, the agent's metrics count
//     the operations, and the time from the power cycle to the kernel is logged.
//   - TestE2E_BMCFailoverReusesPowerCycle: the same with two agents, the holder killed
//     right after it power-cycled the machine (its claim report recorded, its heartbeat
//     with the result never sent): the control plane reuses the recorded outcome, the
//     standby never sends the power cycle again, is promoted only after the lease expired
//     and boots the machine; the chassis log shows one power-on.
//   - TestE2E_BMCClaimedNeverReportedIsUnknown: the holder killed as the control plane
//     grants its claim of the power cycle, before it hears the grant: the command ends
//     "unknown" from its claim record once the holder's session timed out, the standby
//     sends nothing to the BMC, and the BMC never changed the machine's power.
//   - TestE2E_BMCRedfishSushy: the same flow against sushy-emulator's fake Redfish driver
//     (no VM: no machine boots): a bmc.query's inspection makes the entry; the one-time PXE
//     boot lands but fails (sushy keeps every override Continuous) and no power cycle is
//     sent; with PersistentBoot the override and the power cycle land; results come back by
//     command id.
//   - TestE2E_SushyLibvirtSecureBootRefusesUnsigned: sushy-emulator's libvirt driver (a
//     private libvirtd run as nobody, testpeer.StartLibvirtd) in front of a QEMU domain with
//     OVMF's Secure Boot build, whose NVRAM template says Secure Boot is on (the variables
//     with Microsoft's keys) or off (no keys): through the Redfish driver Secure Boot reads
//     disabled, is enabled and reads enabled (and libvirt holds the keys' template); powered
//     on through Redfish, OVMF refuses the disk's unsigned EFI application ("BdsDxe: failed
//     to load Boot0001 ...: Access Denied"); disabled again, the same domain runs it. About
//     10 s a boot under TCG, 40 s in all.
//   - TestE2E_SiteDHCPAnswersFirst: SeaBIOS's iPXE ROM powers on while only dnsmasq is on
//     the segment: dnsmasq answers with an address and no boot file, nothing boots, and the
//     firmware tries again; the agent then comes up with the machine's entry and the machine
//     boots through it. On the exchange that booted, which offer came first varies from run
//     to run (dnsmasq's by 256 µs in one, the agent's in another); the test logs it. iPXE
//     waits for proxy offers after the first offer, so either way the machine boots.
//   - TestE2E_SiteDHCPOption60NoOption43NextServerAgent, ...NoNextServer: dnsmasq sends
//     option 60 PXEClient without option 43, naming the agent as next server or not. With
//     the agent as next server EDK2 asks it at 4011 and loads ipxe.efi; iPXE then takes the
//     site's offer as its ProxyDHCP offer as well and asks the site's server at 4011, and
//     has nothing to boot. Without, EDK2's PXE finds no valid offer and its HTTP boot ends
//     the same way. Neither machine boots; `siteagent explain MAC` says why (ipxe-no-chain
//     or no-4011, naming option 60 PXEClient without option 43).
//   - TestE2E_SecureBootGRUBGiveUpReturnsToFirmware: a Secure Boot machine's entry is
//     withdrawn after proxy DHCP named shim, so GRUB's configuration is a give-up: the
//     agent's configuration looks for a disk, finds none, and runs "exit 1", and OVMF's
//     boot manager gets control back in the same boot (no reboot into PXE); with Debian
//     12's shim and GRUB 2.06 it opens its menu (UiApp) rather than the next boot option,
//     and the test logs which.
//   - TestE2E_SecureBootGiveUpBootsDisk: the same give-up on a machine whose disk holds an
//     ESP installed for Secure Boot (Debian's signed shim and GRUB): the network GRUB runs
//     the ESP's /EFI/debian/grub.cfg itself, and on a second machine (a local-boot entry,
//     its ESP without /EFI/debian) chainloads the ESP's shim, whose GRUB reads the disk's
//     configuration; OVMF's boot manager starts the PXEv4 option only and never its menu.
//     TestE2E_SecureBootHTTPGiveUpNoLoop: after UEFI HTTP boot the give-up does not
//     chainload the RAM disk's own shim (the same network boot again); GRUB's search finds
//     the RAM disk before the machine's disk there, so GRUB exits and OVMF opens its menu
//     (logged), once, with one local answer.
//   - TestE2E_OVMFExitFallsThrough: OVMF with a disk after its NIC in the boot order (an
//     ESP, through QEMU's vvfat, whose BOOTX64.EFI is a minimal EFI application that prints
//     a line and powers off) runs siteboot's own snponly.efi (package ipxebin), handed out by
//     dnsmasq as the site's DHCP server over PXE and HTTP boot with the agent's chain script.
//     An unknown machine, one refused (its entry holds another UUID) and one whose iPXE
//     chains a site script ending in a plain "exit": each iPXE returns an error to the
//     firmware, and OVMF's boot manager goes on to its next Boot#### option (HTTPv4 on the
//     same NIC, then the disk), never to its menu (UiApp); the disk's application runs.
//   - TestE2E_OVMFFencedFallsThrough: the same machine and disk, the site's DHCP server
//     naming the chain URL (and serving iPXE over its own TFTP), the agent fenced (another
//     node holds the lease): each iPXE run asks /boot/ipxe DefaultAttempts times over the
//     back-off (2 + 4 + 8 s), gives up with "exit 1", and OVMF goes on to HTTPv4 and then
//     the disk instead of rebooting into the same network boot.
//   - TestE2E_LocalBootBIOS: an entry that says "boot from the local disk": SeaBIOS's iPXE
//     ROM gets the local-boot script at once and sanboot --no-describe --drive 0x80 runs the
//     disk's boot sector. TestE2E_LocalBootBIOSOwnIPXE does the same through siteboot's own
//     undionly.kpxe, chained from the ROM by a site script, with the agent's proxy DHCP off.
//   - TestE2E_LocalBootUEFI: the same over UEFI with siteboot's snponly.efi: the local-boot
//     script's "exit 1" makes OVMF boot its next options (HTTPv4, answered the same way,
//     then the disk's EFI application); no kernel is fetched.
//   - TestE2E_ConsoleLinesUEFIPXE: the agent's syslog receiver on port 514 of its boot
//     address (syslog_listen) and no tftp_root: OVMF's PXE loads the agent's own
//     snponly.efi, whose syslog console the chain script points at the agent; after the
//     boot to the ramdisk, /debug/machines/{mac} and `siteagent explain` hold its console
//     lines, among them its fetches from the agent, and none holds a query value or cache
//     grant of the URLs on the wire (the receiver redacts them), nor a token or assertion.
//     TestE2E_ConsoleLinesBIOS does the same through siteboot's undionly.kpxe, chained
//     from SeaBIOS's ROM (Debian's iPXE, without the syslog console) as in
//     TestE2E_LocalBootBIOSOwnIPXE.
//   - TestE2E_HTTPS: the agent with a boot certificate from the site's boot CA and plain
//     HTTP refused; OVMF's PXE loads siteboot's snponly.efi (patched to trust that CA) over
//     TFTP, and iPXE fetches the chain, the script, the kernel and the initrd over https to
//     a verified assertion. A plain request is refused and counted, and the segment's
//     capture holds no discovery token, assertion, grant or image bytes.
//   - TestE2E_HTTPSOtherCA: iPXE trusting another CA stops at the chain with "Permission
//     denied" on its console; the agent answers no boot request.
//   - TestE2E_HTTPSFirmware: OVMF with the boot CA enrolled (fw_cfg etc/edk2/https/cacerts)
//     fetches the iPXE build itself by UEFI HTTP boot over https, then boots as above.
//   - TestE2E_IPv6HTTPS: on the IPv6-only segment, the agent under a boot certificate for
//     its IPv4 and IPv6 boot addresses, plain HTTP refused: OVMF's IPv6 PXE loads the
//     agent's snponly.efi over TFTP, iPXE takes the https chain URL from dnsmasq (stateful
//     DHCPv6) and fetches everything over https from [2001:db8::11]:443; the assertion names
//     the DHCPv6 lease and the capture holds none of the secrets.
//   - TestE2E_ARM64PXE: AAVMF on an emulated Cortex-A57 (qemu-system-aarch64, TCG), PXE
//     (option 93 = 11): the agent's arm64 snponly.efi over TFTP, patched to trust the boot
//     CA, then the chain, the script, Debian's arm64 kernel (a 33 MB Image) and the initrd
//     over https; the assertion verifies, a plain request is refused, and the capture holds
//     none of the secrets.
//   - TestE2E_ARM64HTTP: AAVMF's UEFI HTTP boot (option 93 = 19, PXE off) fetches the arm64
//     snponly.efi from /boot/files/ and boots the arm64 ramdisk over plain HTTP, the kernel
//     and the initrd from the agent's cache; no TFTP.
//   - TestE2E_ARM64HTTPSFirmware: AAVMF with the boot CA enrolled fetches the arm64 build by
//     UEFI HTTP boot over https (firmware_https), and iPXE boots on over https; nothing over
//     TFTP or plain HTTP, and the capture holds none of the secrets.
//   - TestE2E_BIOSHTTPS: SeaBIOS's iPXE ROM (Debian's, without HTTPS) is handed by proxy
//     DHCP, the chain being https, the agent's own undionly.kpxe over TFTP, repacked to trust
//     the boot CA; that iPXE fetches the chain, the script, the kernel and the initrd over
//     https; the assertion verifies, one TFTP transfer completes (the build), no plain HTTP
//     leaves the machine, and the capture holds none of the secrets.
//   - TestE2E_BIOSHTTPSOtherCA: undionly.kpxe repacked to trust one CA (in tftp_root,
//     chained by SeaBIOS's ROM as the site's DHCP server says) stops at the https chain
//     with "Permission denied"; the agent answers no boot request.
//   - TestE2E_ARM64HTTPSOtherCA: AAVMF's PXE loads the arm64 snponly build patched to trust
//     one CA while the agent's boot certificate comes from another: iPXE stops at the https
//     chain with "Permission denied" on the serial console, and the agent answers no boot
//     request and serves nothing from its cache.
//   - TestE2E_OffSegmentRequester: a routed host on another network (no relay) asks at
//     4011 for a known MAC: no answer, no nonce, no IPv6 boot pass, counted as off-segment.
//   - TestE2E_BroadcastBystander: a host on the bridge reads the broadcast proxy offers while
//     a BIOS machine boots: none names a nonce, and the machine boots.
//
// TestE2E_BenchFirmwareBoot (bench/e2e/run.sh) and TestE2E_BenchHTTPS (bench/e2e/https.sh,
// for OVMF PXE, AAVMF PXE or SeaBIOS as SITEBOOT_E2E_BENCH_HTTPS_FW says) are benchmarks:
// they skip unless SITEBOOT_E2E_BENCH or SITEBOOT_E2E_BENCH_HTTPS names the rounds to run.
//
// # Timings on a loaded machine
//
// The lab runs the lease with the production TTL (15 s), a 1 s heartbeat and a 5 s
// session timeout, so heartbeats late by seconds on a loaded 2-core machine never fence the
// holder by accident. Every time bound a test asserts is stated from those settings (or
// from a firmware figure measured in the same run), and the measured margin is logged.
//
// Power-on to the ramdisk's command line, measured on the 2-core machine shared with other
// test runs (load average 9 to 17; "loaded": two CPU burners added), each test alone unless
// said:
//
//	TestE2E_ARM64HTTP           25 s (kernel 21.7 s); loaded, beside ARM64PXE: 65 s
//	TestE2E_ARM64PXE            33 s (kernel 29.6 s); loaded, beside ARM64HTTP: 89 s
//	TestE2E_ARM64HTTPSFirmware  38 s (kernel 34.1 s); loaded, beside IPv6HTTPS: 68 s
//	TestE2E_IPv6HTTPS           53 s (kernel 50.5 s); loaded, beside ARM64HTTPSFirmware: 120 s
//	TestE2E_ConsoleLinesBIOS    27 s (kernel 23.4 s); beside ConsoleLinesUEFIPXE: 34 s
//	TestE2E_ConsoleLinesUEFIPXE 27 s (kernel 24.3 s); beside ConsoleLinesBIOS: 36 s
//
// and on a quieter machine (load average 1 to 3):
//
//	TestE2E_BIOSHTTPS           21 s (kernel 13.4 s, beside ARM64HTTPSOtherCA; 20.1 s alone)
//	TestE2E_BIOSHTTPSOtherCA     8 s (to iPXE's refusal)
//	TestE2E_ARM64HTTPSOtherCA   21 s (to iPXE's refusal)
//
// The arm64 machines are bounded by arm64BootTimeout (6 minutes, four times the slowest
// loaded run), the IPv6 one by bootTimeout (4 minutes), and so are the console tests' boots
// and their wait for the console lines in the timeline.
//
// # Nothing left behind
//
// Every process a test starts (QEMU, dnsmasq, tcpdump, the agents, nginx, the agent's
// build) runs in the foreground and dies with the test binary (internal/testpeer ties it
// with the parent-death signal), even when the binary is killed by its timeout; the
// namespaces, bridges and taps of such a run are deleted by the next run, and so is the
// folder of its agent binary.
//
// Each machine boots the agent's ramdisk (the kernel and initramfs it pulled into its
// cache); the initramfs prints /proc/cmdline to the serial console and powers off, and the
// test verifies the discovery assertion on that command line with the control plane's
// verifier. On failure a test prints the serial logs, the agents' and dnsmasq's logs and a
// decoded packet trace of the segment.
package e2e
