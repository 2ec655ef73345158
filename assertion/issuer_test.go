package assertion_test

import (
	"bytes"
	"context"
	"crypto"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"errors"
	"fmt"
	"io"
	"math/big"
	"net/netip"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/bettercompute/siteboot/assertion"
	"github.com/bettercompute/siteboot/bootevents"
	"github.com/bettercompute/siteboot/hwid"
)

func TestIssueTimes(t *testing.T) {
	tests := []struct {
		name      string
		lifetime  time.Duration
		now       time.Time
		entry     time.Time
		wantIssue time.Time
		wantAfter time.Time
	}{
		{"no-entry-not-after", 0, t0, time.Time{}, t0, t0.Add(15 * time.Minute)},
		{"entry-two-hours-out", 0, t0, t0.Add(2 * time.Hour), t0, t0.Add(15 * time.Minute)},
		{"entry-five-minutes-out", 0, t0, t0.Add(5 * time.Minute), t0, t0.Add(5 * time.Minute)},
		{"entry-fraction-rounded-down", 0, t0, t0.Add(5*time.Minute + 700*time.Millisecond), t0, t0.Add(5 * time.Minute)},
		{"entry-in-other-zone", 0, t0, t0.Add(time.Minute).In(time.FixedZone("X", 3600)), t0, t0.Add(time.Minute)},
		{"now-fraction-truncated", 0, t0.Add(900 * time.Millisecond), time.Time{}, t0, t0.Add(15 * time.Minute)},
		{"shorter-lifetime", 2 * time.Minute, t0, t0.Add(2 * time.Hour), t0, t0.Add(2 * time.Minute)},
		{"entry-before-lifetime", 10 * time.Minute, t0, t0.Add(time.Minute), t0, t0.Add(time.Minute)},
		{"entry-one-second-out", 0, t0, t0.Add(time.Second), t0, t0.Add(time.Second)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := newSite(t)
			s.issuer.Lifetime = tt.lifetime
			s.agentClock.Set(tt.now)
			s.fields.NotAfter = tt.entry
			got, err := assertion.Decode(s.issue(t))
			if err != nil {
				t.Fatal(err)
			}
			want := [2]time.Time{tt.wantIssue, tt.wantAfter}
			if diff := cmp.Diff(want, [2]time.Time{got.Assertion.IssuedAt, got.Assertion.NotAfter}); diff != "" {
				t.Errorf("issued-at, not-after (-want +got):\n%s", diff)
			}
			if d := got.Assertion.NotAfter.Sub(got.Assertion.IssuedAt); d > assertion.MaxLifetime || d <= 0 {
				t.Errorf("lifetime %v", d)
			}
		})
	}
}

func TestIssueFields(t *testing.T) {
	s := newSite(t)
	s.fields.IP = netip.MustParseAddr("fe80::1%eth0")
	got, err := assertion.Decode(s.issue(t))
	if err != nil {
		t.Fatal(err)
	}
	want := assertion.Assertion{
		Site: "site-a", Agent: "agent-a1", Epoch: 7, MAC: s.mac, IP: netip.MustParseAddr("fe80::1"),
		UUID: s.uuid, Workflow: "wf-1", IssuedAt: t0, NotAfter: t0.Add(15 * time.Minute),
	}
	if diff := cmp.Diff(want, got.Assertion, addrCmp); diff != "" {
		t.Errorf("issued (-want +got):\n%s", diff)
	}

	// A firmware placeholder UUID is not asserted: it could never match a machine.
	for _, p := range []string{"00000000-0000-0000-0000-000000000000", "03000200-0400-0500-0006-000700080009", "ffffffff-ffff-ffff-ffff-ffffffffffff"} {
		s.fields.UUID = hwid.MustParseUUID(p)
		got, err := assertion.Decode(s.issue(t))
		if err != nil {
			t.Fatal(err)
		}
		if got.Assertion.UUID != (hwid.UUID{}) {
			t.Errorf("placeholder %s asserted as %s", p, got.Assertion.UUID)
		}
	}
}

type failingSigner struct {
	pub crypto.PublicKey
	sig []byte
	err error
}

func (f failingSigner) Public() crypto.PublicKey { return f.pub }
func (f failingSigner) Sign(io.Reader, []byte, crypto.SignerOpts) ([]byte, error) {
	return f.sig, f.err
}

