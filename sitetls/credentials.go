package sitetls

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/rsa"
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"github.com/bettercompute/siteboot/clock"
	"log/slog"
	"sync"
	"time"
)

// DefaultCheckInterval is how often, at most, a handshake looks at the files when
// Config.CheckInterval is zero.
const DefaultCheckInterval = 5 * time.Second

// Config names a node's certificate, its key and the CA bundle its peers must chain to.
type Config struct {
	// CertFile is the PEM certificate, leaf first, then any intermediates. Required. It
	// must grant nothing to group or others (mode & 0o077 == 0, such as 0600).
	CertFile string
	// KeyFile is the PEM private key of the leaf: PKCS#8 ("PRIVATE KEY", as the site
	// agent's node key is written), SEC1 ("EC PRIVATE KEY") or PKCS#1; Ed25519, ECDSA or RSA.
	// Required, with the same mode rule. It may name CertFile, for a single file that holds
	// both and is therefore replaced in one step.
	KeyFile string
	// CAFile is the PEM bundle of CA certificates the peer's certificate must chain to.
	// Required. It may be world-readable but not writable by group or others
	// (mode & 0o022 == 0).
	CAFile string
	// IssuerFile is the PEM bundle of CA certificates a re-read certificate must chain to
	// before it replaces the one in use: the CAs the peers trust, so that this side never
	// adopts a certificate its peers would refuse (and lose the link with it). Empty means
	// CAFile, right when one CA issues both sides' certificates; set it when this side's
	// certificate comes from another CA than the one its peers' chain to. Same mode rule
	// as CAFile. The certificate read by Load is not checked against it: a bad first
	// certificate shows at the first handshake.
	IssuerFile string
	// CheckInterval is how often, at most, a handshake compares the files' metadata
	// with what was loaded. Zero means DefaultCheckInterval.
	CheckInterval time.Duration
	// Clock is the clock for certificate validity and for CheckInterval; nil means
	// [clock.Real].
	Clock clock.Clock
	// Logger receives a line per reload and per failed reload (naming the file, never its
	// content); nil discards.
	Logger *slog.Logger
}

// Validate reports a missing file name or a negative interval.
func (c Config) Validate() error {
	switch {
	case c.CertFile == "":
		return fmt.Errorf("%w: CertFile is empty", ErrConfig)
	case c.KeyFile == "":
		return fmt.Errorf("%w: KeyFile is empty", ErrConfig)
	case c.CAFile == "":
		return fmt.Errorf("%w: CAFile is empty", ErrConfig)
	case c.CheckInterval < 0:
		return fmt.Errorf("%w: CheckInterval %v is negative", ErrConfig, c.CheckInterval)
	}
	return nil
}

// Credentials are a node's certificate, key and trusted CAs, as last loaded from their
// files. They are safe for concurrent use; the tls.Configs they build read the current
// ones on every handshake.
type Credentials struct {
	cfg      Config
	now      func() time.Time
	interval time.Duration
	log      *slog.Logger

	checking sync.Mutex // one check at a time

	mu           sync.Mutex
	pair         *tls.Certificate
	pool         *x509.CertPool
	certV, keyV  version
	caV          version
	pairErr      error
	caErr        error
	loadedAt     time.Time
	lastCheck    time.Time
	reloads      uint64
	failures     uint64
	lastReported string
	served       struct { // servedChain's result, for pair and pool
		pair  *tls.Certificate
		pool  *x509.CertPool
		chain *tls.Certificate
		root  *x509.Certificate
	}
}

// Load reads the files named by cfg. It fails, with a *FileError naming the file, when any
// of them is unreadable, too open (see Config), malformed, when the key is not the
// certificate's, or when the certificate is outside its validity at cfg.Clock's Now.
func Load(cfg Config) (*Credentials, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	c := &Credentials{cfg: cfg, now: clock.Or(cfg.Clock).Now, interval: cfg.CheckInterval, log: cfg.Logger}
	if c.interval == 0 {
		c.interval = DefaultCheckInterval
	}
	if c.log == nil {
		c.log = slog.New(slog.DiscardHandler)
	}
	now := c.now()
	pair, cv, kv, err := loadPair(cfg.CertFile, cfg.KeyFile, now)
	if err != nil {
		return nil, err
	}
	pool, av, err := loadCA(RoleCA, cfg.CAFile)
	if err != nil {
		return nil, err
	}
	c.pair, c.certV, c.keyV, c.pool, c.caV = pair, cv, kv, pool, av
	c.loadedAt, c.lastCheck = now, now
	return c, nil
}

