package bmc

import (
	"context"
	"errors"
	"log/slog"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/bettercompute/siteboot/clock"
)

// TransitionAction is what a power transition does to each of its machines.
type TransitionAction string

// Transition actions.
const (
	// TransitionOn powers each machine on (a power-on: counted by the ramp limits).
	TransitionOn TransitionAction = "on"
	// TransitionOff cuts each machine's power (force-off).
	TransitionOff TransitionAction = "off"
	// TransitionCycle power-cycles each machine (a power-on: counted by the ramp limits).
	TransitionCycle TransitionAction = "cycle"
	// TransitionSoftOff asks each machine's OS to shut down and cuts its power if it is
	// not off by Transition.Deadline.
	TransitionSoftOff TransitionAction = "soft-off"
)

// Valid reports whether a is one of the TransitionAction constants.
func (a TransitionAction) Valid() bool {
	switch a {
	case TransitionOn, TransitionOff, TransitionCycle, TransitionSoftOff:
		return true
	}
	return false
}

// powersOn reports whether the action powers machines on.
func (a TransitionAction) powersOn() bool { return a == TransitionOn || a == TransitionCycle }

// Machine is one machine of a transition.
type Machine struct {
	// Name identifies the machine within the transition (its inventory id). Required,
	// unique, without "/".
	Name string
	// Target is its BMC.
	Target TargetRef
	// Group is the group whose power-ons TransitionLimits.GroupPowerOnRate bounds (the
	// PDU or circuit the machine draws from); empty is a group of its own.
	Group string
	// Network is the BMC network whose operations in flight
	// TransitionLimits.NetworkInFlight bounds; empty is one shared network.
	Network string
}

// DefaultSoftOffDeadline is how long a soft-off waits for a machine to shut down before
// cutting its power, when Transition.Deadline is zero.
const DefaultSoftOffDeadline = 5 * time.Minute

// Transition is a power transition over many machines.
type Transition struct {
	// ID identifies the transition. Each step it takes on a machine is a destructive
	// operation journaled and claimed under an id made of ID, the machine's Name, the
	// step and the attempt, so that starting the same transition again (after a restart,
	// or on another agent after a failover) resumes it: a step already taken is answered
	// from the journal or the claim record and never sent twice. Required.
	ID string
	// Action is what is done to each machine.
	Action TransitionAction
	// Machines are the machines, each named once.
	Machines []Machine
	// Deadline is how long a soft-off waits for the machine to report off before it
	// forces it off; zero means DefaultSoftOffDeadline.
	Deadline time.Duration
}

// maxStepSuffix is the room a step id leaves after the transition id and machine name
// ("/graceful/NN").
const maxStepSuffix = 16

// Validate reports an ErrInvalid error for a transition that cannot run.
func (t Transition) Validate() error {
	bad := func(msg string) error { return &OpError{Op: "transition", Kind: ErrInvalid, Message: msg} }
	if t.ID == "" || strings.Contains(t.ID, "/") {
		return bad("a transition needs an id without \"/\"")
	}
	if !t.Action.Valid() {
		return bad("unknown transition action " + quote(string(t.Action)))
	}
	if t.Deadline < 0 {
		return bad("negative soft-off deadline")
	}
	seen := make(map[string]bool, len(t.Machines))
	for _, m := range t.Machines {
		switch {
		case m.Name == "" || strings.Contains(m.Name, "/"):
			return bad("a machine needs a name without \"/\"")
		case seen[m.Name]:
			return bad("machine " + quote(m.Name) + " named twice")
		case len(t.ID)+len(m.Name)+maxStepSuffix > MaxIDLen:
			return bad("transition id and machine name " + quote(m.Name) + " too long for a command id")
		}
		seen[m.Name] = true
	}
	return nil
}

// MachineStatus is how a transition ended for one machine.
type MachineStatus string

// Machine statuses.
const (
	// MachineDone: the machine was read in the state asked for after the action.
	MachineDone MachineStatus = "done"
	// MachineFailed: the action was refused, not sent after every attempt, or taken and
	// then not kept (a machine that reverted): Reason says which.
	MachineFailed MachineStatus = "failed"
	// MachineUnknown: the action may have been taken and nobody can say whether (another
	// agent claimed it and never reported, the state could not be read): not sent again.
	MachineUnknown MachineStatus = "unknown"
	// MachineAborted: the transition was aborted before the action was taken (or, for a
	// soft-off, before the power was cut).
	MachineAborted MachineStatus = "aborted"
)

