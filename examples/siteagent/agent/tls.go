package agent

import (
	"crypto"
	"errors"
	"log/slog"
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

// linkNode is the agent as its link's certificate must name it.
func (c *Config) linkNode(nodeKey crypto.PublicKey, clk Clock, log *slog.Logger) sitelink.LinkNode {
	return sitelink.LinkNode{Identity: c.Identity(), Key: nodeKey, KeyFile: c.keyFile(), Clock: clk, Logger: log}
}

// Identity is the node identity the agent's site certificate must carry:
// spiffe://SITE/agent/NODE.
func (c *Config) Identity() sitetls.Identity {
	return sitetls.Identity{Site: c.SiteID, Node: c.NodeID}
}

// LoadCredentials loads the link's site certificate, its key (Control.KeyFile, else the
// node key) and the CA bundle named in cfg.Control, and checks that the certificate is the
// agent's: its identity is cfg's site and node, and its public key is nodeKey
// (sitelink.LinkConfig.LoadCredentials). clk is the clock for validity; nil means the
// real one.
func LoadCredentials(cfg *Config, nodeKey crypto.PublicKey, clk Clock, log *slog.Logger) (*sitetls.Credentials, error) {
	return cfg.Control.link().LoadCredentials(cfg.linkNode(nodeKey, clk, log))
}

// NewLink returns the agent's own link to cfg.Control.URL (sitelink.LinkConfig.NewLink):
// over https it presents creds' site certificate and verifies the control plane against
// creds' CA bundle; creds are required. A plain http URL is refused unless
// Control.Insecure allows it.
func NewLink(cfg *Config, creds *sitetls.Credentials) (*sitelink.Client, error) {
	lc := cfg.Control.link()
	if lc.Timeout <= 0 {
		lc.Timeout = DefaultTimeout
	}
	c, err := lc.NewLink(creds)
	return c, linkError(err)
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
		l, creds, err := c.Control.link().Open(c.linkNode(nodeKey, a.clock, a.log))
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