// Check looks at the files now and re-reads those that changed (a new inode, size,
// modification or change time) or that failed to load last time. A file that fails to load
// leaves the last good certificate and key (or CA bundle) in use: Check returns its error,
// and the next check tries again. Handshakes call Check at most once per CheckInterval; a
// host with a loop of its own (the agent's heartbeat) may call it there too, so that a bad
// new file is reported even while no handshake happens.
func (c *Credentials) Check() error {
	c.checking.Lock()
	defer c.checking.Unlock()
	return c.check()
}

// check is Check with c.checking held.
func (c *Credentials) check() error {
	now := c.now()

	c.mu.Lock()
	c.lastCheck = now
	pairErr, certV, keyV := c.pairErr, c.certV, c.keyV
	caErr, caV, curPool := c.caErr, c.caV, c.pool
	c.mu.Unlock()

	var (
		pair         *tls.Certificate
		cv, kv       version
		newPairErr   = pairErr
		pool         *x509.CertPool
		av           version
		newCAErr     = caErr
		pairTried    bool
		caTried      bool
		statCert, e1 = statVersion(c.cfg.CertFile)
		statKey, e2  = statVersion(c.cfg.KeyFile)
		statCA, e3   = statVersion(c.cfg.CAFile)
	)
	if pairErr != nil || e1 != nil || e2 != nil || statCert != certV || statKey != keyV {
		pairTried = true
		pair, cv, kv, newPairErr = loadPair(c.cfg.CertFile, c.cfg.KeyFile, now)
	}
	if caErr != nil || e3 != nil || statCA != caV {
		caTried = true
		pool, av, newCAErr = loadCA(RoleCA, c.cfg.CAFile)
	}
	if pairTried && newPairErr == nil {
		// A new certificate is adopted only if the peers will take it.
		issuers := curPool
		if pool != nil {
			issuers = pool // the bundle this check adopts
		}
		var err error
		if c.cfg.IssuerFile != "" {
			issuers, _, err = loadCA(RoleIssuer, c.cfg.IssuerFile)
		}
		if err == nil {
			err = verifyIssued(pair, issuers, c.cfg.CertFile, now)
		}
		if err != nil {
			pair, newPairErr = nil, err
		}
	}

	c.mu.Lock()
	defer c.mu.Unlock()
	if pairTried {
		c.pairErr = newPairErr
		if newPairErr == nil {
			c.pair, c.certV, c.keyV, c.loadedAt = pair, cv, kv, now
			c.reloads++
			c.log.Info("sitetls: certificate reloaded", "cert", c.cfg.CertFile,
				"serial", pair.Leaf.SerialNumber.Text(16), "not_after", pair.Leaf.NotAfter)
		} else {
			c.failures++
		}
	}
	if caTried {
		c.caErr = newCAErr
		if newCAErr == nil {
			c.pool, c.caV = pool, av
			c.reloads++
			c.log.Info("sitetls: CA bundle reloaded", "ca", c.cfg.CAFile)
		} else {
			c.failures++
		}
	}
	err := errors.Join(c.pairErr, c.caErr)
	if err != nil && err.Error() != c.lastReported {
		c.log.Warn("sitetls: keeping the last good credentials", "err", err)
	}
	c.lastReported = ""
	if err != nil {
		c.lastReported = err.Error()
	}
	return err
}

// maybeCheck runs Check when CheckInterval has passed since the last one (or the clock went
// back), unless another check is under way.
func (c *Credentials) maybeCheck() {
	now := c.now()
	c.mu.Lock()
	due := now.Sub(c.lastCheck) >= c.interval || now.Before(c.lastCheck)
	c.mu.Unlock()
	if !due || !c.checking.TryLock() {
		return
	}
	defer c.checking.Unlock()
	_ = c.check() // the error is kept for Status and logged once
}

func (c *Credentials) current() (*tls.Certificate, *x509.CertPool) {
	c.maybeCheck()
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.pair, c.pool
}

// Status is what a host reports about its credentials (in /healthz, metrics or logs).
type Status struct {
	// Leaf is the certificate in use. The caller must not modify it.
	Leaf *x509.Certificate
	// Identity is the leaf's node identity; zero when it has none (a server certificate).
	Identity Identity
	// NotAfter is the leaf's expiry.
	NotAfter time.Time
	// LoadedAt is when the leaf was loaded, by the configured clock.
	LoadedAt time.Time
	// Reloads counts files re-read successfully after Load; Failures counts failed tries.
	Reloads, Failures uint64
	// Err is the last check's error (the files on disk are not what is served), or
	// ErrExpired when the certificate in use has expired; nil otherwise.
	Err error
}