// MachineResult is how a transition ended for one machine.
type MachineResult struct {
	Machine string
	Status  MachineStatus
	// Kind is the KindName of the failure behind a failed or unknown status ("differs"
	// for a machine that reverted), empty otherwise.
	Kind string
	// Reason says why, for any status but done (and how a done was confirmed when the
	// action's own outcome was unknown).
	Reason string
	// Power is the power state last read, "" when none was read.
	Power PowerState
	// Forced: a soft-off cut the power after its deadline.
	Forced bool
	// Sends counts the action's sends (attempts) this run made or found recorded.
	Sends int
	// Resumed: an outcome recorded before this run (in the journal, or by another agent)
	// was used.
	Resumed bool
}

// Defaults of TransitionLimits.
const (
	// DefaultNetworkInFlight bounds the operations in flight on one BMC network.
	DefaultNetworkInFlight = 32
	// DefaultTransitionAttempts bounds the sends of one step answered busy or not sent.
	DefaultTransitionAttempts = 5
	// DefaultBusyBackoff is the first wait after a busy answer; it doubles up to
	// DefaultMaxBusyBackoff.
	DefaultBusyBackoff    = time.Second
	DefaultMaxBusyBackoff = 30 * time.Second
	// DefaultSettle is the wait after an action before its state is read to confirm it.
	DefaultSettle = 2 * time.Second
	// DefaultConfirmReads bounds the reads that confirm one action.
	DefaultConfirmReads = 3
)

// TransitionLimits are the limits a site sets on its transitions. Rates are shared by
// every transition of one TransitionRunner.
type TransitionLimits struct {
	// PowerOnRate bounds power-ons per second across the site (the runner): at most
	// floor(PowerOnRate) (at least 1, per 1/PowerOnRate s below 1) power-on requests sent
	// in any window of a second, spaced half of 1/PowerOnRate apart; zero means
	// no bound. PowerOnBurst power-ons may start at once (zero: 1), the window's bound
	// still holding.
	PowerOnRate  float64
	PowerOnBurst int
	// GroupPowerOnRate bounds power-ons per second within one Machine.Group; zero means
	// no bound. GroupPowerOnBurst as PowerOnBurst.
	GroupPowerOnRate  float64
	GroupPowerOnBurst int
	// NetworkInFlight bounds the operations in flight on one Machine.Network; zero means
	// DefaultNetworkInFlight. The Executor's MaxConcurrent bounds them all as well.
	NetworkInFlight int
	// Attempts bounds the sends of one step that the BMC answered busy (refused, no
	// session, unreachable) or that were not sent; zero means DefaultTransitionAttempts.
	Attempts int
	// Backoff is the wait after the first busy answer, doubled after each up to
	// MaxBackoff; zero means DefaultBusyBackoff and DefaultMaxBusyBackoff.
	Backoff, MaxBackoff time.Duration
	// Settle is the wait after an action before its state is read to confirm it: a BMC
	// that took the change and dropped it since is reported failed. Zero means
	// DefaultSettle.
	Settle time.Duration
	// ConfirmReads bounds the reads that confirm one action; zero means
	// DefaultConfirmReads.
	ConfirmReads int
}

func orDefault[T int | time.Duration](v, d T) T {
	if v <= 0 {
		return d
	}
	return v
}

