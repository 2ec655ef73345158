package sitelink

import (
	"strconv"
	"strings"
	"time"

	"github.com/bettercompute/siteboot/bmc"
)

// MaxTransitionMachines bounds the machines of one bmc.transition command.
const MaxTransitionMachines = 4096

// MaxTransitionDeadline bounds TransitionCommand.DeadlineMs.
const MaxTransitionDeadline = 24 * time.Hour

// TransitionCommand is the body of a bmc.transition command: one power transition over a
// list of machines, run by the agent as a bmc.TransitionRunner under the site's limits
// (its power-on ramp, its operations in flight per BMC network). The command's id is the
// transition's: each step it takes on a machine is claimed as "ID/machine/step/attempt".
type TransitionCommand struct {
	// Action is "on", "off" (force-off), "cycle" or "soft-off" (a graceful shutdown, forced
	// off after DeadlineMs).
	Action string `json:"action"`
	// DeadlineMs is how long a soft-off waits for a machine to be off before forcing it;
	// zero means bmc.DefaultSoftOffDeadline.
	DeadlineMs int64 `json:"deadline_ms,omitempty"`
	// Machines are the machines, each named once.
	Machines []TransitionMachine `json:"machines"`
}

// TransitionMachine is one machine of a transition: its name (unique in the transition,
// without "/"), its BMC, and the groups the site's limits count it in.
type TransitionMachine struct {
	Name   string    `json:"name"`
	Target BMCTarget `json:"target"`
	// Group is the group whose power-ons the agent's group rate bounds (the PDU or circuit
	// the machine draws from); "" is a group of its own.
	Group string `json:"group,omitempty"`
	// Network is the BMC network whose operations in flight the agent bounds; "" is one
	// shared network.
	Network string `json:"network,omitempty"`
}

// TransitionProgress counts the machines of a running transition by state, reported on
// each heartbeat (StatusReport.Transitions) and in the transition's own result
// (BMCResult.Progress).
type TransitionProgress struct {
	// ID is the bmc.transition command's id.
	ID      string `json:"id"`
	Action  string `json:"action"`
	Total   int    `json:"total"`
	Pending int    `json:"pending"`
	Done    int    `json:"done"`
	Failed  int    `json:"failed"`
	Unknown int    `json:"unknown"`
	Aborted int    `json:"aborted"`
	// Aborting: an abort was asked; the machines still pending take no new action.
	Aborting bool `json:"aborting,omitempty"`
}

// Refs returns the credential references of the transition's machines, each once.
func (t TransitionCommand) Refs() []string {
	var refs []string
	seen := map[string]bool{}
	for _, m := range t.Machines {
		if r := m.Target.Credential; !seen[r] {
			seen[r] = true
			refs = append(refs, r)
		}
	}
	return refs
}

// BMCTransition turns a bmc.transition command into the transition a bmc.TransitionRunner
// runs; its ID is c.ID. A command without a body, with no machine or over
// MaxTransitionMachines, a deadline out of bounds, a bad target, or a transition that
// does not validate (an unknown action, a machine named twice or with "/") is an
// *bmc.OpError of kind bmc.ErrInvalid, meant for NotSentResult.
func BMCTransition(c Command) (bmc.Transition, error) {
	invalid := func(msg string) error { return &bmc.OpError{Op: c.Kind, Kind: bmc.ErrInvalid, Message: msg} }
	b := c.Transition
	switch {
	case c.Kind != KindBMCTransition:
		return bmc.Transition{}, invalid("not a " + KindBMCTransition + " command")
	case b == nil:
		return bmc.Transition{}, invalid("command without a transition body")
	case len(b.Machines) == 0 || len(b.Machines) > MaxTransitionMachines:
		return bmc.Transition{}, invalid("a transition needs 1 to " + strconv.Itoa(MaxTransitionMachines) + " machines")
	case b.DeadlineMs < 0 || time.Duration(b.DeadlineMs) > MaxTransitionDeadline/time.Millisecond:
		return bmc.Transition{}, invalid("deadline_ms out of bounds")
	}
	t := bmc.Transition{ID: c.ID, Action: bmc.TransitionAction(b.Action), Deadline: time.Duration(b.DeadlineMs) * time.Millisecond,
		Machines: make([]bmc.Machine, 0, len(b.Machines))}
	for _, m := range b.Machines {
		tg, msg := m.Target.ref()
		if msg != "" {
			return bmc.Transition{}, invalid("machine " + strconv.Quote(m.Name) + ": " + msg)
		}
		if len(m.Group) > bmc.MaxIDLen || len(m.Network) > bmc.MaxIDLen {
			return bmc.Transition{}, invalid("machine " + strconv.Quote(m.Name) + ": group or network too long")
		}
		t.Machines = append(t.Machines, bmc.Machine{Name: m.Name, Target: tg, Group: m.Group, Network: m.Network})
	}
	if err := t.Validate(); err != nil {
		return bmc.Transition{}, err
	}
	return t, nil
}

