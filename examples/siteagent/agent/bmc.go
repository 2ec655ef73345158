package agent

import (
	"context"
	"errors"
	"fmt"
	"math"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/bettercompute/siteboot/bmc"
	"github.com/bettercompute/siteboot/bmc/ipmi"
	"github.com/bettercompute/siteboot/bmc/redfish"
	"github.com/bettercompute/siteboot/bootserver"
	"github.com/bettercompute/siteboot/metric"
	"github.com/bettercompute/siteboot/sitelink"
)

// bmcPart runs the agent's bmc.* commands: a bmc.Dispatcher runs each off the sync loop
// (a BMC that hangs never holds the heartbeat or the boot path) and holds its result
// until a report carrying it is answered; a bmc.Executor journals, claims and sends it.
type bmcPart struct {
	linked   bool // the link carries BMC access
	exec     *bmc.Executor
	sessions *bmc.SessionPool // one session per BMC, lent to each operation in turn
	keeps    *bootKeeps       // the executor's Wrap: boot devices kept by re-arming (bootkeep.go)
	journal  *bmc.FileJournal
	dispatch *bmc.Dispatcher[sitelink.BMCResult]
	trans    *transitionPart // bmc.transition commands (transition.go)

	sweepMu  sync.Mutex
	sweeping bool // a sweep of idle sessions runs (sweepSessions)
	closing  bool // close has begun
	sweeps   sync.WaitGroup
}

// setupBMC opens the BMC journal in the data dir and builds the executor.
func (a *Agent) setupBMC() error {
	j, err := bmc.OpenFileJournal(a.cfg.DataDir)
	if err != nil {
		return fmt.Errorf("agent: bmc journal: %w", err)
	}
	if d, ok := j.Damage(); ok {
		// The journal set its damaged file aside and refuses destructive operations until an
		// operator clears it; queries and booting go on.
		a.log.Error("BMC journal damaged: destructive bmc.* commands are refused until an operator clears it",
			"set_aside", d.SetAside, "reason", d.Reason, "kept", d.Kept, "lost", d.Lost,
			"clear", "rm "+filepath.Join(a.cfg.DataDir, bmc.JournalDamagedMarker))
	}
	opener := a.opt.BMCOpener
	if opener == nil {
		reg := bmc.NewRegistry()
		reg.Register(redfish.Name, redfish.Config{})
		reg.Register(ipmi.Name, ipmi.Config{})
		opener = reg
	}
	keeps := newBootKeeps()
	idle := a.cfg.BMC.SessionIdle
	if idle == 0 {
		idle = DefaultSessionIdle
	}
	sessions := &bmc.SessionPool{MaxOpen: a.cfg.BMC.MaxSessions, IdleTimeout: idle, Clock: a.clock,
		Logger: a.log.With("component", "bmc")}
	b := &bmcPart{journal: j, keeps: keeps, sessions: sessions, dispatch: &bmc.Dispatcher[sitelink.BMCResult]{
		// The result goes back in the next report: ask for one now.
		OnDone: func(string) { a.beat.Wake() },
	}}
	b.exec = &bmc.Executor{
		Opener:        opener,
		Sessions:      sessions,
		Wrap:          keeps.wrap,
		Journal:       j,
		MaxConcurrent: a.cfg.BMC.MaxConcurrent,
		Timeout:       a.cfg.BMC.Timeout,
		Logger:        a.log.With("component", "bmc"),
		Clock:         a.clock,
	}
	b.trans = newTransitionPart(b.exec, a.cfg.BMC, a)
	// A link that carries BMC access (a *sitelink.Client does) claims and fetches
	// credentials in this node's name; over any other, every bmc.* command is not sent.
	if l, ok := a.link.(sitelink.BMCLink); ok {
		c := sitelink.BMCClient{Client: l, Node: a.cfg.NodeID}
		b.exec.Claims, b.exec.Credentials, b.exec.OnClaim = c, c, b.dispatch.OnClaim
		b.linked = true
	}
	a.bmc = b
	return nil
}

// bmcCommand takes a bmc.* command from the desired state and starts it, unless it is
// running or its result waits to be reported; it reports whether c was a bmc.* command.
// BMC access works whether or not the agent holds the lease.
func (a *Agent) bmcCommand(ctx context.Context, c sitelink.Command) bool {
	if !sitelink.IsBMCKind(c.Kind) {
		return false
	}
	run := a.runBMC
	switch c.Kind {
	case sitelink.KindBMCTransition:
		run = a.runTransition
	case sitelink.KindBMCTransitionAbort:
		run = func(context.Context, sitelink.Command) sitelink.BMCResult { return a.abortTransition(c) }
	}
	a.bmc.dispatch.Start(ctx, c.ID, func(ctx context.Context) sitelink.BMCResult { return run(ctx, c) })
	return true
}

// runBMC carries out one bmc.* command and returns its result (sitelink.RunBMC): its image,
// if any, served from the cache under a grant of its own at bmcCacheBase.
func (a *Agent) runBMC(ctx context.Context, c sitelink.Command) sitelink.BMCResult {
	if c.BMC != nil && !a.bmc.linked {
		return sitelink.NotSentResult(c, &bmc.OpError{Op: c.Kind, Kind: bmc.ErrUnsupported, Message: "the agent's link carries no BMC access"})
	}
	if c.Kind == sitelink.KindBMCBoot || c.Kind == sitelink.KindBMCPower {
		// Through the BMC's boot keeper: a persistent boot device the BMC refuses is kept
		// by arming it before each power-on.
		ctx = keepBoot(ctx)
	}
	res := sitelink.RunBMC(ctx, a.bmc.exec, bootserver.BMCImages{Cache: a.cache, BaseURL: a.bmcCacheBase()}, c)
	if c.Kind == sitelink.KindBMCBoot && res.Status == sitelink.StatusOK && !res.Replayed && c.BMC != nil && c.BMC.Persistent {
		if tg, err := c.BMC.Target.Ref(); err == nil {
			if _, res.BootKept = a.bmc.keeps.Kept(tg); res.BootKept && res.Message == "" {
				res.Message = keptMessage
			}
		}
	}
	return res
}

