// Package bootevents is the vocabulary of what siteboot's components decide about a
// machine, and the bounded per-machine timeline that answers "why didn't it boot?".
//
// # Events
//
// Each decision about a machine is an [Event]: the MAC, the boot id, the [Stage] (DHCPv4,
// DHCPv6, 4011, TFTP, the script, GRUB, the cache, the assertion, the BMC, the fence, the
// machine's console), the [Outcome], the reason in the same word the component's counters
// use, the peer address, bytes and duration. A component emits through its optional
// Events field of type [Sink]; nil is off, and a component with no Sink builds no event,
// so nothing is allocated when no one listens. [Tee] hands events to several sinks;
// [LogSink] writes them as slog records carrying the same ids.
//
// # Boot ids
//
// A boot is named by the nonce its DHCP answer carried (package bootbind), which the
// firmware and iPXE bring back over TFTP and HTTP. The nonce is a one-time credential, so
// events carry [BootIDOf] the nonce (8 bytes of its SHA-256) and never the nonce: every
// component that sees the nonce names the same boot, and a timeline, a log or a trace
// that shows the id gives nothing to replay.
//
// # The timeline
//
// A [Timeline] is a Sink that keeps the last boots of each machine, found by MAC
// ([Timeline.Machine]) and by boot id ([Timeline.ByBootID]). Events that name only an
// address (TFTP, a console line) are put in the timeline of the machine the address was
// last seen for (an event's Addr, [Timeline.Learn], or the host's Config.Resolve). A new
// boot begins at the firmware's DHCP request after a boot that got further than DHCP, or
// after Config.BootGap of silence.
//
// # Limits
//
// Memory is bounded whatever the network sends: Config.MaxMachines machines (default
// 4096), Config.BootsPerMachine boots each (3), Config.EventsPerBoot events per boot (16:
// the first quarter and the latest are kept) and Config.LinesPerBoot console lines (8,
// the latest); a detail is cut at MaxDetail bytes, a console line at MaxLine, and both
// are stripped of all but printable text ([Printable]); at most MaxReasons distinct
// reason words are kept. A boot's events are kept packed (a dozen or two bytes each:
// times as offsets, reasons and the first MaxDetails distinct details as indexes into one
// kept copy, the machine's UUID, the boot's ids and its first address by reference, other
// addresses as their bytes) and unpacked when read; a machine's boots, addresses and UUID
// are one byte slice, the rest of it 40 bytes in a slab of machines with no pointer but
// that slice's, and one open-addressing index of the slots finds machines by MAC, address
// and boot id. [Config.MaxBytes] states the total (about 85 MiB at the defaults, every
// machine full of events at their longest; a machine whose boot went well, ten events,
// holds under 320 bytes, its share of the index included), and a
// test floods a Timeline with 100,000 spoofed MACs and holds it to that figure. When a
// new machine needs room, the machine least recently heard of among those never answered
// gives way first, so a flood of spoofed MACs pushes out only its own kind.
//
// # Explain
//
// [Explain] turns a machine's newest boot, and what the host knows ([Facts]: its entry,
// the boot lease), into a [Diagnosis]: a code and one line a person acts on ("no DHCP
// request seen from this MAC on any interface: check the relay or the VLAN"; "answered at
// 4011 but the firmware never asked for the boot file over TFTP"; "fenced: this agent does
// not hold the boot lease (epoch 3 held by agent-b)"; "entry's arch BIOS, machine asked as
// x86-64 UEFI"), and for a boot that went through, its path with timings. A [Machine]
// encodes to JSON as a host serves it; the same JSON decodes back for Explain at the
// other end.
package bootevents
