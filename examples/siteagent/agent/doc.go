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
//   - tftpd serves the iPXE builds from Boot.TFTPRoot.
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
// the 8 KiB header cap, read-header, read and idle timeouts ([ipxe.NewServer]). Every rule
// that depends on time reads the one [Clock] in Options: entries' not-after, the fence,
// discovery's forgetting and throttle, cache grants, assertions and the heartbeat.
//
// # The walk of one MAC
//
// A machine's MAC is parsed once, from the DHCP packet, and travels typed ([hwid.MAC], with
// its [hwid.UUID] and [hwid.Arch]) to the assertion the control plane verifies:
//
//  1. proxydhcp.Server reads the datagram on UDP 67 (or 4011) and parses it into a
//     proxydhcp.Request: chaddr as the MAC, option 93 as the arch, option 97 as the UUID,
//     giaddr as the relay.
//  2. The agent's proxy DHCP decision (serveDHCP) asks the fence, then [Entries] for the
//     MAC's record (the entry with its UUID and arch parsed when it arrived), then the
//     record's one match rule: option 93 against the entry's arch, option 97 against any
//     spelling of its UUID, when both sides have one. A mismatch is silence, counted and
//     logged by reason; no entry is silence too, and the Request goes on to
//     discoveredDHCP, which hands the same typed fields to discovery.List.Seen.
//  3. Answered, the firmware fetches the iPXE build (tftpd or /boot/files/), iPXE asks DHCP
//     again and is sent to /boot/chain.ipxe, whose script reports the NIC iPXE booted from:
//     ${netX/mac:hexhyp}, ${netX/ip}, with ${uuid}, ${platform} and ${buildarch}.
//  4. GET /boot/ipxe: ipxe.ParseQuery turns the query back into an ipxe.Query (the MAC, the
//     UUID, the IP, the arch). The handler asks the fence, then ipxe.Config.Entries, which
//     is the agent's ipxeEntry: the same record and the same match rule as in step 2. A
//     mismatch is ipxe.ErrMismatch: the exit script, no secret. An unknown MAC goes to
//     discovery (ViaHTTP), where discovery.Config.DHCPFirst keeps the one "proxy DHCP saw
//     it first" rule.
//  5. The ipxe.Entry carries the record as its Ref: the token step (the agent's token, via
//     Link.Token) and the cache grant (imagecache's BootGrantFor) read it without a second
//     lookup.
//  6. The handler fills ipxe.Claims: the query's MAC (the NIC that booted), the IP, the
//     entry's UUID, the workflow, the fence's epoch and the entry's not-after. The agent's
//     sign hands them to assertion.Issuer, the one owner of the assertion's lifetime (issued
//     now, at most 15 minutes, never past the entry's not-after), which signs them with the
//     node key.
//  7. The script puts the assertion on the kernel command line (bc.assertion); the
//     machine's ramdisk presents it to the control plane, whose assertion.Verifier checks
//     the agent's signature, the lease epoch (the control plane's lease.Store), age and
//     replay, that the joining machine's MACs include the asserted MAC, and the UUID.
//
// An unknown MAC's walk ends in the status report instead: the discovery list's snapshot
// travels in the heartbeat's [Report] (as text, on the wire), and the control plane merges
// the agents' lists and matches candidates (discovery.Merge, discovery.Match).
//
// # The control plane
//
// A Link carries a heartbeat (Report, with the fence's heartbeat number, the discovered
// list when its digest changed, the cache's state, counters and acknowledgements) and
// returns the desired state (the lease word, cache images) and commands: boot entries
// (boot.prepareRamdisk) and their clean-up (boot.cleanUp). A command is applied, written to
// DATA/boot-entries.json (temp file, fsync, rename, fsync dir) and only then acknowledged,
// so a restart keeps answering every entry the control plane saw acknowledged. While the
// link is down the agent keeps serving from what it has until its fence ends.
//
// HTTPLink is the link over HTTP+JSON; examples/siteagent/controlplane has the other end and
// an in-process link for tests. A host with its own control plane implements Link (see the
// package Example).
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
package agent