func TestIssueErrors(t *testing.T) {
	errHSM := errors.New("hsm: session closed")
	rsaPub := &rsa.PublicKey{N: big.NewInt(0).Lsh(big.NewInt(1), 2047), E: 65537}
	tests := []struct {
		name   string
		change func(s *site)
		ctx    func() context.Context
		want   error
	}{
		{"epoch-0", func(s *site) { s.fields.Epoch = 0 }, nil, assertion.ErrNoEpoch},
		{"entry-lapsed", func(s *site) { s.fields.NotAfter = t0.Add(-time.Minute) }, nil, assertion.ErrEntryLapsed},
		{"entry-ends-now", func(s *site) { s.fields.NotAfter = t0 }, nil, assertion.ErrEntryLapsed},
		{"entry-ends-within-the-second", func(s *site) { s.fields.NotAfter = t0.Add(500 * time.Millisecond) }, nil, assertion.ErrEntryLapsed},
		{"bad-workflow", func(s *site) { s.fields.Workflow = "wf 1" }, nil, assertion.ErrInvalid},
		{"empty-site", func(s *site) { s.issuer.Site = "" }, nil, assertion.ErrConfig},
		{"bad-agent", func(s *site) { s.issuer.Agent = "agent/1" }, nil, assertion.ErrConfig},
		{"nil-signer", func(s *site) { s.issuer.Signer = nil }, nil, assertion.ErrConfig},
		{"lifetime-16m", func(s *site) { s.issuer.Lifetime = 16 * time.Minute }, nil, assertion.ErrConfig},
		{"negative-lifetime", func(s *site) { s.issuer.Lifetime = -time.Second }, nil, assertion.ErrConfig},
		{"rsa-key", func(s *site) { s.issuer.Signer = failingSigner{pub: rsaPub} }, nil, assertion.ErrUnsupportedKey},
		{"ecdsa-p521", func(s *site) {
			k, _ := ecdsa.GenerateKey(elliptic.P521(), rand.Reader)
			s.issuer.Signer = k
		}, nil, assertion.ErrUnsupportedKey},
		{"short-ed25519-key", func(s *site) { s.issuer.Signer = failingSigner{pub: ed25519.PublicKey{1, 2}} }, nil, assertion.ErrUnsupportedKey},
		{"signer-fails", func(s *site) { s.issuer.Signer = failingSigner{pub: s.keyA1.Public(), err: errHSM} }, nil, errHSM},
		{"ctx-canceled", func(*site) {}, func() context.Context {
			ctx, cancel := context.WithCancel(context.Background())
			cancel()
			return ctx
		}, context.Canceled},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := newSite(t)
			tt.change(s)
			ctx := context.Background()
			if tt.ctx != nil {
				ctx = tt.ctx()
			}
			text, err := s.issuer.Issue(ctx, s.fields)
			if !errors.Is(err, tt.want) || text != "" {
				t.Errorf("Issue = %q, %v; want %v", text, err, tt.want)
			}
			if st := s.issuer.Stats(); st != (assertion.IssuerStats{Failed: 1}) {
				t.Errorf("Stats = %+v", st)
			}
		})
	}
	// A signer that returns an empty or oversized signature is an error, not a text.
	for _, n := range []int{0, assertion.MaxSignatureLen + 1} {
		s := newSite(t)
		s.issuer.Signer = failingSigner{pub: s.keyA1.Public(), sig: make([]byte, n)}
		if text, err := s.issuer.Issue(context.Background(), s.fields); err == nil || text != "" {
			t.Errorf("%d-byte signature: Issue = %q, %v", n, text, err)
		}
	}
}

// hsmSigner stands for a key in an HSM or TPM: a crypto.Signer that is not one of the
// standard library's private key types and never exposes its key. It records what it was
// asked to sign.
type hsmSigner struct {
	pub    crypto.PublicKey
	sign   func(rand io.Reader, digest []byte, opts crypto.SignerOpts) ([]byte, error)
	calls  atomic.Int64
	inputs atomic.Value // last []byte signed
}

