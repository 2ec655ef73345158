package agent

import (
	"context"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/bettercompute/siteboot/bmc"
	"github.com/bettercompute/siteboot/metric"
	"github.com/bettercompute/siteboot/sitelink"
)

// maxMachineResults bounds the machines' results one report carries; the rest go in the
// next ones.
const maxMachineResults = 512

// maxEarlyAborts bounds the aborts kept for transitions not (yet) running here.
const maxEarlyAborts = 64

// transitionPart runs the agent's bmc.transition commands: each through a
// bmc.TransitionRunner (the site's ramp and limits, shared by every transition; each step
// journaled and claimed through the agent's Executor) off the heartbeat, in a goroutine
// of the bmc.Dispatcher that reports the transition's own result once its run ended. On
// each heartbeat the report carries the progress of each run and the results of the
// machines that ended since the last report the control plane answered, each until a
// report carrying it is answered.
type transitionPart struct {
	runner *bmc.TransitionRunner

	ended    [len(machineStatuses)]atomic.Uint64 // machines that ended, by machineStatuses
	powerOns atomic.Uint64                       // power-ons let through the ramp

	mu     sync.Mutex
	runs   map[string]*transitionRun // by command id
	aborts []string                  // aborts of transitions not running here when they came
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

func newTransitionPart(exec *bmc.Executor, cfg BMCConfig, a *Agent) *transitionPart {
	p := &transitionPart{}
	p.runner = &bmc.TransitionRunner{
		Executor: exec,
		Limits: bmc.TransitionLimits{
			PowerOnRate: cfg.PowerOnRate, PowerOnBurst: cfg.PowerOnBurst,
			GroupPowerOnRate: cfg.GroupPowerOnRate, GroupPowerOnBurst: cfg.GroupPowerOnBurst,
			NetworkInFlight: cfg.NetworkInFlight, Settle: cfg.TransitionSettle,
		},
		Clock:  a.clock,
		Logger: a.log.With("component", "bmc-transition"),
		OnResult: func(_ string, r bmc.MachineResult) {
			for i, st := range machineStatuses {
				if r.Status == st {
					p.ended[i].Add(1)
				}
			}
		},
		OnPowerOn: func(string, string, time.Time) { p.powerOns.Add(1) },
	}
	return p
}

// machineStatuses are the statuses a transition's machine ends with, in the order
// transitionPart.ended counts them.
var machineStatuses = [...]bmc.MachineStatus{bmc.MachineDone, bmc.MachineFailed, bmc.MachineUnknown, bmc.MachineAborted}

var (
	famTransitionMachines = metric.Family{Name: "bmc_transition_machines_total",
		Help: "Machines of bmc.transition commands that ended, by status (done, failed, unknown, aborted).", Labels: []string{"status"}}
	famTransitionPowerOns = metric.Family{Name: "bmc_transition_power_ons_total",
		Help: "Power-on requests of bmc.transition commands the agent's power-on ramp let through to BMCs (none counted without a ramp: BMC.PowerOnRate zero)."}
	famTransitionsRunning = metric.Family{Name: "bmc_transitions_running",
		Help: "bmc.transition commands running now.", Kind: metric.Gauge}
)

// samples are the transitions' counters.
func (p *transitionPart) samples() []metric.Sample {
	var out []metric.Sample
	for i, st := range machineStatuses {
		out = append(out, famTransitionMachines.Sample(p.ended[i].Load(), string(st)))
	}
	p.mu.Lock()
	running := 0
	for _, tr := range p.runs {
		if !tr.ended {
			running++
		}
	}
	p.mu.Unlock()
	return append(out, famTransitionPowerOns.Sample(p.powerOns.Load()), famTransitionsRunning.Sample(uint64(running)))
}

// runTransition runs bmc.transition command c to its end (or until ctx ends: the agent
// stops, and the transition resumes when it is started again, here or on another agent)
// and returns its result.
func (a *Agent) runTransition(ctx context.Context, c sitelink.Command) sitelink.BMCResult {
	if !a.bmc.linked {
		return sitelink.NotSentResult(c, &bmc.OpError{Op: c.Kind, Kind: bmc.ErrUnsupported, Message: "the agent's link carries no BMC access"})
	}
	t, err := sitelink.BMCTransition(c)
	if err != nil {
		return sitelink.NotSentResult(c, err)
	}
	p := a.bmc.trans
	// Each power-on a transition sends arms a boot device kept at its BMC first.
	run, err := p.runner.Start(keepBoot(ctx), t)
	if err != nil {
		return sitelink.NotSentResult(c, err)
	}
	tr := &transitionRun{id: c.ID, action: t.Action, run: run}
	p.mu.Lock()
	if p.runs == nil {
		p.runs = make(map[string]*transitionRun)
	}
	p.runs[c.ID] = tr
	for i, id := range p.aborts {
		if id == c.ID {
			p.aborts = append(p.aborts[:i], p.aborts[i+1:]...)
			tr.aborting = true
			run.Abort()
			break
		}
	}
	p.mu.Unlock()
	<-run.Done()
	p.mu.Lock()
	tr.ended = true
	prog := sitelink.ProgressOf(c.ID, t.Action, run.Progress(), tr.aborting)
	p.mu.Unlock()
	return sitelink.TransitionSummary(c, prog)
}

// abortTransition carries out bmc.transitionAbort command c: the transition it names, if
// it runs here, takes no new action. One not running here yet is aborted when it starts.
func (a *Agent) abortTransition(c sitelink.Command) sitelink.BMCResult {
	res := sitelink.BMCResult{ID: c.ID, Kind: c.Kind, Status: sitelink.StatusOK}
	if c.Abort == "" {
		return sitelink.NotSentResult(c, &bmc.OpError{Op: c.Kind, Kind: bmc.ErrInvalid, Message: "an abort names no transition"})
	}
	p := a.bmc.trans
	p.mu.Lock()
	defer p.mu.Unlock()
	tr := p.runs[c.Abort]
	switch {
	case tr == nil:
		if len(p.aborts) == maxEarlyAborts {
			p.aborts = p.aborts[1:]
		}
		p.aborts = append(p.aborts, c.Abort)
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

// pending returns what the next report carries of the transitions: the machines' results
// not yet delivered (at most maxMachineResults) and each run's progress.
func (p *transitionPart) pending() ([]sitelink.BMCResult, []sitelink.TransitionProgress) {
	p.mu.Lock()
	defer p.mu.Unlock()
	var results []sitelink.BMCResult
	var progress []sitelink.TransitionProgress
	for _, tr := range p.runs {
		progress = append(progress, sitelink.ProgressOf(tr.id, tr.action, tr.run.Progress(), tr.aborting))
		for _, r := range tr.run.Ended(tr.delivered) {
			if len(results) == maxMachineResults {
				break
			}
			results = append(results, sitelink.TransitionResultOf(tr.id, r))
		}
	}
	slices.SortFunc(progress, func(x, y sitelink.TransitionProgress) int { return strings.Compare(x.ID, y.ID) })
	return results, progress
}

// delivered records what a report the control plane answered carried: the machines'
// results and the transitions' own. A run whose every result was delivered is forgotten.
func (p *transitionPart) delivered(sent []sitelink.BMCResult) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, r := range sent {
		if r.Kind != sitelink.KindBMCTransition {
			continue
		}
		if r.Machine != "" {
			if tr := p.runs[r.Transition]; tr != nil {
				tr.delivered++
			}
		} else if tr := p.runs[r.ID]; tr != nil && tr.ended {
			tr.summaryDelivered = true
		}
	}
	for id, tr := range p.runs {
		if tr.summaryDelivered && tr.delivered >= len(tr.run.Ended(0)) {
			delete(p.runs, id)
		}
	}
}