// TransitionRunner runs power transitions over many machines: for each machine it takes a
// turn to power on (site-wide and per group) where the action powers on, a slot of its
// BMC network, sends the action through the Executor, its power-on request waiting at the
// ramp's gate immediately before it goes out (journaled and claimed, so that no step
// reaches a BMC twice across restarts and agents), backs off and sends again while the
// BMC answers busy, and confirms by reading the power state after Settle. A soft-off that
// has not reached off by its deadline is forced off. An aborted transition takes no new
// action; one whose context ends stops where it is and is resumed by starting it again,
// here or on another agent sharing the claims.
//
// Set the fields before first use; it is safe for concurrent use, and runs any number of
// transitions at once under one set of rate limits.
type TransitionRunner struct {
	// Executor sends each step. Required; give it a Journal and Claims for a transition
	// that must resume after a restart or a failover, and Sessions to reuse one session
	// per BMC.
	Executor *Executor
	// Limits are the site's limits.
	Limits TransitionLimits
	// Clock is the clock of the limits, back-offs, settle waits and soft-off deadlines;
	// nil means [clock.Real].
	Clock clock.Clock
	// Logger receives one line per machine that ends other than done; nil discards.
	Logger *slog.Logger
	// OnResult, when set, is called as each machine ends. It must not block.
	OnResult func(transition string, r MachineResult)
	// OnPowerOn, when set, is called as the ramp lets a power-on request go, immediately
	// before the driver sends it (a host's counter of power-ons sent), with the time it
	// passed the ramp (the times the ramp's bound holds on). It must not block.
	OnPowerOn func(transition, machine string, at time.Time)

	mu     sync.Mutex
	site   *ramp
	groups map[string]*ramp
	nets   map[string]chan struct{}
}

// rateLimiter spaces events interval apart, burst at a time (a generic cell rate
// algorithm over the monotonic clock): with a burst of 1, no two events are closer than
// interval, so any one-second window holds at most ceil(1s/interval) of them.
type rateLimiter struct {
	mu       sync.Mutex
	interval time.Duration
	burst    int
	tat      time.Duration // theoretical arrival time of the next event
	started  bool
}

// ramp bounds power-ons twice: admit spaces the machines' turns at the rate (taken
// before a machine waits for a slot of its network, so that machines do not crowd the
// network ahead of their turn), gate bounds the power-ons themselves, waited at by the
// driver immediately before each power-on request it sends (WithPowerOnGate). The gate
// is what the site's bound holds on: every power-on request sent passes it (one sent
// again after a busy answer too) and none gets its place back. It lets no more than the
// rate's worth through in any window (windowLimiter), spaced at least half the rate's
// interval apart (burst aside), so that power-ons whose turns reached their sends late
// (a slow read, a cycle's off, a busy answer) catch up within the window instead of
// pushing every later one back.
type ramp struct {
	admit *rateLimiter
	gate  *windowLimiter
}

func newRamp(rate float64, burst int) *ramp {
	if rate <= 0 {
		return nil
	}
	interval := time.Duration(float64(time.Second) / rate)
	k := max(int(rate), 1)
	return &ramp{admit: &rateLimiter{interval: interval, burst: max(burst, 1)},
		gate: &windowLimiter{spacing: interval / 2, burst: max(burst, 1),
			k: k, window: time.Duration(float64(k) / rate * float64(time.Second))}}
}

// windowLimiter lets at most k events through in any window of the given length (a
// rate of r per second: k = floor(r), at least 1, per k/r seconds), spaced by spacing
// (burst at a time) where the clock keeps up. The window holds on the times events
// really pass, read under its lock as each passes, not on times reserved ahead: a waiter
// the scheduler wakes late (a loaded machine) finds the place taken and waits again, so
// late wake-ups cannot crowd a window.
type windowLimiter struct {
	mu      sync.Mutex
	spacing time.Duration
	burst   int
	k       int
	window  time.Duration
	base    time.Time       // the first reading: times below are from it
	tat     time.Duration   // spacing: the theoretical time of the next event
	last    []time.Duration // the times of the last k events, ascending
}

// catchUp is how many spacings a gate's theoretical time may trail its clock: how far
// power-ons woken late may come closer together than the spacing to catch up.
const catchUp = 4

// maxGateWaits bounds the waits of one pass (each ends at a time the limiter named).
const maxGateWaits = 1 << 20

