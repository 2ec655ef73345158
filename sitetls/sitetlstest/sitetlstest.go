package sitetlstest

import (
	"crypto"
	"crypto/ed25519"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"net"
	"path/filepath"
	"time"

	"github.com/bettercompute/siteboot/clock"

	"github.com/bettercompute/siteboot/internal/atomicfile"
	"github.com/bettercompute/siteboot/sitetls"
)

// Lifetimes used when a request gives none.
const (
	// DefaultLifetime is a leaf's lifetime: 24 hours, as the seed's site certificates.
	DefaultLifetime = 24 * time.Hour
	// CALifetime is a CA's lifetime.
	CALifetime = 365 * 24 * time.Hour
	// Backdate is how long before Now a certificate's validity starts, for clock skew.
	Backdate = time.Hour
)

// ErrRequest is wrapped when a Request names neither a node nor a host, or a bad identity.
var ErrRequest = errors.New("sitetlstest: bad request")

// CA is a certificate authority minted in memory. Its fields may be read, not changed.
type CA struct {
	Cert    *x509.Certificate
	Key     crypto.Signer // Ed25519
	CertPEM []byte
	// Now is the clock certificates are issued by.
	Now func() time.Time

	chain []byte // PEM of this CA and the intermediates above it, for an intermediate
}

// NewCA mints a self-signed Ed25519 CA named name, valid from Backdate before now for
// CALifetime. A nil now means time.Now.
func NewCA(name string, now func() time.Time) (*CA, error) {
	if now == nil {
		now = time.Now
	}
	_, key, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		return nil, err
	}
	serial, err := newSerial()
	if err != nil {
		return nil, err
	}
	t := now()
	tmpl := &x509.Certificate{
		SerialNumber:          serial,
		Subject:               pkix.Name{CommonName: name},
		NotBefore:             t.Add(-Backdate),
		NotAfter:              t.Add(CALifetime),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageCRLSign,
		BasicConstraintsValid: true,
		IsCA:                  true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, key.Public(), key)
	if err != nil {
		return nil, err
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, err
	}
	return &CA{Cert: cert, Key: key, CertPEM: pemCert(der), Now: now}, nil
}

// NewIntermediate mints an intermediate CA under ca, limited to URI names whose host is one
// of uriDomains (a site's trust domain), as a per-site issuer would be. Certificates it
// issues carry the intermediate after the leaf in CertPEM.
func (ca *CA) NewIntermediate(name string, uriDomains ...string) (*CA, error) {
	_, key, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		return nil, err
	}
	serial, err := newSerial()
	if err != nil {
		return nil, err
	}
	t := ca.Now()
	tmpl := &x509.Certificate{
		SerialNumber:          serial,
		Subject:               pkix.Name{CommonName: name},
		NotBefore:             t.Add(-Backdate),
		NotAfter:              t.Add(CALifetime),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageCRLSign,
		BasicConstraintsValid: true,
		IsCA:                  true,
		PermittedURIDomains:   uriDomains,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.Cert, key.Public(), ca.Key)
	if err != nil {
		return nil, err
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, err
	}
	p := pemCert(der)
	return &CA{Cert: cert, Key: key, CertPEM: p, Now: ca.Now, chain: append(p, ca.chain...)}, nil
}

// Pool returns a certificate pool holding the CA, for a client or server configured by hand.
func (ca *CA) Pool() *x509.CertPool {
	p := x509.NewCertPool()
	p.AddCert(ca.Cert)
	return p
}

// WriteFile writes the CA's certificate to path (mode 0600), atomically.
func (ca *CA) WriteFile(path string) error { return atomicfile.Write(path, ca.CertPEM, 0o600) }

// Request says what certificate to issue. Node and Hosts may both be set.
type Request struct {
	// Node, when set, makes a node certificate for client authentication, with the
	// identity as its one URI name.
	Node sitetls.Identity
	// Hosts, when set, makes a server certificate for server authentication, for these DNS
	// names and IP addresses.
	Hosts []string
	// Key is the certificate's key; nil means a new Ed25519 key. Pass the agent's node
	// key (or an ECDSA key) to certify it.
	Key crypto.Signer
	// NotBefore is the start of validity; zero means Backdate before the CA's Now.
	NotBefore time.Time
	// Lifetime is the validity from NotBefore; zero means DefaultLifetime.
	Lifetime time.Duration
}

// Pair is an issued certificate and its key.
type Pair struct {
	Cert    *x509.Certificate
	Key     crypto.Signer
	CertPEM []byte // the leaf, then the intermediates that issued it
	KeyPEM  []byte // PKCS#8; nil when the key cannot be exported (a hardware key)
}

