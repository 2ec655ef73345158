// Package discovery keeps the list of unknown machines that tried to network-boot at a site
// (the site agent's side) and decides, on the control plane's side, which discovered MAC is an
// enrolled machine's candidate, or says why none is.
//
// Discovery lets a provisioning system learn the PXE MAC of a machine it already enrolled by
// product UUID (typically through an IPMI BMC that cannot name the machine's NICs). It never
// enrolls anything: everything in the list comes from unauthenticated DHCP and HTTP, so any
// host on the provisioning network can claim any MAC and any UUID. A candidate is a
// suggestion for an operator to confirm, not a binding.
//
// # The agent's side
//
// A [List] is fed by the proxy DHCP server and the iPXE boot handler through [List.Seen],
// with the typed fields they already parsed from a machine that has no boot entry
// ([Sighting]: a [hwid.MAC], a [hwid.UUID], a [hwid.Arch], a netip.Addr), so no field is
// turned into text and parsed again on the way:
//
//   - a sighting with a zero MAC is dropped;
//   - a product UUID is stored in its canonical lower-case 36-character form;
//   - an arch as [hwid.Arch.String] spells it, which always matches [a-z0-9_-]{1,32};
//   - a relay only as a unicast address without a zone; 0.0.0.0, :: and an IPv6 link-local
//     address mean "no relay", IPv4-mapped is unmapped. For DHCPv6 the relay is the link
//     address of the relay nearest the client (proxydhcp's Request.Relay): the address that
//     names the machine's link, as giaddr does for DHCPv4.
//
// A zero field means "not sent": it never erases what an earlier sighting of the MAC said.
// Nothing malformed can be stored, so no client can grow the agent's status report.
//
// The list holds at most [DefaultMax] machines (the one last seen longest ago is evicted to
// make room), forgets each [DefaultForgetAfter] after it was last seen, and drops a MAC when
// the host calls [List.Forget] because the MAC got a boot entry. With
// [Config.DHCPFirst] set, as when the agent runs proxy DHCP, a sighting from the boot handler
// only counts for a MAC that DHCP already put in the list, since anyone can fetch a URL. This
// is the one place that rule is kept: the boot handler reports every unknown fetch.
//
// # Machines that went silent
//
// A [Silent] watches the machines proxy DHCP answered ([Silent.Answered]) for a request
// that should follow within the boot binding's window ([Silent.Asked]: a script, a boot
// file, a chain). [Silent.Sweep], on the host's ticker, ends the watches that ran out,
// counts each (SilentStats.Silent) and returns the MACs not named before, for the host to
// log once: such a machine's firmware most likely took another server's boot file or HTTP
// boot URL, the site's own DHCP server offering one. It is bounded like the list.
//
// # Status reports
//
// [List.Snapshot] returns the entries, newest first, with a [Digest] of their content: the
// same content always gives the same digest, and any change (a new machine, a count, a
// last-seen time, an entry forgotten) gives a new one, so a control plane stores a list only
// when its digest changes.
//
// A new machine asks the host for a status report through [Config.ReportWanted], at most
// once per [DefaultReportEvery]. A new machine that arrives while the callback is throttled is
// not lost: one trailing call is made when the interval has passed, so the last change is
// always reported within the interval even if no further machine arrives. Updates of machines
// already listed never call it; they travel with the host's periodic status report.
//
// # The control plane's side
//
// [Merge] combines the lists of a site's agents (each agent's list replacing its previous
// one whole): counts summed, relays and agent ids listed, newest first, at most [DefaultMax],
// last 24 hours only.
//
// [Match] applies the candidate rule to a machine enrolled with a product UUID and no MACs,
// right after the control plane power-cycled it into PXE: a MAC is its candidate when it was
// first seen within 10 minutes after the power command (30 s of slack before it), it is the
// only MAC the UUID was seen from in the last 24 hours in any of the UUID's three spellings,
// whichever spelling the enrollment holds ([hwid.SameMachine], the one rule every siteboot
// package compares UUIDs by), no other machine of the site shares the UUID, and no enrolled
// machine has the MAC. Otherwise it returns a [*MatchError] whose [Reason] is one of
// [ReasonSharedUUID], [ReasonNotSeen], [ReasonAmbiguous] or [ReasonMACEnrolled].
// Placeholder UUIDs ([hwid.UUID.IsPlaceholder]) never match.
//
// [Identity.Verify] is the backstop once the ramdisk reports its own system UUID and NICs:
// for a MAC that came from discovery, the reported UUID must be the same machine as the
// enrolled one (any spelling of it against any other, [hwid.SameMachine]) and the NICs must
// include the MAC, otherwise [ReasonIdentityMismatch] (machine-identity-mismatch).
//
// # Time
//
// Every rule that depends on time takes it from an injected [clock.Clock] (the List's Clock
// field) or from a time passed in (Merge, Match), so tests run on fake time and never sleep.
package discovery
