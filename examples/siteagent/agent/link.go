package agent

import (
	"context"

	"github.com/bettercompute/siteboot/sitelink"
)

// Link is how the agent talks to its control plane, in package sitelink's messages: a
// *sitelink.Client is one (the agent's own, over HTTPS: sitelink.LinkConfig.Open), and an in-process link
// may be another. The agent calls Sync every heartbeat and keeps serving from the last
// desired state while Sync fails, until its fence says stop. A Link that is also a
// sitelink.BMCLink (a *sitelink.Client is) carries the agent's BMC access; over any other,
// every bmc.* command is reported not sent.
type Link interface {
	// Sync sends the agent's report (with the heartbeat number the lease fence stamped) and
	// returns the control plane's desired state for this agent.
	Sync(ctx context.Context, r sitelink.StatusReport) (sitelink.SyncResponse, error)
	// Token returns the bearer of a machine's discovery token, named by the entry's
	// workflow and token reference. An error matching sitelink.ErrNotReady means "ask again
	// later".
	Token(ctx context.Context, q sitelink.TokenRequest) (string, error)
}

var _ Link = (*sitelink.Client)(nil)
