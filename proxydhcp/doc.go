// Package proxydhcp implements a proxy DHCP server (PXE 2.1 ProxyDHCP, RFC 4578 options) for
// PXE and UEFI HTTP boot: it answers boot clients on UDP 67 and 4011 beside the site's own
// DHCP server with where to find their boot file, and never hands out an address.
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
//
// The table is data: a host edits it and installs it with [Server.SetBootFiles], and a
// [Decision] may name another file for one machine (a signed shim, say).
//
// A legacy BIOS offer carries option 43 with PXE discovery control 8 (boot the named file,
// no boot-server discovery). UEFI firmware instead asks again on UDP 4011; that request is
// answered with an ACK to its source address and port (OVMF sends from 4011, iPXE from 68).
// Port-67 replies go to the relay's port 67 when relayed, to ciaddr when the client has an
// address, and otherwise are broadcast out of the interface the request came in on.
//
// # Wiring
//
// Give [Server.Serve] a socket for port 67 and [Server.ServeBoot] one for port 4011, or call
// [Server.ListenAndServe]. On a *net.UDPConn the server turns on IP_PKTINFO (through
// golang.org/x/net/ipv4) and, per packet, answers out of the interface the request came in
// on, naming the address the kernel gives for it (on Linux, ipi_spec_dst: the receiving
// interface's address for a broadcast), so one server on 0.0.0.0 serves several segments,
// in any network namespace. [Server.ServerIP] fixes the address instead; elsewhere than
// Linux, a wildcard socket that receives broadcasts needs it. [Server.Shutdown] lets requests already read be answered; [Server.Close]
// stops at once. [Server.Respond] runs the whole decision for one datagram without a socket.
//
// # Limits and safety
//
// Everything in a packet is hostile until parsed. Datagrams over [MaxPacketSize] bytes,
// truncated options and non-Ethernet requests are dropped; a [Request] carries only typed
// fields (no free text), so a host may store them. A fixed number of Workers per socket read
// and answer requests, so work is bounded: while all are busy, datagrams wait in the socket's
// buffer and what does not fit is dropped by the kernel (the firmware retries; Linux reports
// the drops, counted as [ReasonOverload]). A panic in the Handler is recovered. Counters of
// answers and of silence by reason, per port, are in [Server.Stats].
package proxydhcp
