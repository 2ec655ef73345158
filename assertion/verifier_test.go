package assertion_test

import (
	"context"
	"crypto"
	"crypto/ed25519"
	"crypto/rsa"
	"errors"
	"fmt"
	"log/slog"
	"math/big"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"
	"unicode"

	"github.com/google/go-cmp/cmp"

	"github.com/bettercompute/siteboot/assertion"
	"github.com/bettercompute/siteboot/hwid"
	"github.com/bettercompute/siteboot/internal/testlog"
)

func TestVerifyAdmits(t *testing.T) {
	s := newSite(t)
	text := s.issue(t)
	got, err := s.verifier.Verify(context.Background(), text, s.join)
	if err != nil {
		t.Fatalf("Verify: %v", err)
	}
	want := s.assertionFor()
	if diff := cmp.Diff(want, got, addrCmp); diff != "" {
		t.Errorf("admitted (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(assertion.VerifierStats{Admitted: 1}, s.verifier.Stats()); diff != "" {
		t.Errorf("stats (-want +got):\n%s", diff)
	}
}

// TestVerifyUUIDSpellings: the entry, and so the assertion, may hold the machine's UUID in
// any of its three spellings, and the joining machine may report it in any of them: each
// against each is admitted (A2), the SMBIOS spelling against the reversed one included.
func TestVerifyUUIDSpellings(t *testing.T) {
	u := hwid.MustParseUUID("4c4c4544-0031-3510-8052-b4c04f4e4b32")
	names := []string{"as given", "SMBIOS", "reversed"}
	for i, asserted := range u.Spellings() {
		for j, reported := range u.Spellings() {
			t.Run(names[i]+" asserted, "+names[j]+" reported", func(t *testing.T) {
				s := newSite(t)
				s.fields.UUID, s.join.UUID = asserted, reported
				a, err := s.verifier.Verify(context.Background(), s.issue(t), s.join)
				if err != nil {
					t.Fatalf("asserted %s, reported %s: %v", asserted, reported, err)
				}
				if a.UUID != asserted {
					t.Errorf("admitted UUID %s, want %s as asserted", a.UUID, asserted)
				}
			})
		}
	}
	// No UUID asserted: whatever the machine reports (or nothing) is fine.
	s := newSite(t)
	s.fields.UUID = hwid.UUID{}
	s.join.UUID = hwid.UUID{}
	if _, err := s.verifier.Verify(context.Background(), s.issue(t), s.join); err != nil {
		t.Errorf("no UUID asserted: %v", err)
	}
}

type refusalCase struct {
	name string
	// prepare changes the world and returns the text to present (and may change s.join).
	prepare func(t *testing.T, s *site) string
	want    assertion.Reason
	// wrapped, when set, must be in the error chain too.
	wrapped error
}

var errBackend = errors.New("backend: connection refused")

func refusalCases() []refusalCase {
	return []refusalCase{
		{"malformed-garbage", func(t *testing.T, s *site) string { return "not an assertion" }, assertion.ReasonMalformed, assertion.ErrMalformed},
		{"malformed-truncated", func(t *testing.T, s *site) string { return s.issue(t)[:60] }, assertion.ReasonMalformed, assertion.ErrMalformed},
		{"unknown-agent", func(t *testing.T, s *site) string {
			a := s.assertionFor()
			a.Agent = "agent-zz"
			return signText(t, s.keyA1, assertion.Purpose, a)
		}, assertion.ReasonUnknownAgent, assertion.ErrUnknownAgent},
		{"signature-for-another-purpose", func(t *testing.T, s *site) string {
			return signText(t, s.keyA1, "image-grant", s.assertionFor())
		}, assertion.ReasonBadSignature, nil},
		{"signature-without-purpose", func(t *testing.T, s *site) string {
			a := s.assertionFor()
			payload, _ := a.MarshalBinary()
			return assertion.Signed{Payload: payload, Signature: ed25519.Sign(s.keyA1, payload)}.Text()
		}, assertion.ReasonBadSignature, nil},
		{"signed-by-another-agent-key", func(t *testing.T, s *site) string {
			return signText(t, s.keyA2, assertion.Purpose, s.assertionFor())
		}, assertion.ReasonBadSignature, nil},
		{"payload-altered-after-signing", func(t *testing.T, s *site) string {
			sg, err := assertion.Decode(s.issue(t))
			if err != nil {
				t.Fatal(err)
			}
			a := sg.Assertion
			a.Epoch = 8
			payload, _ := a.MarshalBinary()
			return assertion.Signed{Payload: payload, Signature: sg.Signature}.Text()
		}, assertion.ReasonBadSignature, nil},
		{"resolver-gives-unsupported-key", func(t *testing.T, s *site) string {
			s.verifier.Keys.(assertion.StaticKeys)["agent-a1"] = assertion.Agent{
				PublicKey: &rsa.PublicKey{N: big.NewInt(0).Lsh(big.NewInt(1), 2047), E: 65537}, Site: "site-a", Role: assertion.RoleSite,
			}
			return s.issue(t)
		}, assertion.ReasonBadSignature, assertion.ErrUnsupportedKey},
		{"worker-node-not-site-agent", func(t *testing.T, s *site) string {
			a := s.assertionFor()
			a.Agent = "worker-1"
			s.lease.set("site-a", "worker-1", 7)
			return signText(t, s.keyWorker, assertion.Purpose, a)
		}, assertion.ReasonNotSiteAgent, nil},
		{"another-sites-agent-asserts-this-site", func(t *testing.T, s *site) string {
			a := s.assertionFor()
			a.Agent = "agent-b1"
			return signText(t, s.keyB1, assertion.Purpose, a)
		}, assertion.ReasonWrongSite, nil},
		{"another-sites-assertion-for-this-join", func(t *testing.T, s *site) string {
			a := s.assertionFor()
			a.Agent, a.Site, a.Epoch = "agent-b1", "site-b", 3
			return signText(t, s.keyB1, assertion.Purpose, a)
		}, assertion.ReasonWrongSite, nil},
		{"join-without-site", func(t *testing.T, s *site) string {
			s.join.Site = ""
			return s.issue(t)
		}, assertion.ReasonWrongSite, nil},
		{"lifetime-over-15-minutes", func(t *testing.T, s *site) string {
			a := s.assertionFor()
			a.NotAfter = a.IssuedAt.Add(15*time.Minute + time.Second)
			return signText(t, s.keyA1, assertion.Purpose, a)
		}, assertion.ReasonBadLifetime, nil},
		{"not-after-before-issued-at", func(t *testing.T, s *site) string {
			a := s.assertionFor()
			a.NotAfter = a.IssuedAt.Add(-time.Second)
			return signText(t, s.keyA1, assertion.Purpose, a)
		}, assertion.ReasonBadLifetime, nil},
		{"issued-beyond-skew-in-future", func(t *testing.T, s *site) string {
			s.cpClock.Set(t0.Add(-assertion.DefaultSkew - time.Second))
			return s.issue(t)
		}, assertion.ReasonNotYetValid, nil},
		{"past-not-after-plus-skew", func(t *testing.T, s *site) string {
			s.fields.NotAfter = t0.Add(5 * time.Minute)
			s.cpClock.Set(t0.Add(5*time.Minute + assertion.DefaultSkew + time.Second))
			return s.issue(t)
		}, assertion.ReasonExpired, nil},
		{"older-than-15-minutes-plus-skew", func(t *testing.T, s *site) string {
			s.cpClock.Set(t0.Add(15*time.Minute + assertion.DefaultSkew + time.Nanosecond))
			return s.issue(t)
		}, assertion.ReasonExpired, nil},
		{"old-epoch-after-failover", func(t *testing.T, s *site) string {
			text := s.issue(t) // agent-a1 at epoch 7
			s.lease.set("site-a", "agent-a2", 8)
			return text
		}, assertion.ReasonStaleEpoch, assertion.ErrStaleEpoch},
		{"epoch-moved-on-after-release", func(t *testing.T, s *site) string {
			text := s.issue(t)
			s.lease.set("site-a", "", 8)
			return text
		}, assertion.ReasonStaleEpoch, nil},
		{"future-epoch", func(t *testing.T, s *site) string {
			s.fields.Epoch = 9
			return s.issue(t)
		}, assertion.ReasonStaleEpoch, nil},
		{"standby-signs-at-current-epoch", func(t *testing.T, s *site) string {
			a := s.assertionFor()
			a.Agent = "agent-a2"
			return signText(t, s.keyA2, assertion.Purpose, a)
		}, assertion.ReasonNotLeaseHolder, nil},
		{"lease-lapsed-nobody-holds", func(t *testing.T, s *site) string {
			s.lease.set("site-a", "", 7)
			return s.issue(t)
		}, assertion.ReasonNotLeaseHolder, assertion.ErrNotLeaseHolder},
		{"mac-not-among-machines", func(t *testing.T, s *site) string {
			s.join.MACs = []hwid.MAC{hwid.MustParseMAC("3c:ec:ef:12:34:57")}
			return s.issue(t)
		}, assertion.ReasonMACMismatch, nil},
		{"machine-reports-no-macs", func(t *testing.T, s *site) string {
			s.join.MACs = nil
			return s.issue(t)
		}, assertion.ReasonMACMismatch, nil},
		{"uuid-of-another-machine", func(t *testing.T, s *site) string {
			s.join.UUID = hwid.MustParseUUID("4c4c4544-0031-3510-8052-b4c04f4e4b33")
			return s.issue(t)
		}, assertion.ReasonUUIDMismatch, nil},
		{"uuid-of-another-machine-smbios-asserted-reversed-reported", func(t *testing.T, s *site) string {
			other := s.uuid
			other[15] ^= 1
			s.fields.UUID, s.join.UUID = s.uuid.SMBIOS(), other.Reversed()
			return s.issue(t)
		}, assertion.ReasonUUIDMismatch, nil},
		{"uuid-asserted-machine-reports-none", func(t *testing.T, s *site) string {
			s.join.UUID = hwid.UUID{}
			return s.issue(t)
		}, assertion.ReasonUUIDMismatch, nil},
		{"uuid-placeholder-asserted-by-hand", func(t *testing.T, s *site) string {
			a := s.assertionFor()
			a.UUID = hwid.MustParseUUID("03000200-0400-0500-0006-000700080009")
			s.join.UUID = a.UUID
			return signText(t, s.keyA1, assertion.Purpose, a)
		}, assertion.ReasonUUIDMismatch, nil},
		{"replay", func(t *testing.T, s *site) string {
			text := s.issue(t)
			if _, err := s.verifier.Verify(context.Background(), text, s.join); err != nil {
				t.Fatalf("first use: %v", err)
			}
			return text
		}, assertion.ReasonReplay, nil},
		{"resolver-down", func(t *testing.T, s *site) string {
			s.verifier.Keys = assertion.KeyResolverFunc(func(context.Context, string) (assertion.Agent, error) {
				return assertion.Agent{}, errBackend
			})
			return s.issue(t)
		}, assertion.ReasonUnavailable, errBackend},
		{"lease-store-down", func(t *testing.T, s *site) string {
			s.lease.err = errBackend
			return s.issue(t)
		}, assertion.ReasonUnavailable, errBackend},
		{"replay-cache-full", func(t *testing.T, s *site) string {
			s.replay.MaxEntries = 1
			first := s.issue(t)
			if _, err := s.verifier.Verify(context.Background(), first, s.join); err != nil {
				t.Fatalf("first: %v", err)
			}
			s.fields.Workflow = "wf-2"
			return s.issue(t)
		}, assertion.ReasonUnavailable, assertion.ErrReplayCacheFull},
	}
}

// TestVerifyRefusals covers every refusal reason; each case also checks that a refused
// assertion is not consumed where it was validly signed, and the counters.
func TestVerifyRefusals(t *testing.T) {
	covered := map[assertion.Reason]bool{}
	for _, tt := range refusalCases() {
		covered[tt.want] = true
		t.Run(tt.name, func(t *testing.T) {
			s := newSite(t)
			text := tt.prepare(t, s)
			before := s.verifier.Stats()
			a, err := s.verifier.Verify(context.Background(), text, s.join)
			if err == nil {
				t.Fatalf("Verify admitted %+v", a)
			}
			var re *assertion.RefusedError
			if !errors.As(err, &re) || re.Reason != tt.want {
				t.Fatalf("Verify = %v, want a refusal for %s", err, tt.want)
			}
			if !errors.Is(err, tt.want) || assertion.ReasonOf(err) != string(tt.want) {
				t.Errorf("errors.Is / ReasonOf do not find %s in %v", tt.want, err)
			}
			for _, other := range assertion.Reasons() {
				if other != tt.want && errors.Is(err, other) {
					t.Errorf("error also matches %s", other)
				}
			}
			if tt.wrapped != nil && !errors.Is(err, tt.wrapped) {
				t.Errorf("error %v does not wrap %v", err, tt.wrapped)
			}
			if !strings.Contains(err.Error(), tt.want.String()) {
				t.Errorf("message %q does not name the reason", err)
			}
			if a != (assertion.Assertion{}) {
				t.Errorf("refusal returned an assertion: %+v", a)
			}
			after := s.verifier.Stats()
			if after.Refused.Of(tt.want) != before.Refused.Of(tt.want)+1 || refusedTotal(after) != refusedTotal(before)+1 || after.Admitted != before.Admitted {
				t.Errorf("stats before %+v after %+v", before, after)
			}
		})
	}
	for _, r := range assertion.Reasons() {
		if !covered[r] {
			t.Errorf("no test refuses with %s", r)
		}
	}
}

// TestRefusalDoesNotConsume: an assertion refused for the machine's claims (a stolen
// assertion presented by another machine) is still usable by the machine it names.
func TestRefusalDoesNotConsume(t *testing.T) {
	s := newSite(t)
	text := s.issue(t)
	thief := assertion.Join{Site: "site-a", MACs: []hwid.MAC{hwid.MustParseMAC("02:00:00:00:00:01")}, UUID: s.uuid}
	if _, err := s.verifier.Verify(context.Background(), text, thief); assertion.ReasonOf(err) != assertion.ReasonMACMismatch {
		t.Fatalf("thief: %v", err)
	}
	if _, err := s.verifier.Verify(context.Background(), text, s.join); err != nil {
		t.Fatalf("rightful machine after the thief: %v", err)
	}
}

// TestSkewEdges: issued-at up to Skew in the future, and use up to Skew past not-after,
// are admitted; a second more at either edge is refused.
func TestSkewEdges(t *testing.T) {
	for _, skew := range []time.Duration{0, 5 * time.Second, 2 * time.Minute} {
		eff := skew
		if eff == 0 {
			eff = assertion.DefaultSkew
		}
		tests := []struct {
			name string
			now  time.Time
			want assertion.Reason // "": admitted
		}{
			{"agent-clock-ahead-by-skew", t0.Add(-eff), ""},
			{"agent-clock-ahead-beyond-skew", t0.Add(-eff - time.Second), assertion.ReasonNotYetValid},
			{"at-not-after-plus-skew", t0.Add(10*time.Minute + eff), ""},
			{"beyond-not-after-plus-skew", t0.Add(10*time.Minute + eff + time.Second), assertion.ReasonExpired},
		}
		for _, tt := range tests {
			t.Run(eff.String()+"/"+tt.name, func(t *testing.T) {
				s := newSite(t)
				s.verifier.Skew = skew
				s.fields.NotAfter = t0.Add(10 * time.Minute)
				s.cpClock.Set(tt.now)
				_, err := s.verifier.Verify(context.Background(), s.issue(t), s.join)
				if got := assertion.ReasonOf(err); got != string(tt.want) || (tt.want == "" && err != nil) {
					t.Errorf("Verify = %v, want reason %v", err, tt.want)
				}
			})
		}
	}
}

// TestFailover: after the lease moves to the standby, the old holder's assertions stop
// verifying within their 15 minutes and the new holder's verify.
func TestFailover(t *testing.T) {
	s := newSite(t)
	old := s.issue(t)
	s.lease.set("site-a", "agent-a2", 8)
	if _, err := s.verifier.Verify(context.Background(), old, s.join); assertion.ReasonOf(err) != assertion.ReasonStaleEpoch {
		t.Fatalf("old holder's assertion after failover: %v", err)
	}
	standby := &assertion.Issuer{Site: "site-a", Agent: "agent-a2", Signer: s.keyA2, Clock: s.agentClock}
	s.fields.Epoch = 8
	text, err := standby.Issue(context.Background(), s.fields)
	if err != nil {
		t.Fatal(err)
	}
	a, err := s.verifier.Verify(context.Background(), text, s.join)
	if err != nil || a.Agent != "agent-a2" || a.Epoch != 8 {
		t.Fatalf("new holder: %+v, %v", a, err)
	}
}

// TestReplaySameBytesNewSignature: ECDSA signatures are randomised; signing the same
// assertion twice gives two texts, and the second is still a replay.
func TestReplaySameBytesNewSignature(t *testing.T) {
	s := newSite(t)
	p256 := newECDSAHSM(mustP256(t), crypto.SHA256)
	s.issuer.Signer = p256
	s.verifier.Keys.(assertion.StaticKeys)["agent-a1"] = assertion.Agent{PublicKey: p256.pub, Site: "site-a", Role: assertion.RoleSite}
	first, second := s.issue(t), s.issue(t)
	if first == second {
		t.Fatal("two ECDSA signatures came out identical")
	}
	if _, err := s.verifier.Verify(context.Background(), first, s.join); err != nil {
		t.Fatal(err)
	}
	if _, err := s.verifier.Verify(context.Background(), second, s.join); assertion.ReasonOf(err) != assertion.ReasonReplay {
		t.Fatalf("same assertion, new signature: %v, want replay", err)
	}
}

// TestVerifyConcurrentReplay: of many concurrent presentations of one text, exactly one is
// admitted.
func TestVerifyConcurrentReplay(t *testing.T) {
	s := newSite(t)
	text := s.issue(t)
	const n = 32
	var wg sync.WaitGroup
	errs := make(chan error, n)
	for range n {
		wg.Go(func() {
			_, err := s.verifier.Verify(context.Background(), text, s.join)
			errs <- err
		})
	}
	wg.Wait()
	close(errs)
	admitted, replays := 0, 0
	for err := range errs {
		switch {
		case err == nil:
			admitted++
		case assertion.ReasonOf(err) == assertion.ReasonReplay:
			replays++
		default:
			t.Errorf("unexpected: %v", err)
		}
	}
	if admitted != 1 || replays != n-1 {
		t.Errorf("admitted %d, replays %d", admitted, replays)
	}
}

func TestVerifierValidate(t *testing.T) {
	tests := []struct {
		name   string
		change func(v *assertion.Verifier)
	}{
		{"nil-keys", func(v *assertion.Verifier) { v.Keys = nil }},
		{"nil-leases", func(v *assertion.Verifier) { v.Leases = nil }},
		{"nil-replay", func(v *assertion.Verifier) { v.Replay = nil }},
		{"negative-skew", func(v *assertion.Verifier) { v.Skew = -time.Second }},
		{"skew-over-max", func(v *assertion.Verifier) { v.Skew = assertion.MaxSkew + time.Second }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := newSite(t)
			text := s.issue(t)
			tt.change(s.verifier)
			_, err := s.verifier.Verify(context.Background(), text, s.join)
			if !errors.Is(err, assertion.ErrConfig) || assertion.ReasonOf(err) != "" {
				t.Errorf("Verify = %v, want ErrConfig and no refusal reason", err)
			}
		})
	}
}

