package sitelink

import (
	"context"
	"log/slog"
	"slices"
	"sync"
)

// EntryApplier applies an agent's boot entry commands (KindPrepareRamdisk, KindCleanUp) to
// its [EntryStore] off the heartbeat, and keeps their acknowledgements until a report has
// carried them. The control plane sends a command again until it is acknowledged, so
// [EntryApplier.Enqueue] skips a command that is queued, being applied, or applied and not
// yet acknowledged; a command refused by [CheckEntryCommand] is logged and never
// acknowledged, and a batch that could not be written is sent again by the control plane.
//
// A heartbeat calls Enqueue with the answer's boot commands, [EntryApplier.Acked] for the
// next report, and [EntryApplier.Delivered] with those ids once the report got through.
type EntryApplier struct {
	// Store holds the entries. Required.
	Store *EntryStore
	// OnApplied, if set, is called after each batch is on disk with the entries its
	// clean-ups dropped (so that a host ends what they granted).
	OnApplied func(dropped []ProxyDhcpEntry)
	// Logger receives the commands refused and the writes that failed; nil discards.
	Logger *slog.Logger

	wake wakeup

	mu      sync.Mutex
	pending []Command
	ids     map[string]bool // queued or being applied
	acks    []string        // applied, not yet delivered in a report
}

// Kick asks Run to prune the lapsed entries (a write, when any lapsed) and to apply what
// is queued.
func (p *EntryApplier) Kick() { p.wake.signal() }

// Enqueue hands commands to Run, but those queued, being applied or applied and not yet
// acknowledged.
func (p *EntryApplier) Enqueue(cmds ...Command) {
	p.mu.Lock()
	if p.ids == nil {
		p.ids = map[string]bool{}
	}
	for _, c := range cmds {
		if p.ids[c.ID] || slices.Contains(p.acks, c.ID) {
			continue
		}
		p.ids[c.ID] = true
		p.pending = append(p.pending, c)
	}
	p.mu.Unlock()
	p.Kick()
}

// Queued is the number of commands enqueued and not yet applied.
func (p *EntryApplier) Queued() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.ids)
}

// Acked returns the ids of the commands applied and not yet delivered, for a StatusReport.
func (p *EntryApplier) Acked() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return slices.Clone(p.acks)
}

// Delivered drops ids, sent in a report the control plane received, from the
// acknowledgements: it stops sending those commands.
func (p *EntryApplier) Delivered(ids []string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.acks = slices.DeleteFunc(p.acks, func(id string) bool { return slices.Contains(ids, id) })
}

// Run prunes and applies, each time it is kicked, until ctx ends; then it returns nil.
func (p *EntryApplier) Run(ctx context.Context) error {
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-p.wake.c():
		}
		p.applyPending()
	}
}

func (p *EntryApplier) applyPending() {
	log := p.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	if err := p.Store.Prune(); err != nil {
		log.Error("prune boot entries", "err", err)
	}
	p.mu.Lock()
	cmds := p.pending
	p.pending = nil
	p.mu.Unlock()
	if len(cmds) == 0 {
		return
	}
	var batch []Command
	for _, c := range cmds {
		if err := CheckEntryCommand(c); err != nil {
			log.Error("command refused", "id", c.ID, "kind", c.Kind, "err", err)
			continue
		}
		batch = append(batch, c)
	}
	// The whole batch costs one write of the entries file, not one per command.
	dropped, err := p.Store.Apply(batch...)
	if err != nil {
		log.Error("commands not applied; the control plane sends them again", "commands", len(batch), "err", err)
		batch = nil
	} else if len(batch) > 0 && p.OnApplied != nil {
		p.OnApplied(dropped)
	}
	p.mu.Lock()
	for _, c := range batch {
		if !slices.Contains(p.acks, c.ID) {
			p.acks = append(p.acks, c.ID)
		}
	}
	// Acknowledged (or refused, and sent again): no longer queued.
	for _, c := range cmds {
		delete(p.ids, c.ID)
	}
	p.mu.Unlock()
}
