package agent

import (
	"context"
	"strconv"

	"github.com/bettercompute/siteboot/bmc"
	"github.com/bettercompute/siteboot/sitelink"
)

// The BMC half of HTTPLink: the claim protocol and credentials by reference, over
// sitelink.Client.
var _ BMCLink = (*HTTPLink)(nil)

// Claim implements BMCLink.
func (l *HTTPLink) Claim(ctx context.Context, node string, req bmc.ClaimRequest) (bmc.Grant, error) {
	g, err := l.client().Claim(ctx, sitelink.ClaimRequest{Node: node, ID: req.ID, Op: req.Op, Journal: req.Journal})
	if err != nil {
		return bmc.Grant{}, err
	}
	return bmc.Grant{Granted: g.Granted, State: bmc.ClaimState(g.State), Node: g.Node, Outcome: bmcOutcome(g.Outcome)}, nil
}

// ReportClaim implements BMCLink.
func (l *HTTPLink) ReportClaim(ctx context.Context, node string, req bmc.ClaimRequest, o bmc.Outcome) error {
	so := sitelink.Outcome{Status: string(o.Status), Kind: o.Kind, Code: o.Code, Message: o.Message}
	return l.client().ReportClaim(ctx, sitelink.ClaimRequest{Node: node, ID: req.ID, Op: req.Op, Journal: req.Journal, Outcome: &so})
}

// Credential implements BMCLink. The secret is held in memory only.
func (l *HTTPLink) Credential(ctx context.Context, node, ref string) (bmc.Credential, error) {
	c, err := l.client().Credential(ctx, sitelink.CredentialRequest{Node: node, Ref: ref})
	if err != nil {
		return bmc.Credential{}, &bmc.OpError{Op: "credential", Kind: bmc.ErrAuth, Message: "credential " + strconv.Quote(ref) + " not available", Err: err}
	}
	return bmc.Credential{Username: c.Username, Password: c.Password}, nil
}

func bmcOutcome(o sitelink.Outcome) bmc.Outcome {
	return bmc.Outcome{Status: bmc.Status(o.Status), Kind: o.Kind, Code: o.Code, Message: o.Message}
}
