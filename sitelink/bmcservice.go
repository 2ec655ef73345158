package sitelink

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/bettercompute/siteboot/bmc"
	"github.com/bettercompute/siteboot/clock"
	"github.com/bettercompute/siteboot/metric"
)

// DefaultSessionIdle is BMCLimits.SessionIdle's default: below the shortest idle timeout
// BMCs apply (Redfish's SessionTimeout is 30 s at the least, IPMI's about a minute).
const DefaultSessionIdle = 25 * time.Second

// Bounds of what a BMCService keeps for its reports.
const (
	// MaxMachineResults bounds the transitions' machine results one Pending returns; the
	// rest come in the next ones.
	MaxMachineResults = 512
	// MaxEarlyAborts bounds the aborts kept for transitions not (yet) running.
	MaxEarlyAborts = 64
)

// KeptMessage is the message of a persistent bmc.boot that the BMC would not keep, kept by
// arming it again before each power-on the agent sends ([BMCResult.BootKept]).
const KeptMessage = "the BMC keeps no persistent boot device: set for the next boot, and armed again by this agent before each power-on it sends"

// BMCLimits bound an agent's BMC access. Validate reports a field out of bounds as a
// *bmc.LimitError naming it.
type BMCLimits struct {
	// MaxConcurrent bounds the BMC operations in progress, across BMCs (one at a time per
	// BMC always); zero means bmc.DefaultMaxConcurrent.
	MaxConcurrent int
	// Timeout is each operation's deadline (the wait for its BMC, the claim, the login, the
	// operation, the logout); zero means bmc.DefaultOpTimeout.
	Timeout time.Duration
	// MaxSessions bounds the BMC sessions kept open across BMCs: each BMC keeps at most
	// one (per credential), reused by one operation after another and logged out after an
	// error that may have spoilt it, when more than MaxSessions are open (the least
	// recently used first), once idle for SessionIdle and at Close. Zero means
	// bmc.DefaultMaxOpenSessions.
	MaxSessions int
	// SessionIdle logs out a BMC session idle this long: the next operation there logs in
	// again. BMCs end idle sessions themselves (IPMI after about a minute, Redfish after its
	// SessionTimeout, 30 s at the least); zero means DefaultSessionIdle.
	SessionIdle time.Duration

	// PowerOnRate bounds the power-ons of bmc.transition commands sent to BMCs per second,
	// across every transition the service runs (bmc.TransitionLimits.PowerOnRate); zero
	// means no bound. PowerOnBurst power-ons may start at once; zero means 1.
	PowerOnRate  float64
	PowerOnBurst int
	// GroupPowerOnRate bounds them within one group of machines (a transition machine's
	// group: its PDU or circuit); zero means no bound. GroupPowerOnBurst as PowerOnBurst.
	GroupPowerOnRate  float64
	GroupPowerOnBurst int
	// NetworkInFlight bounds a transition's operations in flight on one BMC network; zero
	// means bmc.DefaultNetworkInFlight. MaxConcurrent bounds them all as well.
	NetworkInFlight int
	// TransitionSettle is how long after a transition's action the machine's power state is
	// read to confirm it (a BMC that took the change and dropped it is reported failed);
	// zero means bmc.DefaultSettle.
	TransitionSettle time.Duration
}

// Validate reports the first field out of bounds as a *bmc.LimitError whose Field is the
// field's name ("MaxConcurrent", "PowerOnRate", ...).
func (l BMCLimits) Validate() error {
	if err := (&bmc.Executor{MaxConcurrent: l.MaxConcurrent, Timeout: l.Timeout}).Validate(); err != nil {
		return err
	}
	for _, f := range []struct {
		name string
		bad  bool
	}{
		{"PowerOnRate", l.PowerOnRate < 0 || math.IsNaN(l.PowerOnRate) || math.IsInf(l.PowerOnRate, 0)},
		{"PowerOnBurst", l.PowerOnBurst < 0},
		{"GroupPowerOnRate", l.GroupPowerOnRate < 0 || math.IsNaN(l.GroupPowerOnRate) || math.IsInf(l.GroupPowerOnRate, 0)},
		{"GroupPowerOnBurst", l.GroupPowerOnBurst < 0},
		{"NetworkInFlight", l.NetworkInFlight < 0},
		{"MaxSessions", l.MaxSessions < 0},
		{"SessionIdle", l.SessionIdle < 0},
		{"TransitionSettle", l.TransitionSettle < 0},
	} {
		if f.bad {
			return &bmc.LimitError{Field: f.name, Err: errors.New("want a finite value, zero or more")}
		}
	}
	return nil
}

