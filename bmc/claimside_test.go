package bmc_test

import (
	"context"
	"errors"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/bettercompute/siteboot/bmc"
)

// TestClaimRegistryRequireRoute: the control plane's side grants a claim only on a
// command it routed to the claiming node. A claim on an id nobody routed (one a node read
// or made up) is ErrNotRouted and writes nothing, so it cannot take the grant from the
// node that is to run it; without RequireRoute the first claimer would get it.
func TestClaimRegistryRequireRoute(t *testing.T) {
	ctx := context.Background()
	for _, require := range []bool{false, true} {
		store := &bmc.MemoryClaimStore{}
		reg := &bmc.ClaimRegistry{Store: store, RequireRoute: require}
		g, err := reg.Claim(ctx, "intruder", bmc.ClaimRequest{ID: "c1", Op: "power", Journal: "j"})
		if require {
			if !errors.Is(err, bmc.ErrNotRouted) || g.Granted || store.Len() != 0 {
				t.Errorf("RequireRoute: unrouted claim: %+v, %v, %d records", g, err, store.Len())
			}
		} else if err != nil || !g.Granted {
			t.Errorf("without RequireRoute: unrouted claim: %+v, %v", g, err)
			continue
		}
		if require {
			if _, err := reg.Route(ctx, "c1", "power", "agent-1"); err != nil {
				t.Fatal(err)
			}
			if g, err := reg.Claim(ctx, "intruder", bmc.ClaimRequest{ID: "c1", Op: "power", Journal: "j"}); err != nil || g.Granted {
				t.Errorf("claim on a command routed to another: %+v, %v", g, err)
			}
			if g, err := reg.Claim(ctx, "agent-1", bmc.ClaimRequest{ID: "c1", Op: "power", Journal: "j1"}); err != nil || !g.Granted {
				t.Errorf("claim by the node routed to: %+v, %v", g, err)
			}
		}
	}
}

// TestExecutorOnClaim: the agent's side over any link (ClaimerFuncs) tells the host how
// each claim was answered: granted, refused, reused, unanswered.
func TestExecutorOnClaim(t *testing.T) {
	ctx := context.Background()
	reg := &bmc.ClaimRegistry{Store: &bmc.MemoryClaimStore{}, RequireRoute: true}
	var mu sync.Mutex
	answers := map[string]bmc.ClaimAnswer{}
	linkUp := true
	agent := func(node string) *bmc.Executor {
		return &bmc.Executor{Opener: &countingBMC{}, Journal: &bmc.MemoryJournal{},
			Claims: bmc.ClaimerFuncs{
				ClaimFunc: func(ctx context.Context, req bmc.ClaimRequest) (bmc.Grant, error) {
					if !linkUp {
						return bmc.Grant{}, errors.New("link down")
					}
					return reg.Claim(ctx, node, req)
				},
				ReportFunc: func(ctx context.Context, req bmc.ClaimRequest, o bmc.Outcome) error {
					return reg.Report(ctx, node, req, o)
				},
			},
			OnClaim: func(req bmc.ClaimRequest, a bmc.ClaimAnswer) {
				mu.Lock()
				answers[node+" "+req.ID] = a
				mu.Unlock()
			}}
	}
	a1, a2 := agent("a1"), agent("a2")
	power := bmc.SetPower{Action: bmc.PowerActionOn}
	for _, id := range []string{"c1", "c2"} {
		if _, err := reg.Route(ctx, id, "power", "a1"); err != nil {
			t.Fatal(err)
		}
	}
	a1.RunOp(ctx, "c1", counted, power) // granted, run, reported
	a2.RunOp(ctx, "c1", counted, power) // reported by a1: reused
	a2.RunOp(ctx, "c2", counted, power) // issued to a1: refused
	linkUp = false
	a1.RunOp(ctx, "c2", counted, power) // unanswered
	want := map[string]bmc.ClaimAnswer{"a1 c1": bmc.ClaimAnswerGranted, "a2 c1": bmc.ClaimAnswerReused,
		"a2 c2": bmc.ClaimAnswerRefused, "a1 c2": bmc.ClaimAnswerUnanswered}
	if diff := cmp.Diff(want, answers); diff != "" {
		t.Errorf("claim answers (-want +got):\n%s", diff)
	}
}
