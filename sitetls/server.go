package sitetls

import (
	"bytes"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"time"
)

// ErrNoRoot: the certificate in use does not chain to any CA of the bundle, so there is no
// root to complete its chain with or to tell clients to trust.
var ErrNoRoot = errors.New("sitetls: the certificate does not chain to the CA bundle")

// OpenServerConfig returns a TLS configuration for a server whose clients have no
// certificate of their own, such as a boot server that iPXE fetches from: it presents the
// current certificate, followed by its intermediates and then the root of the CA bundle it
// chains to ([Credentials.Root]), and asks for no client certificate. TLS 1.2 and later
// (iPXE speaks TLS 1.2), Go's default AEAD suites; session tickets are off, so every
// connection is made under the certificate in use. The per-connection configuration is a
// copy of the returned one with those fields filled in.
//
// The root is sent because some clients (iPXE among them) trust a root by its fingerprint
// and must see it in the chain. A certificate that does not chain to the bundle (one the
// first Load read, since a reload adopts only one that does) is served without it, and the
// client then refuses the connection.
func (c *Credentials) OpenServerConfig() *tls.Config {
	base := &tls.Config{MinVersion: tls.VersionTLS12}
	base.GetConfigForClient = func(*tls.ClientHelloInfo) (*tls.Config, error) {
		c.maybeCheck()
		chain, _ := c.servedChain()
		cfg := base.Clone()
		cfg.GetConfigForClient = nil
		cfg.Certificates = []tls.Certificate{*chain}
		cfg.ClientAuth = tls.NoClientCert
		cfg.SessionTicketsDisabled = true
		cfg.Time = c.now
		return cfg, nil
	}
	return base
}

// Root returns the CA certificate of the bundle in use that the certificate in use chains
// to, or ErrNoRoot. A boot server hands it to the clients it serves as their one trust
// anchor (package ipxebin patches it into iPXE builds).
func (c *Credentials) Root() (*x509.Certificate, error) {
	c.maybeCheck()
	_, root := c.servedChain()
	if root == nil {
		return nil, ErrNoRoot
	}
	return root, nil
}

// servedChain is the certificate in use with its root appended (when it chains to the
// bundle), and that root; computed once per certificate and bundle.
func (c *Credentials) servedChain() (*tls.Certificate, *x509.Certificate) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.served.pair == c.pair && c.served.pool == c.pool && c.served.chain != nil {
		return c.served.chain, c.served.root
	}
	chain, root := completeChain(c.pair, c.pool, c.now())
	c.served.pair, c.served.pool, c.served.chain, c.served.root = c.pair, c.pool, chain, root
	return chain, root
}

// completeChain returns pair with the root of pool it chains to appended, unless its file
// ends with that root already; pair itself when it does not chain to pool.
func completeChain(pair *tls.Certificate, pool *x509.CertPool, now time.Time) (*tls.Certificate, *x509.Certificate) {
	inter := x509.NewCertPool()
	for _, der := range pair.Certificate[1:] {
		if ic, err := x509.ParseCertificate(der); err == nil {
			inter.AddCert(ic)
		}
	}
	chains, err := pair.Leaf.Verify(x509.VerifyOptions{Roots: pool, Intermediates: inter, CurrentTime: now,
		KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageAny}})
	if err != nil || len(chains) == 0 {
		return pair, nil
	}
	root := chains[0][len(chains[0])-1]
	if bytes.Equal(pair.Certificate[len(pair.Certificate)-1], root.Raw) {
		return pair, root
	}
	out := *pair
	out.Certificate = append(append([][]byte(nil), pair.Certificate...), root.Raw)
	return &out, root
}