// Status returns the credentials' current state, without checking the files.
func (c *Credentials) Status() Status {
	now := c.now()
	c.mu.Lock()
	defer c.mu.Unlock()
	leaf := c.pair.Leaf
	id, _ := IdentityFromCert(leaf)
	err := errors.Join(c.pairErr, c.caErr)
	if now.After(leaf.NotAfter) {
		err = errors.Join(err, &FileError{Role: RoleCert, Path: c.cfg.CertFile,
			Err: fmt.Errorf("%w: in use since %s, expired %s", ErrExpired,
				c.loadedAt.UTC().Format(time.RFC3339), leaf.NotAfter.UTC().Format(time.RFC3339))})
	}
	return Status{Leaf: leaf, Identity: id, NotAfter: leaf.NotAfter, LoadedAt: c.loadedAt,
		Reloads: c.reloads, Failures: c.failures, Err: err}
}

// ClientConfig returns a TLS configuration for the agent's side of the link: it presents
// the current certificate and verifies the server's certificate against the current CA
// bundle, for serverName (a DNS name or an IP address; empty means the name the connection
// was made for, which an http.Transport sets from the URL's host, except for an IP
// address), for server authentication, at Config.Clock. TLS 1.3 only.
//
// The verification is this package's own, in VerifyConnection, because crypto/tls's
// RootCAs cannot change after the first handshake: InsecureSkipVerify is set only to hand
// the check over to it, and a handshake with no verified server never completes.
func (c *Credentials) ClientConfig(serverName string) *tls.Config {
	return &tls.Config{
		MinVersion:         tls.VersionTLS13,
		ServerName:         serverName,
		Time:               c.now,
		InsecureSkipVerify: true, // verified in VerifyConnection, on every handshake
		GetClientCertificate: func(*tls.CertificateRequestInfo) (*tls.Certificate, error) {
			pair, _ := c.current()
			return pair, nil
		},
		VerifyConnection: func(cs tls.ConnectionState) error {
			return c.verifyServer(cs, serverName)
		},
	}
}

func (c *Credentials) verifyServer(cs tls.ConnectionState, serverName string) error {
	name := serverName
	if name == "" {
		name = cs.ServerName
	}
	if name == "" {
		return ErrNoServerName
	}
	if len(cs.PeerCertificates) == 0 {
		return fmt.Errorf("%w: the server sent no certificate", ErrPeerNotVerified)
	}
	_, pool := c.current()
	inter := x509.NewCertPool()
	for _, ic := range cs.PeerCertificates[1:] {
		inter.AddCert(ic)
	}
	_, err := cs.PeerCertificates[0].Verify(x509.VerifyOptions{
		Roots:         pool,
		Intermediates: inter,
		DNSName:       name,
		CurrentTime:   c.now(),
		KeyUsages:     []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	})
	if err != nil {
		return fmt.Errorf("%w: %w", ErrPeerNotVerified, err)
	}
	return nil
}

// ServerConfig returns a TLS configuration for the control plane's side of the link: it
// presents the current certificate and requires a client certificate that chains to the
// current CA bundle, for client authentication, at Config.Clock. TLS 1.3 only; session
// tickets are off, so every connection is verified against the CA bundle in use when it
// is made. The per-connection configuration is a copy of the returned one (its NextProtos,
// cipher and curve settings, as set before serving) with those fields filled in.
//
// [NodeFrom] reads the client's identity in a handler.
func (c *Credentials) ServerConfig() *tls.Config {
	base := &tls.Config{MinVersion: tls.VersionTLS13}
	base.GetConfigForClient = func(*tls.ClientHelloInfo) (*tls.Config, error) {
		pair, pool := c.current()
		cfg := base.Clone()
		cfg.GetConfigForClient = nil
		cfg.GetCertificate = nil
		cfg.Certificates = []tls.Certificate{*pair}
		cfg.ClientAuth = tls.RequireAndVerifyClientCert
		cfg.ClientCAs = pool
		cfg.SessionTicketsDisabled = true
		cfg.Time = c.now
		return cfg, nil
	}
	return base
}