func TestVerifyLogs(t *testing.T) {
	var buf testlog.Buffer
	s := newSite(t)
	s.verifier.Logger = slog.New(slog.NewTextHandler(&buf, &slog.HandlerOptions{Level: slog.LevelDebug}))
	text := s.issue(t)
	s.verifier.Verify(context.Background(), text, s.join)
	s.verifier.Verify(context.Background(), text, s.join)
	out := buf.String()
	if !strings.Contains(out, "assertion admitted") || !strings.Contains(out, "reason=replay") || !strings.Contains(out, "agent=agent-a1") {
		t.Errorf("log:\n%s", out)
	}
}

func TestReasonNames(t *testing.T) {
	seen := map[string]bool{}
	for _, r := range assertion.Reasons() {
		name := r.String()
		if name == "" || strings.HasPrefix(name, "reason(") || seen[name] || r.Error() != name {
			t.Errorf("reason %q named %q", string(r), name)
		}
		seen[name] = true
	}
	if len(seen) != 14 {
		t.Errorf("%d reasons", len(seen))
	}
}

func TestReasonOfTable(t *testing.T) {
	for _, tt := range []struct {
		err  error
		want string
	}{
		{nil, ""},
		{errors.New("elsewhere"), ""},
		{assertion.ErrMalformed, ""}, // a decoding error, not a refusal
		{&assertion.RefusedError{Reason: assertion.ReasonReplay}, "replay"},
		{fmt.Errorf("joining: %w", &assertion.RefusedError{Reason: assertion.ReasonStaleEpoch, Err: assertion.ErrStaleEpoch}), "stale-epoch"},
	} {
		if got := assertion.ReasonOf(tt.err); got != tt.want {
			t.Errorf("ReasonOf(%v) = %q, want %q", tt.err, got, tt.want)
		}
	}
	// The refusal still matches its typed Reason under errors.Is, and no other.
	err := fmt.Errorf("joining: %w", &assertion.RefusedError{Reason: assertion.ReasonReplay})
	if !errors.Is(err, assertion.Reason(assertion.ReasonReplay)) || errors.Is(err, assertion.Reason(assertion.ReasonExpired)) {
		t.Errorf("errors.Is does not single out the Reason of %v", err)
	}
}

