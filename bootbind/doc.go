// Package bootbind binds a machine's boot requests to the proxy DHCP answer it got (DESIGN.md
// S1): one-time boot nonces named in the answers, the keys a signed boot loader presents for
// its configuration, and the per-MAC IPv6 passes where DHCPv6 cannot carry a nonce. A host
// gives a script, configuration or file with a secret (a discovery token, a cache grant, a
// signed assertion) only to a request this package calls [Bound].
//
// # Wiring
//
// [Nonces] is the store. Its Bind method is proxydhcp's Binder: set it as
// proxydhcp.Server.Binder and proxy DHCP names a fresh chain nonce in every answer to iPXE it
// sends unicast to the machine, bound to the address the answer went to; the script handler
// asks [Nonces.Claim] with the nonce, the MAC and the request's address. A host that builds
// an answer itself (a signed shim under a nonce's directory, an HTTP boot RAM disk) calls
// [Nonces.Issue] with the address the answer goes to and later [Nonces.Fetched]. [Keys] bind
// a boot loader's configuration to the address its key went to; [Passes] stand in for a
// nonce over IPv6. [Nonces.SaveFile] and [Nonces.LoadFile] keep the binding across a
// restart, within each nonce's window: SaveFile writes the file atomically and only when
// the nonces changed; LoadFile drops the lapsed on the store's clock, keeps the store's
// bounds, and sets a damaged file aside ([DamagedError]) keeping every entry that parsed.
// [Nonces.Save] and [Nonces.Load] are the same documents in memory. [Keeper] does that
// bookkeeping for a host: Load at start, a save after each nonce issued and every second.
//
// # IPv6 passes
//
// iPXE over DHCPv6 never uses a proxy's answer when the segment's router advertisements
// ask for stateful DHCPv6 (the M flag: iPXE's src/net/udp/dhcpv6.c dhcpv6_rx takes the
// settings of the one server whose address it took), so its chain URL comes from the
// site's DHCPv6 server, which cannot carry a one-time nonce. What binds that script
// request to the host's DHCP answer instead is the answer the host gave the machine's
// firmware (EDK2's SOLICIT or its 4011 REQUEST, or on a dual-stack segment its DHCPv4
// DISCOVER or 4011 REQUEST: Debian's iPXE then takes the DHCPv6 server's chain URL over the
// IPv4 proxy's, seen in the reference agent's TestE2E_IPv6DualStack): each such answer
// issues the MAC's pass ([Passes.Issue]), valid for the window, which only a script
// request over IPv6 from the provisioning segment ([OnLink]), from an address that got one
// of those answers or that is the MAC's own, holds.
//
// # Refusals
//
// Each refusal has a [Reason], counted by the store: "no-nonce" (a MAC-only request),
// "unknown-nonce" (never issued, forgotten, or of another kind), "nonce-lapsed" (older than
// the window), "nonce-other-mac", "nonce-other-address" (the nonce belongs to another
// address: the one its answer was sent to, or the first that presented it), "off-segment"
// (the requester is not on a provisioning segment) and "no-pass" (no IPv6 pass of the MAC).
//
// # Who can still do what
//
// The binding trusts the DHCP path of the machine's own segment, and nothing else:
//
//   - Proxy DHCP answers with a nonce only a requester on a provisioning segment (a source
//     on the receiving interface's own subnets, or on a subnet behind an allowed relay:
//     proxydhcp's ReasonOffSegment), and only in an answer sent unicast to that requester;
//     broadcast answers to iPXE name no nonce (iPXE then asks on port 4011). The nonce
//     belongs to the address the answer went to.
//   - So a host on the machine's own segment (or on the subnet behind the machine's relay)
//     that sends DHCP requests with the machine's MAC gets nonces of its own, bound to its own
//     address, and with them the machine's secrets; and a host there that also spoofs the
//     machine's IP address, or its MAC toward the neighbour table, and wins the race takes the
//     machine's own nonce or IPv6 pass. That is S1's remaining exposure: such a host could
//     always have answered for the machine.
//   - Nobody else can: not a host on another network (its requests are off-segment, and a
//     nonce sent to an address it does not hold is refused from its own), not a bystander
//     that reads every broadcast (no nonce travels in one), not a requester that knows only a
//     MAC, a guesser (128 random bits), or one that replays a nonce after its window.
//   - UEFI HTTP boot takes its URL from the broadcast offer itself: a host that makes that
//     URL name a nonce (a Secure Boot RAM disk) sends it to no single address, and the first
//     address to fetch under it owns it, unless [Nonces.Neighbor] resolves that address to
//     another MAC than the nonce's: a bystander on the segment that read the offer must then
//     also spoof the machine's MAC, as above. A machine behind a router is not in the
//     neighbour table, so there the first fetcher owns the nonce.
//
// # Limits
//
// Every store is bounded (Config.Max, default DefaultMaxNonces; MaxNoncesPerMAC,
// MaxKeysPerMAC, MaxPassAddrs): the lapsed, else the oldest, give way. A MAC's new nonce
// pushes out first the oldest nonce issued to the same address, so answers to one requester
// never push out the nonce of another that has not presented it yet. Once a newer key of a
// MAC is active, its older keys stop working. Time and randomness are injected
// (Config.Clock, Config.Rand).
package bootbind
