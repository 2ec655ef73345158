// Package proxydhcp implements a proxy DHCP server (PXE 2.1 ProxyDHCP, RFC 4578 options, and
// DHCPv6 with the RFC 5970 boot options) for PXE and UEFI HTTP boot: it answers boot clients
// on UDP 67 and 4011, and on UDP 547 and [::]:4011, beside the site's own DHCP and DHCPv6
// servers with where to find their boot file, and never hands out an address or a prefix.
//
// # What it answers
//
// Only requests whose option 60 starts with PXEClient or HTTPClient are considered. For each
// one the server parses the MAC (chaddr), the client architecture (option 93), the client
// UUID (option 97), the UNDI version (option 94), the relay (giaddr) and whether the client
// is iPXE already (option 77 user class "iPXE", or option 175), and asks the host's
// [Handler]. The host answers only machines it has prepared, while it is the active boot
// server; everything else gets silence. A request the Handler calls [ReasonUnknown] is passed
// to the [Discoverer], if any, so the host can list machines it does not know.
//
// An answer carries no address (yiaddr 0.0.0.0), names the server in option 54 and siaddr,
// echoes option 60 as "PXEClient" or "HTTPClient" (EDK2 ignores an HTTP boot URL otherwise)
// and option 97 when the client sent it, and names the boot file from [BootFiles]:
//
//	legacy BIOS PXE                 undionly.kpxe               (TFTP)
//	x86-64 UEFI PXE (93 = 7 or 9)   ipxe.efi                    (TFTP)
//	arm64 UEFI PXE (93 = 11)        ipxe-arm64.efi              (TFTP)
//	UEFI HTTP boot (93 = 16, 19)    http://SERVER/boot/files/ipxe.efi, .../ipxe-arm64.efi
//	iPXE itself                     http://SERVER/boot/chain.ipxe
//	                                https://SERVER/boot/chain.ipxe with Server.HTTPSPort
//	iPXE without HTTPS, with        its arch's file above (TFTP): an iPXE build that
//	  Server.HTTPSPort              speaks https, which then asks for the chain itself
//
// Whether iPXE speaks https is read from its option 175 (feature 0x14, [Request.NoHTTPS]):
// a NIC ROM's iPXE often has no TLS, and handed an https chain URL it could only fail.
//
// Architectures are hwid's ([hwid.Arch], hwid.ArchBIOS, hwid.ArchX86_64EFI, ...): the
// same values a boot entry, discovery and the assertion use, under one set of names.
//
// The table is data: a host edits it and installs it with [Server.SetBootFiles], and a
// [Decision] may name another file for one machine: a signed shim for a machine that boots
// with Secure Boot, say, named for its architecture by [hwid.Arch.ShimFile] (shimx64.efi
// for 7, 9 and 16, which loads grubx64.efi from its own directory).
//
// A legacy BIOS offer carries option 43 with PXE discovery control 8 (boot the named file,
// no boot-server discovery). UEFI firmware instead asks again on UDP 4011; that request is
// answered with an ACK to its source address and port (OVMF sends from 4011, iPXE from 68).
// Port-67 replies go to the relay's port 67 when relayed, to ciaddr when the client has an
// address, and otherwise are broadcast out of the interface the request came in on. A reply
// through a relay to a client without an address (ciaddr 0; yiaddr is always 0) sets the
// broadcast flag, as dnsmasq's proxy does: a relay can deliver such a reply only by
// broadcasting it, and does so only when the flag is set (iPXE does not set it).
//
// [Server.Relays], when set, lists the relays whose requests are answered: a request naming
// another giaddr (for DHCPv6, a RELAY-FORW from another address) is dropped before the
// Handler hears of it and counted as [ReasonRelayNotAllowed].
//
// # Provisioning segments
//
// An answer that goes unicast to the requester (port 4011, a port-67 request with ciaddr, a
// DHCPv6 request that was not relayed) is sent only to an address on a provisioning segment:
// a subnet of the interface the request came in on (read per packet, in the socket's own
// network namespace), an IPv6 link-local address, a subnet of [Server.Segments], or the
// [Server.RelayPrefixLen] subnet of the relay the MAC's own relayed DISCOVER came through
// (learned for [LearnedRelayTTL]: a relayed machine sends its 4011 request straight to this
// server, not through the relay). Anything else is dropped before the Handler hears of it
// and counted as [ReasonOffSegment]: a host on another network cannot make this server
// answer it for a MAC.
//
// A [Binder] binds each answer to iPXE to the machine (DESIGN.md S1): the unicast answer's
// chain URL carries the Binder's token (?n=TOKEN, [BindParam]), and an answer that is
// broadcast (or sent through a relay, which broadcasts it) names no boot file, so that iPXE
// asks again on port 4011 from its new address (iPXE's dhcp.c: a ProxyDHCP offer without a
// boot file and menu leads to a ProxyDHCPREQUEST) and gets the token unicast. No token
// travels in a broadcast.
//
// # DHCPv6
//
// [Server.ServeDHCPv6] answers on UDP 547 (a socket from [ListenDHCPv6], which joins
// ff02::1:2): a SOLICIT with an ADVERTISE, an INFORMATION-REQUEST with a REPLY, each bare or
// inside up to 8 RELAY-FORWs, whose answer goes back to the relay's port 547 inside as many
// RELAY-REPLs (hop count, link and peer address and Interface-ID echoed). [Server.ServeBoot]
// on an IPv6 socket ([::]:4011) answers EDK2's boot-server REQUEST with a REPLY to its
// source. A REQUEST on 547 is not answered: it asks for the address of an ADVERTISE, and this
// server offers none.
//
// A request is a boot client's when its vendor class (option 16, any enterprise number) has
// data starting with PXEClient or HTTPClient, or its user class (option 15) is "iPXE" (iPXE
// sends no vendor class over DHCPv6). The arch is option 61 (else the vendor class's
// ":Arch:NNNNN"), UNDI option 62, the UUID a client DUID of type UUID (RFC 6355: EDK2 puts the
// SMBIOS UUID there). The MAC ([Request.MACSource]) is the first of: option 79 (RFC 6939) of
// the relay nearest the client (dnsmasq's dhcp-relay adds it); a client DUID of type LL
// (iPXE) or LLT (EDK2 on a machine without an SMBIOS UUID) with hardware type Ethernet; the
// modified EUI-64 interface ID of the client's link-local address (EDK2 builds its
// link-local address so: Ip6Dxe/Ip6Common.c Ip6CreateInterfaceID). EDK2's boot-server
// REQUEST to 4011 comes from the address the site's server gave it, which carries no MAC:
// the server remembers the MAC of the last 1024 clients it sent an ADVERTISE to, by client
// DUID and transaction (the REQUEST repeats both), and answers that REQUEST with it. A boot
// client whose MAC cannot be known is silent, counted as [ReasonNoMAC] ([ErrNoMAC]): EDK2
// with an SMBIOS UUID (DUID-UUID, Dhcp6Dxe/Dhcp6Utility.c Dhcp6GenerateClientId with
// PcdDhcp6UidType's default 4) behind a relay that adds no option 79, or whose 4011 REQUEST
// follows no ADVERTISE of this server, or a client with a random (RFC 7217) link-local
// address and a DUID of another type. CONFIRM, RENEW, REBIND, RELEASE and DECLINE are for
// the site's server and are never answered ([ReasonIgnored]). The decision is the same [Handler] as for DHCPv4, with
// [Request.IPv6] set; unknown machines reach the [Discoverer] the same way, with Relay the
// innermost relay's link address.
//
// A reply carries the client's DUID, this server's ([Server.ServerDUID]), the vendor class
// 343 "PXEClient" or "HTTPClient", and the boot file URL (option 59):
//
//	UEFI PXE        tftp://[SERVER]/ipxe.efi (ipxe-arm64.efi for arm64)
//	UEFI HTTP boot  http://[SERVER]/boot/files/ipxe.efi
//	iPXE            http://[SERVER]/boot/chain.ipxe
//
// and never an IA_NA, IA_TA, IA_PD, status code, preference or option 60 (see below why).
// A Decision's BootFile that is a URL goes in as it is; a bare file name becomes
// tftp://[SERVER]/NAME. SERVER is [Server.ServerIP6], else per packet (IPV6_PKTINFO) the
// address the request was sent to when it is global (relayed requests, the 4011 request),
// else a global address of the interface a multicast request came in on. Replies leave from
// the address the request was sent to (unicast) or the kernel's choice on the receiving
// interface (a multicast request), out of that interface.
//
// # What EDK2 accepts over DHCPv6
//
// From EDK2's source (NetworkPkg; the same logic in edk2-stable202211, which Debian's OVMF
// is built from):
//
//   - The PXE driver always runs a stateful exchange for an address (UefiPxeBcDxe/PxeBcDhcp6.c
//     PxeBcDhcp6Sarr, IA_NA): the site's DHCPv6 server must give the machine its address; this
//     server only adds the boot file. HTTP boot does the same (HttpBootDxe/HttpBootDhcp6.c).
//   - An ADVERTISE with a status code other than Success, at its top level or inside the
//     client's IA_NA, is dropped before PXE or HTTP boot see it (Dhcp6Dxe/Dhcp6Io.c
//     Dhcp6HandleAdvertiseMsg, Dhcp6SeekStsOption): a proxy must not send the NoAddrsAvail
//     that RFC 8415 has an address-less server send. An ADVERTISE with preference 255 is
//     selected at once (Dhcp6HandleAdvertiseMsg), before the address server's offer; so
//     neither is sent. The offers collected after the first retransmission time (4 s,
//     PxeBcDhcp6Sarr) are all the client looks at, and if only a proxy's came by then the
//     attempt fails: the address server must answer within it.
//   - An offer without an IA_NA (or with one whose status is not Success) is a proxy offer;
//     one whose option 16 has enterprise 343 and data starting "PXEClient" is a PXE offer
//     (PxeBcParseDhcp6Packet, PXEBC_DHCP6_ENTERPRISE_NUM): this server's ADVERTISE is a
//     "ProxyBinl" offer, all of which are kept (PxeBcCacheDhcp6Offer). The address server's
//     offer is chosen with it (PxeBcSelectDhcp6Offer: "DhcpOnly offer and ProxyBinl offer").
//   - When it asks again: after the address server's REPLY, for each ProxyBinl offer, EDK2
//     reads the server address from its option 59 (PxeBcRetryDhcp6Binl,
//     PxeBcExtractBootFileUrl; without option 59 it would use ff02::1:2) and sends once, from
//     UDP 4011 to that address's UDP 4011, its REQUEST with the proxy offer's xid and server
//     DUID and its other options but the IAs (PxeBcRequestBootService); the answer, from port
//     4011, must carry option 59 or the offer is skipped, and it is where the boot file comes
//     from (UefiPxeBcDxe/PxeBcBoot.c PxeBcDhcp6BootInfo). EDK2 starts reading for that
//     answer only after its send completed (PxeBcImpl.c EfiPxeBcUdpWrite resets its writer,
//     then PxeBcRequestBootService configures its reader), so a fast answer can be lost and,
//     with it, the attempt (seen here once in a few runs): the server sends the REPLY again
//     [Resend6Delay] later, counted in [Stats].Resent. The server DUID must be 3 to 130
//     bytes (PXEBC_MIN_SIZE_OF_DUID, PXEBC_MAX_SIZE_OF_DUID) and a packet at most 1472 bytes.
//   - Option 60's first parameter is read as the boot file's size in 512-byte blocks
//     (PxeBcExtractBootFileParam); without it EDK2 asks TFTP for tsize. Replies carry none: a
//     wrong size would cut the download short. The URL is tftp://[ADDRESS]/FILE or a host
//     name resolved by DNS, with at most ";mode=octet" after it.
//   - HTTP boot takes a proxy offer (no IA_NA) whose option 16 data starts "HTTPClient" (the
//     enterprise number is not checked) and that has an option 59, without which the offer is
//     dropped (HttpBootParseDhcp6Packet); with an address literal in the URL it is a
//     ProxyIpUri offer, used with the address server's offer ("DhcpOnly + ProxyIpUri" or
//     "DhcpDns + ProxyIpUri", HttpBootDhcp4.c HttpBootSelectDhcpOffer; the URL from
//     HttpBootClient.c HttpBootDhcp6ExtractUriInfo). HTTP boot asks nothing again: the
//     ADVERTISE is all it needs.
//
// Seen here with Debian's OVMF and QEMU (TestQEMU_OVMFIPv6PXE, its exchange in
// testdata/ovmf-ipv6-pxe.pcap): with dnsmasq as the address server, OVMF's IPv6 PXE takes
// this server's ADVERTISE, gets its address from dnsmasq, sends the REQUEST to 4011 from its
// new address with this server's DUID and the SOLICIT's xid, and reads ipxe.efi over TFTP
// from the address named; with PXE off, its IPv6 HTTP boot takes the HTTPClient ADVERTISE
// and asks HEAD /boot/files/ipxe.efi of the URL's server (TestQEMU_OVMFIPv6HTTPBoot).
//
// Where the boot file must come from the site's DHCPv6 server itself, that server names this
// agent's URL:
//
//   - An EDK2 offer with an address and PXEClient ("DhcpBinl", chosen first) makes EDK2 send
//     its 4011 REQUEST to the address in that offer's option 59 without a server DUID
//     (PxeBcRequestBootService adds one only for a proxy offer): with option 59
//     tftp://[AGENT]/ipxe.efi there, this server answers that REQUEST (same Handler; the
//     machine's MAC must then be in its DUID, as it is without an SMBIOS UUID). An offer
//     with an address and option 59 but no PXEClient, or an HTTP boot offer with an address and
//     an HTTPClient URL, is booted from directly, without asking this server.
//   - iPXE over DHCPv6 (src/net/udp/dhcpv6.c dhcpv6_rx) takes, when stateful (router
//     advertisements with the M flag), the first ADVERTISE with a usable address and the
//     settings of that one server's REPLY: a proxy's answer is never used, so the site's
//     server names http://[AGENT]/boot/chain.ipxe for user class iPXE. When stateless (the O
//     flag: INFORMATION-REQUEST) iPXE takes the first REPLY, which this server answers with
//     the chain URL.
//
// # Firmware quirks
//
// Real firmware's quirks that broke other network-boot projects, and the test that holds
// each here (tests in this package unless another is named):
//
//	quirk                                        source                                  test
//	-------------------------------------------  --------------------------------------  -------------------------------------------------------
//	exit must fall through: give-ups are a 200   tinkerbell #984; Sidero Metal notes     ipxe TestQuirk_ExitMustFallThrough,
//	  with "exit 1" (iPXE runs no 4xx body;                                                secureboot TestQuirk_GRUBGiveUpsFallThrough
//	  GRUB reads none, over TFTP or HTTP)                                                  (each give-up, TFTP and HTTP);
//	  and OVMF then boots its next Boot####                                                e2e TestE2E_OVMFExitFallsThrough (OVMF,
//	                                                                                         siteboot's snponly.efi, real firmware)
//	  fenced past its wait, and the chain                                                ipxe TestQuirk_FencedGivesUpWithExit1,
//	  script's own give-up: "exit 1" after the                                             TestGiveUpFallsThrough,
//	  back-off, never "reboot" (which loops                                                TestQEMU_RealIPXEFencedGivesUp (SeaBIOS);
//	  while no agent is active)                                                            e2e TestE2E_OVMFFencedFallsThrough (OVMF)
//	  GRUB (Secure Boot): its exit returns                                                 grubcfg TestGiveUpBootsTheDisk,
//	  success, so every give-up boots the                                                  secureboot TestDecisions;
//	  ESP's own grub.cfg, else its shim                                                    e2e TestE2E_SecureBootGiveUpBootsDisk
//	  chainloaded; exit 1 only without a disk                                                (OVMF enforcing Secure Boot)
//	local boot on purpose (entry local_boot)     MAAS LP#1642298; Foreman #10207; Sidero  ipxe TestQuirk_LocalBootOnPurpose,
//	                                                                                       secureboot TestQuirk_LocalBootOnPurposeGRUB,
//	                                                                                       sitelink TestQuirk_LocalBootEntry;
//	                                                                                       e2e TestE2E_LocalBootUEFI (OVMF),
//	                                                                                       TestE2E_LocalBootBIOS (SeaBIOS's ROM),
//	                                                                                       TestE2E_LocalBootBIOSOwnIPXE (undionly)
//	a chained iPXE sends option 60 PXEClient     ipxe #1527                              TestQuirk_ChainedIPXESendsOption60PXEClient
//	option 93 x86-64 UEFI is 7 or 9              RFC 4578 errata; netboot #101, #30;     TestQuirk_Option93X86_64UEFIIs7Or9
//	                                               xCAT #7645
//	no option 97 (no client GUID)                pixiecore #21                           TestQuirk_NoOption97
//	  the decision says so (Decision.NoUUID,                                               TestQuirk_NoOption97DecisionSaysSo,
//	  event Detail "no-uuid", AnsweredNoUUID)                                              sitelink TestQuirk_NoOption97UUIDUnchecked
//	  and /metrics proxydhcp_answered_no_uuid_total
//	reply delay per arch, default none           dnsmasq --dhcp-reply-delay              TestQuirk_ReplyDelay
//	the site's DHCP answers first (no boot file) pixiecore README.booting.md;            e2e TestE2E_SiteDHCPAnswersFirst (SeaBIOS,
//	                                             warewulf3 #137                            dnsmasq, real firmware)
//	site's option 60 PXEClient without 43:       FOG docs #188                           e2e TestE2E_SiteDHCPOption60NoOption43*
//	  EDK2 asks its next server at 4011, iPXE                                              (OVMF); bootevents TestExplain (no-4011,
//	  its server id: no boot; explain says why                                             ipxe-no-chain)
//	no DNS in UEFI HTTP boot: IP-literal URLs    ipxe #1316                              TestQuirk_NoDNSInUEFIHTTPBoot
//	arm64 UEFI HTTP boot (19) and PXE (11)       AAVMF; IANA processor architectures     TestQuirk_ARM64UEFIHTTPBoot
//	DHCPv6 DUID-LLT, -LL, -UUID, option 79       RFC 8415, 6355, 6939; EDK2 Dhcp6Dxe     TestQuirk_DHCPv6Identities
//	GRUB config name by version                  Ironic release note (GRUB config name)  secureboot TestQuirk_GRUBConfigNameByVersion
//	  (grub.cfg-01-MAC, MAC.conf)
//
// Shown with real firmware: after the exit script (or the local-boot script on UEFI) OVMF
// moves on to its next Boot#### entry, and a machine whose network comes first boots its
// disk (e2e TestE2E_OVMFExitFallsThrough, TestE2E_LocalBootUEFI, with siteboot's
// snponly.efi). Run with Debian's ipxe.efi (1.0.0+git-20190125) in its place, the test
// showed that build returning the error of "exit 1" to the firmware too; what returned
// success was a plain "exit", on which OVMF opened its menu (UiApp). Siteboot's build ends its embedded
// script in "exit 1" after autoboot returns, so even a site script's plain "exit" falls
// through with it. A fenced agent's answer ends the same way once the chain script's
// back-off (2 + 4 + 8 s by default) is over: OVMF boots its disk (e2e
// TestE2E_OVMFFencedFallsThrough). Debian 12's shim and signed GRUB 2.06 return success
// for GRUB's "exit 1", and OVMF opens its menu (e2e
// TestE2E_SecureBootGRUBGiveUpReturnsToFirmware, a machine without a disk), so GRUB's
// give-ups and local boot boot the disk themselves: the ESP's own configuration, else its
// shim chainloaded (e2e TestE2E_SecureBootGiveUpBootsDisk).
//
// A site DHCP server that sends option 60 PXEClient without option 43 defeats proxy DHCP
// for iPXE: iPXE takes that offer as a ProxyDHCP offer too (it names PXEClient and a
// server) and, in the e2e run with Debian's iPXE, asked that server at 4011 and not this
// one, though this server's proxy offer came within the same tens of milliseconds. EDK2
// asks the offer's next server at 4011, which works when the site names this agent there.
// The site must stop sending option 60 (or send option 43); the agent's explanation of the
// machine says so (bootevents' no-4011 and ipxe-no-chain).
//
// [Server.ReplyDelay] holds back the replies to the architectures it lists: for firmware
// that ignores an instant answer, and for a site whose own DHCP server must answer first.
//
// # Wiring
//
// Give [Server.Serve] a socket for port 67 and [Server.ServeBoot] one for port 4011, or call
// [Server.ListenAndServe]. On a *net.UDPConn the server turns on IP_PKTINFO (through
// golang.org/x/net/ipv4) and, per packet, answers out of the interface the request came in
// on, naming the address the kernel gives for it (on Linux, ipi_spec_dst: the receiving
// interface's address for a broadcast), so one server on 0.0.0.0 serves several segments,
// in any network namespace. [Server.ServerIP] fixes the address instead; elsewhere than
// Linux, a wildcard socket that receives broadcasts needs it. For DHCPv6 give
// [Server.ServeDHCPv6] a socket from [ListenDHCPv6] and [Server.ServeBoot] a second one on
// [::]:4011 (or set [Server.IPv6] for ListenAndServe); IPV6_PKTINFO gives the address and
// interface per packet, and [Server.ServerIP6] names the address for URLs when the sockets
// were opened in another network namespace than the process's. [Server.Shutdown] lets
// requests already read be answered (and a pending second copy of a DHCPv6 boot-server REPLY
// be sent); [Server.Close] stops at once. [Server.Respond] runs the whole decision for one
// datagram without a socket.
//
// # Limits and safety
//
// Everything in a packet is hostile until parsed. Datagrams over [MaxPacketSize] bytes,
// truncated options and non-Ethernet requests are dropped; a [Request] carries only typed
// fields (no free text), so a host may store them. A fixed number of Workers per socket read
// and answer requests, so work is bounded: while all are busy, datagrams wait in the socket's
// buffer and what does not fit is dropped by the kernel (the firmware retries; Linux reports
// the drops, counted as [ReasonOverload]). A panic in the Handler is recovered. Counters of
// answers and of silence by reason, per port, are in [Server.Stats]. DHCPv6 requests nest at
// most 8 relays deep and name DUIDs of 3 to 130 bytes; anything else is malformed.
package proxydhcp