// pass waits (sleep) until an event may pass at the clock's reading (wall, read under
// the lock, its monotonic part compared), records it and returns that reading; sleep's
// error ends the wait.
func (l *windowLimiter) pass(wall func() time.Time, sleep func(time.Duration) error) (time.Time, error) {
	for i := range maxGateWaits {
		l.mu.Lock()
		w := wall() // one reading: the time checked is the time returned
		if l.base.IsZero() {
			l.base = w
		}
		t := w.Sub(l.base)
		at := t
		if len(l.last) > 0 {
			at = max(l.tat-time.Duration(l.burst-1)*l.spacing, l.last[len(l.last)-1])
		}
		if len(l.last) == l.k {
			at = max(at, l.last[0]+l.window)
		}
		if t >= at {
			if len(l.last) == 0 { // the clock's origin is its own: start from the first reading
				l.tat = t
			}
			if len(l.last) == l.k {
				l.last = l.last[1:]
			}
			l.last = append(l.last, t)
			// After a wait, the spacing is kept on the theoretical times, up to catchUp
			// behind the clock: a waiter the scheduler woke late is followed by the
			// next without that lateness adding up (the window's bound still holds).
			// One that did not wait came to an idle gate: spaced from its own time.
			from := t
			if i > 0 {
				from = t - catchUp*l.spacing
			}
			l.tat = max(l.tat, from) + l.spacing
			l.mu.Unlock()
			return w, nil
		}
		l.mu.Unlock()
		if err := sleep(at - t); err != nil {
			return time.Time{}, err
		}
	}
	return time.Time{}, errors.New("bmc: power-on gate: too many waits")
}

// reserve takes the next event's place and returns how long to wait for it.
func (l *rateLimiter) reserve(now time.Duration) time.Duration {
	l.mu.Lock()
	defer l.mu.Unlock()
	if !l.started { // the clock's origin is its own: start from the first reading
		l.tat, l.started = now, true
	}
	start := max(l.tat, now)
	at := max(start-time.Duration(l.burst-1)*l.interval, now)
	l.tat = start + l.interval
	return at - now
}

func (r *TransitionRunner) clk() clock.Clock { return clock.Or(r.Clock) }

func (r *TransitionRunner) logger() *slog.Logger {
	if r.Logger != nil {
		return r.Logger
	}
	return slog.New(slog.DiscardHandler)
}

// limiters returns the site's and m's group's limiters (nil for no bound).
func (r *TransitionRunner) limiters(m Machine) (site, group *ramp) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.site == nil {
		r.site = newRamp(r.Limits.PowerOnRate, r.Limits.PowerOnBurst)
	}
	if r.Limits.GroupPowerOnRate > 0 && m.Group != "" {
		if r.groups == nil {
			r.groups = make(map[string]*ramp)
		}
		group = r.groups[m.Group]
		if group == nil {
			group = newRamp(r.Limits.GroupPowerOnRate, r.Limits.GroupPowerOnBurst)
			r.groups[m.Group] = group
		}
	}
	return r.site, group
}

// network returns the semaphore of a network's slots, or with first of the slots its
// first reads may take (half of them, so that actions always find slots).
func (r *TransitionRunner) network(name string, first bool) chan struct{} {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.nets == nil {
		r.nets = make(map[string]chan struct{})
	}
	n := orDefault(r.Limits.NetworkInFlight, DefaultNetworkInFlight)
	if first {
		name, n = name+"\x00first", max(n/2, 1)
	}
	ch := r.nets[name]
	if ch == nil {
		ch = make(chan struct{}, n)
		r.nets[name] = ch
	}
	return ch
}

// errAborted ends a wait that the transition's abort interrupted.
var errAborted = errors.New("bmc: transition aborted")

// sleep waits d on the runner's clock, until ctx ends or abort closes (nil: never).
func (r *TransitionRunner) sleep(ctx context.Context, abort <-chan struct{}, d time.Duration) error {
	if d <= 0 {
		select {
		case <-abort:
			return errAborted
		default:
			return ctx.Err()
		}
	}
	fired := make(chan struct{})
	t := r.clk().AfterFunc(d, func() { close(fired) })
	defer t.Stop()
	select {
	case <-fired:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	case <-abort:
		return errAborted
	}
}

// Run runs t to its end (or until ctx ends) and returns each machine's result, in the
// order of t.Machines.
func (r *TransitionRunner) Run(ctx context.Context, t Transition) ([]MachineResult, error) {
	run, err := r.Start(ctx, t)
	if err != nil {
		return nil, err
	}
	return run.Wait(), nil
}

