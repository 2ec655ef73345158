// Package siteboot is a library of the parts a bare-metal site agent needs to network-boot
// machines safely beside a site's own DHCP server. It holds no code of its own: each part is
// an independent package with small interfaces, and a host program wires the ones it needs.
//
// # Packages
//
//   - proxydhcp: proxy DHCP on UDP 67 and 4011 for PXE and UEFI HTTP boot; names the boot
//     file and server, never hands out an address, and answers only machines the host names.
//   - tftpd: a read-only TFTP server confined to one root, with transfer limits.
//   - ipxe: an injection-proof iPXE script renderer and the /boot/ HTTP handler.
//   - grubcfg: an injection-proof GRUB configuration renderer for machines that boot with
//     Secure Boot through shim and a signed GRUB.
//   - imagecache: a sha256-addressed image cache with verified pulls, LRU eviction under a
//     byte budget, and serving only under unguessable grants.
//   - bmc: BMC drivers (bmc/redfish, bmc/ipmi) behind one small interface, and bmc/bmctest,
//     a fake Redfish BMC serving real Redfish data.
//   - lease: the fenced boot lease that makes one agent per site the boot server.
//   - casreg: the compare-and-swap register (bytes by key, versioned) that lease records
//     and BMC claims are kept in: in memory, or on etcd (lease/etcdstore, a module apart).
//   - discovery: the bounded list of machines that tried to boot without an entry, and the
//     control plane's matcher that names a machine's candidate MAC.
//   - assertion: signed discovery assertions ("this agent served this MAC") and their
//     verification.
//   - hwid: MAC, SMBIOS UUID and client-architecture vocabulary shared by the others.
//   - sitetls: mutual TLS between a site agent and its control plane, with certificate
//     files re-read when they change and the node identity of a verified peer.
//   - sitelink: the protocol between a site agent and its control plane (messages, HTTP
//     binding, client, server-side handler) and its OpenAPI specification.
//   - connlimit: a listener that caps connections per source and in total, so a flood of
//     HTTP connections cannot take the descriptors other protocols need.
//
// # Wiring
//
// Component packages never import each other. Each declares the one- to three-method
// interface it needs (proxydhcp asks whether to answer a MAC and with what; ipxe asks for the
// machine's entry, a token and an assertion; imagecache asks whether the fence is active), and
// the host implements them from the others: the lease fence gates proxydhcp, ipxe and
// imagecache grants; proxydhcp and ipxe feed discovery; ipxe's assertions are signed by
// assertion. examples/siteagent is a reference agent that wires every package, and
// examples/bootlab runs it with simulated machines in one command.
package siteboot
