// Package agent is the reference site agent: it wires every siteboot package into one
// daemon, and is what examples/siteagent runs and examples/bootlab starts twice.
//
// # Wiring
//
// New binds the sockets its Config names and builds the parts; Run serves them in one
// errgroup until its context ends, then drains them.
//
//   - proxydhcp answers a machine only when it has a live boot entry (Entries) and the lease
//     fence is active; an unknown machine goes to the discovery list.
//   - tftpd serves the iPXE builds from boot.tftp_root.
//   - ipxe renders each machine's script: the site's kernel and initrd from the image cache
//     under the entry's boot grant (one grant per entry, revoked at clean-up), the bc.*
//     parameters, the discovery token fetched once from the control plane, and a fresh
//     assertion signed by the node key.
//   - imagecache pulls the site's kernel and initrd and the control plane's cache images, and
//     serves them only under grants, boot grants only while the fence is active.
//   - lease.Fence says whether this agent is the site's boot server, from the control plane's
//     word on each heartbeat, measured from when the heartbeat was sent.
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
// an in-process link for tests.
//
// # Metrics
//
// /metrics (Prometheus, the agent's own registry) exports the components' counters: proxy
// DHCP answers and silences by reason, TFTP transfers by outcome and drops, the boot
// handler's answers by kind (script, unknown, fenced, token-wait, ...), cache serving,
// refusals and pulls, assertions, the fence and the epoch. /healthz answers 503 while the
// control plane has not been heard from for three heartbeats.
package agent
