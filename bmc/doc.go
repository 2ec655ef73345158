// Package bmc defines how siteboot talks to baseboard management controllers: a small
// Driver interface, optional capability interfaces a driver implements when its protocol
// and the BMC allow (power, one-time boot device, inspection, virtual media, firmware
// update, storage listing and changes, Secure Boot, credential rotation), a Registry that opens a driver by name,
// typed errors that say what failed, a Journal that keeps a retried operation from being
// sent twice (in memory, or persisted in a data dir), the claim protocol that keeps a
// destructive operation from reaching a BMC twice across agents, and an Executor that runs
// an agent's BMC operations in order and in bounds.
//
// Drivers live in sub-packages: bmc/redfish (DMTF Redfish over gofish) and bmc/ipmi (IPMI
// 2.0 lanplus over go-ipmi). bmc/bmctest serves a fake Redfish BMC for tests.
//
// # Wiring
//
// The host builds a Registry once, registering each driver it supports under the name its
// inventory uses; there is no package-level registry:
//
//	reg := bmc.NewRegistry()
//	reg.Register("redfish", redfish.Config{RootCAs: pool})
//	reg.Register("ipmi", ipmi.Config{})
//	d, err := reg.Open(ctx, bmc.Target{Driver: "redfish", Address: "https://10.0.0.5", Username: u, Password: p})
//	if err != nil { ... }           // errors.Is(err, bmc.ErrUnsupportedDriver) for a name nobody registered
//	defer d.Close()                  // logs the session out; BMCs cap sessions
//	if pc, ok := d.(bmc.PowerController); ok { err = pc.SetPower(ctx, bmc.PowerActionCycle) }
//
// A capability a driver lacks is a failed type assertion; a capability the driver has but
// this BMC refuses or does not offer is an error matching ErrUnsupported.

