package agent

import (
	"crypto"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"sync"
	"time"

	"github.com/bettercompute/siteboot/sitetls"
)

// Errors of the link's configuration and credentials.
var (
	// ErrPlainHTTP is the cause of a Control.URL error for an http:// URL without
	// Control.Insecure: whoever answered that URL would be trusted as the control plane.
	ErrPlainHTTP = errors.New("plain http trusts whoever answers the URL: use https with a certificate and CA, or set insecure to allow it")
	// ErrNoCredentials is returned by NewHTTPLink for an https URL without credentials.
	ErrNoCredentials = errors.New("agent: an https control URL needs the site certificate and CA (Control.CertFile, Control.CAFile)")
	// ErrCertIdentity is wrapped when the site certificate names another site or node than
	// the agent's.
	ErrCertIdentity = errors.New("agent: site certificate is for another node")
	// ErrCertKey is wrapped when the site certificate is not for the agent's node key.
	ErrCertKey = errors.New("agent: site certificate is not for the node key")
)

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
// cfg.Control, and checks that the certificate is the agent's: its identity is cfg's site
// and node, and its public key is nodeKey. The files must grant nothing to group or others
// (sitetls refuses them otherwise). clk is the clock for validity; nil means the real one.
func LoadCredentials(cfg *Config, nodeKey crypto.PublicKey, clk Clock, log *slog.Logger) (*sitetls.Credentials, error) {
	cc := cfg.Control
	if cc.CertFile == "" || cc.CAFile == "" {
		return nil, ErrNoCredentials
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	creds, err := sitetls.Load(sitetls.Config{
		CertFile: cc.CertFile, KeyFile: cfg.controlKeyFile(), CAFile: cc.CAFile, IssuerFile: cc.IssuerFile,
		Clock: clk, Logger: log.With("component", "sitetls"),
	})
	if err != nil {
		return nil, fmt.Errorf("agent: control link: %w", err)
	}
	if err := checkLeaf(creds.Status(), cfg.Identity(), nodeKey); err != nil {
		return nil, err
	}
	return creds, nil
}

// checkLeaf says whether the certificate in use is for this node and its key.
func checkLeaf(st sitetls.Status, want sitetls.Identity, nodeKey crypto.PublicKey) error {
	if st.Leaf == nil {
		return ErrNoCredentials
	}
	if st.Identity != want {
		return fmt.Errorf("%w: it names %q, the agent is %q", ErrCertIdentity, st.Identity.String(), want.String())
	}
	k, ok := nodeKey.(interface{ Equal(crypto.PublicKey) bool })
	if !ok || !k.Equal(st.Leaf.PublicKey) {
		return ErrCertKey
	}
	return nil
}

// NewHTTPLink returns the agent's own link to cfg.Control.URL. For an https URL it presents
// creds' site certificate and verifies the control plane against creds' CA bundle, for
// the URL's host name; creds are required. A plain http URL is refused unless
// Control.Insecure allows it.
func NewHTTPLink(cfg *Config, creds *sitetls.Credentials) (*HTTPLink, error) {
	u, err := url.Parse(cfg.Control.URL)
	if err != nil || u.Host == "" {
		return nil, &FieldError{Field: "Control.URL", Err: fmt.Errorf("want the control plane's URL, got %q", cfg.Control.URL)}
	}
	timeout := cfg.Control.Timeout
	if timeout <= 0 {
		timeout = DefaultTimeout
	}
	tr := &http.Transport{
		// The control plane is dialled directly: a proxy from the environment would be the
		// peer the TLS check sees for plain http.
		Proxy:                 nil,
		TLSHandshakeTimeout:   timeout,
		ResponseHeaderTimeout: timeout,
		IdleConnTimeout:       90 * time.Second,
		MaxIdleConnsPerHost:   2,
	}
	switch u.Scheme {
	case "https":
		if creds == nil {
			return nil, ErrNoCredentials
		}
		tr.TLSClientConfig = creds.ClientConfig(u.Hostname())
	case "http":
		if !cfg.Control.Insecure {
			return nil, &FieldError{Field: "Control.URL", Err: ErrPlainHTTP}
		}
	default:
		return nil, &FieldError{Field: "Control.URL", Err: fmt.Errorf("want an http(s) URL, got %q", cfg.Control.URL)}
	}
	return &HTTPLink{Base: cfg.Control.URL, Client: &http.Client{Timeout: timeout, Transport: tr}}, nil
}

// linkTLS is the agent's view of its link's credentials: checked on every heartbeat,
// reported in /healthz and /metrics.
type linkTLS struct {
	creds    *sitetls.Credentials // nil: none known to the agent
	insecure bool                 // the link is plain http
	want     sitetls.Identity
	nodeKey  crypto.PublicKey
	log      *slog.Logger

	mu        sync.Mutex
	lastErr   string // the last check's problem, logged once per change
	untrusted bool   // the last check found a new certificate that does not chain to the issuer
}

// untrustedCert reports whether the last check refused a new site certificate that does not
// chain to the CAs its peers trust (sitetls.ErrUntrustedCert): the previous one stays in
// use until it expires.
func (t *linkTLS) untrustedCert() bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.untrusted
}