func (h *hsmSigner) Public() crypto.PublicKey { return h.pub }
func (h *hsmSigner) Sign(r io.Reader, digest []byte, opts crypto.SignerOpts) ([]byte, error) {
	h.calls.Add(1)
	h.inputs.Store(append([]byte(nil), digest...))
	return h.sign(r, digest, opts)
}

func newEd25519HSM(key ed25519.PrivateKey) *hsmSigner {
	return &hsmSigner{pub: key.Public(), sign: func(_ io.Reader, msg []byte, opts crypto.SignerOpts) ([]byte, error) {
		if opts.HashFunc() != 0 {
			return nil, fmt.Errorf("ed25519 HSM: asked to sign a %v digest", opts.HashFunc())
		}
		return ed25519.Sign(key, msg), nil
	}}
}

func newECDSAHSM(key *ecdsa.PrivateKey, want crypto.Hash) *hsmSigner {
	return &hsmSigner{pub: &key.PublicKey, sign: func(r io.Reader, digest []byte, opts crypto.SignerOpts) ([]byte, error) {
		if opts.HashFunc() != want || len(digest) != want.Size() {
			return nil, fmt.Errorf("ecdsa HSM: %d-byte digest under %v, want %v", len(digest), opts.HashFunc(), want)
		}
		return ecdsa.SignASN1(r, key, digest)
	}}
}

func TestHSMSigners(t *testing.T) {
	p256, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	p384, err := ecdsa.GenerateKey(elliptic.P384(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name    string
		signer  *hsmSigner
		maxText int
	}{
		{"ed25519-hsm", newEd25519HSM(seedKey(9)), 282},
		{"ecdsa-p256-tpm", newECDSAHSM(p256, crypto.SHA256), 400},
		{"ecdsa-p384-hsm", newECDSAHSM(p384, crypto.SHA384), assertion.MaxTextLen},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := newSite(t)
			s.issuer.Signer = tt.signer
			s.verifier.Keys.(assertion.StaticKeys)["agent-a1"] = assertion.Agent{PublicKey: tt.signer.pub, Site: "site-a", Role: assertion.RoleSite}
			text := s.issue(t)
			if tt.signer.calls.Load() != 1 {
				t.Errorf("signer called %d times", tt.signer.calls.Load())
			}
			if len(text) > tt.maxText {
				t.Errorf("text of %d characters, want at most %d", len(text), tt.maxText)
			}
			if _, ok := tt.signer.pub.(ed25519.PublicKey); ok {
				in := tt.signer.inputs.Load().([]byte)
				if !bytes.HasPrefix(in, []byte("siteboot/discovery-assertion\x00")) {
					t.Errorf("signed %q, not under the purpose prefix", in[:min(len(in), 40)])
				}
			}
			if _, err := s.verifier.Verify(context.Background(), text, s.join); err != nil {
				t.Fatalf("Verify: %v", err)
			}
			// The control plane's copy of another key refuses it.
			s.verifier.Keys.(assertion.StaticKeys)["agent-a1"] = assertion.Agent{PublicKey: s.keyA1.Public(), Site: "site-a", Role: assertion.RoleSite}
			s.fields.Workflow = "wf-2"
			if _, err := s.verifier.Verify(context.Background(), s.issue(t), s.join); assertion.ReasonOf(err) != assertion.ReasonBadSignature {
				t.Errorf("Verify with another key = %v, want bad-signature", err)
			}
		})
	}
}

func TestIssueConcurrent(t *testing.T) {
	s := newSite(t)
	const n = 16
	texts := make(chan string, n)
	for i := range n {
		go func() {
			f := s.fields
			f.Workflow = fmt.Sprintf("wf-%d", i)
			text, err := s.issuer.Issue(context.Background(), f)
			if err != nil {
				t.Error(err)
			}
			texts <- text
		}()
	}
	seen := map[string]bool{}
	for range n {
		text := <-texts
		if _, err := s.verifier.Verify(context.Background(), text, s.join); err != nil {
			t.Errorf("Verify: %v", err)
		}
		seen[text] = true
	}
	if len(seen) != n || s.issuer.Stats().Issued != n {
		t.Errorf("%d distinct texts, stats %+v", len(seen), s.issuer.Stats())
	}
}

