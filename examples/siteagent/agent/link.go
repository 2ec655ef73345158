package agent

import (
	"context"
	"net/http"

	"github.com/bettercompute/siteboot/sitelink"
)

// Link is how the agent talks to its control plane, in package sitelink's messages. The
// agent calls Sync every heartbeat and keeps serving from the last desired state while Sync
// fails, until its fence says stop.
type Link interface {
	// Sync sends the agent's report (with the heartbeat number the lease fence stamped) and
	// returns the control plane's desired state for this agent.
	Sync(ctx context.Context, r sitelink.StatusReport) (sitelink.SyncResponse, error)
	// Token returns the bearer of a machine's discovery token, named by the entry's
	// workflow and token reference. An error matching sitelink.ErrNotReady means "ask again
	// later".
	Token(ctx context.Context, node, workflow, ref string) (string, error)
}

// HTTPLink is a Link and a BMCLink over sitelink's HTTP binding (sitelink.Client).
type HTTPLink struct {
	Base   string       // the control plane's base URL
	Client *http.Client // nil: a client with Timeout sitelink.DefaultTimeout
}

var _ Link = (*HTTPLink)(nil)

func (l *HTTPLink) client() *sitelink.Client {
	return &sitelink.Client{Base: l.Base, HTTPClient: l.Client}
}

// Sync implements Link.
func (l *HTTPLink) Sync(ctx context.Context, r sitelink.StatusReport) (sitelink.SyncResponse, error) {
	return l.client().Sync(ctx, r)
}

// Token implements Link.
func (l *HTTPLink) Token(ctx context.Context, node, workflow, ref string) (string, error) {
	return l.client().Token(ctx, sitelink.TokenRequest{Node: node, Workflow: workflow, Ref: ref})
}
