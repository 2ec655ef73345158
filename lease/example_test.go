package lease_test

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/bettercompute/siteboot/lease"
	"github.com/bettercompute/siteboot/lease/leasetest"
)

// sessions is the control plane's view of its agents' sessions: the latest heartbeat of
// each connected agent.
type sessions map[string]lease.Agent

func (s sessions) Sites(context.Context) ([]string, error) { return []string{"fsn1"}, nil }

func (s sessions) Connected(_ context.Context, site string) ([]lease.Agent, error) {
	var out []lease.Agent
	for _, a := range s {
		if a.Site == site {
			out = append(out, a)
		}
	}
	return out, nil
}

// Example wires both sides: a control plane with a Controller, a Checker and PickAgent;
// two site agents with a Fence each. The holder loses its session, fences itself, and the
// standby takes over under a new epoch once the lease has lapsed.
func Example() {
	ctx := context.Background()
	clock := leasetest.NewClock() // time.Now in production: leave Clock nil
	store := &lease.MemoryStore{}
	conn := sessions{}
	ctl := &lease.Controller{Store: store, Fleet: conn, Clock: clock}
	checker := &lease.Checker{Store: store, Clock: clock}

	fences := map[string]*lease.Fence{
		"agent-a": {Clock: clock},
		"agent-b": {Clock: clock},
	}
	// An agent's heartbeat: numbered by its fence, recorded by the control plane, and
	// answered with the word about the lease as stored now.
	heartbeat := func(node string) {
		conn[node] = lease.Agent{Node: node, Site: "fsn1", Beat: fences[node].Heartbeat()}
		rec, _, _ := store.Get(ctx, "fsn1")
		fences[node].Observe(rec.WordFor(node))
	}
	show := func() {
		for _, node := range []string{"agent-a", "agent-b"} {
			epoch, ok := fences[node].Active()
			fmt.Printf("  %s active=%v epoch=%d\n", node, ok, epoch)
		}
	}

	heartbeat("agent-a")
	heartbeat("agent-b")
	d, _ := ctl.TickSite(ctx, "fsn1")
	fmt.Println("t=0s:", d.Change, d.Next.Holder, "epoch", d.Next.Epoch)
	heartbeat("agent-a")
	heartbeat("agent-b")
	show()
	fmt.Println("assertion by agent-a at epoch 1:", checker.CheckEpoch(ctx, "fsn1", "agent-a", 1))

	// agent-a is cut off: no more heartbeats, no more words.
	delete(conn, "agent-a")
	for s := 5; s <= 15; s += 5 {
		clock.Advance(5 * time.Second)
		heartbeat("agent-b")
		d, _ = ctl.TickSite(ctx, "fsn1")
		fmt.Printf("t=%ds: %s %s epoch %d\n", s, d.Change, d.Next.Holder, d.Next.Epoch)
		heartbeat("agent-b")
		show()
	}

	err := checker.CheckEpoch(ctx, "fsn1", "agent-a", 1)
	fmt.Println("assertion by agent-a at epoch 1:", errors.Is(err, lease.ErrStaleEpoch))
	rec, _, _ := store.Get(ctx, "fsn1")
	agent, _ := lease.PickAgent("fsn1", rec, []lease.Agent{conn["agent-b"]})
	fmt.Println("site steps go to", agent)
	// Output:
	// t=0s: acquired agent-a epoch 1
	//   agent-a active=true epoch=1
	//   agent-b active=false epoch=0
	// assertion by agent-a at epoch 1: <nil>
	// t=5s: kept agent-a epoch 1
	//   agent-a active=true epoch=1
	//   agent-b active=false epoch=0
	// t=10s: kept agent-a epoch 1
	//   agent-a active=true epoch=1
	//   agent-b active=false epoch=0
	// t=15s: promoted agent-b epoch 2
	//   agent-a active=false epoch=0
	//   agent-b active=true epoch=2
	// assertion by agent-a at epoch 1: true
	// site steps go to agent-b
}
