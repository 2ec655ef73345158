package controlplane

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/bettercompute/siteboot/bmc"
	"github.com/bettercompute/siteboot/lease"
	"github.com/bettercompute/siteboot/sitelink"
)

// BMC access. The plane routes each bmc.* command like the seed's siteAgentFor: to the
// site's lease holder when it is connected, else to the first connected agent by node id.
// Before routing a destructive one it asks its bmc.ClaimRegistry: after a failover a
// recorded outcome is reused (nothing is sent again), a command nobody claimed moves to the
// new agent, and one claimed by an agent that never reported is finished as "outcome
// unknown" for the host to decide. A bmc.query is always safe to send.

// bmcPlane is the plane's BMC state.
type bmcPlane struct {
	once     sync.Once
	reg      *bmc.ClaimRegistry
	mu       sync.Mutex
	creds    map[string]bmc.Credential // by reference
	cmds     map[string]*bmcCmd        // by command id
	order    []string                  // command ids, oldest first
	ramdisks []*ramdiskRun
}

type bmcCmd struct {
	site   string
	cmd    sitelink.Command
	node   string // routed to last
	done   chan struct{}
	result sitelink.BMCResult
	// reused: finished from the claim record, not from an agent's report.
	reused bool
	// trans is a bmc.transition's state; nil for any other kind.
	trans *transitionState
}

// ramdiskRun is one metal.ensureRamdisk in progress: its entries go to every agent its
// site's commands are routed to (boot entries stay per agent).
type ramdiskRun struct {
	site    string
	entries []sitelink.ProxyDhcpEntry
	sentTo  []string
}

// Claims is the plane's claim registry, over ClaimStore (a bmc.MemoryClaimStore when nil).
func (p *Plane) Claims() *bmc.ClaimRegistry {
	b := &p.bmcs
	b.once.Do(func() {
		st := p.ClaimStore
		if st == nil {
			st = &bmc.MemoryClaimStore{}
		}
		// A claim is granted only on a command Route issued to the claiming node.
		b.reg = &bmc.ClaimRegistry{Store: st, Clock: p.Clock, RequireRoute: true}
	})
	return b.reg
}

// SetCredential stores the BMC credential agents fetch by ref. It stays in memory.
func (p *Plane) SetCredential(ref string, c bmc.Credential) {
	b := &p.bmcs
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.creds == nil {
		b.creds = map[string]bmc.Credential{}
	}
	b.creds[ref] = c
}

// BMC queues a bmc.* command for a site and returns its id, unique across the plane's
// restarts (claims outlive the plane when its ClaimStore does). It is routed on the next
// heartbeat of the agent siteAgentFor picks.
func (p *Plane) BMC(site, kind string, body sitelink.BMCCommand) (string, error) {
	if !sitelink.IsBMCKind(kind) {
		return "", fmt.Errorf("controlplane: %q is not a bmc command", kind)
	}
	if kind == sitelink.KindBMCTransition || kind == sitelink.KindBMCTransitionAbort {
		return "", fmt.Errorf("controlplane: %s has no bmc body: use Transition or AbortTransition", kind)
	}
	id := newCommandID()
	p.queueBMC(site, sitelink.Command{ID: id, Kind: kind, BMC: &body}, nil)
	return id, nil
}

// BMCResult returns how command id ended, once it has; reused says the outcome came from
// the claim record (an agent that died after running it), not from an agent's report.
func (p *Plane) BMCResult(id string) (res sitelink.BMCResult, reused, ok bool) {
	b := &p.bmcs
	b.mu.Lock()
	defer b.mu.Unlock()
	c := b.cmds[id]
	if c == nil {
		return sitelink.BMCResult{}, false, false
	}
	select {
	case <-c.done:
		return c.result, c.reused, true
	default:
		return sitelink.BMCResult{}, false, false
	}
}

// WaitBMC waits until command id has ended and returns its result.
func (p *Plane) WaitBMC(ctx context.Context, id string) (sitelink.BMCResult, error) {
	b := &p.bmcs
	b.mu.Lock()
	c := b.cmds[id]
	b.mu.Unlock()
	if c == nil {
		return sitelink.BMCResult{}, fmt.Errorf("controlplane: no bmc command %q", id)
	}
	select {
	case <-c.done:
		b.mu.Lock()
		defer b.mu.Unlock()
		return c.result, nil
	case <-ctx.Done():
		return sitelink.BMCResult{}, ctx.Err()
	}
}

