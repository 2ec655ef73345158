package controlplane

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"maps"
	"strings"

	"github.com/bettercompute/siteboot/sitelink"
)

// Power transitions. A bmc.transition is one command over many machines, routed like any
// destructive bmc.* command (to the site's agent, through the claim registry). Its agent
// claims each step it takes on a machine under "ID/machine/step/attempt": the plane
// grants such a claim only to the node the transition is routed to, for one of its
// machines, routing the step to that node first (so a step another agent claimed before a
// failover stays that agent's, and ends unknown on the new one). The agent reports each
// machine's result as it ends and the transition's progress on each heartbeat; its own
// result (WaitBMC) comes once every machine ended.

// TransitionState is what the plane knows of a transition: its progress as last reported
// and each machine's result.
type TransitionState struct {
	// Progress is the last progress its agent reported; zero before the first.
	Progress sitelink.TransitionProgress
	// Machines are the machines' results by name, the first one reported for each.
	Machines map[string]sitelink.BMCResult
	// Repeats counts machines' results reported again (a report whose answer was lost, a
	// transition resumed by another agent).
	Repeats int
}

// transitionState is a bmc.transition command's state in the plane.
type transitionState struct {
	progress sitelink.TransitionProgress
	machines map[string]sitelink.BMCResult
	names    map[string]bool // the machines of the command
	repeats  int
}

// Transition queues a power transition over machines for a site and returns its id (the
// command's). A body that does not convert (sitelink.BMCTransition) is refused here, before
// anything is routed.
func (p *Plane) Transition(site string, body sitelink.TransitionCommand) (string, error) {
	id := newCommandID()
	c := sitelink.Command{ID: id, Kind: sitelink.KindBMCTransition, Transition: &body}
	if _, err := sitelink.BMCTransition(c); err != nil {
		return "", err
	}
	st := &transitionState{machines: map[string]sitelink.BMCResult{}, names: map[string]bool{}}
	for _, m := range body.Machines {
		st.names[m.Name] = true
	}
	p.queueBMC(site, c, st)
	return id, nil
}

// AbortTransition queues the abort of transition id for a site and returns the abort
// command's id: the transition's machines still pending take no new action.
func (p *Plane) AbortTransition(site, id string) (string, error) {
	if id == "" {
		return "", errors.New("controlplane: abort names no transition")
	}
	aid := newCommandID()
	p.queueBMC(site, sitelink.Command{ID: aid, Kind: sitelink.KindBMCTransitionAbort, Abort: id}, nil)
	return aid, nil
}

// TransitionState returns what the plane knows of transition id; false when there is no
// such transition.
func (p *Plane) TransitionState(id string) (TransitionState, bool) {
	b := &p.bmcs
	b.mu.Lock()
	defer b.mu.Unlock()
	c := b.cmds[id]
	if c == nil || c.trans == nil {
		return TransitionState{}, false
	}
	return TransitionState{Progress: c.trans.progress, Machines: maps.Clone(c.trans.machines), Repeats: c.trans.repeats}, true
}

func newCommandID() string {
	var r [12]byte
	rand.Read(r[:])
	return "bmc-" + hex.EncodeToString(r[:])
}

// queueBMC adds command c for a site.
func (p *Plane) queueBMC(site string, c sitelink.Command, st *transitionState) {
	b := &p.bmcs
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.cmds == nil {
		b.cmds = map[string]*bmcCmd{}
	}
	b.cmds[c.ID] = &bmcCmd{site: site, cmd: c, done: make(chan struct{}), trans: st}
	b.order = append(b.order, c.ID)
}

// transitionReport takes a report's machines' results and progress for the transitions
// routed to its node. Called with b.mu held.
func (b *bmcPlane) transitionReport(r sitelink.StatusReport) {
	for _, res := range r.BMC {
		if res.Transition == "" || res.Machine == "" {
			continue
		}
		c := b.cmds[res.Transition]
		if c == nil || c.trans == nil || c.site != r.Site || c.node != r.Node || !c.trans.names[res.Machine] ||
			res.ID != sitelink.MachineResultID(res.Transition, res.Machine) {
			continue
		}
		if _, ok := c.trans.machines[res.Machine]; ok {
			c.trans.repeats++
			continue
		}
		c.trans.machines[res.Machine] = res
	}
	for _, pr := range r.Transitions {
		if c := b.cmds[pr.ID]; c != nil && c.trans != nil && c.site == r.Site && c.node == r.Node {
			c.trans.progress = pr
		}
	}
}

// transitionStep reports whether claim id is a step of a live transition routed to node,
// on one of its machines ("ID/machine/step/attempt"). Called with b.mu held.
func (b *bmcPlane) transitionStep(node, id string) bool {
	tid, rest, ok := strings.Cut(id, "/")
	if !ok {
		return false
	}
	machine, _, ok := strings.Cut(rest, "/")
	c := b.cmds[tid]
	if !ok || c == nil || c.trans == nil || c.node != node || !c.trans.names[machine] {
		return false
	}
	select {
	case <-c.done:
		return false
	default:
		return true
	}
}

// names a transition's credential references.
func transitionRefs(c sitelink.Command) []string {
	if c.Transition == nil {
		return nil
	}
	return c.Transition.Refs()
}