// BMCServiceConfig is what a [BMCService] is built from.
type BMCServiceConfig struct {
	BMCLimits
	// Opener opens the drivers of the commands' targets (a *bmc.Registry of the drivers
	// the host links). Required.
	Opener bmc.Opener
	// JournalDir is where the BMC journal lives (bmc.OpenFileJournal), so that a restart
	// never sends a destructive operation twice; "" keeps it in memory.
	JournalDir string
	// Link carries the claims and credentials of the commands, in Node's name (a *Client
	// is one); nil reports every bmc.* command that names a BMC not sent.
	Link BMCLink
	Node string
	// Images serves the images of bmc.firmware and bmc.mediaInsert (RunBMC); nil refuses
	// those commands.
	Images BMCImages
	// OnDone, when set, is called after each command (or transition) ends and its result
	// is held: the host sends a report sooner. It must not block.
	OnDone func(id string)
	// Clock is the journal's, the sessions' and the transitions' clock; nil means
	// [clock.Real].
	Clock clock.Clock
	// Logger receives the journal's damage, and a line per operation (under component
	// "bmc", a transition's under "bmc-transition"); nil discards.
	Logger *slog.Logger
}

// BMCService is an agent's side of the BMC protocol: it runs the bmc.* commands of its
// desired state off the heartbeat (a BMC that hangs never holds it), each through a
// bmc.Executor that journals, claims and sends it over one pooled session per BMC, a
// persistent boot device the BMC refuses kept by re-arming (bmc.BootKeepers); it runs
// bmc.transition commands through a bmc.TransitionRunner shared by all (the site's
// power-on ramp), and aborts them (an abort that comes before its transition is kept, and
// aborts it when it starts). Each heartbeat, [BMCService.Pending] gives what the report
// carries (the commands' results, each transition's machines that ended and its progress)
// and [BMCService.Delivered] forgets what a report the control plane answered carried.
//
// Build it with [NewBMCService]; it is safe for concurrent use. Close once the commands'
// contexts ended.
type BMCService struct {
	exec     *bmc.Executor
	sessions *bmc.SessionPool
	keeps    *bmc.BootKeepers
	journal  *bmc.FileJournal // nil in memory
	dispatch *bmc.Dispatcher[BMCResult]
	runner   *bmc.TransitionRunner
	images   BMCImages
	linked   bool

	ended    [len(machineStatuses)]atomic.Uint64 // machines that ended, by machineStatuses
	powerOns atomic.Uint64                       // power-ons let through the ramp

	mu     sync.Mutex
	runs   map[string]*transitionRun // by command id
	aborts []string                  // aborts of transitions not running here when they came

	sweepMu  sync.Mutex
	sweeping bool // a sweep of idle sessions runs
	closing  bool
	sweeps   sync.WaitGroup
}

type transitionRun struct {
	id       string
	action   bmc.TransitionAction
	run      *bmc.TransitionRun
	aborting bool
	// delivered counts the machines' results reports the control plane answered carried
	// (run.Ended's order); summaryDelivered says its own result was.
	delivered        int
	ended            bool
	summaryDelivered bool
}

// machineStatuses are the statuses a transition's machine ends with, in the order
// BMCService.ended counts them.
var machineStatuses = [...]bmc.MachineStatus{bmc.MachineDone, bmc.MachineFailed, bmc.MachineUnknown, bmc.MachineAborted}

