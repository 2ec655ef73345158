package controlplane

// The in-process link for an agent in the same process (its tests, the demo), in package
// sitelink's messages: the calls the HTTP binding carries, without the HTTP.

import (
	"context"
	"errors"
	"sync"

	"github.com/bettercompute/siteboot/sitelink"
)

// Link returns an in-process link for one agent. Cut makes it fail as a partitioned
// network would, until restored.
func (p *Plane) Link() *LocalLink { return &LocalLink{p: p} }

// LocalLink is an in-process link: the agent's Link (package examples/siteagent/agent,
// which this package does not import) and a sitelink.BMCLink.
type LocalLink struct {
	p   *Plane
	mu  sync.Mutex
	cut bool
}

// ErrCut is what a cut link returns.
var ErrCut = errors.New("controlplane: link cut")

// SetCut cuts (true) or restores (false) the link.
func (l *LocalLink) SetCut(cut bool) {
	l.mu.Lock()
	l.cut = cut
	l.mu.Unlock()
}

// Cut reports whether the link is cut. A host that carries the same heartbeats over
// another link (HTTPS) may honour it there too.
func (l *LocalLink) Cut() bool { return l.isCut() }

func (l *LocalLink) isCut() bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.cut
}

// Sync is the agent's heartbeat (the agent's Link).
func (l *LocalLink) Sync(ctx context.Context, r sitelink.StatusReport) (sitelink.SyncResponse, error) {
	if l.isCut() {
		return sitelink.SyncResponse{}, ErrCut
	}
	// Each message goes through JSON, as over the wire: neither side keeps the other's
	// slices, and what JSON drops (an empty list under omitempty) is dropped here too.
	var r2 sitelink.StatusReport
	if err := convert(r, &r2); err != nil {
		return sitelink.SyncResponse{}, err
	}
	d, err := l.p.Sync(ctx, r2)
	if err != nil {
		return sitelink.SyncResponse{}, err
	}
	var d2 sitelink.SyncResponse
	err = convert(d, &d2)
	return d2, err
}

// Token is the agent's Link.
func (l *LocalLink) Token(ctx context.Context, q sitelink.TokenRequest) (string, error) {
	if l.isCut() {
		return "", ErrCut
	}
	return l.p.Token(ctx, q.Node, q.Workflow, q.Ref)
}

// Claim is the agent's sitelink.BMCLink.
func (l *LocalLink) Claim(ctx context.Context, q sitelink.ClaimRequest) (sitelink.Grant, error) {
	if l.isCut() {
		return sitelink.Grant{}, ErrCut
	}
	return l.p.linkClaim(ctx, q)
}

// ReportClaim is the agent's sitelink.BMCLink.
func (l *LocalLink) ReportClaim(ctx context.Context, q sitelink.ClaimRequest) error {
	if l.isCut() {
		return ErrCut
	}
	return l.p.linkReport(ctx, q)
}

// Credential is the agent's sitelink.BMCLink.
func (l *LocalLink) Credential(ctx context.Context, q sitelink.CredentialRequest) (sitelink.Credential, error) {
	if l.isCut() {
		return sitelink.Credential{}, ErrCut
	}
	return l.p.linkCredential(q)
}

var _ sitelink.BMCLink = (*LocalLink)(nil)
