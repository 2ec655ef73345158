package assertion_test

import (
	"context"
	"crypto/ed25519"
	"errors"
	"fmt"
	"net/netip"
	"time"

	"github.com/bettercompute/siteboot/assertion"
	"github.com/bettercompute/siteboot/hwid"
)

// An agent issues an assertion for the machine it boots; the control plane admits it once,
// and refuses it as a replay the second time.
func Example() {
	ctx := context.Background()
	now := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	clock := func() time.Time { return now }
	key := ed25519.NewKeyFromSeed(make([]byte, ed25519.SeedSize)) // the agent's node key

	// Agent side.
	issuer := &assertion.Issuer{Site: "site-fsn1", Agent: "node-agent-a", Signer: key, Now: clock}
	mac, _ := hwid.ParseMAC("3c:ec:ef:12:34:56")
	uuid, _ := hwid.ParseUUID("4c4c4544-0031-3510-8052-b4c04f4e4b32")
	text, err := issuer.Issue(ctx, assertion.Fields{
		Epoch: 7, MAC: mac, IP: netip.MustParseAddr("192.0.2.20"), UUID: uuid,
		Workflow: "wf-commission-42", NotAfter: now.Add(2 * time.Hour),
	})
	if err != nil {
		fmt.Println(err)
		return
	}

	// Control-plane side.
	verifier := &assertion.Verifier{
		Keys: assertion.StaticKeys{
			"node-agent-a": {PublicKey: key.Public(), Site: "site-fsn1", Role: assertion.RoleSite},
		},
		Leases: assertion.LeaseCheckerFunc(func(ctx context.Context, site string) (string, uint64, error) {
			return "node-agent-a", 7, nil // holder and current epoch of site:SITE:boot
		}),
		Replay: &assertion.MemoryReplayCache{},
		Now:    func() time.Time { return now.Add(40 * time.Second) },
	}
	join := assertion.Join{Site: "site-fsn1", MACs: []hwid.MAC{mac}, UUID: uuid.SMBIOS()}
	a, err := verifier.Verify(ctx, text, join)
	fmt.Println(a.Agent, a.Epoch, a.MAC, a.Workflow, a.NotAfter.Sub(a.IssuedAt), err)

	_, err = verifier.Verify(ctx, text, join)
	var refused *assertion.RefusedError
	if errors.As(err, &refused) {
		fmt.Println("refused:", refused.Reason)
	}
	fmt.Println(errors.Is(err, assertion.ReasonReplay))
	// Output:
	// node-agent-a 7 3c:ec:ef:12:34:56 wf-commission-42 15m0s <nil>
	// refused: replay
	// true
}