// Machine result statuses (BMCResult.Status of a transition's machine) beside StatusOK
// (done), StatusFailed and StatusUnknown.
const (
	// StatusAborted: the transition was aborted before the machine's action was taken.
	StatusAborted = "aborted"
)

// MachineResultID is the id of a transition machine's result: the transition's id and the
// machine's name.
func MachineResultID(transition, machine string) string { return transition + "/" + machine }

// TransitionResultOf is how machine r of transition id ended, as the report carries it:
// BMCResult.ID is MachineResultID, Transition and Machine name it, Status is StatusOK for
// done, StatusFailed, StatusUnknown or StatusAborted; Replayed says an outcome recorded
// before this run (the journal, another agent's claim record) was used.
func TransitionResultOf(id string, r bmc.MachineResult) BMCResult {
	st := string(r.Status)
	switch r.Status {
	case bmc.MachineDone:
		st = StatusOK
	case bmc.MachineFailed:
		st = StatusFailed
	case bmc.MachineUnknown:
		st = StatusUnknown
	case bmc.MachineAborted:
		st = StatusAborted
	}
	return BMCResult{ID: MachineResultID(id, r.Machine), Kind: KindBMCTransition, Status: st, ErrorKind: r.Kind,
		Message: cutMessage(r.Reason), Replayed: r.Resumed, Power: string(r.Power), Transition: id, Machine: r.Machine,
		Forced: r.Forced, Sends: r.Sends}
}

// ProgressOf is the wire form of a run's progress.
func ProgressOf(id string, action bmc.TransitionAction, p bmc.TransitionProgress, aborting bool) TransitionProgress {
	return TransitionProgress{ID: id, Action: string(action), Total: p.Total, Pending: p.Pending, Done: p.Done,
		Failed: p.Failed, Unknown: p.Unknown, Aborted: p.Aborted, Aborting: aborting}
}

// TransitionSummary is the result of bmc.transition command c once its run ended with
// progress p: StatusOK when every machine is done, else StatusFailed (or StatusUnknown
// when no machine failed but some are unknown), saying the counts. The machines' own
// results go in the reports as they end (TransitionResultOf).
func TransitionSummary(c Command, p TransitionProgress) BMCResult {
	st := StatusOK
	switch {
	case p.Failed > 0 || p.Aborted > 0 || p.Pending > 0:
		st = StatusFailed
	case p.Unknown > 0:
		st = StatusUnknown
	}
	var msg strings.Builder
	for i, part := range []struct {
		n    int
		name string
	}{{p.Done, "done"}, {p.Failed, "failed"}, {p.Unknown, "unknown"}, {p.Aborted, "aborted"}, {p.Pending, "pending"}} {
		if i > 0 {
			msg.WriteString(", ")
		}
		msg.WriteString(strconv.Itoa(part.n) + " " + part.name)
	}
	msg.WriteString(" of " + strconv.Itoa(p.Total))
	return BMCResult{ID: c.ID, Kind: c.Kind, Status: st, Message: msg.String(), Progress: &p}
}

// cutMessage bounds a message as a claim record does.
func cutMessage(s string) string {
	if len(s) <= bmc.MaxMessageLen {
		return s
	}
	return strings.ToValidUTF8(s[:bmc.MaxMessageLen], "")
}
