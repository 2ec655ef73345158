package sitetls

import (
	"crypto/x509"
	"fmt"
	"net/http"
	"net/url"
	"strings"
)

// Identity is a site agent's node identity as its certificate states it: the URI name
// spiffe://SITE/agent/NODE.
type Identity struct {
	Site string // the trust domain: 1 to MaxIDLen of [a-z0-9._-]
	Node string // 1 to MaxIDLen of [A-Za-z0-9._-], not "." or ".."
}

// MaxIDLen bounds a site or node id in an [Identity].
const MaxIDLen = 128

const (
	identityScheme = "spiffe://"
	agentPath      = "/agent/"
)

// String returns the identity's URI, spiffe://SITE/agent/NODE.
func (id Identity) String() string { return identityScheme + id.Site + agentPath + id.Node }

// URI returns the identity as the URI name a certificate carries.
func (id Identity) URI() *url.URL {
	return &url.URL{Scheme: "spiffe", Host: id.Site, Path: agentPath + id.Node}
}

// Validate reports whether both ids are well formed.
func (id Identity) Validate() error {
	if !validID(id.Site, false) {
		return fmt.Errorf("%w: site %q: want 1 to %d of [a-z0-9._-]", ErrNoIdentity, id.Site, MaxIDLen)
	}
	if !validID(id.Node, true) || id.Node == "." || id.Node == ".." {
		return fmt.Errorf("%w: node %q: want 1 to %d of [A-Za-z0-9._-]", ErrNoIdentity, id.Node, MaxIDLen)
	}
	return nil
}

func validID(s string, upper bool) bool {
	if len(s) == 0 || len(s) > MaxIDLen {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c >= 'a' && c <= 'z', c >= '0' && c <= '9', c == '.', c == '-', c == '_':
		case upper && c >= 'A' && c <= 'Z':
		default:
			return false
		}
	}
	return true
}

// ParseIdentity parses the canonical form spiffe://SITE/agent/NODE and nothing else: no
// port, user, query, fragment, escapes, trailing slash or other path.
func ParseIdentity(s string) (Identity, error) {
	rest, ok := strings.CutPrefix(s, identityScheme)
	if !ok {
		return Identity{}, fmt.Errorf("%w: %q is not a spiffe:// URI", ErrNoIdentity, s)
	}
	site, node, ok := strings.Cut(rest, agentPath)
	if !ok {
		return Identity{}, fmt.Errorf("%w: %q: want spiffe://SITE/agent/NODE", ErrNoIdentity, s)
	}
	id := Identity{Site: site, Node: node}
	if err := id.Validate(); err != nil {
		return Identity{}, err
	}
	return id, nil
}

// IdentityFromCert returns the node identity of a certificate: its one URI name, which must
// be an [Identity]. The subject's common name is not read. The caller must have verified the
// certificate; [NodeFrom] does this for an HTTP request.
func IdentityFromCert(c *x509.Certificate) (Identity, error) {
	if c == nil {
		return Identity{}, fmt.Errorf("%w: no certificate", ErrNoIdentity)
	}
	if len(c.URIs) != 1 {
		return Identity{}, fmt.Errorf("%w: certificate has %d URI names, want 1", ErrNoIdentity, len(c.URIs))
	}
	return ParseIdentity(c.URIs[0].String())
}

// NodeFrom returns the node identity of the client that sent r: the identity of the leaf
// of the connection's verified client certificate chain. It answers only for a request that
// came over TLS with a verified chain (as a server built by [Credentials.ServerConfig]
// requires), never from an unverified certificate, a header or the request body.
func NodeFrom(r *http.Request) (Identity, error) {
	if r.TLS == nil {
		return Identity{}, ErrNoTLS
	}
	if len(r.TLS.VerifiedChains) == 0 || len(r.TLS.VerifiedChains[0]) == 0 {
		return Identity{}, ErrNoVerifiedCert
	}
	return IdentityFromCert(r.TLS.VerifiedChains[0][0])
}