// loadPair reads and checks a certificate and its key.
func loadPair(certPath, keyPath string, now time.Time) (*tls.Certificate, version, version, error) {
	fail := func(err error) (*tls.Certificate, version, version, error) {
		return nil, version{}, version{}, err
	}
	certPEM, cv, err := readFile(RoleCert, certPath, 0o077)
	if err != nil {
		return fail(err)
	}
	keyPEM, kv := certPEM, cv
	if keyPath != certPath {
		if keyPEM, kv, err = readFile(RoleKey, keyPath, 0o077); err != nil {
			return fail(err)
		}
	}
	certErr := func(err error) error { return &FileError{Role: RoleCert, Path: certPath, Err: err} }
	keyErr := func(err error) error { return &FileError{Role: RoleKey, Path: keyPath, Err: err} }

	ders, err := certBlocks(certPEM)
	if err != nil {
		return fail(certErr(err))
	}
	leaf, err := x509.ParseCertificate(ders[0])
	if err != nil {
		return fail(certErr(fmt.Errorf("%w: %w", ErrNoCertificate, err)))
	}
	key, err := parseKey(keyPEM)
	if err != nil {
		return fail(keyErr(err))
	}
	pub, ok := leaf.PublicKey.(interface{ Equal(crypto.PublicKey) bool })
	if !ok || !pub.Equal(key.Public()) {
		return fail(keyErr(ErrKeyMismatch))
	}
	switch {
	case now.Before(leaf.NotBefore):
		return fail(certErr(fmt.Errorf("%w: valid from %s", ErrNotYetValid, leaf.NotBefore.UTC().Format(time.RFC3339))))
	case now.After(leaf.NotAfter):
		return fail(certErr(fmt.Errorf("%w: %s", ErrExpired, leaf.NotAfter.UTC().Format(time.RFC3339))))
	}
	return &tls.Certificate{Certificate: ders, PrivateKey: key, Leaf: leaf}, cv, kv, nil
}

// certBlocks returns the DER of every CERTIFICATE block, in order.
func certBlocks(b []byte) ([][]byte, error) {
	var ders [][]byte
	for {
		var block *pem.Block
		block, b = pem.Decode(b)
		if block == nil {
			break
		}
		if block.Type == "CERTIFICATE" {
			ders = append(ders, block.Bytes)
		}
	}
	if len(ders) == 0 {
		return nil, fmt.Errorf("%w: no PEM CERTIFICATE block", ErrNoCertificate)
	}
	return ders, nil
}

// parseKey returns the first private key in b. Its errors never hold key material.
func parseKey(b []byte) (crypto.Signer, error) {
	for {
		var block *pem.Block
		block, b = pem.Decode(b)
		if block == nil {
			return nil, fmt.Errorf("%w: no PEM private key block", ErrNoKey)
		}
		var (
			k   any
			err error
		)
		switch block.Type {
		case "PRIVATE KEY":
			k, err = x509.ParsePKCS8PrivateKey(block.Bytes)
		case "EC PRIVATE KEY":
			k, err = x509.ParseECPrivateKey(block.Bytes)
		case "RSA PRIVATE KEY":
			k, err = x509.ParsePKCS1PrivateKey(block.Bytes)
		default:
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("%w: %s block does not parse", ErrNoKey, block.Type)
		}
		switch k := k.(type) {
		case ed25519.PrivateKey:
			return k, nil
		case *ecdsa.PrivateKey:
			return k, nil
		case *rsa.PrivateKey:
			return k, nil
		default:
			return nil, fmt.Errorf("%w: %T", ErrUnsupportedKey, k)
		}
	}
}

// verifyIssued checks that pair's leaf chains to issuers, through the intermediates the
// certificate file holds, at now.
func verifyIssued(pair *tls.Certificate, issuers *x509.CertPool, certPath string, now time.Time) error {
	inter := x509.NewCertPool()
	for _, der := range pair.Certificate[1:] {
		ic, err := x509.ParseCertificate(der)
		if err != nil {
			return &FileError{Role: RoleCert, Path: certPath, Err: fmt.Errorf("%w: intermediate: %w", ErrNoCertificate, err)}
		}
		inter.AddCert(ic)
	}
	_, err := pair.Leaf.Verify(x509.VerifyOptions{Roots: issuers, Intermediates: inter, CurrentTime: now,
		KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageAny}})
	if err != nil {
		return &FileError{Role: RoleCert, Path: certPath, Err: fmt.Errorf("%w: %w", ErrUntrustedCert, err)}
	}
	return nil
}

// loadCA reads a CA bundle (role RoleCA or RoleIssuer): every block must be a certificate
// that parses, and there must be at least one.
func loadCA(role, path string) (*x509.CertPool, version, error) {
	b, v, err := readFile(role, path, 0o022)
	if err != nil {
		return nil, version{}, err
	}
	ders, err := certBlocks(b)
	if err != nil {
		return nil, version{}, &FileError{Role: role, Path: path, Err: err}
	}
	pool := x509.NewCertPool()
	for i, der := range ders {
		ca, err := x509.ParseCertificate(der)
		if err != nil {
			return nil, version{}, &FileError{Role: role, Path: path,
				Err: fmt.Errorf("%w: certificate %d: %w", ErrNoCertificate, i+1, err)}
		}
		pool.AddCert(ca)
	}
	return pool, v, nil
}