// NewBMCService checks c and builds the service, opening its journal. A damaged journal
// is set aside and logged: queries go on, destructive operations are refused until an
// operator clears it (bmc.FileJournal.Damage).
func NewBMCService(c BMCServiceConfig) (*BMCService, error) {
	if err := c.BMCLimits.Validate(); err != nil {
		return nil, err
	}
	if c.Opener == nil {
		return nil, &bmc.LimitError{Field: "Opener", Err: errors.New("required")}
	}
	log := c.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	s := &BMCService{keeps: &bmc.BootKeepers{}, images: c.Images}
	var journal bmc.Journal
	if c.JournalDir != "" {
		j, err := bmc.OpenFileJournal(c.JournalDir)
		if err != nil {
			return nil, fmt.Errorf("sitelink: bmc journal: %w", err)
		}
		if d, ok := j.Damage(); ok {
			log.Error("BMC journal damaged: destructive bmc.* commands are refused until an operator clears it",
				"set_aside", d.SetAside, "reason", d.Reason, "kept", d.Kept, "lost", d.Lost,
				"clear", "rm "+filepath.Join(c.JournalDir, bmc.JournalDamagedMarker))
		}
		s.journal, journal = j, j
	}
	idle := c.SessionIdle
	if idle == 0 {
		idle = DefaultSessionIdle
	}
	opLog := log.With("component", "bmc")
	s.sessions = &bmc.SessionPool{MaxOpen: c.MaxSessions, IdleTimeout: idle, Clock: c.Clock, Logger: opLog}
	s.dispatch = &bmc.Dispatcher[BMCResult]{OnDone: c.OnDone}
	s.exec = &bmc.Executor{
		Opener:        c.Opener,
		Sessions:      s.sessions,
		Wrap:          s.keeps.Wrap,
		Journal:       journal,
		MaxConcurrent: c.MaxConcurrent,
		Timeout:       c.Timeout,
		Logger:        opLog,
		Clock:         c.Clock,
	}
	if c.Link != nil {
		l := BMCClient{Client: c.Link, Node: c.Node}
		s.exec.Claims, s.exec.Credentials, s.exec.OnClaim = l, l, s.dispatch.OnClaim
		s.linked = true
	}
	s.runner = &bmc.TransitionRunner{
		Executor: s.exec,
		Limits: bmc.TransitionLimits{
			PowerOnRate: c.PowerOnRate, PowerOnBurst: c.PowerOnBurst,
			GroupPowerOnRate: c.GroupPowerOnRate, GroupPowerOnBurst: c.GroupPowerOnBurst,
			NetworkInFlight: c.NetworkInFlight, Settle: c.TransitionSettle,
		},
		Clock:  c.Clock,
		Logger: log.With("component", "bmc-transition"),
		OnResult: func(_ string, r bmc.MachineResult) {
			for i, st := range machineStatuses {
				if r.Status == st {
					s.ended[i].Add(1)
				}
			}
		},
		OnPowerOn: func(string, string, time.Time) { s.powerOns.Add(1) },
	}
	return s, nil
}

// Start takes command c from the desired state and starts it, unless it is running or
// its result waits to be delivered; it reports whether c was a bmc.* command (any other
// is the host's). The command runs until it ends or ctx ends.
func (s *BMCService) Start(ctx context.Context, c Command) bool {
	if !IsBMCKind(c.Kind) {
		return false
	}
	run := s.run
	switch c.Kind {
	case KindBMCTransition:
		run = s.runTransition
	case KindBMCTransitionAbort:
		run = func(context.Context, Command) BMCResult { return s.abortTransition(c) }
	}
	s.dispatch.Start(ctx, c.ID, func(ctx context.Context) BMCResult { return run(ctx, c) })
	return true
}

// notLinked is the refusal of a command over a link that carries no BMC access.
func notLinked(c Command) BMCResult {
	return NotSentResult(c, &bmc.OpError{Op: c.Kind, Kind: bmc.ErrUnsupported, Message: "the agent's link carries no BMC access"})
}

