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
//   - secureboot: the Secure Boot chain itself (shim and GRUB over TFTP, per-machine boot
//     keys, the RAM disk of UEFI HTTP boot, each machine's GRUB configuration from the boot
//     decision), given only to the address a machine's key went to.
//   - imagecache: a sha256-addressed image cache with verified pulls, LRU eviction under a
//     byte budget, and serving only under unguessable grants.
//   - bmc: BMC drivers (bmc/redfish, bmc/ipmi) behind one small interface, and bmc/bmctest,
//     a fake Redfish BMC serving real Redfish data.
//   - lease: the fenced boot lease that makes one agent per site the boot server.
//   - casreg: the compare-and-swap register (bytes by key, versioned) that lease records
//     and BMC claims are kept in: in memory, or on etcd (lease/etcdstore, a module apart).
//   - discovery: the bounded list of machines that tried to boot without an entry, the
//     machines answered that then went silent, and the control plane's matcher that names
//     a machine's candidate MAC.
//   - assertion: signed discovery assertions ("this agent served this MAC") and their
//     verification.
//   - hwid: MAC, SMBIOS UUID and client-architecture vocabulary shared by the others.
//   - sitetls: mutual TLS between a site agent and its control plane, with certificate
//     files re-read when they change and the node identity of a verified peer.
//   - sitelink: the protocol between a site agent and its control plane (messages, HTTP
//     binding, client, server-side handler) and its OpenAPI specification.
//   - connlimit: a listener that caps connections per source and in total, so a flood of
//     HTTP connections cannot take the descriptors other protocols need, with room kept
//     for the machines being booted (Recent); GiveWay, where the oldest connection gives
//     way to a new one.
//   - udpbind: a UDP socket bound to one network interface (SO_BINDTODEVICE on Linux), so
//     proxy DHCP hears and answers only the segment it serves.
//   - bootserver: the composition of a boot server from the packages above: proxy DHCP,
//     TFTP and the /boot/ and /cache/ HTTP mux on sockets the host bound, under one
//     fence, each script request bound to its DHCP answer, each script's assertion
//     signed; and the adapters that wire ipxe to imagecache, assertion and bootbind.
//   - bootevents: the typed events every component emits about a machine (an Events field,
//     nil meaning off), the bounded per-machine boot timeline, and Explain, the one-line
//     answer to "why didn't it boot?"; bootevents/oteltrace, a module apart, turns the
//     events into OpenTelemetry spans.
//   - syslogd: a syslog receiver that puts iPXE's console lines into the machine's
//     timeline.
//   - metric: a component's counters as named samples (no metrics library imported), so
//     that a host exports every component's counters with one loop.
//   - clock: the clock interface the packages take, and clock/clocktest, a fake that
//     moves and fires timers only when a test says so.
//
// # Wiring
//
// Component packages never import each other. Each declares the one- to three-method
// interface it needs (proxydhcp asks whether to answer a MAC and with what; ipxe asks for the
// machine's entry, a token and an assertion; imagecache asks whether the fence is active), and
// the host implements them from the others: the lease fence gates proxydhcp, ipxe and
// imagecache grants; proxydhcp and ipxe feed discovery; ipxe's assertions are signed by
// assertion. bootserver, the one package that imports the others, is that wiring for a boot
// server, so a host gives it its machines, its fence and its sockets and writes no glue.
// examples/siteagent is a reference agent that wires every package, and
// examples/bootlab runs it with simulated machines in one command.
//
// # Conventions every package follows
//
// Every package, present and future, follows these rules, so that an embedder who has
// learned one package has learned the shape of all of them.
//
// Lifecycle. A server starts and stops like [net/http.Server]: Serve(l) on a listener or
// socket the caller bound; ListenAndServe() binding the Addr field of the struct (the zero
// Addr names the protocol's default); Shutdown(ctx) graceful, Close() immediate, both
// making Serve and ListenAndServe return the package's ErrServerClosed. No goroutine
// outlives Shutdown or Close, and a leak check in the package's tests proves it. A type
// that is not a server but holds goroutines or files (a cache, a bounded list) has
// Close() error, and Shutdown(ctx) error when it has work to drain; a type that only runs
// a loop has Run(ctx) error, returning when ctx is done.
//
// Configuration. Exported struct fields whose comments state the default used when zero,
// the defaults exported as constants, and Validate() error where fields can conflict or
// be out of range. A constructor that must do I/O (opening a directory) takes such a
// struct. Functional options only for building messages.
//
// Time. A Clock field of type [github.com/bettercompute/siteboot/clock.Clock]; nil means
// [github.com/bettercompute/siteboot/clock.Real]. No package calls time.Now, time.Since
// or time.AfterFunc directly for a rule that depends on time (expiries, leases, grants,
// throttles, retries); deadlines of socket I/O, and of a transfer in progress
// (imagecache's stall, rate and pull deadlines), stay on the process's clock. Tests, ours
// and an embedder's, move time with [github.com/bettercompute/siteboot/clock/clocktest.Fake]
// and never sleep; a test whose Advance must follow a timer another goroutine arms waits
// for it with the Fake's BlockUntilContext or BlockUntilTimer, not with a poll.
//
// Errors. Package-prefixed sentinels, typed errors with Unwrap, always %w. Every package
// that refuses or fails for reasons a host counts has
//
//	func ReasonOf(err error) string
//
// returning a short stable name ("stale-epoch", "not-found", ...) for the first error of
// the package in err's chain, and "" for nil. The names are documented beside the
// function and meant for logs and metric labels; so is what it returns for an error it
// does not recognise ("" in most packages; imagecache names any other pull failure
// "network"). Typed reasons, where a package has them, are untyped constants or convert
// to the same strings: bootbind's ReasonOf names a refusal by its typed Reason
// (Reason.String, carried by RefusedError). The BMC drivers (bmc/redfish, bmc/ipmi)
// classify through bmc.KindOf, whose kinds bmc.ReasonOf names.
//
// Fence. A package that must act only while this agent is the site's active boot server
// declares, in its own words, the one-method interface
//
//	type Fence interface {
//		Active() (epoch uint64, active bool)
//	}
//
// with a FenceFunc adapter of func() (uint64, bool);
// [github.com/bettercompute/siteboot/lease.Fence] satisfies it as it is. The epoch is the lease term this agent holds; a consumer that records it
// (an assertion, a grant) treats epoch 0 as no lease.
//
// Statistics. A Stats() method returning a struct of uint64 counters (and gauges), copied
// under no lock the caller sees; never a map keyed by strings. Counts by refusal reason
// are one field per reason (assertion.RefusedCounts, with Of for a metric labelled by
// the reason's name).
//
// Metrics. The same Stats struct (or the type, where it has none) has
//
//	func (s Stats) Samples() []metric.Sample
//
// listing its counters under stable names a host exports as they are after its own
// namespace: lower-case snake case beginning with the component's subject (proxydhcp_,
// tftp_, cache_, boot_, secureboot_, http_connections_, bmc_, lease_, control_), ending
// in _total for a counter and not for a gauge; a count by reason is one family labelled
// by the name ReasonOf gives. A family whose labels multiply lists only its non-zero
// samples; every other sample is listed when zero. A label only the host knows (which
// listener) it adds with metric.With; metric.Check tests the convention. The reference
// agent's /metrics is one loop over its components' samples.
//
// Test helpers. A package an embedder would fake or run in a test ships an xxxtest
// package (tftpd/tftpdtest, ipxe/ipxetest, imagecache/imagecachetest, bmc/bmctest,
// lease/leasetest, casreg/casregtest, sitetls/sitetlstest, assertion/assertiontest,
// clock/clocktest). A helper that serves returns a value already serving on 127.0.0.1,
// with a URL or Addr field, and Close() with no result, like
// [net/http/httptest.Server]: Close blocks until every goroutine the helper started has
// ended, and the helper's own tests check that with a leak check. A helper that holds
// no goroutine, socket or file (assertiontest.Pair) has no Close.
package siteboot
