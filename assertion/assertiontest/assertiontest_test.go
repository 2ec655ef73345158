package assertiontest_test

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/bettercompute/siteboot/assertion"
	"github.com/bettercompute/siteboot/assertion/assertiontest"
	"github.com/bettercompute/siteboot/hwid"
)

var mac = hwid.MustParseMAC("52:54:00:00:00:01")

// TestPair: what the Issuer signs, the Verifier admits once, for the MAC it names, and
// refuses for each thing the test can move: the lease, the clock, the machine.
func TestPair(t *testing.T) {
	ctx := context.Background()
	for _, tt := range []struct {
		name  string
		after func(p *assertiontest.Pair) // between issue and verify
		join  hwid.MAC
		want  assertion.Reason // "" for admitted
	}{
		{"admitted", func(*assertiontest.Pair) {}, mac, ""},
		{"failover", func(p *assertiontest.Pair) { p.SetLease("agent-2", 2) }, mac, assertion.ReasonStaleEpoch},
		{"other holder", func(p *assertiontest.Pair) { p.SetLease("agent-2", 1) }, mac, assertion.ReasonNotLeaseHolder},
		{"released", func(p *assertiontest.Pair) { p.SetLease("", 1) }, mac, assertion.ReasonNotLeaseHolder},
		{"expired", func(p *assertiontest.Pair) { p.Clock.Advance(assertion.MaxLifetime + assertion.MaxSkew) }, mac, assertion.ReasonExpired},
		{"other machine", func(*assertiontest.Pair) {}, hwid.MustParseMAC("52:54:00:00:00:02"), assertion.ReasonMACMismatch},
	} {
		t.Run(tt.name, func(t *testing.T) {
			p := assertiontest.New("site-1", "agent-1")
			if h, e := p.Lease(); h != "agent-1" || e != 1 {
				t.Fatalf("Lease = %q, %d; want agent-1, 1", h, e)
			}
			text, err := p.Issue(ctx, mac)
			if err != nil {
				t.Fatal(err)
			}
			tt.after(p)
			a, err := p.Verifier.Verify(ctx, text, p.Join(tt.join))
			if got := assertion.ReasonOf(err); got != string(tt.want) {
				t.Fatalf("Verify = %v (reason %q), want reason %q", err, got, tt.want)
			}
			if tt.want != "" {
				return
			}
			if a.Site != "site-1" || a.Agent != "agent-1" || a.Epoch != 1 || a.MAC != mac || !a.IssuedAt.Equal(p.Clock.Now()) {
				t.Errorf("admitted %+v", a)
			}
			if _, err := p.Verifier.Verify(ctx, text, p.Join(mac)); assertion.ReasonOf(err) != assertion.ReasonReplay {
				t.Errorf("second Verify = %v, want replay", err)
			}
		})
	}
}

// TestPairsDoNotTrustEachOther: each Pair has its own key, so one's Verifier refuses
// what another's Issuer signed.
func TestPairsDoNotTrustEachOther(t *testing.T) {
	a, b := assertiontest.New("site-1", "agent-1"), assertiontest.New("site-1", "agent-1")
	text, err := a.Issue(context.Background(), mac)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := b.Verifier.Verify(context.Background(), text, b.Join(mac)); assertion.ReasonOf(err) != assertion.ReasonBadSignature {
		t.Errorf("Verify of another pair's assertion = %v, want bad-signature", err)
	}
}

func TestBadIDFailsIssue(t *testing.T) {
	p := assertiontest.New("site 1", "agent-1")
	if _, err := p.Issue(context.Background(), mac); !errors.Is(err, assertion.ErrConfig) {
		t.Errorf("Issue with a site id holding a space = %v, want ErrConfig", err)
	}
}

// A join endpoint under test takes assertions; the Pair signs one as the site agent would
// and stands in for the control plane's keys and lease.
func Example() {
	ctx := context.Background()
	p := assertiontest.New("site-1", "agent-1")
	machine := hwid.MustParseMAC("52:54:00:00:00:01")

	text, _ := p.Issue(ctx, machine)
	a, err := p.Verifier.Verify(ctx, text, p.Join(machine))
	fmt.Println(a.Agent, a.MAC, a.Epoch, err)

	// The lease fails over to another agent: a fresh assertion from agent-1, made under
	// epoch 1, is refused.
	text, _ = p.Issuer.Issue(ctx, assertion.Fields{Epoch: 1, MAC: machine})
	p.SetLease("agent-2", 2)
	_, err = p.Verifier.Verify(ctx, text, p.Join(machine))
	fmt.Println(assertion.ReasonOf(err))
	// Output:
	// agent-1 52:54:00:00:00:01 1 <nil>
	// stale-epoch
}
