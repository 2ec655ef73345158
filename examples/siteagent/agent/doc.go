// Package agent is the reference site agent: it wires every siteboot package into one
// daemon, and is what examples/siteagent runs and examples/bootlab starts twice. It is also
// a composition a Go host can reuse: a typed [Config] ([DefaultConfig], [Config.Validate]),
// its own [Link] to its control plane, its own [Clock], sockets it bound itself ([Options]).
//
// # Wiring
//
// [New] binds the sockets its Config names (or takes those in Options) and builds the
// parts; [Agent.Run] serves them in one errgroup until its context ends, then drains them.
//
//   - proxydhcp answers a machine only when it has a live boot entry ([Entries]), the lease
//     fence is active, and the machine is the one the entry names (its arch and UUID, S3);
//     an unknown machine goes to the discovery list.
//   - tftpd serves the iPXE builds from Boot.TFTPRoot and, where it can, the signed chain
//     of Secure Boot machines (see Secure Boot).
//   - ipxe renders each machine's script: the site's kernel and initrd from the image cache
//     under the entry's boot grant (one grant per entry, revoked at clean-up), the bc.*
//     parameters, the discovery token fetched once from the control plane, and a fresh
//     assertion signed by the node key.
//   - imagecache pulls the site's kernel and initrd and the control plane's cache images, and
//     serves them only under grants, boot grants only while the fence is active.
//   - lease.Fence says whether this agent is the site's boot server, from the control plane's
//     word on each heartbeat, measured from when the heartbeat was sent.
//
// Every HTTP path (/boot/, /boot/files/, /cache/, /metrics) is served with ipxe's limits:
// the 8 KiB header cap, read-header, read and idle timeouts ([ipxe.NewServer]), and behind
// connlimit's per-source and total connection caps, derived from the soft RLIMIT_NOFILE less
// what proxy DHCP, TFTP's transfers and the agent's files need, so that a flood of held HTTP
// connections never takes TFTP's or proxy DHCP's descriptors (S4). The boot HTTP server's
// connections send images by sendfile(2) as internal/sendfile does: a call whose pages are
// cached does not tell the scheduler, so it does not hand its P to another thread. Every
// rule that depends on time reads the one [Clock] in Options: entries' not-after, the
// fence, discovery's forgetting and throttle, cache grants, assertions and the heartbeat.
//
// # The walk of one MAC
//
// A machine's MAC is parsed once, from the DHCP packet, and travels typed ([hwid.MAC], with
// its [hwid.UUID] and [hwid.Arch]) to the assertion the control plane verifies:
//
//  1. proxydhcp.Server reads the datagram on UDP 67 (or 4011) and parses it into a
//     proxydhcp.Request: chaddr as the MAC, option 93 as the arch, option 97 as the UUID,
//     giaddr as the relay. A request whose answer would go unicast to an address off the
//     provisioning segments is dropped there (off-segment).
//  2. The agent's proxy DHCP decision (serveDHCP) asks the fence, then [Entries] for the
//     MAC's record (the entry with its UUID and arch parsed when it arrived), then the
//     record's one match rule: option 93 against the entry's arch, option 97 against any
//     spelling of its UUID, when both sides have one. A mismatch is silence, counted and
//     logged by reason; no entry is silence too, and the Request goes on to
//     discoveredDHCP, which hands the same typed fields to discovery.List.Seen. A unicast
//     answer to iPXE (option 77 "iPXE") names the chain URL with a fresh boot nonce from
//     bootbind (proxydhcp's Binder); a broadcast one names no file (see Boot secrets).
//  3. Answered, the firmware fetches the iPXE build (tftpd or /boot/files/), iPXE asks DHCP
//     again, then port 4011 from its new address, and is sent to
//     /boot/chain.ipxe?n=NONCE, whose script reports the NIC iPXE
//     booted from: ${netX/mac:hexhyp}, ${netX/ip}, with ${uuid}, ${platform} and
//     ${buildarch}, and carries the nonce on (&n=NONCE).
//  4. GET /boot/ipxe: ipxe.ParseQuery turns the query back into an ipxe.Query (the MAC, the
//     UUID, the IP, the arch). The handler asks the fence, then ipxe.Config.Entries, which
//     is the agent's ipxeEntry: the same record and the same match rule as in step 2. A
//     mismatch is ipxe.ErrMismatch: the exit script, no secret. With proxy DHCP the request
//     must then hold a nonce this agent handed that MAC within Boot.NonceWindow, belonging
//     to the connection's address (ipxe.Query.Remote: the address its answer went to); otherwise
//     ipxe.ErrUnbound: the exit script, no secret, counted and logged by reason. An unknown
//     MAC goes to discovery (ViaHTTP), where discovery.Config.DHCPFirst keeps the one
//     "proxy DHCP saw it first" rule.
//  5. The ipxe.Entry carries the record as its Ref: the token step (the agent's token, via
//     Link.Token) and the cache grant (imagecache's BootGrantFor) read it without a second
//     lookup.
//  6. The handler fills ipxe.Claims: the query's MAC (the NIC that booted), the
//     connection's IP (a query ip that differs gets the exit script), the entry's UUID (a
//     query uuid that is no spelling of it gets the exit script), the workflow, the fence's
//     epoch and the entry's not-after. The agent's
//     sign hands them to assertion.Issuer, the one owner of the assertion's lifetime (issued
//     now, at most 15 minutes, never past the entry's not-after), which signs them with the
//     node key.
//  7. The script puts the assertion on the kernel command line (bc.assertion); the
//     machine's ramdisk presents it to the control plane, whose assertion.Verifier checks
//     the agent's signature, the lease epoch (the control plane's lease.Store), age and
//     replay, that the joining machine's MACs include the asserted MAC, and the UUID.
//
// An unknown MAC's walk ends in the status report instead: the discovery list's snapshot
// travels in the heartbeat's [sitelink.StatusReport] (as text, on the wire), and the control plane merges
// the agents' lists and matches candidates (discovery.Merge, discovery.Match).
//
// # Boot secrets
//
// A script with a secret (the discovery token, a cache grant, a signed assertion) goes only
// to the machine the agent booted (S1, S2); the binding is package bootbind's. With proxy
// DHCP, each answer to iPXE that goes unicast to the machine names a one-time boot nonce in
// its chain URL (http://SERVER/boot/chain.ipxe?n=NONCE, 128 bits from Options.Rand, in hex):
// proxy DHCP asks bootbind.Nonces for it (proxydhcp.Server.Binder), and the nonce belongs to
// the address the answer went to. The broadcast proxy offer to iPXE names no boot file, so
// iPXE asks again on port 4011 from its new address and gets the nonce there: no nonce
// travels in a broadcast. Proxy DHCP answers such unicast requests only from a provisioning
// segment: the interface's own subnets, Boot.Segments, and the subnet behind the relay a
// machine's own relayed DISCOVER came through (proxydhcp's off-segment silence).
//
// /boot/ipxe gives the entry's script only to a request with a nonce handed to that MAC less
// than Boot.NonceWindow ago (DefaultNonceWindow, 5 minutes; "nonce_window" in the file), from
// the address it belongs to: the machine's retries, its Retry-After asks and its token waits
// (whose scripts keep the nonce) get their script, anyone else gets the exit script, counted
// by reason (boot_unbound_no-nonce, _unknown-nonce, _nonce-lapsed, _nonce-other-mac,
// _nonce-other-address; siteboot_boot_unbound_total) and logged without the nonce. The store
// holds at most MaxNonces nonces, MaxNoncesPerMAC per MAC (answers to one address push out
// only that address's nonces first), on the agent's Clock, and is saved in
// Config.DataDir/boot-nonces.json (after each nonce issued, each second when it changed,
// and at the stop) and loaded at the start: a machine between its chain and its script
// when the agent restarts boots on within its window. The window bounds a whole boot's script fetches: a token that takes
// longer than the window leaves the machine on the exit script until it boots again.
//
// Who can still take a machine's secrets is a host on the machine's own segment (or on the
// subnet behind its relay) that sends DHCP requests with the machine's MAC (it gets nonces of
// its own, bound to its own address), as it could always have answered for the machine;
// nobody else: not a host on another network, not a bystander reading broadcasts, not a
// requester that knows only a MAC, nor one that replays a chain URL (bootbind's package doc,
// "Who can still do what").
//
// Without proxy DHCP (Boot.ProxyDHCP false: the site's own DHCP server names
// /boot/chain.ipxe) there is no nonce and the old rule applies: whoever reaches the agent's
// HTTP port and knows a MAC with a live entry gets that machine's script, with the
// assertion bound to the requester's own address. Such a site trusts every host that can
// reach the boot network, and should keep it to the machines being booted.
//
// # Secure Boot
//
// A machine whose entry says secure_boot (or, for x86-64 UEFI entries that do not say, with
// Boot.SecureBoot) boots through shim, signed by the UEFI CA, Debian's signed network GRUB
// and the site's signed kernel (DESIGN.md SB1; package grubcfg has what these binaries do).
// That GRUB has tftp and no http, so after shim everything goes over this agent's TFTP
// (port 69: GRUB names no port): grub/grub.cfg (grubcfg.Chain), the machine's configuration
// boot/grub.cfg?mac=..&uuid=..&n=KEY, the kernel and initrd as cache/t/GRANT/SHA256 (the
// image cache's own answer, under the entry's boot grant). The configuration is the boot
// handler's answer: its GRUB loader (ipxe.Loader, at /boot/grub.cfg) gets /boot/ipxe's
// decision (the live entry and match rule, the fence, the query's UUID, the token, the
// grant, a fresh assertion for the address the key was delivered to) spelled by grubcfg;
// the fenced and waiting answers are configurations (GRUB has no status to read over TFTP),
// "no" is a missing file, after which the Chain's back-off reboots. The site's DHCP server
// must name this agent as next server with an empty boot file (GRUB reads its server from
// the acknowledgement only). UEFI HTTP boot gets a RAM disk instead of shim over HTTP, after
// which the signed GRUB could fetch nothing: /sb/NONCE/boot.img, a FAT image with shim as
// \EFI\BOOT\BOOTX64.EFI, GRUB beside it, and a configuration that runs GRUB's own DHCP and
// then fetches over TFTP as after PXE.
//
// Secrets go only to the machine the agent answered (S1), by a boot key the configuration
// request must present (n=KEY, 128 bits, for one MAC, within Boot.NonceWindow):
//
//   - PXE: proxy DHCP's 4011 answer (unicast to the machine) names sb/NONCE/shimx64.efi; the
//     first address tftpd reports fetching a file under the nonce (the firmware's shim, then
//     shim's GRUB) is where the machine is. GRUB's Chain then fetches the key file
//     sb/key?mac=MAC: a fresh key, pending, one per MAC at a time, that becomes active only
//     when tftpd reports its transfer completed to that address; a key sent anywhere else is
//     dropped. (The port-67 offer names sb/shimx64.efi, without a nonce.)
//   - HTTP boot: the answer's URL names the nonce; the first connection that GETs the RAM
//     disk binds it, and the image it gets carries a fresh active key (HEAD mints none; a
//     second address gets 404).
//
// A configuration request whose key is unknown, lapsed, for another MAC or delivered to
// another address than the request's (over TFTP as over HTTP: tftpd opens the agent's files
// with tftpd.PeerFS's OpenFrom, told who asks) gets no answer: counted by reason
// (siteboot_secureboot_unbound_total), as are the keys (siteboot_secureboot_keys_total)
// and fetches under a machine's nonce from a second address. tftpd reports a transfer's
// peer only when it ends, so the binding of nonce and key to an address is made from those
// reports, before any secret leaves, and the secret's request is named by what only the
// machine received and comes from where it was received. What this trusts is what the
// iPXE path trusts (a host on the segment that spoofs the machine's MAC in DHCP, or sniffs
// its unicast traffic, can answer for it); a requester that knows the MAC and the
// machine's address, from anywhere, gets nothing. tftpd opens files on its reading loop, so a configuration whose answer takes
// longer than 100 ms (a token on its way) is answered with a one-second wait configuration
// and made meanwhile for the machine's next request.
//
// Without the files (and Boot.SecureBoot off) the chain is not served and such machines
// get silence, counted (siteboot_secureboot_refused_total{reason="unavailable"}); the chain
// is x86-64 UEFI and IPv4 only. Shim and GRUB are read, and the RAM disk built, when the
// first machine that boots the chain asks (at start with Boot.SecureBoot on, so that a bad
// file fails the start), then kept: a package upgrade takes effect at the next start.
//
// # Start-up and -check
//
// New removes the temporary files that writes interrupted by a crash left beside the boot
// entries and the node key (.tmp-boot-entries.json-*, .tmp-node.key-*; the image cache
// sweeps its own). [Config.Validate] (the command's -check) refuses a configuration that
// would start and serve nothing, naming the field: no address for the scripts' URLs
// (Boot.HTTPBase, Boot.ServerIP and Boot.CacheURL all unset), a Boot.ServerIP,
// Boot.HTTPBase or Boot.CacheURL host no machine can reach (unspecified, multicast,
// broadcast), a Boot.NonceWindow outside 10s..1h, Boot.SecureBoot without proxy DHCP,
// TFTP, or the shim and GRUB files (Boot.Shim, Boot.GRUB), a DataDir that exists and is not
// a directory, and a Control.Timeout longer than Lease.TTL.
//
// A damaged file does not stop the start. A DATA/boot-entries.json that does not parse, or
// holds entries that do not, is renamed aside (boot-entries.json.damaged-TIME, never
// deleted), the valid entries are served and written anew, and the status says so
// (boot_entries_damaged, boot_entries_dropped; siteboot_boot_entries_damaged). A damaged
// BMC journal is set aside by bmc.FileJournal, which then refuses destructive operations
// until an operator clears it; the agent logs it at start and reports it
// (bmc_journal_damaged; siteboot_bmc_journal_damaged), and keeps booting.
//
// The agent builds for Linux, macOS, FreeBSD and Windows; it serves as described here on
// Linux. Binding proxy DHCP to one interface (Boot.Interface) is Linux's SO_BINDTODEVICE:
// on other systems the agent does not start with it set (an error wrapping
// errors.ErrUnsupported), and the images it serves go out through net's own sendfile path
// (internal/sendfile). On Windows it does not start at all: its HTTP connection caps come
// from the descriptor limit, which connlimit cannot read there.
//
// # The control plane
//
// A Link speaks package sitelink's messages: a heartbeat (sitelink.StatusReport, with the
// fence's heartbeat number, the discovered list when its digest changed, the cache's state,
// counters and acknowledgements) answered by a sitelink.SyncResponse (the lease word, cache
// images) and commands: boot entries (boot.prepareRamdisk) and their clean-up
// (boot.cleanUp). The heartbeat hands the boot commands to an applier and never waits on
// the disk: the applier applies all it was handed in order, writes DATA/boot-entries.json
// once for the batch (temp file, fsync, rename, fsync dir) and only then acknowledges them,
// so a restart keeps answering every entry the control plane saw acknowledged. While the
// link is down the agent keeps serving from what it has until its fence ends.
//
// HTTPLink is the link over sitelink's HTTP binding (sitelink.Client);
// examples/siteagent/controlplane has the other end and an in-process link for tests. A
// host with its own control plane implements Link (see the package Example).
//
// # The link's security
//
// With a nil Link, [New] builds the agent's own ([NewHTTPLink]): mutual TLS (G3) with the
// site certificate in Control.CertFile, for the node key (Control.KeyFile, by default the
// node key file), verifying the control plane against Control.CAFile. At start the agent
// checks that the certificate names this site and node (spiffe://SITE/agent/NODE) and is
// for the node key, and sitetls refuses certificate and key files that group or others can
// read. Each heartbeat re-reads the files that changed (a renewed certificate is used from
// the next connection; a bad new file leaves the last good pair in use, so the fence never
// lapses for it, and /healthz names the file). A plain http:// URL is refused by
// [Config.Validate] unless Control.Insecure: then each start logs a warning, /healthz says
// "insecure" and siteboot_control_insecure is 1. No token, grant, assertion or key is
// written to a log, a metric, an error or a status report.
//
// # BMC access
//
// The bmc.* commands (bmc.query, bmc.boot, bmc.power, bmc.rotate, bmc.firmware,
// bmc.storage, bmc.mediaInsert, bmc.mediaEject; [sitelink.BMCCommand]) run whether or not the agent
// holds the lease, on a bmc.Executor off the heartbeat: one operation at a time per BMC,
// [BMCConfig].MaxConcurrent at once, each under its own deadline, the session closed after
// each. A target names its driver, address and credential reference; the agent fetches the
// credential through its link ([BMCLink]) when it needs it and keeps it in memory only.
// A destructive command is journaled in DATA/bmc-journal.json (bmc.FileJournal) and
// claimed through the link before it reaches the BMC, so neither a repeat, a restart nor a
// failover to another agent sends it twice. bmc.firmware and bmc.mediaInsert hand the BMC
// a cache URL under a grant for that one digest (2 h). Each command's [sitelink.BMCResult]
// (outcome, error kind, the BMC's message, what it read) goes back by id in the next
// Report, which the agent asks for as soon as a command ends.
//
// examples/siteagent/controlplane routes the commands (the lease holder first, else the
// first connected agent by id), keeps the claims, and runs the seed's metal.ensureRamdisk
// (the entries, a one-time PXE boot, a power cycle).
//
// # IPv6
//
// With Boot.ServerIP6 (a global IPv6 address of the agent) TFTP and HTTP each listen on one
// dual-stack socket ([::]:69, [::]:80), and a request that came to an IPv6 address is
// answered by a boot handler whose URLs are under Boot.HTTPBase6 (default
// http://[ServerIP6]): the chain script, the machine's script, the kernel, the initrd and
// bc.cache all name the bracketed address (imagecache's grant paths do not depend on the
// host). The chain script over IPv6 sends iPXE's ${netX/ip6} (iPXE's IPv6 address
// setting: its DHCPv6 lease when it has one, else its SLAAC address, else its link-local
// one, by the order of src/include/ipxe/ipv6.h IPV6_ORDER_*) as ip=, which the handler
// checks against the connection's address, and the assertion names the connection's
// address. With Boot.DHCPv6 proxy DHCP also answers DHCPv6 (UDP 547 and [::]:4011, see
// package proxydhcp): EDK2's IPv6 PXE is named tftp://[ServerIP6]/ipxe.efi and its IPv6
// HTTP boot http://[ServerIP6]/boot/files/ipxe.efi; the DHCPv6 counters (port 547) and
// the second copies of 4011 replies (siteboot_proxydhcp_resent_total) are in /metrics.
//
// iPXE never uses a proxy's DHCPv6 answer when the segment's router advertisements ask for
// stateful DHCPv6 (the M flag): it takes the settings of the one server that gave it an
// address (src/net/udp/dhcpv6.c dhcpv6_rx). So on such a segment the site's own DHCPv6
// server names the agent's chain URL for the user class iPXE, e.g. with dnsmasq:
//
//	dhcp-userclass=set:ipxe,iPXE
//	dhcp-option=tag:ipxe,option6:bootfile-url,http://[2001:db8::2]/boot/chain.ipxe
//
// That URL cannot carry this agent's one-time boot nonce (S1). In its place, each answer
// the agent gives a machine's firmware while Boot.DHCPv6 is on (EDK2's SOLICIT or 4011
// REQUEST, and on a dual-stack segment its DHCPv4 requests too: Debian's iPXE then takes
// the DHCPv6 server's chain URL over the IPv4 proxy's; for a MAC with a live entry, while
// the fence is active, from a provisioning segment) issues the MAC a boot pass
// (bootbind.Passes) for the nonce window. A script request over IPv6 for that MAC without a
// nonce holds it only from the provisioning segment (an on-link prefix of Boot.Interface, or
// Boot.Segments) and only from an address that got one of those DHCPv6 answers, or that is
// the MAC's own: its EUI-64 interface identifier, or an address the kernel's neighbour table
// resolves to the MAC. A host that asks first from another address is refused; a host on
// the segment that spoofs the machine's MAC can still take it. The passes are counted
// (boot_v6_passes_issued, boot_v6_passes_used). With stateless DHCPv6 (the O flag) iPXE
// takes the first REPLY to its INFORMATION-REQUEST, which proxy DHCP answers with the
// chain URL and a nonce, as over IPv4.
//
// # Metrics
//
// /metrics (Prometheus, the agent's own registry) exports the components' counters: proxy
// DHCP answers and silences by reason, TFTP transfers by outcome and drops, the boot
// handler's answers by kind (script, unknown, mismatch, fenced, token-wait, ...), requests
// refused for not matching their entry by where and reason, cache serving, refusals and
// pulls, assertions, the fence and the epoch. /healthz answers 503 while the control plane
// has not been heard from for three heartbeats. [Agent.Stats] gives the same counters by
// name, as the status report carries them.
//
// The boot HTTP listener keeps connlimit's reserve for the machines being booted: the
// addresses proxy DHCP answered, that presented their nonce or were served a live entry's
// script, for a nonce window; a flood from other sources cannot take it
// (siteboot_http_connections_refused_total{cap="reserve"},
// siteboot_http_connections_preferred_total). A machine proxy DHCP answered that then asks
// for nothing within the nonce window is named once in the log, with the likely cause (the
// site's DHCP server offering its own boot file or HTTP boot URL), and counted
// (siteboot_boot_answered_silent_total).
package agent
