package agent

import (
	"errors"
	"fmt"
	"strings"

	"github.com/bettercompute/siteboot/bmc"
	"github.com/bettercompute/siteboot/bmc/ipmi"
	"github.com/bettercompute/siteboot/bmc/redfish"
	"github.com/bettercompute/siteboot/bootserver"
	"github.com/bettercompute/siteboot/sitelink"
)

// setupBMC builds the agent's side of the BMC protocol (sitelink.BMCService): its journal
// in the data dir, its images from the cache under grants of their own at bmcCacheBase,
// a report asked for as soon as a command ends. A link that carries BMC access (a
// *sitelink.Client does) claims and fetches credentials in this node's name; over any
// other, every bmc.* command is not sent. BMC access works whether or not the agent
// holds the lease.
func (a *Agent) setupBMC() error {
	opener := a.opt.BMCOpener
	if opener == nil {
		reg := bmc.NewRegistry()
		reg.Register(redfish.Name, redfish.Config{})
		reg.Register(ipmi.Name, ipmi.Config{})
		opener = reg
	}
	c := sitelink.BMCServiceConfig{BMCLimits: a.cfg.BMC.BMCLimits, Opener: opener, JournalDir: a.cfg.DataDir,
		Node: a.cfg.NodeID, Images: bootserver.BMCImages{Cache: a.cache, BaseURL: a.bmcCacheBase()},
		// The result goes back in the next report: ask for one now.
		OnDone: func(string) { a.beat.Wake() },
		Clock:  a.clock, Logger: a.log}
	if l, ok := a.link.(sitelink.BMCLink); ok {
		c.Link = l
	}
	var err error
	if a.bmc, err = sitelink.NewBMCService(c); err != nil {
		return fmt.Errorf("agent: %w", err)
	}
	return nil
}

// DefaultSessionIdle is BMCConfig.SessionIdle's default.
const DefaultSessionIdle = sitelink.DefaultSessionIdle

// bmcCacheBase is where BMCs reach the image cache: BMC.CacheURL, else the machines' cache
// URL.
func (a *Agent) bmcCacheBase() string {
	if a.cfg.BMC.CacheURL != "" {
		return strings.TrimRight(a.cfg.BMC.CacheURL, "/")
	}
	return a.cacheBase()
}

// BMCConfig bounds the agent's BMC access (sitelink.BMCLimits: operations and sessions at
// once, deadlines, the power-on ramp of transitions) and says where BMCs reach the cache.
type BMCConfig struct {
	sitelink.BMCLimits
	// CacheURL is where BMCs reach the image cache for firmware and virtual media (their
	// management network may reach this host under another name); "" means the machines'
	// cache URL (Boot.CacheURL, or HTTPBase + "/cache").
	CacheURL string
}

func (c BMCConfig) validate() error {
	if le := (*bmc.LimitError)(nil); errors.As(c.BMCLimits.Validate(), &le) {
		return &FieldError{Field: "BMC." + le.Field, Err: le.Err}
	}
	if c.CacheURL != "" {
		if err := bootserver.CheckCacheURL(c.CacheURL); err != nil {
			return &FieldError{Field: "BMC.CacheURL", Err: err}
		}
	}
	return nil
}
