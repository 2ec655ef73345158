package sitelink

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"time"
)

// DefaultTimeout is the timeout of the http.Client a Client uses when it is given none.
const DefaultTimeout = 10 * time.Second

// Client is an agent's side of the link: each method is one POST to the control plane.
// Over mutual TLS, HTTPClient's transport presents the agent's site certificate and
// verifies the control plane (sitetls.Credentials.ClientConfig). A Client is safe for
// concurrent use.
type Client struct {
	// Base is the control plane's base URL ("https://cp.example:8443"); the paths are
	// joined to it.
	Base string
	// HTTPClient sends the requests; nil means a client with Timeout DefaultTimeout.
	HTTPClient *http.Client
}

// Sync sends a heartbeat's report and returns the agent's desired state.
func (c *Client) Sync(ctx context.Context, r StatusReport) (SyncResponse, error) {
	var d SyncResponse
	err := c.post(ctx, PathSync, r, &d, MaxReportBytes)
	return d, err
}

// Token returns the bearer of a machine's discovery token; an error matching ErrNotReady
// means "ask again later".
func (c *Client) Token(ctx context.Context, q TokenRequest) (string, error) {
	var out TokenResponse
	if err := c.post(ctx, PathToken, q, &out, MaxRequestBytes); err != nil {
		return "", err
	}
	return out.Token, nil
}

// Claim asks for the right to send destructive command q.ID. q.Outcome must be nil.
func (c *Client) Claim(ctx context.Context, q ClaimRequest) (Grant, error) {
	var g Grant
	if q.Outcome != nil {
		return g, fmt.Errorf("%w: a claim carries no outcome", ErrBadRequest)
	}
	err := c.post(ctx, PathBMCClaim, q, &g, MaxRequestBytes)
	return g, err
}

// ReportClaim records how a granted command ended; q.Outcome is required.
func (c *Client) ReportClaim(ctx context.Context, q ClaimRequest) error {
	if q.Outcome == nil {
		return fmt.Errorf("%w: a claim report needs an outcome", ErrBadRequest)
	}
	var out Empty
	return c.post(ctx, PathBMCReport, q, &out, MaxRequestBytes)
}

// Credential returns the BMC credential q.Ref names. Keep it in memory only.
func (c *Client) Credential(ctx context.Context, q CredentialRequest) (Credential, error) {
	var cr Credential
	err := c.post(ctx, PathBMCCredential, q, &cr, MaxRequestBytes)
	return cr, err
}

// post sends in as JSON to path and decodes a 200 answer into out. Any other status is a
// *StatusError; its body is not read into the error.
func (c *Client) post(ctx context.Context, path string, in, out any, max int64) error {
	body, err := json.Marshal(in)
	if err != nil {
		return fmt.Errorf("sitelink: %s: %w", path, err)
	}
	u, err := url.JoinPath(c.Base, path)
	if err != nil {
		return fmt.Errorf("sitelink: control plane url: %w", err)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, u, bytes.NewReader(body))
	if err != nil {
		return fmt.Errorf("sitelink: %s: %w", path, err)
	}
	req.Header.Set("Content-Type", ContentType)
	hc := c.HTTPClient
	if hc == nil {
		hc = &http.Client{Timeout: DefaultTimeout}
	}
	resp, err := hc.Do(req)
	if err != nil {
		return fmt.Errorf("sitelink: %s: %w", path, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, max+1))
	if err != nil {
		return fmt.Errorf("sitelink: %s: %w", path, err)
	}
	if resp.StatusCode != http.StatusOK {
		return &StatusError{Path: path, Status: resp.StatusCode, Err: errorOf(resp.StatusCode)}
	}
	if int64(len(b)) > max {
		return fmt.Errorf("sitelink: %s: answer over %d bytes", path, max)
	}
	if err := json.Unmarshal(b, out); err != nil {
		return fmt.Errorf("sitelink: %s: %w", path, err)
	}
	return nil
}
