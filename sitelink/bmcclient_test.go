package sitelink_test

import (
	"context"
	"errors"
	"net/http/httptest"
	"sync"
	"testing"

	"github.com/bettercompute/siteboot/bmc"
	"github.com/bettercompute/siteboot/sitelink"
	"github.com/google/go-cmp/cmp"
)

// TestBMCClient: each call goes over mutual TLS to the handler's BMCServer in the client's
// node's name, with its fields in the link's spelling, and comes back in package bmc's.
func TestBMCClient(t *testing.T) {
	ctx := context.Background()
	l := newLab(t)
	b := sitelink.BMCClient{Client: l.client(t, "site-a", "agent-1"), Node: "agent-1"}
	req := bmc.ClaimRequest{ID: "cmd-1", Op: "power", Journal: "j-1"}

	l.fake.grant = sitelink.Grant{State: sitelink.ClaimReported, Node: "agent-2",
		Outcome: sitelink.Outcome{Status: "failed", Kind: "refused", Code: "409", Message: "busy"}}
	g, err := b.Claim(ctx, req)
	if err != nil {
		t.Fatal(err)
	}
	want := bmc.Grant{State: bmc.ClaimReported, Node: "agent-2", Outcome: bmc.Outcome{Status: bmc.StatusFailed, Kind: "refused", Code: "409", Message: "busy"}}
	if diff := cmp.Diff(want, g); diff != "" {
		t.Errorf("grant (-want +got):\n%s", diff)
	}
	if bmc.AnswerOf(g, err) != bmc.ClaimAnswerReused {
		t.Errorf("answer %q", bmc.AnswerOf(g, err))
	}
	o := bmc.Outcome{Status: bmc.StatusUnknown, Kind: "outcome-unknown", Code: "c", Message: "m"}
	if err := b.Report(ctx, req, o); err != nil {
		t.Fatal(err)
	}
	l.fake.cred = sitelink.Credential{Username: "admin", Password: "s3cret"}
	c, err := b.Credential(ctx, "bmc-1")
	if err != nil || c.Username != "admin" || c.Password != "s3cret" {
		t.Fatalf("credential: %v", err)
	}
	wantGot := []any{
		sitelink.ClaimRequest{Node: "agent-1", ID: "cmd-1", Op: "power", Journal: "j-1"},
		sitelink.ClaimRequest{Node: "agent-1", ID: "cmd-1", Op: "power", Journal: "j-1",
			Outcome: &sitelink.Outcome{Status: "unknown", Kind: "outcome-unknown", Code: "c", Message: "m"}},
		sitelink.CredentialRequest{Node: "agent-1", Ref: "bmc-1"},
	}
	if diff := cmp.Diff(wantGot, l.fake.got); diff != "" {
		t.Errorf("requests (-want +got):\n%s", diff)
	}
	for _, p := range l.fake.peers {
		if p != verified {
			t.Errorf("peer %+v, want %+v", p, verified)
		}
	}

	// The control plane's refusals: a claim's error as the link said it, a credential's as
	// an authentication failure that names the reference and keeps the link's error.
	l.fake.err = sitelink.ErrForbidden
	if _, err := b.Claim(ctx, req); !errors.Is(err, sitelink.ErrForbidden) || bmc.AnswerOf(bmc.Grant{}, err) != bmc.ClaimAnswerUnanswered {
		t.Errorf("refused claim: %v", err)
	}
	if err := b.Report(ctx, req, o); !errors.Is(err, sitelink.ErrForbidden) {
		t.Errorf("refused report: %v", err)
	}
	_, err = b.Credential(ctx, "bmc-1")
	if !errors.Is(err, bmc.ErrAuth) || !errors.Is(err, sitelink.ErrForbidden) || err.Error() != `bmc: authentication failed (credential): credential "bmc-1" not available` {
		t.Errorf("refused credential: %v", err)
	}
	// Another node's name is refused by the handler before it reaches the server.
	other := sitelink.BMCClient{Client: b.Client, Node: "agent-2"}
	l.fake.err = nil
	if _, err := other.Claim(ctx, req); !errors.Is(err, sitelink.ErrForbidden) {
		t.Errorf("claim in another node's name: %v", err)
	}
}

// registryPlane is a control plane whose BMC side is a bmc.ClaimRegistry.
type registryPlane struct {
	reg  *bmc.ClaimRegistry
	cred sitelink.Credential
}

func (p registryPlane) Claim(ctx context.Context, peer sitelink.Peer, q sitelink.ClaimRequest) (sitelink.Grant, error) {
	g, err := p.reg.Claim(ctx, peer.Node, bmc.ClaimRequest{ID: q.ID, Op: q.Op, Journal: q.Journal})
	return sitelink.Grant{Granted: g.Granted, State: string(g.State), Node: g.Node, Outcome: sitelink.OutcomeOf(g.Outcome)}, err
}