// Start starts t and returns at once. An invalid transition is an *OpError of kind
// ErrInvalid. The run ends when every machine has ended, or soon after ctx ends (a
// stopped agent): machines then still in progress end unknown ("stopped"), and starting
// the same transition again resumes it.
func (r *TransitionRunner) Start(ctx context.Context, t Transition) (*TransitionRun, error) {
	if err := t.Validate(); err != nil {
		return nil, err
	}
	if r.Executor == nil {
		return nil, &OpError{Op: "transition", Kind: ErrInvalid, Message: "a TransitionRunner needs an Executor"}
	}
	run := &TransitionRun{r: r, t: t, ctx: ctx, abort: make(chan struct{}), done: make(chan struct{}),
		results: make([]MachineResult, len(t.Machines)), ended: make([]bool, len(t.Machines))}
	var wg sync.WaitGroup
	for i, m := range t.Machines {
		wg.Go(func() {
			res := run.machine(m)
			run.end(i, res)
		})
	}
	go func() {
		wg.Wait()
		close(run.done)
	}()
	return run, nil
}

// TransitionRun is a transition in progress.
type TransitionRun struct {
	r     *TransitionRunner
	t     Transition
	ctx   context.Context
	abort chan struct{}
	once  sync.Once
	done  chan struct{}

	mu      sync.Mutex
	results []MachineResult
	ended   []bool
	order   []int // indexes of the machines, in the order they ended
}

// TransitionProgress counts a run's machines by how they ended.
type TransitionProgress struct {
	Total, Pending                 int
	Done, Failed, Unknown, Aborted int
}

// Abort takes no new action: machines waiting for a power-on token, a slot or a back-off
// end aborted, a soft-off not yet forced ends aborted, and actions already sent are
// confirmed. It returns at once; Wait for the results.
func (run *TransitionRun) Abort() { run.once.Do(func() { close(run.abort) }) }

// Done is closed when every machine has ended.
func (run *TransitionRun) Done() <-chan struct{} { return run.done }

// Wait waits for every machine to end and returns the results in the order of the
// transition's Machines.
func (run *TransitionRun) Wait() []MachineResult {
	<-run.done
	run.mu.Lock()
	defer run.mu.Unlock()
	return append([]MachineResult(nil), run.results...)
}

// Ended returns the results of the machines that have ended, in the order they ended,
// from the n-th on (a host's heartbeat sends what it has not sent yet).
func (run *TransitionRun) Ended(n int) []MachineResult {
	run.mu.Lock()
	defer run.mu.Unlock()
	var out []MachineResult
	for _, i := range run.order[min(max(n, 0), len(run.order)):] {
		out = append(out, run.results[i])
	}
	return out
}

// Progress counts the machines by how they ended so far.
func (run *TransitionRun) Progress() TransitionProgress {
	run.mu.Lock()
	defer run.mu.Unlock()
	p := TransitionProgress{Total: len(run.results)}
	for i, r := range run.results {
		if !run.ended[i] {
			p.Pending++
			continue
		}
		switch r.Status {
		case MachineDone:
			p.Done++
		case MachineFailed:
			p.Failed++
		case MachineUnknown:
			p.Unknown++
		case MachineAborted:
			p.Aborted++
		}
	}
	return p
}

func (run *TransitionRun) end(i int, res MachineResult) {
	run.mu.Lock()
	run.results[i], run.ended[i] = res, true
	run.order = append(run.order, i)
	run.mu.Unlock()
	if res.Status != MachineDone {
		run.r.logger().Info("bmc: transition machine", "transition", run.t.ID, "machine", res.Machine,
			"status", string(res.Status), "kind", res.Kind, "reason", res.Reason)
	}
	if run.r.OnResult != nil {
		run.r.OnResult(run.t.ID, res)
	}
}

func (run *TransitionRun) aborted() bool {
	select {
	case <-run.abort:
		return true
	default:
		return false
	}
}

// actEnd is how the sends of one step ended.
type actEnd int