// Some BMCs cannot keep a boot device persistently (Lenovo XCC): SetBootDevice with
// Persistent is ErrUnsupported there. A BootKeeper wrapped around the driver sets such a
// device once and arms it once again before each power-on it runs (Ironic's workaround):
//
//	k := bmc.NewBootKeeper(d)
//	err = k.SetBootDevice(ctx, bmc.BootDevice{Target: bmc.BootPXE, Persistent: true})
//	err = k.SetPower(ctx, bmc.PowerActionCycle) // PXE again on this boot and every later one
//
// Across an Executor's operations, where each operation gets the BMC's session anew,
// [BootKeepers] keeps one keeper per BMC as the Executor's Wrap; an operation whose context
// is marked with [KeepBoot] (one that sets a boot device or the power) goes through it.
//
// # Operations
//
// A host rarely asserts for capabilities itself: it names an operation and the library
// maps it to the capability that carries it out. The operations are typed values of the
// Op interface, one per command kind of the seed (Kind: "bmc.query", "bmc.boot",
// "bmc.power", "bmc.rotate", "bmc.firmware", "bmc.storage", "bmc.mediaInsert",
// "bmc.mediaEject"):
//
//	kind             Op            name           destructive  capability
//	bmc.query        Query         query          no           inspect (and power, if any)
//	bmc.storage      ListStorage   storage        no           storage
//	bmc.storage      CreateVolume  create-volume  yes          volumes
//	bmc.storage      DeleteVolume  delete-volume  yes          volumes
//	bmc.storage      EraseDrive    erase-drive    yes          volumes
//	bmc.power        SetPower     power         yes          power
//	bmc.boot         SetBoot      set-boot      yes          boot
//	bmc.rotate       Rotate       rotate        yes          rotate
//	bmc.firmware     Firmware     firmware      yes          firmware
//	bmc.mediaInsert  InsertMedia  media-insert  yes          media
//	bmc.mediaEject   EjectMedia   media-eject   yes          media
//
// bmc.storage is a destructive kind (Kind.Destructive); its listing alone only reads
// (IsDestructive, which the Executor uses). Args.StorageAction picks the operation.
//
// ParseOp makes one from a command's kind and arguments (Args, the wire body's fields;
// this package does not import the link, the host maps its message to Args). Do runs an
// operation on an open driver, answering an *OpError of kind ErrUnsupported (matching
// ErrNoCapability) when the driver lacks the capability, before anything is sent.
// Executor.RunOp runs it under the Executor's rules: a destructive operation journaled and
// claimed under its command id, a Rotate's credentials resolved by reference, an image URL
// (ImageURL) asked for only when the operation is really sent. ExampleParseOp is the whole
// mapping an agent needs from a link command to an outcome.
//
// # Errors
//
// Every driver error is an *OpError whose Kind is one of ErrAuth, ErrUnreachable,
// ErrTimeout, ErrTLS, ErrScheme (http:// to a TLS port or the reverse), ErrRefused (the BMC
// answered and said no; Code and Message hold what it said), ErrDiffers (the BMC took the
// operation but kept something else, read back: never sent again), ErrUnsupported, ErrUnsupportedDriver, ErrInvalid, ErrInProgress, ErrNoSession
// (the BMC has no free session) or ErrOutcomeUnknown. Test with errors.Is; the underlying
// library error stays reachable with errors.As. KindName and KindByName spell a kind for
// journals, claim records and reports ("auth", "timeout", ...). An operation that read
// some parts and not others (an IPMI inspection whose Get System GUID the BMC refuses)
// returns what it read with a *PartialError naming each failed part; KindOf says
// ErrPartial. TestErrorKindsAcrossDrivers states the kinds each driver keeps.
//
// # Repeated requests
//
// A control plane that lost the answer to "power cycle machine X" retries, and a BMC must
// not cycle the machine twice. Runner.Run takes an operation id: the first call with an id
// runs the operation and records its outcome in a Journal; a repeat within the window
// returns the recorded outcome without contacting the BMC (ErrInProgress while the first
// is still running). A failure that shows nothing happened (unreachable, wrong
// credentials, refused) is not replayed: the repeat runs again. An operation that took
// effect differently (ErrDiffers) is recorded as done, with what the BMC kept, and a
// repeat answers that without sending it again. MemoryJournal is the
// in-process default; a host that restarts between a request and its retry uses a
// FileJournal in its data dir (each step written atomically and durably before it is
// taken; one process at a time). An operation running when the process died is
// StateUnknown after the restart and never sent again. Runner and the Executor answer a
// repeat alike, from ReplayOutcome of its record: there is one replay path.
//
// # A damaged journal
//
// A FileJournal whose file does not parse (truncated, garbage, a record that does not
// parse) does not stop the host: OpenFileJournal renames the file aside
// (bmc-journal.json.damaged-TIME, never deleted), keeps the records that parse (see
// FileJournal), starts under a new journal id and writes the marker bmc-journal.damaged.
// While the marker exists the journal refuses every claim with a *JournalDamage
// (errors.Is ErrJournalDamaged; outcome kind "journal-damaged", status "not-sent"): no
// destructive operation is sent, since at-most-once cannot be promised, while queries and
// storage listings, which are never journaled, keep working.
//
// # Storage
//
// A StorageManager (bmc/redfish) creates volumes (RAID level, drives, capacity), deletes
// them and erases drives (Drive.SecureErase, or the Initialize of a volume made of that
// drive alone), each read back: a volume kept with another RAID level, other drives or
// less capacity is ErrDiffers (it exists and is not created again), one still listed
// after its deletion is ErrTimeout. Through the Executor each is claimed and journaled
// like any destructive operation. IPMI has no volumes: the operations answer an *OpError
// of kind ErrUnsupported (ErrNoCapability), nothing sent. FileJournal.Damage says so
// for a host's status and metrics. An operator who has checked the machines clears it
// with FileJournal.ClearDamage or by removing the marker file (rm
// DATA_DIR/bmc-journal.damaged), noticed at the next claim without a restart.
//
// # At most once across agents
//
// A destructive operation (power, boot, rotate, firmware, media, storage changes) is claimed before it
// reaches a BMC. The agent side: an Executor with a Journal (FileJournal in the agent's
// data dir) and a Claimer (its link to the host; ClaimerFuncs adapts the link's two calls,
// and Executor.OnClaim reports each ClaimAnswer for counters). The control-plane side: a
// ClaimRegistry over a ClaimStore: a RegisterClaimStore over a casreg.Register
// (MemoryClaimStore in memory, or on etcd with lease/etcdstore's register, the key's mod
// revision as version), keeping EncodeClaim's bytes; its Route, Claim and Report are what
// the link's claim and report requests call, and with RequireRoute a claim on a command
// never routed to the claimer is ErrNotRouted (a link answers it "forbidden"). The rules:
//
//   - a claim is granted once, ever: to the node the command is routed to (or to any node
//     for a command never routed), and again only to the same node with the same journal
//     (its answer was lost); a node that lost its journal gets the outcome "unknown";
//   - the agent writes "granted, sending" to its journal before the first byte reaches the
//     BMC, and the outcome after; a restart turns a record that may have been sent into
//     StateUnknown and one still waiting for its claim into a retryable failure;
//   - ClaimRegistry.Route tells the control plane, for each command it routes: send it
//     (an unclaimed command moves to the new holder), reuse the recorded outcome, or
//     report "outcome unknown" (claimed by another node that never reported); a query is
//     always safe to send.
//
// A randomised simulation (TestClaimSimulation: agents killed at every point, partitioned
// and wiped, messages and store answers lost and repeated, many seeds) checks that no
// destructive operation reaches a BMC twice and that every command ends with an outcome or
// "unknown"; run with journals alone, it finds doubles at once.
//
// # Executor
//
// Executor.RunOp runs one typed Op: one at a time per BMC (driver and address), at most
// MaxConcurrent at once, each under its own deadline (Timeout, covering the wait for the
// BMC), the session closed after every operation (or, with Sessions, kept for the next).
// A BMC that hangs holds its own queue and one slot until its deadline; others go on.
// Credentials are named by reference (TargetRef.Credential), fetched through Credentials
// when first needed, cached in memory only and dropped after a refused login (when the
// session opens or during an operation); Credential prints redacted with every fmt verb
// and in slog.
//
// # Dispatcher
//
// A Dispatcher runs an agent's commands off its heartbeat: Start runs each in a goroutine
// of its own (a BMC that hangs holds only its command), never twice at once and never
// again while its result waits; Pending gives the results for the next report, Delivered
// drops those a report the control plane answered carried; at most MaxHeld are held.
// It is generic over the host's result message (a Report), so this package does not
// import the link; with sitelink an agent's whole BMC path is
//
//	d := &bmc.Dispatcher[sitelink.BMCResult]{OnDone: func(string) { beat.Wake() }} // beat: a *sitelink.Heartbeat
//	exec.OnClaim = d.OnClaim
//	d.Start(ctx, c.ID, func(ctx context.Context) sitelink.BMCResult {
//		tg, op, err := sitelink.BMCOp(c, images)
//		if err != nil {
//			return sitelink.NotSentResult(c, err)
//		}
//		return sitelink.BMCResultOf(c, exec.RunOp(ctx, c.ID, tg, op))
//	})
//
// Its Stats are uint64 fields by kind and status (DispatchStats.ForKind, KindStats.Status),
// replays by kind and claims by answer.
//
// # Transitions over many machines
//
// A TransitionRunner runs a Transition (on, off, cycle, or soft-off with a deadline then
// force-off) over many machines through an Executor: for each machine it reads the power
// state (opening the session), waits for its turn under the site's power-on ramp
// (TransitionLimits.PowerOnRate, and GroupPowerOnRate per Machine.Group, a PDU), takes a
// slot of its BMC network (NetworkInFlight), sends the action as a destructive operation
// journaled and claimed under "ID/machine/step/attempt", sends it again after a back-off
// while the BMC answers busy, and confirms
// by reading the state after Settle: a machine that took the change and dropped it is
// failed ("differs", reverted). Each machine ends done, failed, unknown or aborted, with
// a reason (MachineResult); TransitionRun gives Progress and the results as they end
// (Ended) for a host's heartbeat, and Abort. Starting the same transition again after a
// restart, or on another agent sharing the ClaimRegistry, resumes it: steps already taken
// are answered from the journal or the claim record, a step another agent claimed and
// never reported is unknown, and nothing is sent twice. With Executor.Sessions (a
// SessionPool) each BMC keeps one session, reused across operations, and the pool remembers
// only the BMCs with a session open or an operation at them; Executor.Wrap lets a
// host run each operation through state it keeps per BMC (a BootKeeper) over that session.
//
// The ramp's bound holds on power-ons as sent to the BMCs: at most the rate's worth
// (floor(PowerOnRate)) in any one-second window, spaced half the rate's interval apart
// (bursts aside) as far as the machine's scheduler keeps time. A turn is not a send (a cycle reads the system, cuts the power
// and waits for off before its power-on goes out), so the runner puts a gate in the
// operation's context (WithPowerOnGate) and the driver waits at it immediately before
// each power-on request it sends (AwaitPowerOn; bmc/redfish and bmc/ipmi do, and
// SetPower does it for a driver that is no PowerOnGater). The gate counts the times
// power-ons really pass it, so a waiter woken late cannot bunch them, and a request sent
// again after a busy answer passes it again. The wait at the gate comes after the claim:
// an agent stopped while waiting there leaves that step unknown to the next one (never
// sent twice); the turns, spaced at the rate before the claim, keep that wait short.
// OnPowerOn counts the power-ons as they pass.
//
// # Security
//
// Credentials are never logged and never appear in errors, outcomes or claim records. Drivers verify TLS by default;
// skipping verification is a per-target choice (Target.Insecure) that never changes any
// other client. What a BMC returns is parsed into typed values (hwid.MAC, hwid.UUID,
// netip.Addr); a value that does not parse is dropped, not passed on.
package bmc
