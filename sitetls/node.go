package sitetls

import (
	"crypto"
	"errors"
	"fmt"
	"log/slog"
	"sync"
)

// CheckLeaf says whether the certificate in use (st, from [Credentials.Status]) is the
// node's: its identity is want and its public key is key. It returns ErrNoCredentials
// when st has no certificate, an error wrapping ErrCertIdentity for another site or node,
// and ErrCertKey for another key (or a key that cannot be compared).
func CheckLeaf(st Status, want Identity, key crypto.PublicKey) error {
	if st.Leaf == nil {
		return ErrNoCredentials
	}
	if st.Identity != want {
		return fmt.Errorf("%w: it names %q, the node is %q", ErrCertIdentity, st.Identity.String(), want.String())
	}
	k, ok := key.(interface{ Equal(crypto.PublicKey) bool })
	if !ok || !k.Equal(st.Leaf.PublicKey) {
		return ErrCertKey
	}
	return nil
}

// LoadNode is [Load] for a node's own side of the link: it also refuses, with CheckLeaf's
// errors, a certificate that is not for want's identity and key (the node key it keeps).
func LoadNode(cfg Config, want Identity, key crypto.PublicKey) (*Credentials, error) {
	c, err := Load(cfg)
	if err != nil {
		return nil, err
	}
	if err := CheckLeaf(c.Status(), want, key); err != nil {
		return nil, err
	}
	return c, nil
}

// Monitor is a node's view of the credentials of its link to the control plane, for its
// health and metrics: [Monitor.Check], called on the node's own schedule (each heartbeat),
// re-reads changed files and checks that the certificate in use is still the node's; the
// last problem is kept for [Monitor.Health] and logged once each time it changes.
//
// Set the fields before the first call and do not change them after. A Monitor is safe
// for concurrent use.
type Monitor struct {
	// Credentials are the link's; nil means the node holds none (Check does nothing).
	Credentials *Credentials
	// Insecure says the link is plain http, with no certificate either way; Health says
	// so.
	Insecure bool
	// Identity and Key are what the certificate must be for ([CheckLeaf]).
	Identity Identity
	Key      crypto.PublicKey
	// Logger receives a line each time the check's outcome changes; nil discards.
	Logger *slog.Logger

	mu        sync.Mutex
	lastErr   string // the last check's problem
	untrusted bool   // the last check refused a new certificate that does not chain to the issuers
}

// Check re-reads the files that changed ([Credentials.Check]; the last good pair stays in
// use when the new one is bad) and checks the certificate in use with CheckLeaf. It
// returns the problem found, nil when all is well or there are no Credentials.
func (m *Monitor) Check() error {
	if m.Credentials == nil {
		return nil
	}
	err := m.Credentials.Check()
	if err == nil {
		err = CheckLeaf(m.Credentials.Status(), m.Identity, m.Key)
	}
	msg := ""
	if err != nil {
		msg = err.Error()
	}
	m.mu.Lock()
	changed := msg != m.lastErr
	m.lastErr = msg
	m.untrusted = errors.Is(err, ErrUntrustedCert)
	m.mu.Unlock()
	log := m.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	if changed && err != nil {
		log.Error("control link: site certificate", "err", err)
	} else if changed {
		log.Info("control link: site certificate in order", "not_after", m.Credentials.Status().NotAfter)
	}
	return err
}

// Untrusted reports whether the last Check refused a new certificate that does not chain
// to the CAs the peers trust (ErrUntrustedCert): the previous one stays in use until it
// expires.
func (m *Monitor) Untrusted() bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.untrusted
}

// Health is the line a health page adds about the link's security: that it is plain http,
// the last Check's problem, or the certificate in use having expired; "" when all is well.
// It names files, never their content.
func (m *Monitor) Health() string {
	if m.Insecure {
		return "insecure: the control link is plain http, with no certificate either way"
	}
	if m.Credentials == nil {
		return ""
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.lastErr != "" {
		return "control link certificate: " + m.lastErr
	}
	if err := m.Credentials.Status().Err; err != nil {
		return "control link certificate: " + err.Error()
	}
	return ""
}
