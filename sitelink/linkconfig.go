package sitelink

import (
	"crypto"
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"time"

	"github.com/bettercompute/siteboot/clock"
	"github.com/bettercompute/siteboot/sitetls"
)

// LinkConfig is an agent's link to its control plane as a host configures it: the URL, the
// files of the link's mutual TLS (DESIGN.md G3) and the timeout of each call. [LinkConfig.Open]
// loads the agent's site certificate and builds its [Client].
type LinkConfig struct {
	// URL is the control plane's base URL: https (or http with Insecure). Required.
	URL string
	// CertFile is the agent's site certificate, for its node key; CAFile the CA bundle the
	// control plane's certificate must chain to. Both are required by Open for an https
	// URL (a host whose link carries its own credentials may leave them empty), and
	// refused with an http URL. They are re-read when they change.
	CertFile string
	// KeyFile is the site certificate's key; "" means the node key's file
	// (LinkNode.KeyFile). It must be the node key: Open checks that the certificate is for
	// it.
	KeyFile string
	CAFile  string
	// IssuerFile is the CA bundle that issues site certificates, when it is not CAFile (the
	// control plane's CA): a renewed certificate is adopted only if it chains to it
	// (sitetls.Config.IssuerFile). "" means CAFile.
	IssuerFile string
	// Insecure allows a plain http:// URL: no certificate either way, so whoever answers
	// the URL is trusted as the control plane. For a lab only.
	Insecure bool
	// Timeout bounds each call; zero means DefaultTimeout.
	Timeout time.Duration
}

// LinkConfigError is [LinkConfig.Validate]'s report of the field at fault.
type LinkConfigError struct {
	Field string // "URL", "CertFile", "CAFile", "Timeout"
	Err   error
}

func (e *LinkConfigError) Error() string { return "sitelink: link " + e.Field + ": " + e.Err.Error() }
func (e *LinkConfigError) Unwrap() error { return e.Err }

var _ error = &LinkConfigError{}

// Validate checks the URL and the TLS files against its scheme, as a *LinkConfigError: a
// URL that is not http(s) with a host; an http URL without Insecure (wrapping
// ErrPlainHTTP) or with a certificate file; over https, CertFile and CAFile one without
// the other, KeyFile or IssuerFile without CertFile; a negative Timeout.
func (c LinkConfig) Validate() error {
	bad := func(field string, err error) error { return &LinkConfigError{Field: field, Err: err} }
	u, err := url.Parse(c.URL)
	if c.URL == "" || err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return bad("URL", fmt.Errorf("want the control plane's http(s) URL, got %q", c.URL))
	}
	switch u.Scheme {
	case "http":
		if !c.Insecure {
			return bad("URL", ErrPlainHTTP)
		}
		if c.CertFile != "" || c.KeyFile != "" || c.CAFile != "" || c.IssuerFile != "" {
			return bad("CertFile", errors.New("a site certificate needs an https URL"))
		}
	case "https":
		switch {
		case c.CertFile == "" && c.CAFile != "":
			return bad("CertFile", errors.New("required with CAFile"))
		case c.CAFile == "" && c.CertFile != "":
			return bad("CAFile", errors.New("required with CertFile"))
		case c.KeyFile != "" && c.CertFile == "":
			return bad("CertFile", errors.New("required with KeyFile"))
		case c.IssuerFile != "" && c.CertFile == "":
			return bad("CertFile", errors.New("required with IssuerFile"))
		}
	}
	if c.Timeout < 0 {
		return bad("Timeout", fmt.Errorf("want zero (the default) or more, got %v", c.Timeout))
	}
	return nil
}

// LinkNode is the agent a link is opened for.
type LinkNode struct {
	// Identity is what its site certificate must name: spiffe://SITE/agent/NODE.
	Identity sitetls.Identity
	// Key is its node key's public half, which the site certificate must certify.
	Key crypto.PublicKey
	// KeyFile is the node key's file: the site certificate's key when LinkConfig.KeyFile
	// is "".
	KeyFile string
	// Clock is the certificates' clock; nil means [clock.Real].
	Clock clock.Clock
	// Logger receives the credentials' reloads; nil discards.
	Logger *slog.Logger
}

// LoadCredentials loads the site certificate, its key and the CA bundle c names, and
// checks that the certificate is n's (sitetls.LoadNode): its identity is n.Identity and its
// public key n.Key. The files must grant nothing to group or others (sitetls refuses them
// otherwise). Without CertFile and CAFile it returns an error wrapping
// sitetls.ErrNoCredentials.
func (c LinkConfig) LoadCredentials(n LinkNode) (*sitetls.Credentials, error) {
	if c.CertFile == "" || c.CAFile == "" {
		return nil, fmt.Errorf("sitelink: an https control URL needs a site certificate and CA: %w", sitetls.ErrNoCredentials)
	}
	log := n.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	key := c.KeyFile
	if key == "" {
		key = n.KeyFile
	}
	creds, err := sitetls.LoadNode(sitetls.Config{
		CertFile: c.CertFile, KeyFile: key, CAFile: c.CAFile, IssuerFile: c.IssuerFile,
		Clock: n.Clock, Logger: log.With("component", "sitetls"),
	}, n.Identity, n.Key)
	if err != nil {
		return nil, fmt.Errorf("sitelink: control link: %w", err)
	}
	return creds, nil
}

// NewLink returns the agent's Client to c.URL (NewClient): over https it presents creds'
// site certificate and verifies the control plane against creds' CA bundle, for the URL's
// host name; creds are required. A plain http URL is refused unless Insecure allows it.
func (c LinkConfig) NewLink(creds *sitetls.Credentials) (*Client, error) {
	cl, err := NewClient(ClientConfig{URL: c.URL, Credentials: creds, Timeout: c.Timeout, InsecurePlainHTTP: c.Insecure})
	if err != nil {
		return nil, &LinkConfigError{Field: "URL", Err: err}
	}
	return cl, nil
}

// Open validates c and returns the agent's own link: over https with n's site certificate
// (LoadCredentials), which it also returns for the host's checks (a sitetls.Monitor each
// heartbeat) and reports; over http (Insecure) with none.
func (c LinkConfig) Open(n LinkNode) (*Client, *sitetls.Credentials, error) {
	if err := c.Validate(); err != nil {
		return nil, nil, err
	}
	var creds *sitetls.Credentials
	if u, _ := url.Parse(c.URL); u.Scheme == "https" {
		var err error
		if creds, err = c.LoadCredentials(n); err != nil {
			return nil, nil, err
		}
	}
	cl, err := c.NewLink(creds)
	if err != nil {
		return nil, nil, err
	}
	return cl, creds, nil
}