func (p registryPlane) ReportClaim(ctx context.Context, peer sitelink.Peer, q sitelink.ClaimRequest) error {
	return p.reg.Report(ctx, peer.Node, bmc.ClaimRequest{ID: q.ID, Op: q.Op, Journal: q.Journal}, q.Outcome.BMC())
}

func (p registryPlane) Credential(ctx context.Context, peer sitelink.Peer, q sitelink.CredentialRequest) (sitelink.Credential, error) {
	return p.cred, nil
}

// powerBMC counts the power actions it is sent and checks the credential it is opened with.
type powerBMC struct {
	mu   sync.Mutex
	sent int
}

func (p *powerBMC) Open(_ context.Context, t bmc.Target) (bmc.Driver, error) {
	if t.Username != "admin" || t.Password != "s3cret" {
		return nil, &bmc.OpError{Kind: bmc.ErrAuth, Message: "wrong credential"}
	}
	return p, nil
}
func (p *powerBMC) Name() string { return "fake" }
func (p *powerBMC) Close() error { return nil }
func (p *powerBMC) PowerState(context.Context) (bmc.PowerState, error) {
	return bmc.PowerOn, nil
}
func (p *powerBMC) SetPower(context.Context, bmc.PowerAction) error {
	p.mu.Lock()
	p.sent++
	p.mu.Unlock()
	return nil
}

// TestBMCClientExecutor: an Executor whose claims and credentials go through a BMCClient to
// a control plane's ClaimRegistry sends a destructive command once; a second agent (another
// journal) running the same id reuses the reported outcome and sends nothing. The same
// holds over HTTP and over an in-process BMCLink.
func TestBMCClientExecutor(t *testing.T) {
	for _, over := range []string{"http", "in-process"} {
		t.Run(over, func(t *testing.T) {
			ctx := context.Background()
			plane := registryPlane{reg: &bmc.ClaimRegistry{Store: &bmc.MemoryClaimStore{}}, cred: sitelink.Credential{Username: "admin", Password: "s3cret"}}
			var link sitelink.BMCLink = localLink{plane}
			if over == "http" {
				srv := httptest.NewServer(&sitelink.Handler{Server: &fake{}, BMC: plane, Insecure: true})
				defer srv.Close()
				link = &sitelink.Client{Base: srv.URL, HTTPClient: srv.Client()}
			}
			drv := &powerBMC{}
			agent := func(node string) *bmc.Executor {
				b := sitelink.BMCClient{Client: link, Node: node}
				return &bmc.Executor{Opener: drv, Credentials: b, Claims: b, Journal: &bmc.MemoryJournal{}}
			}
			c := sitelink.Command{ID: "cmd-7", Kind: sitelink.KindBMCPower, BMC: &sitelink.BMCCommand{
				Target: sitelink.BMCTarget{Driver: "fake", Address: "198.51.100.10", Credential: "bmc-1"}, Action: "cycle"}}
			tg, op, err := sitelink.BMCOp(c, nil)
			if err != nil {
				t.Fatal(err)
			}
			first := sitelink.BMCResultOf(c, agent("agent-1").RunOp(ctx, c.ID, tg, op))
			second := sitelink.BMCResultOf(c, agent("agent-2").RunOp(ctx, c.ID, tg, op))
			if first.Status != sitelink.StatusOK || first.Replayed {
				t.Errorf("first run: %+v", first)
			}
			if second.Status != sitelink.StatusOK || !second.Replayed {
				t.Errorf("second run: %+v", second)
			}
			if drv.sent != 1 {
				t.Errorf("power sent %d times, want 1", drv.sent)
			}
			rec, _, err := plane.reg.Store.Get(ctx, c.ID)
			if err != nil || rec.State != bmc.ClaimReported || rec.Node != "agent-1" || rec.Outcome.Status != bmc.StatusOK {
				t.Errorf("claim record %+v, %v", rec, err)
			}
		})
	}
}

// localLink is an in-process BMCLink: each call goes to the plane in the name of the node
// the request names, without HTTP.
type localLink struct{ p registryPlane }

func (l localLink) Claim(ctx context.Context, q sitelink.ClaimRequest) (sitelink.Grant, error) {
	return l.p.Claim(ctx, sitelink.Peer{Node: q.Node}, q)
}

func (l localLink) ReportClaim(ctx context.Context, q sitelink.ClaimRequest) error {
	return l.p.ReportClaim(ctx, sitelink.Peer{Node: q.Node}, q)
}

func (l localLink) Credential(ctx context.Context, q sitelink.CredentialRequest) (sitelink.Credential, error) {
	return l.p.Credential(ctx, sitelink.Peer{Node: q.Node}, q)
}