// run carries out one bmc.* command (RunBMC) and returns its result.
func (s *BMCService) run(ctx context.Context, c Command) BMCResult {
	if c.BMC != nil && !s.linked {
		return notLinked(c)
	}
	if c.Kind == KindBMCBoot || c.Kind == KindBMCPower {
		// Through the BMC's boot keeper: a persistent boot device the BMC refuses is kept
		// by arming it before each power-on.
		ctx = bmc.KeepBoot(ctx)
	}
	res := RunBMC(ctx, s.exec, s.images, c)
	if c.Kind == KindBMCBoot && res.Status == StatusOK && !res.Replayed && c.BMC != nil && c.BMC.Persistent {
		if tg, err := c.BMC.Target.Ref(); err == nil {
			if _, res.BootKept = s.keeps.Kept(tg); res.BootKept && res.Message == "" {
				res.Message = KeptMessage
			}
		}
	}
	return res
}

// runTransition runs bmc.transition command c to its end (or until ctx ends: the host
// stops, and the transition resumes when it is started again, here or on another agent)
// and returns its result.
func (s *BMCService) runTransition(ctx context.Context, c Command) BMCResult {
	if !s.linked {
		return notLinked(c)
	}
	t, err := BMCTransition(c)
	if err != nil {
		return NotSentResult(c, err)
	}
	// Each power-on a transition sends arms a boot device kept at its BMC first.
	run, err := s.runner.Start(bmc.KeepBoot(ctx), t)
	if err != nil {
		return NotSentResult(c, err)
	}
	tr := &transitionRun{id: c.ID, action: t.Action, run: run}
	s.mu.Lock()
	if s.runs == nil {
		s.runs = make(map[string]*transitionRun)
	}
	s.runs[c.ID] = tr
	for i, id := range s.aborts {
		if id == c.ID {
			s.aborts = append(s.aborts[:i], s.aborts[i+1:]...)
			tr.aborting = true
			run.Abort()
			break
		}
	}
	s.mu.Unlock()
	<-run.Done()
	s.mu.Lock()
	tr.ended = true
	prog := ProgressOf(c.ID, t.Action, run.Progress(), tr.aborting)
	s.mu.Unlock()
	return TransitionSummary(c, prog)
}

