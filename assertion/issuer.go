package assertion

import (
	"context"
	"crypto"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"net/netip"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/bettercompute/siteboot/bootevents"
	"github.com/bettercompute/siteboot/clock"
	"github.com/bettercompute/siteboot/hwid"
)

// Fields are what one boot contributes to an assertion; the Issuer adds site, agent and
// times.
type Fields struct {
	// Epoch is the boot lease epoch the agent holds now (from its fence); 0 is refused.
	Epoch uint64
	// MAC is the MAC the agent is serving.
	MAC hwid.MAC
	// IP is the machine's address (from the query or the connection); may be zero.
	IP netip.Addr
	// UUID is the machine's product UUID (from the query or the entry); zero when unknown.
	// A firmware placeholder is not asserted: the Issuer drops it, since no machine can
	// ever match one.
	UUID hwid.UUID
	// Workflow is the boot entry's workflow id, or "".
	Workflow string
	// NotAfter is the boot entry's not-after; zero when the entry has none.
	NotAfter time.Time
}

// Issuer signs assertions on the agent side. Configure it with its exported fields; it is
// safe for concurrent use once configured.
type Issuer struct {
	// Site is the agent's site id. Required.
	Site string
	// Agent is the agent's node id. Required.
	Agent string
	// Signer holds the agent's node key: an ed25519.PrivateKey, or any crypto.Signer (a key
	// in an HSM or TPM) whose Public is an ed25519.PublicKey or an *ecdsa.PublicKey on
	// P-256 or P-384. Required.
	Signer crypto.Signer
	// Lifetime is how long an assertion is valid after issue. Zero means MaxLifetime
	// (15 minutes), which is also the most allowed.
	Lifetime time.Duration
	// Clock is the agent's clock. Nil means [clock.Real].
	Clock clock.Clock
	// Rand is the randomness handed to the Signer (ECDSA needs it; Ed25519 ignores it).
	// Nil means crypto/rand.Reader.
	Rand io.Reader
	// Events, if set, receives one bootevents.StageAssertion event per Issue call: for an
	// assertion signed, OutcomeOK with reason IssueSigned, the MAC and IP of the Fields,
	// the text's length and how long signing took; for a refusal, OutcomeRefused with one
	// of the Issue reasons (IssueNoEpoch, IssueEntryLapsed, ...) and the error's detail.
	// Nil: no event is built. A host whose ipxe.Handler already emits the script's
	// assertion event sets this to learn why an Issue failed (the handler names only
	// "error"); both events land in the same boot of the machine's timeline.
	Events bootevents.Sink

	issued, failed atomic.Uint64
}

// The reasons of the Issuer's events: the word an Issue call ended with.
const (
	IssueSigned      = "signed"       // an assertion was signed
	IssueNoEpoch     = "no-epoch"     // ErrNoEpoch: the agent holds no lease
	IssueEntryLapsed = "entry-lapsed" // ErrEntryLapsed: the entry's not-after has passed
	IssueConfig      = "config"       // ErrConfig: the Issuer is misconfigured
	IssueInvalid     = "invalid"      // ErrInvalid: a field out of bounds (a workflow id)
	IssueCanceled    = "canceled"     // the context ended before signing
	IssueSigner      = "signer"       // the Signer failed or returned no usable signature
)

// IssueReasonOf returns the Issuer event reason for an error Issue returned: one of the
// Issue constants; IssueSigned for nil.
func IssueReasonOf(err error) string {
	switch {
	case err == nil:
		return IssueSigned
	case errors.Is(err, ErrNoEpoch):
		return IssueNoEpoch
	case errors.Is(err, ErrEntryLapsed):
		return IssueEntryLapsed
	case errors.Is(err, ErrConfig):
		return IssueConfig
	case errors.Is(err, ErrInvalid):
		return IssueInvalid
	case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		return IssueCanceled
	}
	return IssueSigner
}

// IssuerStats are the Issuer's counters.
type IssuerStats struct {
	Issued uint64 // assertions signed
	Failed uint64 // Issue calls that returned an error
}

// Stats returns the Issuer's counters.
func (is *Issuer) Stats() IssuerStats {
	return IssuerStats{Issued: is.issued.Load(), Failed: is.failed.Load()}
}

// Validate reports a configuration that Issue would refuse.
func (is *Issuer) Validate() error {
	_, err := is.validate()
	return err
}

// validate checks the configuration and returns the signer options of its key.
func (is *Issuer) validate() (crypto.SignerOpts, error) {
	if err := checkID("site", is.Site, false); err != nil {
		return nil, fmt.Errorf("%w: Issuer.Site: %w", ErrConfig, err)
	}
	if err := checkID("agent", is.Agent, false); err != nil {
		return nil, fmt.Errorf("%w: Issuer.Agent: %w", ErrConfig, err)
	}
	if is.Signer == nil {
		return nil, fmt.Errorf("%w: Issuer.Signer is nil", ErrConfig)
	}
	opts, err := signerOpts(is.Signer.Public())
	if err != nil {
		return nil, fmt.Errorf("%w: Issuer.Signer: %w", ErrConfig, err)
	}
	if is.Lifetime < 0 || is.Lifetime > MaxLifetime {
		return nil, fmt.Errorf("%w: Issuer.Lifetime %v outside 0..%v", ErrConfig, is.Lifetime, MaxLifetime)
	}
	return opts, nil
}