const (
	actOK       actEnd = iota // the BMC carried it out
	actMaybe                  // it failed in a way that may have taken effect
	actUnknown                // its outcome is unknown (claimed elsewhere, or recorded unknown)
	actGaveUp                 // not sent: every attempt was busy, or the failure is final
	actAborted                // not sent: aborted
	actStopped                // the run's context ended
	actDeadline               // the step's own context ended (a soft-off's deadline)
)

// busy reports whether an outcome shows the step was not carried out and may be sent
// again after a while.
func busy(o Outcome) bool {
	k := KindByName(o.Kind)
	switch o.Status {
	case StatusNotSent:
		return k != ErrAuth && k != ErrInvalid && k != ErrUnsupported && k != ErrUnsupportedDriver &&
			k != ErrTLS && k != ErrScheme && k != ErrJournalDamaged
	case StatusFailed:
		return k == ErrRefused || k == ErrNoSession || k == ErrUnreachable || k == ErrClosed
	}
	return false
}

// act sends action a as step of m, under ctx, until it is carried out, may have been, or
// will not be.
func (run *TransitionRun) act(ctx context.Context, m Machine, step string, a PowerAction, res *MachineResult) (actEnd, Outcome) {
	r := run.r
	lim := r.Limits
	backoff := orDefault(lim.Backoff, DefaultBusyBackoff)
	var last Outcome
	for attempt := 1; attempt <= orDefault(lim.Attempts, DefaultTransitionAttempts); attempt++ {
		if attempt > 1 {
			if err := r.sleep(ctx, run.abort, backoff); err != nil {
				return run.why(ctx, err), last
			}
			backoff = min(2*backoff, orDefault(lim.MaxBackoff, DefaultMaxBusyBackoff))
		}
		if run.aborted() {
			return actAborted, last
		}
		// A machine takes one turn; a send again after a busy answer (which powered
		// nothing on) passes only the gate, as every power-on request does.
		powerOn := run.t.Action.powersOn() && step == "act"
		if powerOn && attempt == 1 {
			if err := run.turn(ctx, m); err != nil {
				return run.why(ctx, err), last
			}
		}
		release, err := run.slot(ctx, m, run.abort)
		if err != nil {
			return run.why(ctx, err), last
		}
		opCtx := ctx
		if powerOn {
			opCtx = WithPowerOnGate(ctx, func(ctx context.Context) error { return run.gate(ctx, m) })
		}
		id := run.t.ID + "/" + m.Name + "/" + step + "/" + strconv.Itoa(attempt)
		x := r.Executor.RunOp(opCtx, id, m.Target, SetPower{Action: a})
		release()
		o := x.Outcome
		if x.Replayed {
			res.Resumed = true
		}
		if o.Status != StatusNotSent {
			res.Sends++
		}
		switch {
		case run.ctx.Err() != nil:
			return actStopped, o
		case o.Status == StatusOK || o.Status == StatusDiffers:
			return actOK, o
		case x.Claim == ClaimAnswerRefused:
			return actUnknown, Outcome{Status: StatusUnknown, Kind: KindName(ErrOutcomeUnknown),
				Message: "step " + quote(id) + " is claimed by another agent, which never reported how it ended: " + o.Message}
		case o.Status == StatusUnknown, o.Kind == KindName(ErrInProgress):
			return actUnknown, o
		case ctx.Err() != nil:
			return actDeadline, o
		case busy(o):
			last = o
			continue
		case o.Status == StatusNotSent || o.Status == StatusFailed && notApplied(KindByName(o.Kind)):
			return actGaveUp, o
		}
		return actMaybe, o
	}
	return actGaveUp, last
}

// why maps a wait's error to how act ended.
func (run *TransitionRun) why(ctx context.Context, err error) actEnd {
	switch {
	case errors.Is(err, errAborted):
		return actAborted
	case run.ctx.Err() != nil:
		return actStopped
	case ctx.Err() != nil:
		return actDeadline
	}
	return actStopped
}

// turn waits for m's group's turn and then the site's to power on.
func (run *TransitionRun) turn(ctx context.Context, m Machine) error {
	site, group := run.r.limiters(m)
	for _, l := range []*ramp{group, site} {
		if l != nil {
			if err := run.r.sleep(ctx, run.abort, l.admit.reserve(run.r.clk().Monotonic())); err != nil {
				return err
			}
		}
	}
	return nil
}