// abortTransition carries out bmc.transitionAbort command c: the transition it names, if
// it runs here, takes no new action. One not running here yet is aborted when it starts.
func (s *BMCService) abortTransition(c Command) BMCResult {
	res := BMCResult{ID: c.ID, Kind: c.Kind, Status: StatusOK}
	if c.Abort == "" {
		return NotSentResult(c, &bmc.OpError{Op: c.Kind, Kind: bmc.ErrInvalid, Message: "an abort names no transition"})
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	tr := s.runs[c.Abort]
	switch {
	case tr == nil:
		if len(s.aborts) == MaxEarlyAborts {
			s.aborts = s.aborts[1:]
		}
		s.aborts = append(s.aborts, c.Abort)
		res.Message = "transition " + c.Abort + " is not running on this agent: aborted if it starts here"
	case tr.ended:
		res.Message = "transition " + c.Abort + " had already ended"
	default:
		tr.aborting = true
		tr.run.Abort()
		res.Message = "transition " + c.Abort + " aborted: its pending machines take no new action"
	}
	return res
}

// Pending returns what the next report carries: the results of the commands that ended
// and of the transitions' machines not yet delivered (at most MaxMachineResults of those),
// for StatusReport.BMC, and each transition's progress, for StatusReport.Transitions.
func (s *BMCService) Pending() ([]BMCResult, []TransitionProgress) {
	results := s.dispatch.Pending()
	s.mu.Lock()
	defer s.mu.Unlock()
	var progress []TransitionProgress
	n := 0
	for _, tr := range s.runs {
		progress = append(progress, ProgressOf(tr.id, tr.action, tr.run.Progress(), tr.aborting))
		for _, r := range tr.run.Ended(tr.delivered) {
			if n == MaxMachineResults {
				break
			}
			results = append(results, TransitionResultOf(tr.id, r))
			n++
		}
	}
	slices.SortFunc(progress, func(x, y TransitionProgress) int { return strings.Compare(x.ID, y.ID) })
	return results, progress
}

// Delivered records what a report the control plane answered carried (the BMC results
// Pending returned): those results are not held any longer, and a transition whose every
// result was delivered is forgotten.
func (s *BMCService) Delivered(sent []BMCResult) {
	s.dispatch.Delivered(sent)
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, r := range sent {
		if r.Kind != KindBMCTransition {
			continue
		}
		if r.Machine != "" {
			if tr := s.runs[r.Transition]; tr != nil {
				tr.delivered++
			}
		} else if tr := s.runs[r.ID]; tr != nil && tr.ended {
			tr.summaryDelivered = true
		}
	}
	for id, tr := range s.runs {
		if tr.summaryDelivered && tr.delivered >= len(tr.run.Ended(0)) {
			delete(s.runs, id)
		}
	}
}

// SweepSessions logs out the BMC sessions idle longer than SessionIdle, off the caller (a
// logout waits for its BMC), one sweep at a time; a host calls it on each heartbeat.
func (s *BMCService) SweepSessions() {
	s.sweepMu.Lock()
	defer s.sweepMu.Unlock()
	if s.closing || s.sweeping {
		return
	}
	s.sweeping = true
	s.sweeps.Go(func() {
		s.sessions.CloseIdle()
		s.sweepMu.Lock()
		s.sweeping = false
		s.sweepMu.Unlock()
	})
}

// Close waits for the commands in progress (their contexts end with Close) and a sweep of
// sessions, logs every BMC session out and releases the journal.
func (s *BMCService) Close() error {
	s.dispatch.Close()
	s.sweepMu.Lock()
	s.closing = true // a heartbeat may still run: no sweep starts from here
	s.sweepMu.Unlock()
	s.sweeps.Wait()
	err := s.sessions.Close()
	if s.journal != nil {
		err = errors.Join(err, s.journal.Close())
	}
	return err
}

var (
	famBMCSessions = metric.Family{Name: "bmc_sessions_open",
		Help: "BMC sessions the agent holds open, one at most per BMC (and credential), reused across operations.", Kind: metric.Gauge}
	famTransitionMachines = metric.Family{Name: "bmc_transition_machines_total",
		Help: "Machines of bmc.transition commands that ended, by status (done, failed, unknown, aborted).", Labels: []string{"status"}}
	famTransitionPowerOns = metric.Family{Name: "bmc_transition_power_ons_total",
		Help: "Power-on requests of bmc.transition commands the agent's power-on ramp let through to BMCs (none counted without a ramp: BMC.PowerOnRate zero)."}
	famTransitionsRunning = metric.Family{Name: "bmc_transitions_running",
		Help: "bmc.transition commands running now.", Kind: metric.Gauge}
)

// Samples are the service's counters under package metric's names: the commands'
// (bmc.DispatchStats), the journal's (with JournalDir), the transitions'
// (bmc_transition_machines_total by status, bmc_transition_power_ons_total,
// bmc_transitions_running) and bmc_sessions_open.
func (s *BMCService) Samples() []metric.Sample {
	out := s.dispatch.Stats().Samples()
	if s.journal != nil {
		out = append(out, s.journal.Samples()...)
	}
	return append(out, s.transitionSamples()...)
}

// transitionSamples are the transitions' counters and the sessions' gauge.
func (s *BMCService) transitionSamples() []metric.Sample {
	var out []metric.Sample
	for i, st := range machineStatuses {
		out = append(out, famTransitionMachines.Sample(s.ended[i].Load(), string(st)))
	}
	s.mu.Lock()
	running := 0
	for _, tr := range s.runs {
		if !tr.ended {
			running++
		}
	}
	s.mu.Unlock()
	return append(out, famTransitionPowerOns.Sample(s.powerOns.Load()), famTransitionsRunning.Sample(uint64(running)),
		famBMCSessions.Sample(uint64(s.sessions.Open())))
}
