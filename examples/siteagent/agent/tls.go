package agent

import (
	"crypto"
	"errors"
	"fmt"
	"log/slog"
	"net/url"

	"github.com/bettercompute/siteboot/sitelink"
	"github.com/bettercompute/siteboot/sitetls"
)

// ErrPlainHTTP is the cause of a Control.URL error for an http:// URL without
// Control.Insecure: whoever answered that URL would be trusted as the control plane.
var ErrPlainHTTP = errors.New("plain http trusts whoever answers the URL: use https with a certificate and CA, or set insecure to allow it")

// validateTLS checks the link's security settings against the URL's scheme.
func (cc *ControlConfig) validateTLS(u *url.URL) error {
	bad := func(field string, err error) error { return &FieldError{Field: field, Err: err} }
	switch u.Scheme {
	case "http":
		if !cc.Insecure {
			return bad("Control.URL", ErrPlainHTTP)
		}
		if cc.CertFile != "" || cc.KeyFile != "" || cc.CAFile != "" || cc.IssuerFile != "" {
			return bad("Control.CertFile", errors.New("a site certificate needs an https URL"))
		}
	case "https":
		switch {
		case cc.CertFile == "" && cc.CAFile != "":
			return bad("Control.CertFile", errors.New("required with Control.CAFile"))
		case cc.CAFile == "" && cc.CertFile != "":
			return bad("Control.CAFile", errors.New("required with Control.CertFile"))
		case cc.KeyFile != "" && cc.CertFile == "":
			return bad("Control.CertFile", errors.New("required with Control.KeyFile"))
		case cc.IssuerFile != "" && cc.CertFile == "":
			return bad("Control.CertFile", errors.New("required with Control.IssuerFile"))
		}
	}
	return nil
}

// controlKeyFile is the site certificate's key file: Control.KeyFile, else the node key.
func (c *Config) controlKeyFile() string {
	if c.Control.KeyFile != "" {
		return c.Control.KeyFile
	}
	return c.keyFile()
}

// Identity is the node identity the agent's site certificate must carry:
// spiffe://SITE/agent/NODE.
func (c *Config) Identity() sitetls.Identity {
	return sitetls.Identity{Site: c.SiteID, Node: c.NodeID}
}

// LoadCredentials loads the link's site certificate, its key and the CA bundle named in
// cfg.Control, and checks that the certificate is the agent's (sitetls.LoadNode): its
// identity is cfg's site and node, and its public key is nodeKey. The files must grant
// nothing to group or others (sitetls refuses them otherwise). clk is the clock for
// validity; nil means the real one. Without Control.CertFile and Control.CAFile it returns
// sitetls.ErrNoCredentials.
func LoadCredentials(cfg *Config, nodeKey crypto.PublicKey, clk Clock, log *slog.Logger) (*sitetls.Credentials, error) {
	cc := cfg.Control
	if cc.CertFile == "" || cc.CAFile == "" {
		return nil, fmt.Errorf("agent: an https control URL needs Control.CertFile and Control.CAFile: %w", sitetls.ErrNoCredentials)
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	creds, err := sitetls.LoadNode(sitetls.Config{
		CertFile: cc.CertFile, KeyFile: cfg.controlKeyFile(), CAFile: cc.CAFile, IssuerFile: cc.IssuerFile,
		Clock: clk, Logger: log.With("component", "sitetls"),
	}, cfg.Identity(), nodeKey)
	if err != nil {
		return nil, fmt.Errorf("agent: control link: %w", err)
	}
	return creds, nil
}

// NewLink returns the agent's own link to cfg.Control.URL (sitelink.NewClient): over https
// it presents creds' site certificate and verifies the control plane against creds' CA
// bundle, for the URL's host name; creds are required. A plain http URL is refused unless
// Control.Insecure allows it.
func NewLink(cfg *Config, creds *sitetls.Credentials) (*sitelink.Client, error) {
	timeout := cfg.Control.Timeout
	if timeout <= 0 {
		timeout = DefaultTimeout
	}
	c, err := sitelink.NewClient(sitelink.ClientConfig{URL: cfg.Control.URL, Credentials: creds, Timeout: timeout, InsecurePlainHTTP: cfg.Control.Insecure})
	if err != nil {
		return nil, &FieldError{Field: "Control.URL", Err: err}
	}
	return c, nil
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
		if u.Scheme == "https" {
			creds, err := LoadCredentials(c, nodeKey, a.clock, a.log)
			if err != nil {
				return err
			}
			a.linkTLS.Credentials = creds
		}
		l, err := NewLink(c, a.linkTLS.Credentials)
		if err != nil {
			return err
		}
		a.link = l
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