// check re-reads changed files (sitetls keeps the last good pair in use when a new one is
// bad) and checks that the certificate in use is still this node's.
func (t *linkTLS) check() {
	if t.creds == nil {
		return
	}
	err := t.creds.Check()
	if err == nil {
		err = checkLeaf(t.creds.Status(), t.want, t.nodeKey)
	}
	msg := ""
	if err != nil {
		msg = err.Error()
	}
	t.mu.Lock()
	changed := msg != t.lastErr
	t.lastErr = msg
	t.untrusted = errors.Is(err, sitetls.ErrUntrustedCert)
	t.mu.Unlock()
	if changed && err != nil {
		t.log.Error("control link: site certificate", "err", err)
	} else if changed {
		t.log.Info("control link: site certificate in order", "not_after", t.creds.Status().NotAfter)
	}
}

// health is the line /healthz adds about the link's security; "" when all is well.
func (t *linkTLS) health() string {
	if t.insecure {
		return "insecure: the control link is plain http, with no certificate either way"
	}
	if t.creds == nil {
		return ""
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.lastErr != "" {
		return "control link certificate: " + t.lastErr
	}
	if err := t.creds.Status().Err; err != nil {
		return "control link certificate: " + err.Error()
	}
	return ""
}

// setupLink builds the agent's own link when the host handed in none, and sets up the
// checks of its credentials. An insecure link is said at every start.
func (a *Agent) setupLink(nodeKey crypto.PublicKey) error {
	c := &a.cfg
	a.linkTLS = linkTLS{creds: a.opt.Credentials, want: c.Identity(), nodeKey: nodeKey, log: a.log}
	u, _ := url.Parse(c.Control.URL) // Validate parsed it
	a.linkTLS.insecure = u.Scheme == "http"
	if a.link == nil {
		if u.Scheme == "https" {
			creds, err := LoadCredentials(c, nodeKey, a.clock, a.log)
			if err != nil {
				return err
			}
			a.linkTLS.creds = creds
		}
		l, err := NewHTTPLink(c, a.linkTLS.creds)
		if err != nil {
			return err
		}
		a.link = l
	}
	if a.linkTLS.insecure {
		a.log.Warn("control link is plain http (control.insecure = true): no certificate either way, whoever answers the URL is trusted as the control plane",
			"url", u.Redacted())
	} else if a.linkTLS.creds != nil {
		st := a.linkTLS.creds.Status()
		a.log.Info("control link over mutual TLS", "identity", st.Identity.String(), "not_after", st.NotAfter)
	}
	return nil
}