// SiteAgentFor is the seed's siteAgentFor: the site's lease holder when it is connected,
// else the first connected agent of the site by node id; false when none is connected.
func (p *Plane) SiteAgentFor(ctx context.Context, site string) (string, bool, error) {
	rec, _, err := p.Lease.Get(ctx, site)
	if err != nil {
		return "", false, err
	}
	node, ok := p.siteAgentFor(ctx, site, rec)
	return node, ok, nil
}

func (p *Plane) siteAgentFor(ctx context.Context, site string, rec lease.Record) (string, bool) {
	conn, _ := fleet{p}.Connected(ctx, site)
	if len(conn) == 0 {
		return "", false
	}
	ids := make([]string, 0, len(conn))
	for _, a := range conn {
		if a.Node == rec.Holder {
			return a.Node, true
		}
		ids = append(ids, a.Node)
	}
	slices.Sort(ids)
	return ids[0], true
}

// finish ends a command with a result (the first one wins). Called with b.mu held.
func (b *bmcPlane) finish(c *bmcCmd, r sitelink.BMCResult, reused bool) {
	select {
	case <-c.done:
		return
	default:
	}
	c.result, c.reused = r, reused
	close(c.done)
}

// bmcSync takes the agent's BMC results from its report and returns the bmc.* commands
// routed to it; rec is the site's lease record as this heartbeat's answer has it.
func (p *Plane) bmcSync(ctx context.Context, r sitelink.StatusReport, rec lease.Record) []sitelink.Command {
	b := &p.bmcs
	b.mu.Lock()
	b.transitionReport(r)
	for _, res := range r.BMC {
		if res.Machine != "" {
			continue // a transition's machine: transitionReport's
		}
		// Only the node a command was routed to can end it.
		if c := b.cmds[res.ID]; c != nil && c.site == r.Site && c.node == r.Node {
			b.finish(c, res, false)
		}
	}
	b.mu.Unlock()

	target, ok := p.siteAgentFor(ctx, r.Site, rec)
	if !ok || target != r.Node {
		return nil
	}
	b.mu.Lock()
	var open []*bmcCmd
	for _, id := range b.order {
		c := b.cmds[id]
		select {
		case <-c.done:
			continue
		default:
		}
		if c.site == r.Site {
			open = append(open, c)
		}
	}
	var prepare [][]sitelink.ProxyDhcpEntry
	for _, run := range b.ramdisks {
		if run.site == r.Site && !slices.Contains(run.sentTo, r.Node) {
			run.sentTo = append(run.sentTo, r.Node)
			prepare = append(prepare, run.entries)
		}
	}
	b.mu.Unlock()
	// A new agent of a machine being booted gets its own entries.
	for _, e := range prepare {
		p.PrepareRamdisk(r.Node, e)
	}

	var out []sitelink.Command
	for _, c := range open {
		if !sitelink.Destructive(c.cmd.Kind) {
			b.mu.Lock()
			c.node = r.Node
			b.mu.Unlock()
			out = append(out, c.cmd)
			continue
		}
		d, err := p.Claims().Route(ctx, c.cmd.ID, c.cmd.Kind, r.Node)
		if err != nil {
			p.Logger.Warn("bmc command not routed", "id", c.cmd.ID, "err", err)
			continue
		}
		b.mu.Lock()
		switch d.Action {
		case bmc.RouteSend:
			if c.node != "" && c.node != r.Node {
				p.Logger.Info("bmc command moved to another agent", "id", c.cmd.ID, "kind", c.cmd.Kind, "from", c.node, "to", r.Node)
			}
			c.node = r.Node
			out = append(out, c.cmd)
		case bmc.RouteReuse, bmc.RouteUnknown:
			p.Logger.Info("bmc command finished from its claim record", "id", c.cmd.ID, "kind", c.cmd.Kind,
				"action", string(d.Action), "claimed_by", d.Node, "status", string(d.Outcome.Status))
			b.finish(c, sitelink.BMCResult{ID: c.cmd.ID, Kind: c.cmd.Kind, Status: string(d.Outcome.Status),
				ErrorKind: d.Outcome.Kind, Code: d.Outcome.Code, Message: d.Outcome.Message, Replayed: true}, true)
		}
		b.mu.Unlock()
	}
	return out
}

// RamdiskMachine is what metal.ensureRamdisk needs of a machine: one boot entry per known
// PXE MAC and its BMC.
type RamdiskMachine struct {
	Entries []sitelink.ProxyDhcpEntry
	BMC     sitelink.BMCTarget
	// Mode is the boot mode of the one-time PXE boot ("", "uefi", "legacy").
	Mode string
	// PersistentBoot sets PXE as the boot device for every boot, not the next one only, for
	// a BMC that keeps no one-time override: sushy-emulator stores every override as
	// Continuous, and the drivers refuse a one-time request the BMC did not keep (the
	// bmc.boot step then fails and no power cycle is sent). The host sets the boot device
	// back once the machine is provisioned.
	PersistentBoot bool
}