// Issue signs a certificate for r.
func (ca *CA) Issue(r Request) (*Pair, error) {
	if r.Node == (sitetls.Identity{}) && len(r.Hosts) == 0 {
		return nil, fmt.Errorf("%w: neither a node nor a host", ErrRequest)
	}
	key := r.Key
	if key == nil {
		_, k, err := ed25519.GenerateKey(rand.Reader)
		if err != nil {
			return nil, err
		}
		key = k
	}
	serial, err := newSerial()
	if err != nil {
		return nil, err
	}
	nb := r.NotBefore
	if nb.IsZero() {
		nb = ca.Now().Add(-Backdate)
	}
	life := r.Lifetime
	if life == 0 {
		life = DefaultLifetime
	}
	tmpl := &x509.Certificate{
		SerialNumber: serial,
		NotBefore:    nb,
		NotAfter:     nb.Add(life),
		KeyUsage:     x509.KeyUsageDigitalSignature,
	}
	if r.Node != (sitetls.Identity{}) {
		if err := r.Node.Validate(); err != nil {
			return nil, fmt.Errorf("%w: %w", ErrRequest, err)
		}
		tmpl.Subject.CommonName = r.Node.Node
		tmpl.URIs = append(tmpl.URIs, r.Node.URI())
		tmpl.ExtKeyUsage = append(tmpl.ExtKeyUsage, x509.ExtKeyUsageClientAuth)
	}
	if len(r.Hosts) > 0 {
		if tmpl.Subject.CommonName == "" {
			tmpl.Subject.CommonName = r.Hosts[0]
		}
		for _, h := range r.Hosts {
			if ip := net.ParseIP(h); ip != nil {
				tmpl.IPAddresses = append(tmpl.IPAddresses, ip)
			} else {
				tmpl.DNSNames = append(tmpl.DNSNames, h)
			}
		}
		tmpl.ExtKeyUsage = append(tmpl.ExtKeyUsage, x509.ExtKeyUsageServerAuth)
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.Cert, key.Public(), ca.Key)
	if err != nil {
		return nil, err
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, err
	}
	p := &Pair{Cert: cert, Key: key, CertPEM: append(pemCert(der), ca.chain...)}
	if k, err := x509.MarshalPKCS8PrivateKey(key); err == nil {
		p.KeyPEM = pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: k})
	}
	return p, nil
}

// WriteFiles writes the certificate to certPath and the key to keyPath, each with mode
// 0600 and atomically (a new inode, as a rotation by rename). An empty keyPath writes the
// certificate only (for a key that is already on disk, such as the agent's node key).
func (p *Pair) WriteFiles(certPath, keyPath string) error {
	if keyPath != "" {
		if p.KeyPEM == nil {
			return fmt.Errorf("sitetlstest: key %T cannot be exported", p.Key)
		}
		if err := atomicfile.Write(keyPath, p.KeyPEM, 0o600); err != nil {
			return err
		}
	}
	return atomicfile.Write(certPath, p.CertPEM, 0o600)
}

// Link is a CA, a control plane's server certificate and one agent's node certificate,
// written to files in one directory: what a lab or a test needs to run the agent's link
// over mutual TLS.
type Link struct {
	CA            *CA
	Server, Agent *Pair
	// The files, in Dir: ca.pem, server.pem, server.key, agent.pem, agent.key.
	Dir, CAFile, ServerCert, ServerKey, AgentCert, AgentKey string
}

// NewLink mints a CA at now (nil: time.Now), a server certificate for hosts and an agent
// certificate for agent (on agentKey, or a new Ed25519 key when nil), and writes them to dir.
func NewLink(dir string, now func() time.Time, agent sitetls.Identity, agentKey crypto.Signer, hosts ...string) (*Link, error) {
	ca, err := NewCA("siteboot test CA", now)
	if err != nil {
		return nil, err
	}
	srv, err := ca.Issue(Request{Hosts: hosts})
	if err != nil {
		return nil, err
	}
	ag, err := ca.Issue(Request{Node: agent, Key: agentKey})
	if err != nil {
		return nil, err
	}
	l := &Link{CA: ca, Server: srv, Agent: ag, Dir: dir,
		CAFile:     filepath.Join(dir, "ca.pem"),
		ServerCert: filepath.Join(dir, "server.pem"), ServerKey: filepath.Join(dir, "server.key"),
		AgentCert: filepath.Join(dir, "agent.pem"), AgentKey: filepath.Join(dir, "agent.key"),
	}
	if err := ca.WriteFile(l.CAFile); err != nil {
		return nil, err
	}
	if err := srv.WriteFiles(l.ServerCert, l.ServerKey); err != nil {
		return nil, err
	}
	if err := ag.WriteFiles(l.AgentCert, l.AgentKey); err != nil {
		return nil, err
	}
	return l, nil
}

// ServerConfig is the control plane's sitetls.Config for l's files.
func (l *Link) ServerConfig() sitetls.Config {
	return sitetls.Config{CertFile: l.ServerCert, KeyFile: l.ServerKey, CAFile: l.CAFile, Clock: l.clock()}
}

// AgentConfig is the agent's sitetls.Config for l's files.
func (l *Link) AgentConfig() sitetls.Config {
	return sitetls.Config{CertFile: l.AgentCert, KeyFile: l.AgentKey, CAFile: l.CAFile, Clock: l.clock()}
}

// clock is the sitetls clock of the CA's Now (nil when Now is nil: the real clock).
func (l *Link) clock() clock.Clock {
	if l.CA.Now == nil {
		return nil
	}
	return nowClock(l.CA.Now)
}

// nowClock reads the wall time from a func and the rest from the real clock.
type nowClock func() time.Time

func (f nowClock) Now() time.Time                                 { return f() }
func (nowClock) Monotonic() time.Duration                         { return clock.Real.Monotonic() }
func (nowClock) AfterFunc(d time.Duration, fn func()) clock.Timer { return clock.Real.AfterFunc(d, fn) }

func newSerial() (*big.Int, error) {
	return rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 128))
}

func pemCert(der []byte) []byte {
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
}
