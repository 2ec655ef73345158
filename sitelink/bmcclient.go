package sitelink

import (
	"context"
	"strconv"

	"github.com/bettercompute/siteboot/bmc"
)

// BMCLink is the part of an agent's link a BMCClient calls: the claim protocol and
// credentials by reference, in the link's messages. A *Client is one; an in-process link
// to a control plane in the same program (a test, a demo) may be another, so that its
// agent runs the same BMCClient as one over HTTP.
type BMCLink interface {
	// Claim asks for the right to send destructive command q.ID (POST /v1/bmc/claim).
	Claim(ctx context.Context, q ClaimRequest) (Grant, error)
	// ReportClaim records how a granted command ended (POST /v1/bmc/report).
	ReportClaim(ctx context.Context, q ClaimRequest) error
	// Credential returns the BMC credential q.Ref names (POST /v1/bmc/credential).
	Credential(ctx context.Context, q CredentialRequest) (Credential, error)
}

// BMCClient is an agent's BMC access over its link, in the name of node Node: the claim
// protocol (bmc.Claimer, for bmc.Executor.Claims) and credentials by reference
// (bmc.Credentials, for bmc.Executor.Credentials). It holds no state; a credential it
// returns is the caller's to keep in memory only.
type BMCClient struct {
	// Client carries the requests, typically a *Client. Required.
	Client BMCLink
	// Node is the agent's node id, as its certificate names it.
	Node string
}

var (
	_ BMCLink         = (*Client)(nil)
	_ bmc.Claimer     = BMCClient{}
	_ bmc.Credentials = BMCClient{}
)

// Claim implements bmc.Claimer with POST /v1/bmc/claim. The link's error is returned as it
// is: the Executor treats any error as an unanswered claim and sends nothing.
func (b BMCClient) Claim(ctx context.Context, req bmc.ClaimRequest) (bmc.Grant, error) {
	g, err := b.Client.Claim(ctx, ClaimRequest{Node: b.Node, ID: req.ID, Op: req.Op, Journal: req.Journal})
	if err != nil {
		return bmc.Grant{}, err
	}
	return bmc.Grant{Granted: g.Granted, State: bmc.ClaimState(g.State), Node: g.Node, Outcome: g.Outcome.BMC()}, nil
}

// Report implements bmc.Claimer with POST /v1/bmc/report.
func (b BMCClient) Report(ctx context.Context, req bmc.ClaimRequest, o bmc.Outcome) error {
	so := OutcomeOf(o)
	return b.Client.ReportClaim(ctx, ClaimRequest{Node: b.Node, ID: req.ID, Op: req.Op, Journal: req.Journal, Outcome: &so})
}

// Credential implements bmc.Credentials with POST /v1/bmc/credential. A failure is an
// *bmc.OpError of kind bmc.ErrAuth naming ref, wrapping the link's error (which the
// Executor keeps out of its messages).
func (b BMCClient) Credential(ctx context.Context, ref string) (bmc.Credential, error) {
	c, err := b.Client.Credential(ctx, CredentialRequest{Node: b.Node, Ref: ref})
	if err != nil {
		return bmc.Credential{}, &bmc.OpError{Op: "credential", Kind: bmc.ErrAuth, Message: "credential " + strconv.Quote(ref) + " not available", Err: err}
	}
	return bmc.Credential{Username: c.Username, Password: c.Password}, nil
}

// BMC returns o in package bmc's spelling.
func (o Outcome) BMC() bmc.Outcome {
	return bmc.Outcome{Status: bmc.Status(o.Status), Kind: o.Kind, Code: o.Code, Message: o.Message}
}

// OutcomeOf returns o in the link's spelling.
func OutcomeOf(o bmc.Outcome) Outcome {
	return Outcome{Status: string(o.Status), Kind: o.Kind, Code: o.Code, Message: o.Message}
}