// gate waits at m's group's power-on gate and then the site's: the driver calls it
// immediately before a power-on request. Not aborted: a machine that had its turn
// sends its power-on (the wait is short, the turns being spaced already).
func (run *TransitionRun) gate(ctx context.Context, m Machine) error {
	site, group := run.r.limiters(m)
	clk := run.r.clk()
	sleep := func(d time.Duration) error { return run.r.sleep(ctx, nil, d) }
	var at time.Time
	for _, l := range []*ramp{group, site} {
		if l != nil {
			var err error
			if at, err = l.gate.pass(clk.Now, sleep); err != nil {
				return err
			}
		}
	}
	if run.r.OnPowerOn != nil && !at.IsZero() {
		run.r.OnPowerOn(run.t.ID, m.Name, at)
	}
	return nil
}

// slot waits for a slot of m's network, until ctx ends or abort closes.
func (run *TransitionRun) slot(ctx context.Context, m Machine, abort <-chan struct{}) (func(), error) {
	ch := run.r.network(m.Network, false)
	select {
	case ch <- struct{}{}:
		return func() { <-ch }, nil
	case <-ctx.Done():
		return nil, ctx.Err()
	case <-abort:
		return nil, errAborted
	}
}

// read reads m's power state, after wait, with up to ConfirmReads tries.
func (run *TransitionRun) read(m Machine, wait time.Duration) (PowerState, Outcome) {
	r := run.r
	ctx := run.ctx
	if err := r.sleep(ctx, nil, wait); err != nil {
		return "", OutcomeOf(err)
	}
	backoff := orDefault(r.Limits.Backoff, DefaultBusyBackoff)
	var o Outcome
	for i := range orDefault(r.Limits.ConfirmReads, DefaultConfirmReads) {
		if i > 0 {
			if err := r.sleep(ctx, nil, backoff); err != nil {
				return "", o
			}
		}
		release, err := run.slot(ctx, m, nil) // a read is harmless: not aborted
		if err != nil {
			return "", OutcomeOf(err)
		}
		x := r.Executor.RunOp(ctx, "", m.Target, readPower{})
		release()
		if x.Outcome.Status == StatusOK {
			st, _ := x.Value.(PowerState)
			return st, x.Outcome
		}
		o = x.Outcome
	}
	return "", o
}

// machine runs the transition on m.
func (run *TransitionRun) machine(m Machine) MachineResult {
	res := MachineResult{Machine: m.Name}
	if run.t.Action.powersOn() {
		// Read first: the session is open (and a busy BMC has answered) before the machine
		// takes its turn to power on, so that the turns are the power-ons' own.
		first := run.r.network(m.Network, true)
		select {
		case first <- struct{}{}:
			res.Power, _ = run.read(m, 0)
			<-first
		case <-run.ctx.Done():
		case <-run.abort:
		}
	}
	switch run.t.Action {
	case TransitionOn:
		run.step(m, "act", PowerActionOn, PowerOn, &res)
	case TransitionOff:
		run.step(m, "act", PowerActionForceOff, PowerOff, &res)
	case TransitionCycle:
		run.step(m, "act", PowerActionCycle, PowerOn, &res)
	case TransitionSoftOff:
		run.softOff(m, &res)
	}
	return res
}

// step sends a as m's step and confirms that m reads want.
func (run *TransitionRun) step(m Machine, step string, a PowerAction, want PowerState, res *MachineResult) {
	end, o := run.act(run.ctx, m, step, a, res)
	run.settle(m, a, want, end, o, res)
}

