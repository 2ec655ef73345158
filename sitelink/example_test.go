package sitelink_test

import (
	"context"
	"fmt"
	"net/http/httptest"

	"github.com/bettercompute/siteboot/sitelink"
)

// plane is a control plane of one rule: every agent holds the lease at epoch 1.
type plane struct{}

func (plane) Sync(ctx context.Context, p sitelink.Peer, r sitelink.StatusReport) (sitelink.SyncResponse, error) {
	return sitelink.SyncResponse{SiteSpec: sitelink.SiteSpec{Lease: sitelink.BootLeaseState{Holds: true, Epoch: 1, TTLMs: 15000, Beat: r.Beat}}}, nil
}

func (plane) Token(ctx context.Context, p sitelink.Peer, q sitelink.TokenRequest) (sitelink.TokenResponse, error) {
	return sitelink.TokenResponse{}, sitelink.ErrNotReady
}

// A control plane serves the Handler; an agent heartbeats with the Client. (Over mutual
// TLS in production: see the package doc. This lab trusts the node each request names.)
func Example() {
	srv := httptest.NewServer(&sitelink.Handler{Server: plane{}, Insecure: true})
	defer srv.Close()
	c := &sitelink.Client{Base: srv.URL}
	ctx := context.Background()

	spec, err := c.Sync(ctx, sitelink.StatusReport{Site: "site-a", Node: "agent-1", Beat: 7})
	fmt.Printf("%+v %v\n", spec.Lease, err)
	_, err = c.Token(ctx, sitelink.TokenRequest{Node: "agent-1", Workflow: "wf-1", Ref: "tok-1"})
	fmt.Println(err)
	_, err = c.Credential(ctx, sitelink.CredentialRequest{Node: "agent-1", Ref: "bmc-1"})
	fmt.Println(err)
	// Output:
	// {Holds:true Epoch:1 TTLMs:15000 Beat:7 Holder:} <nil>
	// sitelink: /v1/token: 409 Conflict
	// sitelink: /v1/bmc/credential: 404 Not Found
}