// RamdiskSteps are the commands one EnsureRamdisk ran, with their results.
type RamdiskSteps struct {
	// Agent is the agent the entries went to first.
	Agent   string
	BootID  string
	Boot    sitelink.BMCResult
	PowerID string
	Power   sitelink.BMCResult
	// PowerReused: the power cycle's outcome came from the claim record after a failover.
	PowerReused bool
}

// StepError is a step of EnsureRamdisk that did not end "ok": Result says how it ended
// (for "unknown", the host decides; a bmc.query is always safe).
type StepError struct {
	Step   string
	Result sitelink.BMCResult
}

func (e *StepError) Error() string {
	return fmt.Sprintf("controlplane: %s: %s (%s) %s", e.Step, e.Result.Status, e.Result.ErrorKind, e.Result.Message)
}

// EnsureRamdisk is the seed's metal.ensureRamdisk: the machine's boot entries to the
// site's agent (and to whichever agent its commands move to), a one-time PXE boot through
// its BMC (persistent with PersistentBoot), then a power cycle. It returns once the power
// cycle has ended; the entries stay until RamdiskDone.
func (p *Plane) EnsureRamdisk(ctx context.Context, site string, m RamdiskMachine) (RamdiskSteps, error) {
	var steps RamdiskSteps
	if len(m.Entries) == 0 {
		return steps, errors.New("controlplane: ensureRamdisk: a machine with no known MAC: inspect it out of band first")
	}
	for {
		node, ok, err := p.SiteAgentFor(ctx, site)
		if err != nil {
			return steps, err
		}
		if ok {
			steps.Agent = node
			break
		}
		select {
		case <-ctx.Done():
			return steps, fmt.Errorf("controlplane: ensureRamdisk: no site agent: %w", ctx.Err())
		case <-time.After(100 * time.Millisecond):
		}
	}
	b := &p.bmcs
	b.mu.Lock()
	b.ramdisks = append(b.ramdisks, &ramdiskRun{site: site, entries: slices.Clone(m.Entries), sentTo: []string{steps.Agent}})
	b.mu.Unlock()
	p.PrepareRamdisk(steps.Agent, m.Entries)

	run := func(step, kind string, body sitelink.BMCCommand) (string, sitelink.BMCResult, error) {
		id, err := p.BMC(site, kind, body)
		if err != nil {
			return "", sitelink.BMCResult{}, err
		}
		res, err := p.WaitBMC(ctx, id)
		if err != nil {
			return id, res, err
		}
		if res.Status != string(bmc.StatusOK) {
			return id, res, &StepError{Step: step, Result: res}
		}
		return id, res, nil
	}
	var err error
	bootStep := "bmc.boot pxe once"
	if m.PersistentBoot {
		bootStep = "bmc.boot pxe persistent"
	}
	if steps.BootID, steps.Boot, err = run(bootStep, sitelink.KindBMCBoot, sitelink.BMCCommand{Target: m.BMC, Device: string(bmc.BootPXE), Mode: m.Mode, Persistent: m.PersistentBoot}); err != nil {
		return steps, err
	}
	if steps.PowerID, steps.Power, err = run("bmc.power cycle", sitelink.KindBMCPower, sitelink.BMCCommand{Target: m.BMC, Action: string(bmc.PowerActionCycle)}); err != nil {
		return steps, err
	}
	_, steps.PowerReused, _ = p.BMCResult(steps.PowerID)
	return steps, nil
}

// RamdiskDone ends a site's ensureRamdisk of workflow: its entries are cleaned up
// (boot.cleanUp) on every agent they went to.
func (p *Plane) RamdiskDone(site, workflow string) {
	b := &p.bmcs
	b.mu.Lock()
	var nodes []string
	b.ramdisks = slices.DeleteFunc(b.ramdisks, func(r *ramdiskRun) bool {
		if r.site != site || !slices.ContainsFunc(r.entries, func(e sitelink.ProxyDhcpEntry) bool { return e.Workflow == workflow }) {
			return false
		}
		nodes = append(nodes, r.sentTo...)
		return true
	})
	b.mu.Unlock()
	for _, n := range nodes {
		p.CleanUp(n, workflow)
	}
}