// keptMessage is the message of a persistent bmc.boot kept by re-arming.
const keptMessage = "the BMC keeps no persistent boot device: set for the next boot, and armed again by this agent before each power-on it sends"

// DefaultSessionIdle is BMCConfig.SessionIdle's default: below the shortest idle timeout
// BMCs apply (Redfish's SessionTimeout is 30 s at the least, IPMI's about a minute).
const DefaultSessionIdle = 25 * time.Second

// sweepSessions logs out the BMC sessions idle longer than BMC.SessionIdle, off the caller
// (a logout waits for its BMC), one sweep at a time.
func (b *bmcPart) sweepSessions() {
	b.sweepMu.Lock()
	defer b.sweepMu.Unlock()
	if b.closing || b.sweeping {
		return
	}
	b.sweeping = true
	b.sweeps.Go(func() {
		b.sessions.CloseIdle()
		b.sweepMu.Lock()
		b.sweeping = false
		b.sweepMu.Unlock()
	})
}

// close waits for the operations in progress (their contexts have ended) and a sweep of
// sessions, logs every BMC session out and releases the journal.
func (b *bmcPart) close() {
	b.dispatch.Close()
	b.sweepMu.Lock()
	b.closing = true // the heartbeat may still run: no sweep starts from here
	b.sweepMu.Unlock()
	b.sweeps.Wait()
	_ = b.sessions.Close()
	b.journal.Close()
}

var famBMCSessions = metric.Family{Name: "bmc_sessions_open",
	Help: "BMC sessions the agent holds open, one at most per BMC (and credential), reused across operations.", Kind: metric.Gauge}

// samples are the BMC side's own gauges.
func (b *bmcPart) samples() []metric.Sample {
	return []metric.Sample{famBMCSessions.Sample(uint64(b.sessions.Open()))}
}

// bmcCacheBase is where BMCs reach the image cache: BMC.CacheURL, else the machines' cache
// URL.
func (a *Agent) bmcCacheBase() string {
	if a.cfg.BMC.CacheURL != "" {
		return strings.TrimRight(a.cfg.BMC.CacheURL, "/")
	}
	return a.cacheBase()
}

// BMCConfig bounds the agent's BMC access.
type BMCConfig struct {
	// MaxConcurrent bounds the BMC operations in progress, across BMCs (one at a time per
	// BMC always); zero means bmc.DefaultMaxConcurrent.
	MaxConcurrent int
	// Timeout is each operation's deadline (the wait for its BMC, the claim, the login, the
	// operation, the logout); zero means bmc.DefaultOpTimeout.
	Timeout time.Duration
	// MaxSessions bounds the BMC sessions kept open across BMCs: each BMC keeps at most
	// one (per credential), reused by one operation after another and logged out after an
	// error that may have spoilt it, when more than MaxSessions are open (the least
	// recently used first), once idle for SessionIdle and when the agent stops. Zero means
	// bmc.DefaultMaxOpenSessions.
	MaxSessions int
	// SessionIdle logs out a BMC session idle this long: the next operation there logs in
	// again. BMCs end idle sessions themselves (IPMI after about a minute, Redfish after its
	// SessionTimeout, 30 s at the least); zero means DefaultSessionIdle.
	SessionIdle time.Duration
	// CacheURL is where BMCs reach the image cache for firmware and virtual media (their
	// management network may reach this host under another name); "" means the machines'
	// cache URL (Boot.CacheURL, or HTTPBase + "/cache").
	CacheURL string

	// PowerOnRate bounds the power-ons of bmc.transition commands sent to BMCs per second,
	// across every transition this agent runs (bmc.TransitionLimits.PowerOnRate); zero
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

func (c BMCConfig) validate() error {
	var le *bmc.LimitError
	if errors.As((&bmc.Executor{MaxConcurrent: c.MaxConcurrent, Timeout: c.Timeout}).Validate(), &le) {
		return &FieldError{Field: "BMC." + le.Field, Err: le.Err}
	}
	for _, f := range []struct {
		name string
		bad  bool
	}{
		{"PowerOnRate", c.PowerOnRate < 0 || math.IsNaN(c.PowerOnRate) || math.IsInf(c.PowerOnRate, 0)},
		{"PowerOnBurst", c.PowerOnBurst < 0},
		{"GroupPowerOnRate", c.GroupPowerOnRate < 0 || math.IsNaN(c.GroupPowerOnRate) || math.IsInf(c.GroupPowerOnRate, 0)},
		{"GroupPowerOnBurst", c.GroupPowerOnBurst < 0},
		{"NetworkInFlight", c.NetworkInFlight < 0},
		{"MaxSessions", c.MaxSessions < 0},
		{"SessionIdle", c.SessionIdle < 0},
		{"TransitionSettle", c.TransitionSettle < 0},
	} {
		if f.bad {
			return &FieldError{Field: "BMC." + f.name, Err: errors.New("want a finite value, zero or more")}
		}
	}
	if c.CacheURL != "" {
		if err := bootserver.CheckCacheURL(c.CacheURL); err != nil {
			return &FieldError{Field: "BMC.CacheURL", Err: err}
		}
	}
	return nil
}
