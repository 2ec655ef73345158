// Package lease implements the fenced boot lease that makes exactly one site agent the
// active boot server of a site: the control plane's tick, a compare-and-swap Store (a
// RegisterStore over a casreg.Register: in memory, MemoryStore, or on etcd with
// lease/etcdstore), the agent-side Fence, the control plane's epoch check and the agent
// picker.
//
// # The lease
//
// Each site has one lease record, named site:SITE:boot (see [Name]): a holder (a site agent's
// node id), a fencing epoch, an expiry and a TTL (15 s by default, [DefaultTTL]). The epoch
// grows on every change of holder, and also when the lease is released, so an epoch names
// one tenure of one agent and is never reused.
//
// # The control plane: Tick and Controller
//
// [Tick] is a pure function of the record, the connected agents and the time. It renews the
// lease while its holder is connected; keeps it, untouched, for a holder that lost its
// session until it expires; only then promotes the first connected standby by node id
// under epoch+1, or, with no agent left, releases it under epoch+1. A live lease never
// changes hands. [Controller] runs Tick for every site every 5 s ([DefaultInterval]) against a
// [Store], writing with compare-and-swap so that two controllers racing on one lease can
// never both win a round. Besides the record's wall-clock expiry, a Controller takes a
// lapsed lease away only after it has watched the same record version, unchanged, for a full
// TTL on its own monotonic clock: a wall clock that jumps forward, or a controller whose
// clock runs ahead of the one that wrote the record, delays nothing safe and hastens nothing
// unsafe.
//
// # The agent: Fence and heartbeats
//
// An agent learns that it holds the lease from a [Word] of the control plane (in the seed,
// the BootLeaseState of its NodeSpec): holds or not, the epoch, the TTL, and the heartbeat
// the latest renewal answers. The agent numbers its heartbeats with [Fence.Heartbeat], which
// notes when each was sent on the monotonic clock; the control plane hands the tick each
// connected agent's latest received heartbeat ([Agent.Beat]), and a renewal records the
// holder's ([Record.Beat]). [Fence.Active] answers (epoch, true) only while the last word
// says this agent holds the lease at a non-zero epoch and
//
//	now < sent(Beat) + TTL - Margin
//
// on the agent's monotonic clock, where sent(Beat) is when the agent sent the heartbeat the
// renewal answers. A word travels after the renewal it reports, and the renewal after the
// heartbeat it answers, so sent(Beat) is never later than the renewal; measuring from when
// the word arrived instead would let a delayed word keep a partitioned holder active after
// its standby was promoted (the package's simulation shows exactly that).
//
// # The bound
//
// The controller promotes a standby no earlier than TTL after it first saw the record
// version that the renewal wrote, on its monotonic clock, and that moment is no earlier
// than sent(Beat). The old holder's fence ends at sent(Beat) + TTL - Margin on its own
// monotonic clock. With each clock's reading advancing between 1-rho and 1+rho seconds per
// second (rho_a for the agent, rho_c for the controller), the fence has ended before the
// promotion whenever
//
//	(TTL - Margin)/(1 - rho_a) < TTL/(1 + rho_c), i.e. Margin > TTL(rho_a + rho_c)/(1 + rho_c)
//
// With the defaults (TTL 15 s, Margin 1 s, [DefaultMargin]) that tolerates a combined rate
// error of about 6.6%, far beyond any working oscillator. Wall-clock steps (NTP, an operator
// setting the date) do not enter the bound at all: the fence never reads the wall clock, and
// the record's wall-clock expiry can only delay a takeover, never hasten it. Nothing in the bound depends on message delays: words and heartbeats may be
// delayed, reordered or lost. A delayed word only shortens the active window, and a word
// that answers a heartbeat the fence no longer remembers (an agent restart, or more than
// [FenceHistory] heartbeats ago) makes it inactive.
//
// Failover: a holder that dies is promoted away no earlier than its fence has ended, and the
// standby is active no later than expiry + one tick + the standby's next heartbeat and its
// answer.
//
// # Wiring
//
// Control plane: a [Controller] with a Store and a [Fleet] (which sites exist, which agents
// of a site have a live session and the latest heartbeat each sent), run with
// [Controller.Run]; [Record.WordFor] builds the word for each agent; [Checker] (or
// [Record.Check]) refuses an assertion whose epoch is not the lease's current one or whose
// agent is not the holder; [PickAgent] chooses the agent for a machine's site steps.
//
// Agent: one [Fence]; stamp every heartbeat with [Fence.Heartbeat], feed every word to
// [Fence.Observe], and ask [Fence.Active] before answering proxy DHCP, rendering an iPXE
// script, signing an assertion or honouring a boot grant.
//
// Both sides report what they decide through an optional Events field (a [Sink] of [Event]s,
// nil meaning nothing is built): a Fence its transitions (active at an epoch, inactive and
// why: another holder, an unknown heartbeat, a window that lapsed), a Controller the changes
// of holder it stores, the takeovers its watch defers, and lost or failed writes. They are
// the site's events, not a machine's: the refusals a fence causes are reported by the
// components that asked it, in their own boot events.
//
// # How it is tested
//
// Besides table tests of every transition, the package's tests run a seeded simulation:
// several agents with real Fences, two Controllers on one Store, messages delayed up to 5 s,
// reordered, duplicated and lost both ways, partitions, agent crashes and restarts,
// controller restarts, store errors and lost write acknowledgements, wall-clock jumps of two
// minutes and monotonic rates off by 2%. After every event it checks that no two fences are
// active at once and that an active fence's epoch is the store's current one; it runs on
// the in-memory store and on a real etcd, and it catches a fence measured from the word's
// arrival. A longer run:
//
//	go test ./lease -run 'TestSimulation$' -lease.sim.seeds=1000 -lease.sim.steps=100000
//
// # Limits
//
// The fence protects against two agents answering at once; it does not make an agent stop
// a transfer it already started. Heartbeats must arrive more often than the TTL (every few
// seconds) or the holder's window shrinks to nothing although the lease is renewed. More
// precisely, a word can answer a heartbeat as old as the tick interval plus a heartbeat
// interval plus the delays, and the next word comes a heartbeat interval later: the holder's
// fence stays up between words only while TTL - Margin exceeds the tick interval plus two
// heartbeat intervals plus the delays. With the defaults (15 s, 1 s, ticks and heartbeats every
// 5 s) that does not hold, so a control plane should also tick a site when its holder's
// heartbeat arrives (TickSite), which makes every word answer the heartbeat just sent
// (examples/siteagent/controlplane does). A
// controller that restarts forgets what it watched and so waits a full TTL before it takes
// over any lapsed lease. Every controller sharing a Store must use the same TTL: a
// controller waits the longer of the record's TTL and its own before a takeover, which
// covers the holder's fence only while no word carried a longer TTL than that.
package lease