// claim, reportClaim and credential are the BMC half of an agent's link, for both the
// LocalLink and the HTTP handler.
func (p *Plane) claim(ctx context.Context, node string, req bmc.ClaimRequest) (bmc.Grant, error) {
	if !p.enrolled(node) {
		return bmc.Grant{}, errUnknownAgent
	}
	// Only the node the command is routed to may claim it: a claim on an id nobody routed
	// (one another site's agent read or made up) would otherwise take the grant from the
	// agent that is to run it.
	b := &p.bmcs
	b.mu.Lock()
	step := b.transitionStep(node, req.ID)
	b.mu.Unlock()
	if !step && !p.routedTo(node, func(c *bmcCmd) bool { return c.cmd.ID == req.ID && sitelink.Destructive(c.cmd.Kind) }) {
		p.refused.notRouted.Add(1)
		p.Logger.Warn("bmc claim refused: no live command of that id is routed to the node", "node", node, "id", req.ID)
		return bmc.Grant{}, errNotRouted
	}
	if step {
		// A transition's step is routed when it is first claimed: to its claimer, unless
		// another node claimed it (before a failover), whose it stays.
		if _, err := p.Claims().Route(ctx, req.ID, req.Op, node); err != nil {
			return bmc.Grant{}, err
		}
	}
	g, err := p.Claims().Claim(ctx, node, req)
	if errors.Is(err, bmc.ErrNotRouted) {
		// The registry holds no route of this id to this node (one made after the plane's
		// own record of the command lapsed, or a store shared with another plane).
		p.refused.notRouted.Add(1)
		return bmc.Grant{}, fmt.Errorf("%w: %w", sitelink.ErrForbidden, err)
	}
	if err == nil && g.Granted {
		b.mu.Lock()
		h := p.OnBMCClaim
		c := sitelink.Command{ID: req.ID} // a transition's step: no command of its own
		if x := b.cmds[req.ID]; x != nil {
			c = x.cmd
		}
		b.mu.Unlock()
		if h != nil {
			h(node, c)
		}
	}
	return g, err
}

func (p *Plane) reportClaim(ctx context.Context, node string, req bmc.ClaimRequest, o bmc.Outcome) error {
	if !p.enrolled(node) {
		return errUnknownAgent
	}
	if err := p.Claims().Report(ctx, node, req, o); err != nil {
		return err
	}
	b := &p.bmcs
	b.mu.Lock()
	h := p.OnBMCReport // read under the lock BMC took after the host set it
	var c sitelink.Command
	if x := b.cmds[req.ID]; x != nil {
		c = x.cmd
	}
	b.mu.Unlock()
	if h != nil {
		h(node, c, o)
	}
	return nil
}

// credential returns the credential ref names, to the node a live command naming ref (its
// target's credential, or the new one of a rotation) is routed to, and to nobody else.
func (p *Plane) credential(node, ref string) (bmc.Credential, error) {
	if !p.enrolled(node) {
		return bmc.Credential{}, errUnknownAgent
	}
	if ref == "" || !p.routedTo(node, func(c *bmcCmd) bool {
		return c.cmd.BMC != nil && (c.cmd.BMC.Target.Credential == ref || c.cmd.BMC.NewCredential == ref) ||
			slices.Contains(transitionRefs(c.cmd), ref)
	}) {
		p.refused.notRouted.Add(1)
		p.Logger.Warn("bmc credential refused: no live command routed to the node names it", "node", node, "ref", ref)
		return bmc.Credential{}, errNotRouted
	}
	b := &p.bmcs
	b.mu.Lock()
	defer b.mu.Unlock()
	c, ok := b.creds[ref]
	if !ok {
		return bmc.Credential{}, errNoCredential
	}
	return c, nil
}

// routedTo reports whether a command that has not ended, routed to node, satisfies match.
func (p *Plane) routedTo(node string, match func(*bmcCmd) bool) bool {
	b := &p.bmcs
	b.mu.Lock()
	defer b.mu.Unlock()
	for _, c := range b.cmds {
		select {
		case <-c.done:
			continue
		default:
		}
		if c.node == node && match(c) {
			return true
		}
	}
	return false
}

var (
	// errNotRouted: no live command routed to the caller is for that id or credential.
	errNotRouted = fmt.Errorf("controlplane: no such command routed to the node: %w", sitelink.ErrForbidden)
	// errNoCredential: a command names a credential the plane does not hold.
	errNoCredential = fmt.Errorf("controlplane: no credential under that reference: %w", sitelink.ErrNotFound)
)

func (p *Plane) enrolled(node string) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.agents[node] != nil
}
