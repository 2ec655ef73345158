package lease

import (
	"context"
	"time"

	"github.com/bettercompute/siteboot/clock"
)

// Check is the control plane's check of an agent's claim to the lease (an assertion's
// epoch): it refuses, with a *CheckError, an epoch that is zero or not the record's current
// one (ErrStaleEpoch), an agent that is not the holder (ErrNotHolder), and a lease past its
// expiry at now (ErrLapsed).
func (r Record) Check(node string, epoch uint64, now time.Time) error {
	e := &CheckError{Site: r.Site, Node: node, Epoch: epoch, Current: r.Epoch, Holder: r.Holder}
	switch {
	case epoch == 0 || epoch != r.Epoch:
		e.Err = ErrStaleEpoch
	case r.Holder == "" || node != r.Holder:
		e.Err = ErrNotHolder
	case !now.Before(r.Expires):
		e.Err = ErrLapsed
	default:
		return nil
	}
	return e
}

// Checker checks agents' epochs against a Store, for a verifier that asks "is this agent
// the site's lease holder at this epoch" (the assertion verifier's lease check).
type Checker struct {
	// Store keeps the records. Required.
	Store Store
	// Clock's wall time decides whether the lease has lapsed; nil: [clock.Real].
	Clock clock.Clock
}

// CheckEpoch returns nil when node holds site's lease at epoch and the lease has not
// lapsed; otherwise a *CheckError (see Record.Check), or the store's error.
func (c *Checker) CheckEpoch(ctx context.Context, site, node string, epoch uint64) error {
	rec, _, err := c.Store.Get(ctx, site)
	if err != nil {
		return &OpError{Op: "get", Site: site, Err: err}
	}
	var now time.Time
	if c.Clock != nil {
		now = c.Clock.Now()
	} else {
		now = time.Now()
	}
	return rec.Check(node, epoch, now)
}

// PickAgent chooses the agent for a machine of site: the lease holder when it is
// connected, otherwise the first connected agent of the site by node id. Agents of other
// sites are never chosen, and neither is a holder recorded for another site. With no agent
// of the site connected it returns a *NoAgentError (matching ErrNoAgent).
func PickAgent(site string, rec Record, connected []Agent) (string, error) {
	holder := ""
	if rec.Site == site {
		holder = rec.Holder
	}
	first := ""
	for _, a := range connected {
		if a.Site != site || a.Node == "" {
			continue
		}
		if holder != "" && a.Node == holder {
			return holder, nil
		}
		if first == "" || a.Node < first {
			first = a.Node
		}
	}
	if first == "" {
		return "", &NoAgentError{Site: site}
	}
	return first, nil
}
