package sitelink

import (
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"time"

	"github.com/bettercompute/siteboot/sitetls"
)

// Errors of ClientConfig.Validate and NewClient.
var (
	// ErrClientConfig is wrapped when the URL or the timeout is not usable.
	ErrClientConfig = errors.New("sitelink: bad client configuration")
	// ErrPlainHTTP is wrapped for an http:// URL without ClientConfig.InsecurePlainHTTP:
	// whoever answered that URL would be trusted as the control plane.
	ErrPlainHTTP = errors.New("sitelink: plain http trusts whoever answers the URL: use https with a site certificate and CA, or allow plain http explicitly")
)

// Idle connections of a client NewClient builds: a heartbeat reuses its connection, and an
// agent needs no more than a couple to its one control plane.
const (
	DefaultIdleConnTimeout     = 90 * time.Second
	DefaultMaxIdleConnsPerHost = 2
)

// ClientConfig says how an agent reaches its control plane.
type ClientConfig struct {
	// URL is the control plane's base URL ("https://cp.example:8443"). Required.
	URL string
	// Credentials are the agent's site certificate and the CA bundle the control plane's
	// certificate must chain to; required for an https URL, and unused for http.
	Credentials *sitetls.Credentials
	// Timeout bounds each call, and the TLS handshake and wait for response headers
	// within it. Zero means DefaultTimeout.
	Timeout time.Duration
	// InsecurePlainHTTP allows an http:// URL: no certificate either way, so whoever
	// answers the URL is trusted as the control plane. For a lab only.
	InsecurePlainHTTP bool
}

// Validate reports a URL that is not http(s) with a host, an https URL without
// Credentials (sitetls.ErrNoCredentials), an http URL without InsecurePlainHTTP
// (ErrPlainHTTP), and a negative Timeout.
func (c ClientConfig) Validate() error {
	_, err := c.parse()
	return err
}

func (c ClientConfig) parse() (*url.URL, error) {
	u, err := url.Parse(c.URL)
	if err != nil || u.Host == "" {
		return nil, fmt.Errorf("%w: want the control plane's URL, got %q", ErrClientConfig, c.URL)
	}
	switch u.Scheme {
	case "https":
		if c.Credentials == nil {
			return nil, fmt.Errorf("sitelink: an https URL needs the site certificate and CA: %w", sitetls.ErrNoCredentials)
		}
	case "http":
		if !c.InsecurePlainHTTP {
			return nil, ErrPlainHTTP
		}
	default:
		return nil, fmt.Errorf("%w: want an http(s) URL, got %q", ErrClientConfig, u.Redacted())
	}
	if c.Timeout < 0 {
		return nil, fmt.Errorf("%w: Timeout %v is negative", ErrClientConfig, c.Timeout)
	}
	return u, nil
}

// NewClient returns an agent's Client for cfg. Over https it presents the Credentials'
// site certificate and verifies the control plane against their CA bundle for the URL's
// host name (sitetls.Credentials.ClientConfig), so a renewed certificate is used without
// a new Client. The control plane is dialled directly, never through a proxy from the
// environment: over plain http a proxy would be the peer trusted as the control plane.
func NewClient(cfg ClientConfig) (*Client, error) {
	u, err := cfg.parse()
	if err != nil {
		return nil, err
	}
	timeout := cfg.Timeout
	if timeout == 0 {
		timeout = DefaultTimeout
	}
	tr := &http.Transport{
		Proxy:                 nil,
		TLSHandshakeTimeout:   timeout,
		ResponseHeaderTimeout: timeout,
		IdleConnTimeout:       DefaultIdleConnTimeout,
		MaxIdleConnsPerHost:   DefaultMaxIdleConnsPerHost,
	}
	if u.Scheme == "https" {
		tr.TLSClientConfig = cfg.Credentials.ClientConfig(u.Hostname())
	}
	return &Client{Base: cfg.URL, HTTPClient: &http.Client{Timeout: timeout, Transport: tr}}, nil
}
