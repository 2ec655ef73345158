package agent

import (
	"context"
	"strconv"

	"github.com/bettercompute/siteboot/bmc"
)

// The BMC half of HTTPLink:
//
//	POST BASE/v1/bmc/claim       {"node","id","op","journal"} -> bmc.Grant
//	POST BASE/v1/bmc/report      {"node","id","op","journal","outcome"} -> {}
//	POST BASE/v1/bmc/credential  {"node","ref"} -> {"username","password"}
var _ BMCLink = (*HTTPLink)(nil)

// ClaimWire is a claim or claim report as HTTPLink sends it.
type ClaimWire struct {
	Node    string       `json:"node"`
	ID      string       `json:"id"`
	Op      string       `json:"op"`
	Journal string       `json:"journal"`
	Outcome *bmc.Outcome `json:"outcome,omitempty"`
}

// CredentialWire is a credential as the control plane answers it.
type CredentialWire struct {
	Username string `json:"username"`
	Password string `json:"password"`
}

// Claim implements BMCLink.
func (l *HTTPLink) Claim(ctx context.Context, node string, req bmc.ClaimRequest) (bmc.Grant, error) {
	var g bmc.Grant
	err := l.post(ctx, "/v1/bmc/claim", ClaimWire{Node: node, ID: req.ID, Op: req.Op, Journal: req.Journal}, &g)
	return g, err
}

// ReportClaim implements BMCLink.
func (l *HTTPLink) ReportClaim(ctx context.Context, node string, req bmc.ClaimRequest, o bmc.Outcome) error {
	var out struct{}
	return l.post(ctx, "/v1/bmc/report", ClaimWire{Node: node, ID: req.ID, Op: req.Op, Journal: req.Journal, Outcome: &o}, &out)
}

// Credential implements BMCLink. The secret is held in memory only.
func (l *HTTPLink) Credential(ctx context.Context, node, ref string) (bmc.Credential, error) {
	var c CredentialWire
	if err := l.post(ctx, "/v1/bmc/credential", map[string]string{"node": node, "ref": ref}, &c); err != nil {
		return bmc.Credential{}, &bmc.OpError{Op: "credential", Kind: bmc.ErrAuth, Message: "credential " + strconv.Quote(ref) + " not available", Err: err}
	}
	return bmc.Credential{Username: c.Username, Password: c.Password}, nil
}