func TestIssuerEvents(t *testing.T) {
	errHSM := errors.New("hsm: session closed")
	tests := []struct {
		name    string
		change  func(s *site)
		ctx     func() context.Context
		outcome bootevents.Outcome
		reason  string
	}{
		{"signed", func(*site) {}, nil, bootevents.OutcomeOK, assertion.IssueSigned},
		{"epoch-0", func(s *site) { s.fields.Epoch = 0 }, nil, bootevents.OutcomeRefused, assertion.IssueNoEpoch},
		{"entry-lapsed", func(s *site) { s.fields.NotAfter = t0.Add(-time.Minute) }, nil, bootevents.OutcomeRefused, assertion.IssueEntryLapsed},
		{"bad-workflow", func(s *site) { s.fields.Workflow = "wf 1" }, nil, bootevents.OutcomeRefused, assertion.IssueInvalid},
		{"nil-signer", func(s *site) { s.issuer.Signer = nil }, nil, bootevents.OutcomeRefused, assertion.IssueConfig},
		{"signer-fails", func(s *site) { s.issuer.Signer = failingSigner{pub: s.keyA1.Public(), err: errHSM} }, nil, bootevents.OutcomeFailed, assertion.IssueSigner},
		{"ctx-canceled", func(*site) {}, func() context.Context {
			ctx, cancel := context.WithCancel(context.Background())
			cancel()
			return ctx
		}, bootevents.OutcomeRefused, assertion.IssueCanceled},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := newSite(t)
			// signing takes 3 ms on the agent's clock
			hsm := newEd25519HSM(s.keyA1)
			sign := hsm.sign
			hsm.sign = func(r io.Reader, msg []byte, opts crypto.SignerOpts) ([]byte, error) {
				s.agentClock.Advance(3 * time.Millisecond)
				return sign(r, msg, opts)
			}
			s.issuer.Signer = hsm
			var got []bootevents.Event
			s.issuer.Events = bootevents.SinkFunc(func(e bootevents.Event) { got = append(got, e) })
			tt.change(s)
			ctx := context.Background()
			if tt.ctx != nil {
				ctx = tt.ctx()
			}
			text, err := s.issuer.Issue(ctx, s.fields)
			if len(got) != 1 {
				t.Fatalf("Issue emitted %d events, want 1: %+v", len(got), got)
			}
			e := got[0]
			if r := assertion.IssueReasonOf(err); r != tt.reason {
				t.Errorf("IssueReasonOf(%v) = %q, want %q", err, r, tt.reason)
			}
			want := bootevents.Event{
				Time: s.agentClock.Now(), MAC: s.mac, Stage: bootevents.StageAssertion,
				Outcome: tt.outcome, Reason: tt.reason, Addr: s.fields.IP, Bytes: uint64(len(text)),
			}
			if err == nil {
				want.Duration = 3 * time.Millisecond
				want.Detail = "epoch 7"
			} else {
				want.Detail = bootevents.Printable(err.Error(), bootevents.MaxDetail)
			}
			if diff := cmp.Diff(want, e, cmpopts.EquateComparable(netip.Addr{}, netip.AddrPort{})); diff != "" {
				t.Errorf("event (-want +got):\n%s", diff)
			}
		})
	}
}

// The Issuer's events land in the machine's timeline, and Explain's path shows the
// signing with its duration.
func TestIssuerEventsInTimeline(t *testing.T) {
	s := newSite(t)
	tl, err := bootevents.NewTimeline(bootevents.Config{Clock: s.agentClock})
	if err != nil {
		t.Fatal(err)
	}
	s.issuer.Events = tl
	s.fields.Epoch = 0
	if _, err := s.issuer.Issue(context.Background(), s.fields); !errors.Is(err, assertion.ErrNoEpoch) {
		t.Fatalf("Issue at epoch 0: %v", err)
	}
	d := tl.Explain(s.mac, bootevents.Facts{Entry: true})
	if d.Code != bootevents.DiagRefused || !strings.Contains(d.Line, assertion.IssueNoEpoch) {
		t.Errorf("Explain = %+v, want a refusal naming %q", d, assertion.IssueNoEpoch)
	}
	if mac, ok := tl.MACOf(s.fields.IP); !ok || mac != s.mac {
		t.Errorf("the assertion's address does not lead to the machine: %v, %v", mac, ok)
	}
}