// Issue signs an assertion for f and returns its text form. IssuedAt is the Issuer's clock,
// truncated to the second; NotAfter is IssuedAt plus the lifetime, or the entry's NotAfter
// when that comes first. An entry already lapsed is ErrEntryLapsed; epoch 0 is ErrNoEpoch.
//
// ctx is checked before signing; a crypto.Signer offers no way to interrupt a signature
// already under way.
func (is *Issuer) Issue(ctx context.Context, f Fields) (string, error) {
	if is.Events == nil {
		return is.count(is.issue(ctx, f))
	}
	clk := clock.Or(is.Clock)
	start := clk.Monotonic()
	text, err := is.count(is.issue(ctx, f))
	e := bootevents.Event{
		Time: clk.Now(), MAC: f.MAC, Stage: bootevents.StageAssertion, Outcome: bootevents.OutcomeOK,
		Reason: IssueReasonOf(err), Addr: f.IP.WithZone(""), Duration: clk.Monotonic() - start,
		Bytes: uint64(len(text)),
	}
	if err != nil {
		e.Outcome = bootevents.OutcomeRefused
		if e.Reason == IssueSigner {
			e.Outcome = bootevents.OutcomeFailed
		}
		e.Detail = bootevents.Printable(err.Error(), bootevents.MaxDetail)
	} else {
		e.Detail = "epoch " + strconv.FormatUint(f.Epoch, 10)
	}
	is.Events.Emit(e)
	return text, err
}

// count counts the outcome of one issue.
func (is *Issuer) count(text string, err error) (string, error) {
	if err != nil {
		is.failed.Add(1)
		return "", err
	}
	is.issued.Add(1)
	return text, nil
}

func (is *Issuer) issue(ctx context.Context, f Fields) (string, error) {
	opts, err := is.validate()
	if err != nil {
		return "", err
	}
	if f.Epoch == 0 {
		return "", ErrNoEpoch
	}
	now := clock.Or(is.Clock).Now
	lifetime := is.Lifetime
	if lifetime == 0 {
		lifetime = MaxLifetime
	}
	issued := time.Unix(now().Unix(), 0).UTC()
	notAfter := issued.Add(lifetime)
	if !f.NotAfter.IsZero() {
		entry := time.Unix(f.NotAfter.Unix(), 0).UTC() // whole seconds, never later
		if entry.Before(notAfter) {
			notAfter = entry
		}
		if !notAfter.After(issued) {
			return "", fmt.Errorf("%w: entry not-after %s, now %s", ErrEntryLapsed,
				f.NotAfter.UTC().Format(time.RFC3339), issued.Format(time.RFC3339))
		}
	}
	u := f.UUID
	if u.IsPlaceholder() {
		u = hwid.UUID{}
	}
	a := Assertion{
		Site: is.Site, Agent: is.Agent, Epoch: f.Epoch,
		MAC: f.MAC, IP: f.IP.WithZone(""), UUID: u, Workflow: f.Workflow,
		IssuedAt: issued, NotAfter: notAfter,
	}
	// One buffer: the purpose prefix, the payload, then room for the signature, so that the
	// text is the base64 of the buffer after the prefix.
	msg, err := a.AppendBinary(appendPrefix(make([]byte, 0, prefixLen+MaxPayloadLen+MaxSignatureLen), Purpose))
	if err != nil {
		return "", err
	}
	if err := ctx.Err(); err != nil {
		return "", err
	}
	sig, err := sign(is.Signer, is.Rand, opts, msg)
	if err != nil {
		return "", err
	}
	return base64.RawURLEncoding.EncodeToString(append(msg, sig...)[prefixLen:]), nil
}

// sign signs msg, the purpose-prefixed payload, with s.
func sign(s crypto.Signer, r io.Reader, opts crypto.SignerOpts, msg []byte) ([]byte, error) {
	if r == nil {
		r = rand.Reader
	}
	sig, err := crypto.SignMessage(s, r, msg, opts)
	if err != nil {
		return nil, fmt.Errorf("assertion: signing: %w", err)
	}
	if len(sig) == 0 || len(sig) > MaxSignatureLen {
		return nil, fmt.Errorf("assertion: signer returned %d bytes", len(sig))
	}
	return sig, nil
}

// signerOpts returns the options a key of pub's type signs with: Ed25519 over the message
// itself, ECDSA over its SHA-256 (P-256) or SHA-384 (P-384) digest in ASN.1 form.
func signerOpts(pub crypto.PublicKey) (crypto.SignerOpts, error) {
	switch k := pub.(type) {
	case ed25519.PublicKey:
		if len(k) == ed25519.PublicKeySize {
			return crypto.Hash(0), nil
		}
	case *ecdsa.PublicKey:
		switch k.Curve {
		case elliptic.P256():
			return crypto.SHA256, nil
		case elliptic.P384():
			return crypto.SHA384, nil
		}
	}
	return nil, fmt.Errorf("%w: %T", ErrUnsupportedKey, pub)
}

// verifySignature checks sig over msg, the purpose-prefixed payload, with pub.
func verifySignature(pub crypto.PublicKey, msg, sig []byte) error {
	opts, err := signerOpts(pub)
	if err != nil {
		return err
	}
	ok := false
	switch k := pub.(type) {
	case ed25519.PublicKey:
		ok = ed25519.Verify(k, msg, sig)
	case *ecdsa.PublicKey:
		h := opts.HashFunc().New()
		h.Write(msg)
		ok = ecdsa.VerifyASN1(k, h.Sum(nil), sig)
	}
	if !ok {
		return fmt.Errorf("signature does not verify under purpose %q", Purpose)
	}
	return nil
}