// settle ends res after a step that ended so.
func (run *TransitionRun) settle(m Machine, a PowerAction, want PowerState, end actEnd, o Outcome, res *MachineResult) {
	fail := func(st MachineStatus, kind, reason string) {
		res.Status, res.Kind, res.Reason = st, kind, reason
	}
	switch end {
	case actStopped:
		fail(MachineUnknown, KindName(ErrOutcomeUnknown), "stopped before the transition ended; start it again to resume")
		return
	case actAborted:
		fail(MachineAborted, "", "aborted before "+string(a)+" was sent")
		return
	case actGaveUp:
		fail(MachineFailed, o.Kind, string(a)+" not carried out after "+strconv.Itoa(res.Sends)+" sends: "+o.Message)
		return
	}
	wait := orDefault(run.r.Limits.Settle, DefaultSettle)
	if end != actOK {
		wait = 0
	}
	st, ro := run.read(m, wait)
	res.Power = st
	if st == "" {
		if end == actOK {
			fail(MachineUnknown, ro.Kind, string(a)+" was carried out but the power state could not be read to confirm it: "+ro.Message)
		} else {
			fail(MachineUnknown, o.Kind, o.Message+"; the power state could not be read: "+ro.Message)
		}
		return
	}
	switch {
	case end == actOK && st == want:
		res.Status = MachineDone
	case end == actOK:
		fail(MachineFailed, KindName(ErrDiffers), "the BMC carried out "+string(a)+" and the machine read "+string(want)+
			", but it reads "+string(st)+" "+wait.String()+" later: the change was reverted")
	case a == PowerActionCycle:
		// Reading on says nothing of whether it was cycled.
		fail(MachineUnknown, o.Kind, o.Message+"; the machine reads "+string(st))
	case st == want:
		res.Status = MachineDone
		res.Reason = "confirmed by reading " + string(st) + " after: " + o.Message
	default:
		k := o.Kind
		if k == "" {
			k = KindName(ErrOutcomeUnknown)
		}
		st := MachineFailed
		if end == actUnknown {
			st = MachineUnknown
		}
		fail(st, k, o.Message+"; the machine reads "+string(res.Power))
	}
}

// softOff asks m to shut down and forces it off after the deadline.
func (run *TransitionRun) softOff(m Machine, res *MachineResult) {
	r := run.r
	ctx, cancel := context.WithCancel(run.ctx)
	timer := r.clk().AfterFunc(orDefault(run.t.Deadline, DefaultSoftOffDeadline), cancel)
	go func() {
		select {
		case <-run.abort:
			cancel()
		case <-ctx.Done():
		}
	}()
	end, o := run.act(ctx, m, "graceful", PowerActionOff, res)
	timer.Stop()
	cancel()
	switch end {
	case actStopped:
		run.settle(m, PowerActionOff, PowerOff, end, o, res)
		return
	case actAborted:
		if res.Sends == 0 {
			run.settle(m, PowerActionOff, PowerOff, end, o, res)
			return
		}
	}
	if end == actOK {
		// The driver read it off: confirm after the settle time as any action.
		run.settle(m, PowerActionOff, PowerOff, end, o, res)
		if res.Status == MachineDone {
			return
		}
	}
	st, _ := run.read(m, 0)
	if st == PowerOff {
		res.Status, res.Kind, res.Reason, res.Power = MachineDone, "", "", st
		return
	}
	if run.aborted() || run.ctx.Err() != nil {
		res.Status, res.Kind, res.Power = MachineAborted, "", st
		res.Reason = "a graceful shutdown was asked and the machine reads " + string(orState(st)) + "; aborted before it was forced off"
		if run.ctx.Err() != nil {
			res.Status, res.Kind = MachineUnknown, KindName(ErrOutcomeUnknown)
			res.Reason = "stopped before the transition ended; start it again to resume"
		}
		return
	}
	*res = MachineResult{Machine: m.Name, Sends: res.Sends, Resumed: res.Resumed, Forced: true}
	sends := res.Sends
	res.Sends = 0
	end, o = run.act(run.ctx, m, "force", PowerActionForceOff, res)
	run.settle(m, PowerActionForceOff, PowerOff, end, o, res)
	res.Sends += sends
}

func orState(s PowerState) PowerState {
	if s == "" {
		return PowerUnknown
	}
	return s
}

// readPower reads the power state: the transition's confirming read. Non-destructive.
type readPower struct{}

func (readPower) Kind() Kind             { return KindQuery }
func (readPower) Name() string           { return "power-state" }
func (readPower) Capability() Capability { return CapPower }
func (readPower) Validate() error        { return nil }
func (readPower) do(ctx context.Context, d Driver) (any, error) {
	return d.(PowerController).PowerState(ctx)
}