// refusedTotal sums the refusal counters, so a test sees that one refusal moved one.
func refusedTotal(s assertion.VerifierStats) uint64 {
	var n uint64
	v := reflect.ValueOf(s.Refused)
	for i := range v.NumField() {
		n += v.Field(i).Uint()
	}
	return n
}

// TestRefusedCountsFields: RefusedCounts has one field per Reason, named for it (the
// reason "mac-mismatch" is MACMismatch), and Of reads that field.
func TestRefusedCountsFields(t *testing.T) {
	typ := reflect.TypeFor[assertion.RefusedCounts]()
	if typ.NumField() != len(assertion.Reasons()) {
		t.Fatalf("%d fields for %d reasons", typ.NumField(), len(assertion.Reasons()))
	}
	for i := range typ.NumField() {
		var c assertion.RefusedCounts
		reflect.ValueOf(&c).Elem().Field(i).SetUint(7)
		name := kebab(typ.Field(i).Name)
		for _, r := range assertion.Reasons() {
			want := uint64(0)
			if string(r) == name {
				want = 7
			}
			if got := c.Of(r); got != want {
				t.Errorf("field %s set: Of(%s) = %d, want %d", typ.Field(i).Name, r, got, want)
			}
		}
	}
	if got := (assertion.RefusedCounts{Malformed: 1}).Of("no-such-reason"); got != 0 {
		t.Errorf("Of(no-such-reason) = %d", got)
	}
}

// kebab spells a field name as a reason: UnknownAgent is unknown-agent, MACMismatch is
// mac-mismatch.
func kebab(s string) string {
	var b strings.Builder
	for i, r := range s {
		upper := unicode.IsUpper(r)
		if upper && i > 0 && (unicode.IsLower(rune(s[i-1])) || i+1 < len(s) && unicode.IsLower(rune(s[i+1]))) {
			b.WriteByte('-')
		}
		b.WriteRune(unicode.ToLower(r))
	}
	return b.String()
}
