package agent

import (
	"crypto"
	"errors"
	"net/url"

	"github.com/bettercompute/siteboot/sitelink"
	"github.com/bettercompute/siteboot/sitetls"
)

// ErrPlainHTTP is the cause of a Control.URL error for an http:// URL without
// Control.Insecure (sitelink.ErrPlainHTTP, in the configuration's words): whoever answered
// that URL would be trusted as the control plane.
var ErrPlainHTTP = errors.New("plain http trusts whoever answers the URL: use https with a certificate and CA, or set insecure to allow it")

// link is Control as the library's configuration of an agent's link.
func (cc ControlConfig) link() sitelink.LinkConfig {
	return sitelink.LinkConfig{URL: cc.URL, CertFile: cc.CertFile, KeyFile: cc.KeyFile, CAFile: cc.CAFile,
		IssuerFile: cc.IssuerFile, Insecure: cc.Insecure, Timeout: cc.Timeout}
}

// linkError names the Control field of a sitelink.LinkConfigError.
func linkError(err error) error {
	if le := (*sitelink.LinkConfigError)(nil); errors.As(err, &le) {
		if errors.Is(le.Err, sitelink.ErrPlainHTTP) {
			return &FieldError{Field: "Control." + le.Field, Err: ErrPlainHTTP}
		}
		return &FieldError{Field: "Control." + le.Field, Err: le.Err}
	}
	return err
}

// Identity is the node identity the agent's site certificate must carry:
// spiffe://SITE/agent/NODE.
func (c *Config) Identity() sitetls.Identity {
	return sitetls.Identity{Site: c.SiteID, Node: c.NodeID}
}

// setupLink builds the agent's own link when the host handed in none, and sets up the
// checks of its credentials (a.linkTLS, each heartbeat). An insecure link is said at
// every start.
func (a *Agent) setupLink(nodeKey crypto.PublicKey) error {
	c := &a.cfg
	u, _ := url.Parse(c.Control.URL) // Validate parsed it
	a.linkTLS = &sitetls.Monitor{Credentials: a.opt.Credentials, Insecure: u.Scheme == "http",
		Identity: c.Identity(), Key: nodeKey, Logger: a.log}
	if a.link == nil {
		l, creds, err := c.Control.link().Open(sitelink.LinkNode{Identity: c.Identity(), Key: nodeKey, KeyFile: c.keyFile(), Clock: a.clock, Logger: a.log})
		if err != nil {
			return linkError(err)
		}
		a.link, a.linkTLS.Credentials = l, creds
	}
	if a.linkTLS.Insecure {
		a.log.Warn("control link is plain http (control.insecure = true): no certificate either way, whoever answers the URL is trusted as the control plane",
			"url", u.Redacted())
	} else if creds := a.linkTLS.Credentials; creds != nil {
		st := creds.Status()
		a.log.Info("control link over mutual TLS", "identity", st.Identity.String(), "not_after", st.NotAfter)
	}
	return nil
}
