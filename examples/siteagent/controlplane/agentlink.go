package controlplane

// The in-process link for an agent of package agent in the same process (its tests, the
// demo), in the agent's own Go types. This file is the only one of the package that imports
// the agent: everything else speaks sitelink. The agent's link types carry the same JSON as
// sitelink's (wire_test.go), so each call is converted through JSON, as over the wire. Once
// the agent's types are sitelink's, this file shrinks to LocalLink over them and Prepare
// becomes PrepareRamdisk.

import (
	"context"
	"errors"
	"sync"

	"github.com/bettercompute/siteboot/bmc"
	"github.com/bettercompute/siteboot/examples/siteagent/agent"
	"github.com/bettercompute/siteboot/sitelink"
)

// Prepare is PrepareRamdisk for entries in the agent's type.
func (p *Plane) Prepare(node string, entries []agent.Entry) string {
	var es []sitelink.ProxyDhcpEntry
	if err := convert(entries, &es); err != nil {
		p.Logger.Error("boot entries not converted", "err", err)
		return ""
	}
	return p.PrepareRamdisk(node, es)
}

// Link returns an in-process agent.Link for one agent. Cut makes it fail as a partitioned
// network would, until restored.
func (p *Plane) Link() *LocalLink { return &LocalLink{p: p} }

// LocalLink is an in-process agent.Link and agent.BMCLink.
type LocalLink struct {
	p   *Plane
	mu  sync.Mutex
	cut bool
}

var (
	_ agent.Link    = (*LocalLink)(nil)
	_ agent.BMCLink = (*LocalLink)(nil)
)

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

// Sync implements agent.Link.
func (l *LocalLink) Sync(ctx context.Context, r agent.Report) (agent.Desired, error) {
	if l.isCut() {
		return agent.Desired{}, ErrCut
	}
	var r2 sitelink.StatusReport
	if err := convert(r, &r2); err != nil {
		return agent.Desired{}, err
	}
	d, err := l.p.Sync(ctx, r2)
	if err != nil {
		return agent.Desired{}, err
	}
	var d2 agent.Desired
	err = convert(d, &d2)
	return d2, err
}

// Token implements agent.Link.
func (l *LocalLink) Token(ctx context.Context, node, workflow, ref string) (string, error) {
	if l.isCut() {
		return "", ErrCut
	}
	t, err := l.p.Token(ctx, node, workflow, ref)
	if errors.Is(err, sitelink.ErrNotReady) {
		return "", agent.ErrTokenNotReady
	}
	return t, err
}

// Claim implements agent.BMCLink.
func (l *LocalLink) Claim(ctx context.Context, node string, req bmc.ClaimRequest) (bmc.Grant, error) {
	if l.isCut() {
		return bmc.Grant{}, ErrCut
	}
	return l.p.claim(ctx, node, req)
}

// ReportClaim implements agent.BMCLink.
func (l *LocalLink) ReportClaim(ctx context.Context, node string, req bmc.ClaimRequest, o bmc.Outcome) error {
	if l.isCut() {
		return ErrCut
	}
	return l.p.reportClaim(ctx, node, req, o)
}

// Credential implements agent.BMCLink.
func (l *LocalLink) Credential(ctx context.Context, node, ref string) (bmc.Credential, error) {
	if l.isCut() {
		return bmc.Credential{}, ErrCut
	}
	c, err := l.p.credential(node, ref)
	if err != nil {
		return bmc.Credential{}, &bmc.OpError{Op: "credential", Kind: bmc.ErrAuth, Message: "no credential for this node under that reference"}
	}
	return c, nil
}
